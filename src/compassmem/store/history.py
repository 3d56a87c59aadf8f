"""Each event's change log (Memory.history), written once over any backend's executor."""

from __future__ import annotations

import json

from ..models import HistoryEntry, utcnow
from .sql import SQL


class EventHistory:
    """Created, merged, updated, observations deleted, deleted: one row per change, oldest first."""

    def __init__(self, sql: SQL) -> None:
        self.sql = sql

    def add(self, namespace: str, event_id: str, action: str, step: int | None, observation_ids: list[str],
            summary: str | None) -> None:
        self.add_many([(namespace, event_id, action, step, observation_ids, summary)])

    def add_many(self, entries: list[tuple[str, str, str, int | None, list[str], str | None]]) -> None:
        """Several changes, in the order given: (namespace, event id, action, step, observation ids, summary)."""
        if not entries:
            return
        at = utcnow()
        self.sql.many("INSERT INTO event_history (namespace, event_id, at, action, step, observation_ids, summary) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)",
                      [(ns, eid, at, action, step, json.dumps(obs), summary)
                       for ns, eid, action, step, obs, summary in entries])

    def redact(self, namespace: str, event_ids: list[str]) -> int:
        """Blank the summaries recorded so far for these events (they may hold deleted text); how many."""
        n = 0
        for chunk in self.sql.chunks(list(dict.fromkeys(event_ids))):
            where, args = self.sql.any_of("event_id", chunk)
            n += self.sql.run(f"UPDATE event_history SET summary=NULL WHERE namespace=? AND summary IS NOT NULL "
                              f"AND {where}", (namespace, *args))
        return n

    def of(self, namespace: str, event_id: str) -> list[HistoryEntry]:
        rows = self.sql.rows("SELECT event_id, at, action, step, observation_ids, summary FROM event_history "
                             "WHERE namespace=? AND event_id=? ORDER BY rowid", (namespace, event_id))
        return [HistoryEntry(event_id=r[0], at=r[1], action=r[2], step=r[3], observation_ids=json.loads(r[4]),
                             summary=r[5]) for r in rows]
