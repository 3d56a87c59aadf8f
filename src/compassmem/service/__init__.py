"""The memory over a wire: a REST API with tenant keys (api.py), an MCP server (mcp_server.py), and the
graph viewer (viewer.py). Needs the `server` extra: pip install 'compassmem[server]'."""
