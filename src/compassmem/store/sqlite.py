"""SQLite store: one file, WAL, foreign keys, one transaction per construction step.

The store owns search: a per-namespace FTS5 table (BM25 in C) and per-namespace vector indexes
(store/vectors.py) kept level with the tables through `vector_log`, so asking never loads a namespace
whole and a crash never leaves an index that disagrees with the data.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from ..embed.base import l2_normalise
from ..errors import StoreError
from ..models import Event, Observation, Topic, utcnow
from .history import EventHistory
from .meta import Cache, Meta
from .steps import Steps
from .shared import SharedSQL
from .sql import SQLiteSQL
from .bm25_base import LexicalBase
from .changes import ChangeLog
from .reads import SearchReads, by_event, stack
from .row_cache import ReadCache
from .rows import KindCalls
from .sqlite_edit import SQLiteEditing
from .sqlite_index import SQLiteIndexes, _unblob
from .sqlite_schema import (SCHEMA, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_VERSION, fts_name, immediate, new_token,
                            observation_terms, statements, upgrade, wal_mode)
from .sqlite_schema import chunks as _chunks
from .vectors import IndexPolicy, VectorIndex


def _blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float32).tobytes()


MMAP_BYTES = 1 << 34  # 16 GiB, more than a 1 M-event database


class SQLiteStore(SearchReads, ChangeLog, SharedSQL, SQLiteEditing, SQLiteIndexes, KindCalls):
    """Thread-safe (one connection behind a lock); readers never see half a step."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0, index_policy: IndexPolicy | None = None) -> None:
        self.path = str(path)
        self.busy_timeout_s = busy_timeout_s
        self.policy = index_policy or IndexPolicy()
        self.index_dir = None if self.path == ":memory:" else Path(self.path + "-index")
        if self.path != ":memory:":
            parent = Path(self.path).expanduser().resolve().parent
            if not parent.is_dir():
                raise StoreError(f"cannot create database {self.path}: folder {parent} does not exist")
        try:
            # busy timeout: another process's step holds the write lock for milliseconds (its slow work is
            # done before it takes the lock), so waiting is right and failing at once is not
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                         timeout=busy_timeout_s)
            wal_mode(self._conn, busy_timeout_s)
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA secure_delete=ON")  # deleted text is overwritten, not left in free pages
            self._conn.execute("PRAGMA cache_size=-65536")  # 64 MB of pages: a search re-reads its neighbourhood
            # reads through a memory map, not a read() and a copy per page: a search's ~900 scattered rows
            # took 8.1 ms through the page cache and 3.2 ms mapped (10 K events). Address space, not RAM:
            # the kernel maps in only the pages a search touches
            self._conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            row = self._create_schema()
            if row is not None and int(row[0]) < SCHEMA_VERSION:
                upgrade(self._conn)
            elif row is not None and int(row[0]) > SCHEMA_VERSION:
                raise StoreError(f"database {self.path} has schema v{row[0]}, this CompassMem reads "
                                 f"v{SCHEMA_VERSION}; upgrade CompassMem")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        self._lock = threading.RLock()
        self._depth = 0  # open transactions, read snapshots included
        self._writes = 0  # open write transactions: an index base must never be built from their rows
        self._indexes: dict[tuple[str, str, str], VectorIndex] = {}
        self._lexicals: dict[tuple[str, str], tuple[int, list[LexicalBase]]] = {}  # (ns, token) -> (head, tiers)
        self.sql = SQLiteSQL(self._conn, self._lock, self.transaction)
        self._exec, self._rows = self.sql.cursor, self.sql.rows  # the store's own statements, same lock
        self.meta, self.cache, self.history = Meta(self.sql), Cache(self.sql), EventHistory(self.sql)
        self.steps = Steps(self.sql)
        # what searches read, between asks, while its namespace is unchanged; a write drops what it touched (row_cache.py)
        self._reads = ReadCache(changed=self._changed, by_event=by_event)

    def _state(self, namespace: str) -> int:
        """The namespace's change counter (sqlite_schema.SCHEMA_V4: triggers set it to the next value of one
        database-wide sequence with every row of its observations, events, relations and topics any
        connection writes, its own uncommitted ones included). Read before the rows it keys."""
        with self._lock:
            row = self._conn.execute("SELECT version FROM namespace_changes WHERE namespace=?", (namespace,)).fetchone()
        return row[0] if row else 0

    def _create_schema(self) -> tuple | None:
        """The tables of a new database, inside one write transaction: processes opening the same new file
        at once each wait their turn, and all but the first find the schema there. Returns the stored
        schema_version row."""
        conn = self._conn
        with immediate(conn):
            fresh = not conn.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone()
            for sql in statements(SCHEMA):
                conn.execute(sql)
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None and fresh:
                for sql in [*statements(SCHEMA_V2), *statements(SCHEMA_V3), *SCHEMA_V4]:
                    conn.execute(sql)
                conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return row

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            if outer:
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    raise StoreError(f"database {self.path} is busy: another writer held it for more than "
                                     f"{self.busy_timeout_s:g} s ({exc}); nothing was written, try again") from None
            self._depth += 1
            self._writes += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                self._writes -= 1
                if outer:
                    self._conn.execute("ROLLBACK")
                    self._indexes.clear()  # they may have replayed rows that were never committed
                    self._lexicals.clear()
                    self._reads.clear()
                raise
            self._depth -= 1
            self._writes -= 1
            if outer:
                self._conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one committed state of the database, even while other processes write."""
        with self._lock:
            if self._depth:
                yield
                return
            self._conn.execute("BEGIN")
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                self._conn.execute("COMMIT")

    def _in(self, sql: str, namespace: str, ids: list, extra: tuple = ()) -> list[tuple]:
        """Run `sql` (with one `{marks}` placeholder for an IN list) over ids in chunks."""
        out: list[tuple] = []
        for chunk in _chunks(list(ids)):
            out += self._rows(sql.format(marks=",".join("?" * len(chunk))), (namespace, *extra, *chunk))
        return out

    # ------------------------------------------------------------------ namespaces
    def ensure_namespace(self, namespace: str) -> None:
        with self.transaction():
            if self._exec("INSERT OR IGNORE INTO namespaces VALUES (?, ?)", (namespace, utcnow())).rowcount:
                new_token(self._conn, namespace)

    def _token(self, namespace: str) -> str | None:
        return self.meta.get(f"index_token/{namespace}")

    _OWNED = ("observations", "steps", "events", "relations", "topics", "speakers", "vector_log", "event_history")

    def delete_namespace(self, namespace: str) -> dict[str, int]:
        """Remove a namespace with everything derived from it, in one transaction: its rows (cascading),
        the full-text table, the vector log, the LLM-cache rows its work wrote or replayed; then its
        index files, and a WAL checkpoint so the deleted text is not left in the -wal file. Rows are
        zeroed, not just unlinked (secure_delete). Returns rows removed per table."""
        removed: dict[str, int] = {}
        with self.transaction():
            token = self._token(namespace)
            for table in self._OWNED:
                removed[table] = self._rows(f"SELECT COUNT(*) FROM {table} WHERE namespace=?", (namespace,))[0][0]
            removed["llm_cache"] = self.cache.drop(namespace)
            if token:
                removed["full_text"] = self._rows(f'SELECT COUNT(*) FROM "{fts_name(token)}"')[0][0]
            self._exec("DELETE FROM namespaces WHERE name=?", (namespace,))
            self._forget_changes(namespace)  # its name goes too
            self._exec("DELETE FROM meta WHERE key IN (?, ?)", (f"clustered_events/{namespace}", f"index_token/{namespace}"))
            self._exec("DELETE FROM vector_log WHERE namespace=?", (namespace,))
            if token:
                self._exec(f'DROP TABLE IF EXISTS "{fts_name(token)}"')
        removed["index_files"] = self._drop_index_files(namespace, token)
        self.checkpoint()
        return removed

    def checkpoint(self) -> None:
        """Copy the WAL into the database and empty it (deleted rows then live nowhere but zeroed pages)."""
        if self.path != ":memory:":
            with self._lock:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # ------------------------------------------------------------------ observations
    def add_observations(self, observations: list[Observation], embeddings: np.ndarray | None = None,
                         owners: dict[str, str] | None = None) -> None:
        owners = owners or {}
        with self.transaction():
            tokens: dict[str, str | None] = {}
            for i, o in enumerate(observations):
                vec = _blob(embeddings[i]) if embeddings is not None else None
                meta = json.dumps(o.meta)
                rowid = self._exec(
                    "INSERT INTO observations (namespace,id,step,seq,speaker,text,time,date,meta,ingested_at,embedding,"
                    "event) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(namespace, id) DO UPDATE SET step=excluded.step, "
                    "seq=excluded.seq, speaker=excluded.speaker, text=excluded.text, time=excluded.time, "
                    "date=excluded.date, meta=excluded.meta, ingested_at=excluded.ingested_at, "
                    "embedding=excluded.embedding, event=COALESCE(excluded.event, observations.event) RETURNING rowid",
                    (o.namespace, o.id, o.step, o.seq, o.speaker, o.text, o.time, o.date, meta, o.ingested_at, vec,
                     owners.get(o.id)),
                ).fetchone()[0]
                if o.namespace not in tokens:
                    tokens[o.namespace] = self._token(o.namespace)
                fts = fts_name(tokens[o.namespace] or "")
                self._exec(f'DELETE FROM "{fts}" WHERE rowid=?', (rowid,))
                self._exec(f'INSERT INTO "{fts}"(rowid, terms) VALUES (?, ?)', (rowid, observation_terms(o.text, meta)))
                if o.speaker:
                    self._exec("INSERT OR IGNORE INTO speakers VALUES (?, ?)", (o.namespace, o.speaker))
                self._log(o.namespace, "observations", rowid)

    def _log(self, namespace: str, kind: str, rowid: int) -> None:
        self._exec("INSERT INTO vector_log (namespace, kind, key) VALUES (?, ?, ?)", (namespace, kind, rowid))

    @staticmethod
    def _matrix_of(blobs: list[bytes | None]) -> np.ndarray:
        mat = stack(blobs)
        return l2_normalise(mat) if len(blobs) else mat

    # ------------------------------------------------------------------ events
    def put_event(self, event: Event, embedding: np.ndarray) -> None:
        self.put_events([event], np.asarray(embedding)[None, :])

    def put_events(self, events: list[Event], embeddings: np.ndarray) -> None:
        """Row by row (each row's id goes to the vector log); SQLite has no round trips to save."""
        with self.transaction():
            for event, embedding in zip(events, embeddings):
                rowid = self._exec(
                    "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(namespace, id) DO UPDATE SET "
                    "step=excluded.step, summary=excluded.summary, participants=excluded.participants, "
                    "time=excluded.time, observation_ids=excluded.observation_ids, topic_id=excluded.topic_id, "
                    "history=excluded.history, embedding=excluded.embedding RETURNING rowid",
                    (event.namespace, event.id, event.step, event.summary, json.dumps(event.participants),
                     event.time.model_dump_json(), json.dumps(event.observation_ids), event.topic_id,
                     json.dumps(event.history), _blob(embedding)),
                ).fetchone()[0]
                for chunk in _chunks(event.observation_ids):
                    self._exec(f"UPDATE observations SET event=? WHERE namespace=? AND id IN ({','.join('?' * len(chunk))})",
                               (event.id, event.namespace, *chunk))
                self._log(event.namespace, "events", rowid)

    # ------------------------------------------------------------------ topics
    def put_topic(self, topic: Topic, centroid: np.ndarray) -> None:
        self.put_topics([(topic, centroid)])

    def put_topics(self, topics: list[tuple[Topic, np.ndarray]]) -> None:
        with self.transaction():
            for topic, centroid in topics:
                rowid = self._exec("INSERT INTO topics VALUES (?,?,?,?,?) ON CONFLICT(namespace, id) DO UPDATE SET "
                                   "label=excluded.label, size=excluded.size, centroid=excluded.centroid RETURNING rowid",
                                   (topic.namespace, topic.id, topic.label, topic.size, _blob(centroid))).fetchone()[0]
                self._log(topic.namespace, "topics", rowid)

    def delete_topics(self, namespace: str, topic_ids: list[str]) -> None:
        with self.transaction():
            for topic_id in topic_ids:
                for (rowid,) in self._rows("DELETE FROM topics WHERE namespace=? AND id=? RETURNING rowid",
                                           (namespace, topic_id)):
                    self._log(namespace, "topics", rowid)

    _vector = staticmethod(_unblob)  # a stored vector as float32 (store/shared.py get_topic)
