"""Each namespace's construction steps, one record per step (what was built, what was skipped, what it
cost), written once over any backend's executor. A step's record is what makes a re-ingest resume."""

from __future__ import annotations

from typing import Any

from ..models import StepRecord
from .sql import SQL


class Steps:
    def __init__(self, sql: SQL) -> None:
        self.sql = sql

    def get(self, namespace: str, step: int) -> StepRecord | None:
        rows = self.sql.rows("SELECT record FROM steps WHERE namespace=? AND step=?", (namespace, step))
        return StepRecord.model_validate_json(rows[0][0]) if rows else None

    def put(self, record: StepRecord) -> None:
        self.sql.run("INSERT INTO steps VALUES (?, ?, ?) ON CONFLICT (namespace, step) DO UPDATE SET "
                     "record=excluded.record", (record.namespace, record.step, record.model_dump_json()))

    def all(self, namespace: str) -> list[StepRecord]:
        return [StepRecord.model_validate_json(r[0])
                for r in self.sql.rows("SELECT record FROM steps WHERE namespace=? ORDER BY step", (namespace,))]

    def count(self, namespace: str) -> int:
        return int(self.sql.rows("SELECT COUNT(*) FROM steps WHERE namespace=?", (namespace,))[0][0])

    def last(self, namespace: str) -> int | None:
        """The highest step number stored (None: no step yet); an add without a step takes the next."""
        return self.sql.rows("SELECT MAX(step) FROM steps WHERE namespace=?", (namespace,))[0][0]


def construction_cost(steps: list[StepRecord]) -> dict[str, Any]:
    """What building these steps cost (Memory.stats): model calls, tokens, seconds, in total and per step."""
    return {"llm_calls": sum(s.llm_calls for s in steps), "prompt_tokens": sum(s.prompt_tokens for s in steps),
            "completion_tokens": sum(s.completion_tokens for s in steps),
            "latency_s": round(sum(s.latency_s for s in steps), 3),
            "per_step": [{"step": s.step, "llm_calls": s.llm_calls, "prompt_tokens": s.prompt_tokens,
                          "completion_tokens": s.completion_tokens, "latency_s": s.latency_s,
                          "events_new": s.events_new, "events_merged": s.events_merged} for s in steps]}
