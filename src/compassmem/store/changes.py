"""The change log: which events of a namespace each write touched, so that what a search kept between
asks (store/row_cache.py) loses only what a write made stale.

Triggers on the tables a search reads log one row per (namespace, event) a written row concerns, with
a sequence number that never repeats, and set the namespace's counter (`namespace_changes.version`) to
the newest of them: SQLite's in sqlite_schema.SCHEMA_V4, PostgreSQL's in postgres_schema (v4). A store's
`_state(namespace)` is that counter; this mixin answers "what changed between two counters" and keeps
the log short, written once over the store's `sql` executor for both backends.

A namespace deleted loses its log rows and its counter with it; made again, its counter starts from the
database-wide sequence, above anything it had before, so a cache never takes new rows for old ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sqlite_schema reads LOGGED, and sql.py reads sqlite_schema
    from .meta import Meta
    from .sql import SQL

# table -> the columns naming the event a row of it concerns (topics concern no single event: a topic
# written empties only what is not kept by event)
LOGGED: dict[str, tuple[str, ...]] = {"observations": ("event",), "events": ("id",), "relations": ("source", "target"),
                                      "topics": ()}
# per triggering operation, the row images a trigger sees (each schema names them in its own dialect)
ROW_IMAGES: dict[str, tuple[str, ...]] = {"INSERT": ("new",), "UPDATE": ("old", "new"), "DELETE": ("old",)}
CHANGED_AT_MOST = 5_000  # events a write may touch before reading everything again is the cheaper way
CHANGES_KEPT = 200_000  # log rows kept (prune_changes): a cache older than the oldest reads everything again


class ChangeLog:
    """Mixed into each store; needs `sql` and `meta` from its host."""

    sql: "SQL"
    meta: "Meta"

    def _changed(self, namespace: str, old: int, new: int) -> frozenset[str] | None:
        """The events of the namespace written to after state `old` up to `new`; None when the log cannot
        say: `old` is before its oldest kept row, the namespace was never written to, the state went back,
        or so much changed that reading everything again is cheaper. Read in the snapshot `new` came from."""
        key = (namespace, old, new)
        memo = self.__dict__.setdefault("_changed_memo", {})
        if key in memo:  # a step's fusion lookups and its event reads ask the same question in one snapshot
            return memo[key]
        if not old or new <= old or old < int(self.meta.get("changes_pruned_through") or 0):
            return None
        rows = self.sql.rows("SELECT DISTINCT event FROM changes WHERE namespace=? AND seq>? AND seq<=? LIMIT ?",
                             (namespace, old, new, CHANGED_AT_MOST + 1))
        found = None if len(rows) > CHANGED_AT_MOST else frozenset(e for (e,) in rows if e is not None)
        if len(memo) >= 64:  # what was logged between two committed states never changes: any entry may go
            memo.clear()
        memo[key] = found
        return found

    def prune_changes(self) -> None:
        """Keep the last CHANGES_KEPT rows of the log (a cache older than them reads everything again):
        called after each construction step."""
        with self.sql.transaction():
            top = self.sql.rows("SELECT COALESCE(MAX(seq), 0) FROM changes")[0][0]
            low = int(self.meta.get("changes_pruned_through") or 0)
            if top - low > CHANGES_KEPT + CHANGES_KEPT // 2:
                self.sql.run("DELETE FROM changes WHERE seq<=?", (top - CHANGES_KEPT,))
                self.meta.set("changes_pruned_through", str(top - CHANGES_KEPT))

    def _forget_changes(self, namespace: str) -> None:
        """A namespace deleted: its log rows and counter go with it (inside the deleting transaction)."""
        self.sql.run("DELETE FROM namespace_changes WHERE namespace=?", (namespace,))
        self.sql.run("DELETE FROM changes WHERE namespace=?", (namespace,))
