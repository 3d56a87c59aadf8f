"""The MCP server through the official SDK's own client, over stdio and over streamable HTTP (issue #12)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from service_helpers import free_port  # noqa: E402

TOOLS = {"add", "search", "ask", "list", "get", "history", "update", "delete", "forget", "namespaces", "stats"}


def data(result) -> dict:
    """A tool result's JSON (structured content when given, else the text block)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content.get("result", result.structured_content)
    return json.loads(result.content[0].text)


async def exercise(session: ClientSession) -> None:
    await session.initialize()
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert TOOLS <= set(tools) and all(tools[n].description for n in TOOLS)
    added = data(await session.call_tool("add", {
        "messages": [{"speaker": "Ana", "text": "I adopted a beagle puppy named Luna."},
                     {"speaker": "Ben", "text": "My locker code is 4417-BRAVO, keep it secret."}],
        "namespace": "ana", "world_time": "8 May 2023"}))
    assert added["step"] == 1 and len(added["observation_ids"]) == 2
    hits = data(await session.call_tool("search", {"query": "beagle puppy", "namespace": "ana"}))["hits"]
    assert any(o["id"] == added["observation_ids"][0] for h in hits for o in h["observations"])
    answer = data(await session.call_tool("ask", {"question": "What is the puppy called?", "namespace": "ana"}))
    assert answer["answer"] and set(answer["observation_ids"]) <= set(added["observation_ids"])
    page = data(await session.call_tool("list", {"namespace": "ana"}))
    assert page["total"] >= 1 and "ana" in page["namespaces"]
    event = page["items"][0]["id"]
    assert data(await session.call_tool("get", {"event_id": event, "namespace": "ana"}))["event"]["id"] == event
    assert data(await session.call_tool("history", {"event_id": event, "namespace": "ana"}))["history"]
    scoped = data(await session.call_tool("add", {"messages": ["I like rye bread."], "user_id": "kim",
                                                  "metadata": {"app": "chat"}}))
    assert scoped["namespace"] == "user:kim"
    updated = data(await session.call_tool("update", {"observation_id": scoped["observation_ids"][0],
                                                      "text": "I like sourdough.", "user_id": "kim"}))
    assert updated["action"] == "update"
    assert data(await session.call_tool("stats", {"user_id": "kim"}))["observations"] == 1
    assert "user:kim" in data(await session.call_tool("namespaces", {}))["namespaces"]
    both = await session.call_tool("list", {"namespace": "ana", "user_id": "kim"})
    assert both.is_error and "not both" in both.content[0].text
    receipt = data(await session.call_tool("delete", {"observation_ids": [added["observation_ids"][1]],
                                                            "namespace": "ana"}))
    assert receipt["verified"] and receipt["observation_ids"] == [added["observation_ids"][1]]
    missing = await session.call_tool("search", {"query": "x", "namespace": "nobody"})
    assert missing.is_error and "unknown namespace" in missing.content[0].text  # an error, never a silent []
    assert data(await session.call_tool("forget", {"namespace": "ana"}))["verified"]


def test_stdio_session_lists_and_calls_every_tool(tmp_path):
    params = StdioServerParameters(command=sys.executable, args=["-m", "compassmem", "mcp", "--db",
                                                                 str(tmp_path / "m.db"), "--embedder", "hash"])

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await exercise(session)
    anyio.run(main)


def test_http_session_lists_and_calls_every_tool(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "compassmem", "mcp", "--db", str(tmp_path / "h.db"), "--embedder",
                             "hash", "--transport", "http", "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        import socket

        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)

        async def main():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    await exercise(session)
        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
