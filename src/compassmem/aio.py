"""AsyncMemory: the Memory API for asyncio programs.

Each call runs the synchronous method in a worker thread (`asyncio.to_thread`, which copies the
caller's context, so usage is counted per call), so an event loop is never blocked by embedding, SQLite
or a local model. Concurrent calls are safe: the store serialises its connection behind a lock and
every write is one transaction.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .memory import Memory
from .models import Answer, EditReceipt, Event, EventDetail, EventPage, ForgetReceipt, HistoryEntry, SearchHit, StepRecord


class AsyncMemory:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The same arguments as Memory (opening is quick: models load on first use)."""
        self.sync = Memory(*args, **kwargs)

    # `scope`: user_id / agent_id / run_id, as for Memory (scope.py)
    async def add(self, observations: Any, namespace: str | None = None, step: int | None = None,
                  world_time: str | None = None, **kwargs: Any) -> StepRecord:
        """kwargs: user_id, agent_id, run_id, metadata."""
        return await asyncio.to_thread(self.sync.add, observations, namespace, step, world_time, **kwargs)

    async def ask(self, question: str, namespace: str | None = None, **kwargs: Any) -> Answer:
        """kwargs: filters, user_id, agent_id, run_id."""
        return await asyncio.to_thread(self.sync.ask, question, namespace, **kwargs)

    async def search(self, query: str, namespace: str | None = None, limit: int = 10, **kwargs: Any) -> list[SearchHit]:
        """kwargs: filters, user_id, agent_id, run_id."""
        return await asyncio.to_thread(self.sync.search, query, namespace, limit, **kwargs)

    async def delete(self, observation_ids: str | list[str], namespace: str | None = None, **scope: str) -> EditReceipt:
        return await asyncio.to_thread(self.sync.delete, observation_ids, namespace, **scope)

    async def update(self, observation_id: str, text: str, namespace: str | None = None, **scope: str) -> EditReceipt:
        return await asyncio.to_thread(self.sync.update, observation_id, text, namespace, **scope)

    async def history(self, event_id: str, namespace: str | None = None, **scope: str) -> list[HistoryEntry]:
        return await asyncio.to_thread(self.sync.history, event_id, namespace, **scope)

    async def list(self, namespace: str | None = None, offset: int = 0, limit: int = 100, **scope: str) -> EventPage:
        return await asyncio.to_thread(self.sync.list, namespace, offset, limit, **scope)

    async def get(self, event_id: str, namespace: str | None = None, **scope: str) -> EventDetail:
        return await asyncio.to_thread(self.sync.get, event_id, namespace, **scope)

    async def forget(self, namespace: str | None = None, **scope: str) -> ForgetReceipt:
        return await asyncio.to_thread(self.sync.forget, namespace, **scope)

    async def export(self, namespace: str | None, path: str | Path) -> int:
        return await asyncio.to_thread(self.sync.export, namespace, path)

    async def import_file(self, path: str | Path, **kwargs: Any) -> list[str]:
        """kwargs: rename."""
        return await asyncio.to_thread(self.sync.import_file, path, **kwargs)

    async def namespaces(self) -> list[str]:
        return await asyncio.to_thread(self.sync.namespaces)

    async def stats(self, namespace: str | None = None, **scope: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.stats, namespace, **scope)

    async def get_all(self, namespace: str | None = None, **kwargs: Any) -> list[Event]:
        """kwargs: user_id, agent_id, run_id, limit."""
        return await asyncio.to_thread(self.sync.get_all, namespace, **kwargs)

    async def delete_all(self, namespace: str | None = None, **scope: str) -> list[ForgetReceipt]:
        return await asyncio.to_thread(self.sync.delete_all, namespace, **scope)

    async def reset(self) -> list[ForgetReceipt]:
        return await asyncio.to_thread(self.sync.reset)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
