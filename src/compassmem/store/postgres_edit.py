"""The PostgreSQL store's editing and export/import (Memory.delete / update, receipts). A mixin of PostgresStore (store/postgres.py), which owns the pool and the transactions."""

from __future__ import annotations

from typing import Iterable, Iterator

from ..errors import StoreError
from ..export_file import COLUMNS
from ..models import Observation
from . import rows as records
from .rows import OBS_COLS as _OBS_COLS
from .postgres_values import EXPORT_TABLES, _portable, _terms


class PostgresEditing:
    """Needs from its host: _q, _x, _conn, _pool, _local, _psycopg, transaction, snapshot, _ensure_dim,
    _put_postings, _add_to_totals."""

    # ------------------------------------------------------------------ editing
    def delete_observations(self, namespace: str, ids: list[str]) -> list[Observation]:
        with self.transaction():
            rows = self._q(f"DELETE FROM observations WHERE namespace=%s AND id = ANY(%s) RETURNING {_OBS_COLS}, doc_len",
                           (namespace, list(dict.fromkeys(ids))))
            self._x("DELETE FROM terms WHERE namespace=%s AND obs_id = ANY(%s)", (namespace, [r[1] for r in rows]))
            self._add_to_totals(namespace, -len(rows), -sum(r[-1] for r in rows))
            self._x("DELETE FROM speakers s WHERE namespace=%s AND NOT EXISTS (SELECT 1 FROM observations o WHERE "
                    "o.namespace = s.namespace AND o.speaker = s.name)", (namespace,))
        return sorted((records.observation(r[:-1]) for r in rows), key=lambda o: (o.step, o.seq))

    def delete_events(self, namespace: str, ids: list[str]) -> int:
        with self.transaction():
            before = self._q("SELECT COUNT(*) FROM relations WHERE namespace=%s", (namespace,))[0][0]
            self._x("DELETE FROM events WHERE namespace=%s AND id = ANY(%s)", (namespace, list(dict.fromkeys(ids))))
            return before - self._q("SELECT COUNT(*) FROM relations WHERE namespace=%s", (namespace,))[0][0]

    def compact(self, namespace: str) -> int:
        """VACUUM the tables that held the deleted rows, so their dead tuples are reclaimed (PostgreSQL keeps
        them on their pages until then). Never inside a transaction. No index files: returns 0."""
        if getattr(self._local, "conn", None) is None:
            with self._pool.connection() as c:
                c.execute("VACUUM observations, terms, events, relations, topics, event_history, llm_cache, steps")
        return 0

    def checkpoint(self) -> None:
        """Nothing to do: compact has reclaimed the deleted rows; PostgreSQL's WAL is the server's own."""

    def leak_scan(self, texts: list[str]) -> tuple[list[str], list[str]]:
        """Where each text could still be: every text column of every table (SQL, through the server)."""
        places = [("observations", "text"), ("events", "summary"), ("events", "history"),
                  ("event_history", "summary"), ("llm_cache", "value"), ("topics", "label")]
        found = [f"{table}.{col}: {t[:60]}" for t in texts for table, col in places
                 if self._q(f"SELECT 1 FROM {table} WHERE strpos({col}, %s) > 0 LIMIT 1", (t,))]
        return [f"postgresql:{table}.{col}" for table, col in places], found

    # ------------------------------------------------------------------ export / import
    def export_rows(self, namespace: str) -> Iterator[tuple[str, dict]]:
        with self.snapshot():
            out = []
            for table, cols in EXPORT_TABLES.items():
                key = "name" if table == "namespaces" else "namespace"
                order = {"namespaces": "name", "steps": "step"}.get(table, "rowid")
                for values in self._q(f"SELECT {cols} FROM {table} WHERE {key}=%s ORDER BY {order}", (namespace,)):
                    out.append((table, {c: _portable(v) for c, v in zip(cols.split(","), values)}))
        return iter(out)

    def import_rows(self, rows: Iterable[tuple[str, dict]]) -> int:
        """Insert rows that export_file.read checked, in one transaction; columns come from
        export_file.COLUMNS, never from the rows' keys."""
        n = 0
        with self.transaction():
            for table, values in rows:
                cols = COLUMNS[table]
                try:
                    with self._conn() as c:
                        with c.transaction():  # a savepoint: a refused row leaves a clear error, not an aborted txn
                            c.execute(f"INSERT INTO {table} ({','.join(cols)}) VALUES ({','.join(['%s'] * len(cols))})",
                                      [values[c2] for c2 in cols])
                except self._psycopg.Error as exc:
                    raise StoreError(f"import refused: {str(exc).strip().splitlines()[0]} (table {table})") from None
                if table == "observations":
                    vec = values.get("embedding")
                    if vec is not None:
                        self._ensure_dim(vec)
                    counts, length = _terms(values["text"], values["meta"])
                    self._x("UPDATE observations SET doc_len=%s WHERE namespace=%s AND id=%s",
                            (length, values["namespace"], values["id"]))
                    with self._conn() as c:
                        self._put_postings(c.cursor(), {values["namespace"]: {values["id"]: (counts, length)}})
                    self._add_to_totals(values["namespace"], 1, length)
                    if values.get("speaker"):
                        self._x("INSERT INTO speakers VALUES (%s,%s) ON CONFLICT DO NOTHING",
                                (values["namespace"], values["speaker"]))
                n += 1
        return n
