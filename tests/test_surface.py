"""One surface (issue "What memory users expect", item 3): every public `Memory` method is the CLI command,
the REST route and the MCP tool of the same name, or this table says why one of them is not there. A new
method without its entry fails here, and so does an entry that names something that does not exist."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from compassmem import AsyncClient, AsyncMemory, Client, Memory

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

# method: (CLI command, REST "VERB path", MCP tool); a string starting with "-" says why there is none
SURFACE = {
    "add": ("add", "POST /v1/memories", "add"),
    "search": ("search", "POST /v1/search", "search"),
    "ask": ("ask", "POST /v1/ask", "ask"),
    "list": ("list", "GET /v1/memories", "list"),
    "get": ("get", "GET /v1/memories/{event_id}", "get"),
    "history": ("history", "GET /v1/memories/{event_id}/history", "history"),
    "update": ("update", "PUT /v1/observations/{observation_id}", "update"),
    "delete": ("delete", "POST /v1/observations/delete", "delete"),
    "forget": ("forget", "DELETE /v1/namespaces", "forget"),
    "namespaces": ("namespaces", "GET /v1/namespaces", "namespaces"),
    "stats": ("stats", "GET /v1/stats", "stats"),
    "export": ("export", "GET /v1/export", "- a file on the server's disk is no tool result; REST streams it"),
    "import_file": ("import", "POST /v1/import", "- an assistant has no file to upload; REST takes the body"),
    "ingest": ("ingest", "- a data set on disk: the CLI reads files, REST takes adds", "- as for REST"),
    "add_document": ("- `ingest --format text FILE`", "- adds of its steps (document.py cuts them)", "- as for REST"),
    "graph": ("view", "GET /v1/graph", "- a drawing, not a tool result"),
    "events": ("- `list` pages them", "- GET /v1/memories pages them", "- `list` pages them"),
    "get_all": ("- `list`", "- GET /v1/memories (Client.get_all)", "- `list`"),
    "delete_all": ("- `forget`", "- DELETE /v1/namespaces (Client.delete_all)", "- `forget`"),
    "reset": ("- `forget` per namespace", "- Client.reset forgets each namespace", "- `forget` per namespace"),
    "close": ("- a process ends", "- the server owns its memory", "- the server owns its memory"),
}


def public_methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


def test_every_public_method_has_an_entry():
    assert public_methods(Memory) == set(SURFACE)


def test_the_cli_has_each_command():
    from compassmem.cli.app import app

    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    missing = [cli for cli, _, _ in SURFACE.values() if not cli.startswith("-") and cli not in commands]
    assert not missing


def test_the_rest_api_has_each_route():
    from compassmem.service.api import create_app

    app = create_app(Memory(":memory:", embedder="hash"))
    routes = {f"{m} {r.path}" for r in app.routes for m in getattr(r, "methods", ())}
    missing = [rest for _, rest, _ in SURFACE.values() if not rest.startswith("-") and rest not in routes]
    assert not missing


def test_the_mcp_server_has_each_tool_with_the_methods_defaults():
    from compassmem.service.mcp_server import create_mcp

    tools = {t.name: t for t in asyncio.run(create_mcp(Memory(":memory:", embedder="hash")).list_tools())}
    for method, (_, _, tool) in SURFACE.items():
        if tool.startswith("-"):
            continue
        assert tool in tools, tool
        params = inspect.signature(getattr(Memory, method)).parameters
        schema = tools[tool].input_schema["properties"]
        for name, prop in schema.items():  # a tool argument is the method's, with the method's default
            if name in params and params[name].default is not inspect.Parameter.empty and "default" in prop:
                assert prop["default"] == params[name].default, (tool, name)
        scoped = {"user_id", "agent_id", "run_id"} & set(params)
        assert scoped <= set(schema), (tool, scoped - set(schema))


def test_the_clients_and_async_memory_have_every_method():
    served = {m for m, (_, rest, _) in SURFACE.items() if not rest.startswith("- the server") and
              not rest.startswith("- a data set") and not rest.startswith("- adds")} - {"events", "graph"}
    assert served <= public_methods(Client) and served <= public_methods(AsyncClient)
    assert public_methods(Memory) - {"events", "graph", "ingest", "add_document"} <= public_methods(AsyncMemory)
