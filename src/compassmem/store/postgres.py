"""PostgreSQL + pgvector store: the scale-out path, for a service on several machines sharing one database.

Selected by a `postgresql://` URL. psycopg 3 with a connection pool; one transaction per construction
step, taking a transaction-level advisory lock so two writers (two `compassmem serve` processes, two
ingests) never interleave a step, while readers see whole steps only (a read snapshot is a REPEATABLE
READ transaction). Vectors are pgvector columns with HNSW indexes; the lexical signal is BM25 computed
in SQL over a postings table with FTS5's formula, so rankings equal the SQLite store's. Search and index upkeep
live in store/postgres_index.py, editing and export in store/postgres_edit.py.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from ..embed.base import l2_normalise
from ..errors import StoreError
from ..models import Event, Observation, Relation, Topic, utcnow
from .history import EventHistory
from .meta import Cache, Meta
from .steps import Steps
from .changes import ChangeLog
from .kept_vectors import KeptVectors
from .reads import SearchReads, by_event
from .row_cache import ReadCache
from .shared import SharedSQL
from .sql import PostgresSQL
from .rows import KindCalls
from .postgres_edit import PostgresEditing
from .postgres_index import PostgresIndexes
from .postgres_schema import MIGRATIONS, SCHEMA_VERSION
from .postgres_values import _np, _terms

_WRITE_LOCK = 0x436F6D70  # one advisory lock for all writers: steps never interleave (as in SQLite)


class PostgresStore(SearchReads, ChangeLog, SharedSQL, PostgresEditing, PostgresIndexes, KindCalls):
    """Thread-safe: each thread's transaction or snapshot holds one pooled connection."""

    def __init__(self, url: str, max_connections: int = 8) -> None:
        try:
            import psycopg
            from pgvector.psycopg import register_vector
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise StoreError(f"the PostgreSQL store needs the postgres extra ({exc.name} is missing): "
                             "pip install 'compassmem[postgres]'") from None
        self.url = url
        self._psycopg = psycopg
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                self._migrate(conn)
            self._pool = ConnectionPool(url, min_size=1, max_size=max_connections, open=True, timeout=60,
                                        kwargs={"autocommit": True}, configure=register_vector)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL database: {str(exc).strip().splitlines()[0]}") from None
        self._local = threading.local()
        self.sql = PostgresSQL(self._conn, self.transaction, (psycopg.DataError, psycopg.errors.ProgramLimitExceeded))
        self._q, self._x = self.sql.query, self.sql.execute
        self.meta, self.cache, self.history = Meta(self.sql), Cache(self.sql), EventHistory(self.sql)
        self.steps = Steps(self.sql)
        self._counts: dict[tuple[str, str], tuple[int, float]] = {}
        self._marks: dict[str, tuple[int | None, float]] = {}  # HNSW graph per kind (_hnsw_mark)
        self._dim: int | None = int(self.meta.get("vector_dim") or 0) or None
        # what searches read, between asks, while its namespace is unchanged; a write drops what it touched (row_cache.py)
        self._reads = ReadCache(changed=self._changed, by_event=by_event)
        self._kept_vectors = KeptVectors()  # event vectors kept across writes (kept_vectors.py)
        self._scans: dict[tuple[str, str], tuple[int, int]] = {}  # vector and BM25 searches per namespace state (_worth_keeping)

    def _state(self, namespace: str) -> int | None:
        """Inside a read snapshot, the namespace's change counter as that snapshot sees it (store/changes.py;
        postgres_schema v4's triggers set it with every statement that writes what a search reads), read
        once per snapshot and namespace. Elsewhere None, and nothing is kept: a statement outside a snapshot
        sees whatever is committed when it runs, and a write transaction sees its own uncommitted rows."""
        local = self._local
        if getattr(local, "conn", None) is None or local.write:
            return None
        if namespace not in local.states:
            row = local.conn.execute("SELECT version FROM namespace_changes WHERE namespace=%s", (namespace,)).fetchone()
            local.states[namespace] = row[0] if row else 0
        return local.states[namespace]

    def derived(self, namespace: str, kind: str, keys: list[str],
                work_out: Callable[[list[str]], dict[str, Any]], by_event: bool = False) -> dict[str, Any]:
        """SearchReads.derived, in a snapshot of its own when called outside one (the ranking's name lookups
        and the answerer's turn vectors come after the graph's snapshot): what it works out is then kept
        as well, as lexical_search does. Inside a write transaction nothing is kept (`_state`)."""
        with self.snapshot():  # the caller's, when there is one
            return super().derived(namespace, kind, keys, work_out, by_event)

    # ------------------------------------------------------------------ schema
    def _migrate(self, conn: Any) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"this PostgreSQL database has schema v{version}, this CompassMem reads "
                                 f"v{SCHEMA_VERSION}; upgrade CompassMem")
            for v in range(version + 1, SCHEMA_VERSION + 1):
                conn.execute(MIGRATIONS[v])
            conn.execute("INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET "
                         "value = excluded.value", (str(SCHEMA_VERSION),))

    def _ensure_dim(self, vec: np.ndarray | None) -> None:
        """The first vector fixes the dimension (HNSW indexes come later, see refresh_indexes)."""
        if vec is None or self._dim is not None:
            return
        dim = int(np.asarray(vec).shape[-1])
        if self.meta.get("vector_dim") is None:
            self.meta.set("vector_dim", str(dim))
        self._dim = int(self.meta.get("vector_dim") or dim)

    # ------------------------------------------------------------------ connections
    @contextmanager
    def _conn(self) -> Iterator[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        with self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
            if not self._local.write:  # a write inside a read snapshot: take the writers' lock now
                self._local.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
                self._local.write = True
            yield
            return
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
                    self._local.conn, self._local.write = conn, True
                    try:
                        yield
                    finally:
                        self._local.conn = None
            except self._psycopg.OperationalError as exc:
                raise StoreError(f"PostgreSQL write failed: {str(exc).strip().splitlines()[0]}") from None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._pool.connection() as conn:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                self._local.conn, self._local.write, self._local.states = conn, False, {}
                try:
                    yield
                finally:
                    self._local.conn, self._local.states = None, {}

    # ------------------------------------------------------------------ namespaces
    def ensure_namespace(self, namespace: str) -> None:
        self._x("INSERT INTO namespaces VALUES (%s, %s) ON CONFLICT DO NOTHING", (namespace, utcnow()))

    _OWNED = ("observations", "steps", "events", "relations", "topics", "speakers", "event_history")

    def delete_namespace(self, namespace: str) -> dict[str, int]:
        removed: dict[str, int] = {}
        with self.transaction():
            for table in self._OWNED:
                removed[table] = self._q(f"SELECT COUNT(*) FROM {table} WHERE namespace=%s", (namespace,))[0][0]
            removed["full_text"] = self._q("SELECT COUNT(DISTINCT obs_id) FROM terms WHERE namespace=%s", (namespace,))[0][0]
            removed["llm_cache"] = self.cache.drop(namespace)
            self._x("DELETE FROM terms WHERE namespace=%s", (namespace,))  # no foreign key (schema v3)
            self._x("DELETE FROM namespaces WHERE name=%s", (namespace,))
            self._x("DELETE FROM meta WHERE key=%s", (f"clustered_events/{namespace}",))
            self._forget_changes(namespace)  # its name goes too
            # any namespace deleted: what other connections keep of one made again under its name is stale
            # (kept_vectors.py), and its log rows are gone; a count, so no deleted name stays behind
            self._x("INSERT INTO meta VALUES ('namespaces_deleted', '1') ON CONFLICT (key) DO UPDATE "
                    "SET value = (meta.value::bigint + 1)::text")
            self._kept_vectors.forget(namespace)
        removed["index_files"] = 0
        self.compact(namespace)
        return removed

    # ------------------------------------------------------------------ observations
    def add_observations(self, observations: list[Observation], embeddings: np.ndarray | None = None,
                         owners: dict[str, str] | None = None) -> None:
        """Upserts with their postings, in a few batched statements (one round trip each, not four per row)."""
        owners = owners or {}
        if embeddings is not None and len(embeddings):
            self._ensure_dim(embeddings[0])
        obs_rows, postings, speakers = [], {}, set()
        for i, o in enumerate(observations):
            meta = json.dumps(o.meta)
            counts, length = _terms(o.text, meta)
            vec = np.asarray(embeddings[i], np.float32) if embeddings is not None else None
            obs_rows.append((o.namespace, o.id, o.step, o.seq, o.speaker, o.text, o.time, o.date, meta,
                             o.ingested_at, vec, length, owners.get(o.id)))
            postings.setdefault(o.namespace, {})[o.id] = (counts, length)
            if o.speaker:
                speakers.add((o.namespace, o.speaker))
        with self.transaction(), self._conn() as c, self.sql.refusals():
            cur = c.cursor()
            totals = {}  # per namespace: new documents, and how much their total length changes
            existing: dict[str, set[str]] = {}  # rewritten observations: only theirs have postings to replace
            for namespace, by_id in postings.items():
                before = dict(cur.execute("SELECT id, doc_len FROM observations WHERE namespace=%s AND id = ANY(%s)",
                                          (namespace, list(by_id))).fetchall())
                totals[namespace] = (len(by_id) - len(before),
                                     sum(n for _, n in by_id.values()) - sum(before.values()))
                existing[namespace] = set(before)
            cur.executemany("INSERT INTO observations (namespace,id,step,seq,speaker,text,time,date,meta,ingested_at,"
                            "embedding,doc_len,event) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT "
                            "(namespace, id) DO UPDATE SET step=excluded.step, seq=excluded.seq, speaker=excluded.speaker, "
                            "text=excluded.text, time=excluded.time, date=excluded.date, meta=excluded.meta, "
                            "ingested_at=excluded.ingested_at, embedding=excluded.embedding, doc_len=excluded.doc_len, "
                            "event=COALESCE(excluded.event, observations.event)", obs_rows)
            self._put_postings(cur, postings, existing)
            for namespace, (docs, length) in totals.items():
                self._add_to_totals(namespace, docs, length)
            if speakers:
                cur.executemany("INSERT INTO speakers VALUES (%s,%s) ON CONFLICT DO NOTHING", sorted(speakers))

    def _add_to_totals(self, namespace: str, docs: int, length: int) -> None:
        """Keep a namespace's document count and total length (BM25's N and average length) current; every
        call that adds, rewrites or removes observations calls this in its own transaction."""
        if docs or length:
            self._x("UPDATE namespaces SET docs = docs + %s, total_len = total_len + %s WHERE name = %s",
                    (docs, length, namespace))

    @staticmethod
    def _put_postings(cur: Any, postings: dict[str, dict[str, tuple[Any, int]]],
                      existing: dict[str, set[str]] | None = None) -> None:
        """Replace these observations' postings ({namespace: {id: (term counts, length)}}, the observations
        already written). Each posting carries its observation's length and row id, so a BM25 query reads
        the postings alone (schema v2). `existing`: per namespace, the ids that may have postings already
        (None: any may); a step's new turns have none, and the DELETE for them could take a sequential scan
        of the postings (58 ms a step) while the planner's statistics lag behind a fast-growing table."""
        rows = []
        for namespace, by_id in postings.items():
            ids = list(by_id)
            old = ids if existing is None else [i for i in ids if i in existing.get(namespace, ())]
            if old:
                cur.execute("DELETE FROM terms WHERE namespace=%s AND obs_id = ANY(%s)", (namespace, old))
            rowids = dict(cur.execute("SELECT id, rowid FROM observations WHERE namespace=%s AND id = ANY(%s)",
                                      (namespace, ids)).fetchall())
            rows += [(namespace, oid, t, n, length, rowids[oid]) for oid, (counts, length) in by_id.items()
                     for t, n in counts.items()]
        if rows:  # COPY: one stream instead of a statement per posting
            with cur.copy("COPY terms (namespace, obs_id, term, tf, doc_len, obs_rowid) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    @staticmethod
    def _matrix_of(vecs: list) -> np.ndarray:
        arrays = [_np(v) for v in vecs]
        dim = next((len(v) for v in arrays if v is not None), 0)
        out = np.zeros((len(arrays), dim), np.float32)
        for i, v in enumerate(arrays):
            if v is not None:
                out[i] = v
        return l2_normalise(out) if len(arrays) else out

    # ------------------------------------------------------------------ events
    def put_event(self, event: Event, embedding: np.ndarray) -> None:
        self.put_events([event], np.asarray(embedding)[None, :])

    def put_events(self, events: list[Event], embeddings: np.ndarray) -> None:
        """Two statements for the lot (a pipelined executemany and one UPDATE over unnest), not two round
        trips per event: per-row statements were half of a PostgreSQL build's time."""
        if not events:
            return
        self._ensure_dim(embeddings[0])
        owner = {(e.namespace, oid): e.id for e in events for oid in e.observation_ids}  # a later event wins
        with self.transaction(), self._conn() as c, self.sql.refusals():
            c.cursor().executemany(
                "INSERT INTO events (namespace,id,step,summary,participants,time,observation_ids,topic_id,history,"
                "embedding) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (namespace, id) DO UPDATE SET "
                "step=excluded.step, summary=excluded.summary, participants=excluded.participants, "
                "time=excluded.time, observation_ids=excluded.observation_ids, topic_id=excluded.topic_id, "
                "history=excluded.history, embedding=excluded.embedding",
                [(e.namespace, e.id, e.step, e.summary, json.dumps(e.participants), e.time.model_dump_json(),
                  json.dumps(e.observation_ids), e.topic_id, json.dumps(e.history), np.asarray(v, np.float32))
                 for e, v in zip(events, embeddings)])
            if owner:
                # only rows whose event changes: a row rewritten is a new row version with new entries in every
                # index, HNSW included (a step's UPDATE of its merged events' old turns was 159 ms at 40 K turns)
                c.execute("UPDATE observations o SET event = v.event FROM unnest(%s::text[], %s::text[], %s::text[]) "
                          "AS v(namespace, id, event) WHERE o.namespace = v.namespace AND o.id = v.id "
                          "AND o.event IS DISTINCT FROM v.event",
                          ([ns for ns, _ in owner], [oid for _, oid in owner], list(owner.values())))

    def add_relations(self, relations: list[Relation]) -> None:
        """One statement over `unnest` for the lot: a pipelined executemany fired the change-log trigger
        once per row (about 1 ms a relation on a step's write path). A relation given twice keeps its first
        place in stored order and its last values, as upserting them one by one does."""
        last: dict[tuple[str, str], Relation] = {}
        for r in relations:
            last[(r.namespace, r.id)] = r
        if not last:
            return
        rows = list(last.values())
        self._x("INSERT INTO relations (namespace, id, source, target, type, evidence, origin, confidence, step) "
                "SELECT namespace, id, source, target, type, evidence, origin, confidence, step FROM unnest("
                "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::float8[], "
                "%s::int[]) WITH ORDINALITY AS v(namespace, id, source, target, type, evidence, origin, confidence, "
                "step, n) ORDER BY n ON CONFLICT (namespace, id) DO UPDATE SET source=excluded.source, "
                "target=excluded.target, type=excluded.type, evidence=excluded.evidence, origin=excluded.origin, "
                "confidence=excluded.confidence, step=excluded.step",
                ([r.namespace for r in rows], [r.id for r in rows], [r.source for r in rows],
                 [r.target for r in rows], [r.type for r in rows], [json.dumps(r.evidence) for r in rows],
                 [r.origin for r in rows], [float(r.confidence) for r in rows], [int(r.step) for r in rows]))

    # ------------------------------------------------------------------ topics
    def put_topic(self, topic: Topic, centroid: np.ndarray) -> None:
        self.put_topics([(topic, centroid)])

    def put_topics(self, topics: list[tuple[Topic, np.ndarray]]) -> None:
        """One pipelined executemany: a re-clustering's statement per topic was a tenth of a step's time."""
        if not topics:
            return
        self._ensure_dim(topics[0][1])
        self.sql.many("INSERT INTO topics (namespace,id,label,size,centroid) VALUES (?,?,?,?,?) ON CONFLICT "
                      "(namespace, id) DO UPDATE SET label=excluded.label, size=excluded.size, centroid=excluded.centroid",
                      [(t.namespace, t.id, t.label, t.size, np.asarray(c, np.float32)) for t, c in topics])

    def delete_topics(self, namespace: str, topic_ids: list[str]) -> None:
        if topic_ids:
            self._x("DELETE FROM topics WHERE namespace=%s AND id = ANY(%s)", (namespace, list(topic_ids)))

    _vector = staticmethod(_np)  # a stored vector as float32 (store/shared.py get_topic)
