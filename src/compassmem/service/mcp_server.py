"""`compassmem mcp`: the memory as Model Context Protocol tools, for assistants and IDE agents.

Built on the official `mcp` SDK (MCPServer). Each tool is the Memory method of the same name, with the
same arguments and defaults (scopes included); results are JSON that cite
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
from ..scope import namespace_for

INSTRUCTIONS = (
    "CompassMem is an event-centric long-term memory. Store what happens with add (one call per session or "
    "chunk, in order); find things with search (ranked events with their source turns, no answer) or ask (a "
    "full answer citing observation ids). Memories live in namespaces; name one, or scope by user_id / "
    "agent_id / run_id as in mem0 (not both).")
SCOPE = ("Which memory: namespace, or user_id / agent_id / run_id (not both; none: 'default').")


def create_mcp(memory: Memory) -> MCPServer:
    from .. import __version__

    server = MCPServer("compassmem", version=__version__, instructions=INSTRUCTIONS)

    async def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        except CompassMemError as exc:  # the one-line message reaches the model, which can correct itself
            raise ToolError(str(exc)) from None

    def where(namespace: str | None, user_id: str | None, agent_id: str | None, run_id: str | None) -> str:
        try:
            return namespace_for(namespace, user_id, agent_id, run_id)
        except CompassMemError as exc:
            raise ToolError(str(exc)) from None

    def dump(value: Any) -> Any:
        if isinstance(value, list):
            return [dump(v) for v in value]
        if hasattr(value, "model_dump"):
            out = value.model_dump(mode="json")
            if hasattr(value, "verified"):
                out["verified"] = value.verified
            return out
        return value

    @server.tool(description="Store one step of a conversation or document (a session, a chunk). messages: "
                             "strings, or objects {text, speaker?, id?, time?, meta?}, or chat messages {role, "
                             "content}. world_time: when it happened, e.g. '8 May 2023'. metadata: put on every "
                             "message. Returns the step's record and the observation ids given. " + SCOPE)
    async def add(messages: list[str | dict[str, Any]], namespace: str | None = None, world_time: str | None = None,
                  user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                  metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        ns = where(namespace, user_id, agent_id, run_id)
        record = await run(memory.add, messages, ns, None, world_time, metadata=metadata)
        ids = [o.id for o in memory.store.observations(record.namespace, record.step)]
        return {**dump(record), "observation_ids": ids}

    @server.tool(description="Search memory without answering: ranked events with their source observations "
                             "(ids, speakers, text, dates) and scores. Optional filters: speaker, since/until "
                             "(ISO dates). Makes no LLM call. " + SCOPE)
    async def search(query: str, namespace: str | None = None, limit: int = 10, speaker: str | None = None,
                     since: str | None = None, until: str | None = None, user_id: str | None = None,
                     agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        ns = where(namespace, user_id, agent_id, run_id)
        filters = {k: v for k, v in {"speaker": speaker, "since": since, "until": until}.items() if v}
        hits = await run(memory.search, query, namespace, limit, filters=filters or None, user_id=user_id,
                         agent_id=agent_id, run_id=run_id)
        return {"namespace": ns, "hits": dump(hits)}

    @server.tool(description="Answer a question from memory by actively exploring its event graph. Returns "
                             "the answer, the observation ids it rests on, and the evidence events. mode (with "
                             "a model configured): 'graph' lets the model only write the answer (one call), "
                             "'agentic' lets it plan and explore too. " + SCOPE)
    async def ask(question: str, namespace: str | None = None, mode: str | None = None, user_id: str | None = None,
                  agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        a = await run(memory.ask, question, namespace, mode=mode, user_id=user_id, agent_id=agent_id, run_id=run_id)
        return {"answer": a.answer, "observation_ids": a.observation_ids(), "evidence": dump(a.evidence),
                "usage": a.usage.model_dump()}

    @server.tool(name="list", description="A page of events (id, time, participants, summary, observation ids) "
                                          "in stored order; the result also names every namespace. " + SCOPE)
    async def list_(namespace: str | None = None, offset: int = 0, limit: int = 100, user_id: str | None = None,
                   agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        page = await run(memory.list, namespace, offset, limit, user_id=user_id, agent_id=agent_id, run_id=run_id)
        return {**dump(page), "namespaces": memory.namespaces()}

    @server.tool(description="One event by id (as list or search show it): summary, time, participants, its "
                             "source observations and the typed relations touching it. " + SCOPE)
    async def get(event_id: str, namespace: str | None = None, user_id: str | None = None, agent_id: str | None = None,
                  run_id: str | None = None) -> dict[str, Any]:
        return dump(await run(memory.get, event_id, namespace, user_id=user_id, agent_id=agent_id, run_id=run_id))

    @server.tool(description="What happened to an event, oldest first: created, merged, updated, observations "
                             "deleted, deleted. " + SCOPE)
    async def history(event_id: str, namespace: str | None = None, user_id: str | None = None,
                      agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        entries = await run(memory.history, event_id, namespace, user_id=user_id, agent_id=agent_id, run_id=run_id)
        return {"history": dump(entries)}

    @server.tool(description="Replace an observation's text (by observation id, or an event id when the event "
                             "has one observation); its event is re-derived and the old text removed everywhere. "
                             "Returns the receipt. " + SCOPE)
    async def update(observation_id: str, text: str, namespace: str | None = None, user_id: str | None = None,
                     agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        return dump(await run(memory.update, observation_id, text, where(namespace, user_id, agent_id, run_id)))

    @server.tool(description="Delete observations (or whole events, by event id) and everything derived from "
                             "them. Returns the receipt: rows removed per table, events deleted or re-derived, and "
                             "whether a scan of the database files found the text. " + SCOPE)
    async def delete(observation_ids: list[str], namespace: str | None = None, user_id: str | None = None,
                     agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        return dump(await run(memory.delete, observation_ids, where(namespace, user_id, agent_id, run_id)))

    @server.tool(description="Forget a whole namespace (named, or by user_id / agent_id / run_id) and everything "
                             "derived from it. Irreversible. Returns the receipt with a scan of the database files.")
    async def forget(namespace: str | None = None, user_id: str | None = None, agent_id: str | None = None,
                     run_id: str | None = None) -> dict[str, Any]:
        return dump(await run(memory.forget, namespace, user_id=user_id, agent_id=agent_id, run_id=run_id))

    @server.tool(description="The namespaces of the database.")
    async def namespaces() -> dict[str, Any]:
        return {"namespaces": memory.namespaces()}

    @server.tool(description="Counts of observations, events, relations (by type), topics, merges and "
                             "construction cost. " + SCOPE)
    async def stats(namespace: str | None = None, user_id: str | None = None, agent_id: str | None = None,
                    run_id: str | None = None) -> dict[str, Any]:
        return await run(memory.stats, where(namespace, user_id, agent_id, run_id))

    return server
