"""Database-wide settings and the LLM response cache, written once over any backend's executor.

The cache is shared across namespaces (a row is keyed by the whole request), so each row is tagged with
the namespaces whose work wrote or replayed it (`base.cache_namespace`): forgetting a namespace removes
the cached prompts and answers that held its text.
"""

from __future__ import annotations

from contextvars import ContextVar

from ..models import utcnow
from .sql import SQL

# The namespaces an LLM call works for (an ask over a scope reads several): the cache tags the rows it
# writes or replays with each.
cache_namespace: ContextVar[tuple[str, ...]] = ContextVar("cache_namespace", default=())


class Meta:
    """Key → value settings of the whole database (the embedder that built it, API keys, index tokens)."""

    def __init__(self, sql: SQL) -> None:
        self.sql = sql

    def get(self, key: str) -> str | None:
        rows = self.sql.rows("SELECT value FROM meta WHERE key=?", (key,))
        return rows[0][0] if rows else None

    def set(self, key: str, value: str) -> None:
        self.sql.run("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                     (key, value))

    def items(self, prefix: str) -> list[tuple[str, str]]:
        """(key, value) of the settings whose key starts with `prefix`, by key."""
        return [(k, v) for k, v in self.sql.rows("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ? "
                                                 "ORDER BY key", (len(prefix), prefix))]


class Cache:
    """LLM responses by request key."""

    def __init__(self, sql: SQL) -> None:
        self.sql = sql

    def get(self, key: str) -> str | None:
        rows = self.sql.rows("SELECT value FROM llm_cache WHERE key=?", (key,))
        if rows:
            self._tag(key)
        return rows[0][0] if rows else None

    def put(self, key: str, value: str) -> None:
        with self.sql.transaction():
            self.sql.run("INSERT INTO llm_cache VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                         "value=excluded.value", (key, value, utcnow()))
            self._tag(key)

    def _tag(self, key: str) -> None:
        for namespace in cache_namespace.get():
            self.sql.run("INSERT INTO llm_cache_refs VALUES (?, ?) ON CONFLICT DO NOTHING", (key, namespace))

    def drop(self, namespace: str) -> int:
        """Remove every row the namespace's work wrote or replayed; returns how many."""
        removed = 0
        with self.sql.transaction():
            keys = [r[0] for r in self.sql.rows("SELECT key FROM llm_cache_refs WHERE namespace=?", (namespace,))]
            for chunk in self.sql.chunks(keys):
                where, args = self.sql.any_of("key", chunk)
                removed += self.sql.run(f"DELETE FROM llm_cache WHERE {where}", args)
                self.sql.run(f"DELETE FROM llm_cache_refs WHERE {where}", args)
        return removed
