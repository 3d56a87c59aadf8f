"""`compassmem mcp`: the memory as Model Context Protocol tools, for assistants and IDE agents.

Built on the official `mcp` SDK (MCPServer). Each tool is a Memory method; results are JSON that cite
observation ids, and a failure is a tool error with the library's one-line message (an empty result is
never a disguised error: a filter or namespace that matches nothing says so). Tools run in a worker
thread, so one slow ask does not stall the session. The MCP server serves one local database with
full access: it has no tenants (use the REST API's keys for that).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ..errors import CompassMemError
from ..memory import Memory

INSTRUCTIONS = (
    "CompassMem is an event-centric long-term memory. Store what happens with add_memory (one call per "
    "session or chunk, in order); find things with search_memory (ranked events with their source turns, no "
    "answer) or ask_memory (a full answer citing observation ids). Memories live in namespaces; use one per "
    "user or project.")


def create_mcp(memory: Memory) -> MCPServer:
    from .. import __version__

    server = MCPServer("compassmem", version=__version__, instructions=INSTRUCTIONS)

    async def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        except CompassMemError as exc:  # the one-line message reaches the model, which can correct itself
            raise ToolError(str(exc)) from None

    @server.tool(description="Store one step of a conversation or document (a session, a chunk) in a namespace. "
                             "messages: strings, or objects {text, speaker?, id?, time?, meta?}, or chat messages "
                             "{role, content}. world_time: when it happened, e.g. '8 May 2023'. Returns the "
                             "step's record and the observation ids given to the messages.")
    async def add_memory(messages: list[str | dict[str, Any]], namespace: str = "default",
                         world_time: str | None = None) -> dict[str, Any]:
        record = await run(memory.add, messages, namespace, None, world_time)
        ids = [o.id for o in memory.store.observations(record.namespace, record.step)]
        return {"namespace": record.namespace, "step": record.step, "observation_ids": ids,
                "events_new": record.events_new, "events_merged": record.events_merged,
                "relations": record.relations}

    @server.tool(description="Search a namespace's memory without answering: ranked events with their source "
                             "observations (ids, speakers, text, dates) and scores. Optional filters: speaker, "
                             "since/until (ISO dates). Makes no LLM call.")
    async def search_memory(query: str, namespace: str = "default", limit: int = 10, speaker: str | None = None,
                            since: str | None = None, until: str | None = None) -> dict[str, Any]:
        filters = {k: v for k, v in {"speaker": speaker, "since": since, "until": until}.items() if v}
        hits = await run(memory.search, query, namespace, limit, filters=filters or None)
        return {"namespace": namespace, "hits": [h.model_dump(mode="json") for h in hits]}

    @server.tool(description="Answer a question from a namespace's memory by actively exploring its event graph. "
                             "Returns the answer, the observation ids it rests on, and the evidence events. "
                             "mode (with a model configured): 'graph' lets the model only write the answer (one "
                             "call), 'agentic' lets it plan and explore too.")
    async def ask_memory(question: str, namespace: str = "default", mode: str | None = None) -> dict[str, Any]:
        a = await run(memory.ask, question, namespace, mode=mode)
        return {"answer": a.answer, "observation_ids": a.observation_ids(),
                "evidence": [e.model_dump(mode="json") for e in a.evidence], "usage": a.usage.model_dump()}

    @server.tool(description="List a namespace's events (id, time, participants, summary, observation ids), "
                             "a page at a time; the result also names every namespace in the database.")
    async def list_memories(namespace: str = "default", offset: int = 0, limit: int = 20) -> dict[str, Any]:
        page = await run(memory.list, namespace, offset, limit)
        return {**page.model_dump(mode="json"), "namespaces": memory.namespaces()}

    @server.tool(description="Delete observations (by id, as search_memory or list_memories show them) and "
                             "everything derived from them. Returns the receipt: rows removed per table, events "
                             "deleted or re-derived, and whether a scan of the database files found the text.")
    async def delete_memory(observation_ids: list[str], namespace: str = "default") -> dict[str, Any]:
        receipt = await run(memory.delete, observation_ids, namespace)
        return {**receipt.model_dump(mode="json"), "verified": receipt.verified}

    @server.tool(description="Forget a whole namespace and everything derived from it. Irreversible. Returns "
                             "the receipt with a scan of the database files.")
    async def forget(namespace: str) -> dict[str, Any]:
        receipt = await run(memory.forget, namespace)
        return {**receipt.model_dump(mode="json"), "verified": receipt.verified}

    return server
