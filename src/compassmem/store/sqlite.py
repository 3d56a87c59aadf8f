"""SQLite store: one file, WAL, foreign keys, one transaction per construction step.

Vector search keeps one normalised numpy matrix per namespace in memory and drops it on any write
to that namespace, so a read-heavy workload (asking) pays the load once.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from ..embed.base import dots
from ..errors import StoreError
from ..models import Event, EventTime, Observation, Relation, StepRecord, Topic, utcnow

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS namespaces (name TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS observations (
  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
  id TEXT NOT NULL, step INTEGER NOT NULL, seq INTEGER NOT NULL, speaker TEXT, text TEXT NOT NULL,
  time TEXT, date TEXT, meta TEXT NOT NULL, ingested_at TEXT NOT NULL, embedding BLOB,
  PRIMARY KEY (namespace, id));
CREATE INDEX IF NOT EXISTS obs_step ON observations(namespace, step, seq);
CREATE TABLE IF NOT EXISTS steps (
  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
  step INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (namespace, step));
CREATE TABLE IF NOT EXISTS events (
  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
  id TEXT NOT NULL, step INTEGER NOT NULL, summary TEXT NOT NULL, participants TEXT NOT NULL,
  time TEXT NOT NULL, observation_ids TEXT NOT NULL, topic_id TEXT, history TEXT NOT NULL,
  embedding BLOB NOT NULL, PRIMARY KEY (namespace, id));
CREATE TABLE IF NOT EXISTS relations (
  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
  id TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, type TEXT NOT NULL,
  evidence TEXT NOT NULL, origin TEXT NOT NULL, confidence REAL NOT NULL, step INTEGER NOT NULL,
  PRIMARY KEY (namespace, id),
  FOREIGN KEY (namespace, source) REFERENCES events(namespace, id) ON DELETE CASCADE,
  FOREIGN KEY (namespace, target) REFERENCES events(namespace, id) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS rel_source ON relations(namespace, source);
CREATE INDEX IF NOT EXISTS rel_target ON relations(namespace, target);
CREATE TABLE IF NOT EXISTS topics (
  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
  id TEXT NOT NULL, label TEXT NOT NULL, size INTEGER NOT NULL, centroid BLOB NOT NULL,
  PRIMARY KEY (namespace, id));
CREATE TABLE IF NOT EXISTS llm_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at TEXT NOT NULL);
"""


def _blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float32).tobytes()


def _unblob(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float32)


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


class _Vectors:
    """ids + a growable row buffer: upserts are amortised O(dim), so building a namespace of n events
    costs O(n) copies instead of reloading the whole matrix after every write."""

    def __init__(self, ids: list[str], mat: np.ndarray) -> None:
        self.ids = list(ids)
        self.pos = {eid: i for i, eid in enumerate(self.ids)}
        self.buf = mat.copy() if len(ids) else np.zeros((0, 0), np.float32)

    def upsert(self, key: str, vec: np.ndarray) -> None:
        v = np.asarray(vec, np.float32)
        v = v / (np.linalg.norm(v) or 1.0)
        if key in self.pos:
            self.buf[self.pos[key]] = v
            return
        n = len(self.ids)
        if self.buf.shape[0] == 0 or self.buf.shape[1] != v.shape[0]:
            if n:
                raise StoreError("embedding dimension changed inside a namespace")
            self.buf = np.zeros((16, v.shape[0]), np.float32)
        elif n >= self.buf.shape[0]:
            self.buf = np.vstack([self.buf, np.zeros_like(self.buf)])
        self.buf[n] = v
        self.ids.append(key)
        self.pos[key] = n

    def remove(self, key: str) -> None:
        i = self.pos.pop(key, None)
        if i is None:
            return
        n = len(self.ids)
        self.buf[i : n - 1] = self.buf[i + 1 : n]
        self.ids.pop(i)
        self.pos = {eid: j for j, eid in enumerate(self.ids)}

    def view(self) -> tuple[list[str], np.ndarray]:
        """Live, uncopied: only for searches done under the store lock."""
        return self.ids, self.buf[: len(self.ids)]

    def snapshot(self) -> tuple[list[str], np.ndarray]:
        return list(self.ids), self.buf[: len(self.ids)].copy()


class SQLiteStore:
    """Thread-safe (one connection behind a lock); readers never see half a step."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        self.busy_timeout_s = busy_timeout_s
        if self.path != ":memory:":
            parent = Path(self.path).expanduser().resolve().parent
            if not parent.is_dir():
                raise StoreError(f"cannot create database {self.path}: folder {parent} does not exist")
        try:
            # busy timeout: another process's step holds the write lock for milliseconds (its slow work is
            # done before it takes the lock), so waiting is right and failing at once is not
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                         timeout=busy_timeout_s)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            row = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        if row is None:
            self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise StoreError(f"database {self.path} has schema v{row[0]}, this CompassMem reads v{SCHEMA_VERSION}")
        self._lock = threading.RLock()
        self._depth = 0
        self._matrices: dict[tuple[str, str], _Vectors] = {}
        self._data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]

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
                self._sync()
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._conn.execute("ROLLBACK")
                    self._matrices.clear()
                raise
            self._depth -= 1
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
                self._sync()
                yield
            finally:
                self._depth -= 1
                self._conn.execute("COMMIT")

    def _sync(self) -> None:
        """Drop the vector caches when another connection (another process) has committed since we
        last looked: a cached matrix must never disagree with the tables."""
        version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._data_version = version
            self._matrices.clear()

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, args)

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _dirty(self, namespace: str) -> None:
        for kind in ("events", "topics", "observations"):
            self._matrices.pop((namespace, kind), None)

    def _upsert_vec(self, namespace: str, kind: str, key: str, vec: np.ndarray) -> None:
        cached = self._matrices.get((namespace, kind))
        if cached is not None:
            cached.upsert(key, vec)

    # ------------------------------------------------------------------ namespaces
    def namespaces(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM namespaces ORDER BY name")]

    def ensure_namespace(self, namespace: str) -> None:
        self._exec("INSERT OR IGNORE INTO namespaces VALUES (?, ?)", (namespace, utcnow()))

    def has_namespace(self, namespace: str) -> bool:
        return bool(self._rows("SELECT 1 FROM namespaces WHERE name=?", (namespace,)))

    def delete_namespace(self, namespace: str) -> None:
        with self.transaction():
            self._exec("DELETE FROM namespaces WHERE name=?", (namespace,))
            self._exec("DELETE FROM meta WHERE key=?", (f"clustered_events/{namespace}",))
        self._dirty(namespace)

    # ------------------------------------------------------------------ export / import
    _TABLES = ("namespaces", "observations", "steps", "events", "relations", "topics")  # dependency order

    def export_rows(self, namespace: str) -> Iterator[tuple[str, dict]]:
        """(table, row) for every stored row of a namespace, exactly as stored (vectors as base64 float32),
        from one consistent snapshot."""
        with self.snapshot():
            for table in self._TABLES:
                key = "name" if table == "namespaces" else "namespace"
                cur = self._conn.execute(f"SELECT * FROM {table} WHERE {key}=? ORDER BY rowid", (namespace,))
                cols = [c[0] for c in cur.description]
                for values in cur.fetchall():
                    yield table, {c: ({"b64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v)
                                  for c, v in zip(cols, values)}

    def import_rows(self, rows: Iterable[tuple[str, dict]]) -> int:
        """Insert exported rows in one transaction (all or nothing); returns the number of rows."""
        n = 0
        with self.transaction():
            for table, row in rows:
                if table not in self._TABLES:
                    raise StoreError(f"unknown table '{table}' in import")
                cols = list(row)
                values = [base64.b64decode(v["b64"]) if isinstance(v, dict) and "b64" in v else v for v in row.values()]
                try:
                    self._conn.execute(f"INSERT INTO {table} ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                                       values)
                except sqlite3.IntegrityError as exc:
                    raise StoreError(f"import refused: {exc} (table {table})") from None
                except sqlite3.OperationalError as exc:
                    raise StoreError(f"import refused: {exc} (table {table}); is it a CompassMem export?") from None
                n += 1
            self._matrices.clear()
        return n

    # ------------------------------------------------------------------ observations
    def add_observations(self, observations: list[Observation], embeddings: np.ndarray | None = None) -> None:
        with self.transaction():
            for i, o in enumerate(observations):
                vec = _blob(embeddings[i]) if embeddings is not None else None
                self._exec(
                    "INSERT OR REPLACE INTO observations VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (o.namespace, o.id, o.step, o.seq, o.speaker, o.text, o.time, o.date,
                     json.dumps(o.meta), o.ingested_at, vec),
                )
                if vec is not None:
                    self._upsert_vec(o.namespace, "observations", o.id, embeddings[i])

    _OBS_COLS = "namespace,id,step,seq,speaker,text,time,date,meta,ingested_at"

    @staticmethod
    def _obs(r: tuple) -> Observation:
        return Observation(namespace=r[0], id=r[1], step=r[2], seq=r[3], speaker=r[4], text=r[5],
                           time=r[6], date=r[7], meta=json.loads(r[8]), ingested_at=r[9])

    def get_observations(self, namespace: str, ids: list[str]) -> list[Observation]:
        found: dict[str, Observation] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for r in self._rows(f"SELECT {self._OBS_COLS} FROM observations WHERE namespace=? AND id IN ({marks})",
                                (namespace, *chunk)):
                found[r[1]] = self._obs(r)
        return sorted(found.values(), key=lambda o: (o.step, o.seq))

    def observations(self, namespace: str, step: int | None = None) -> list[Observation]:
        if step is None:
            rows = self._rows(f"SELECT {self._OBS_COLS} FROM observations WHERE namespace=? ORDER BY step, seq", (namespace,))
        else:
            rows = self._rows(f"SELECT {self._OBS_COLS} FROM observations WHERE namespace=? AND step=? ORDER BY seq",
                              (namespace, step))
        return [self._obs(r) for r in rows]

    # ------------------------------------------------------------------ steps
    def get_step(self, namespace: str, step: int) -> StepRecord | None:
        rows = self._rows("SELECT record FROM steps WHERE namespace=? AND step=?", (namespace, step))
        return StepRecord.model_validate_json(rows[0][0]) if rows else None

    def put_step(self, record: StepRecord) -> None:
        self._exec("INSERT OR REPLACE INTO steps VALUES (?,?,?)",
                   (record.namespace, record.step, record.model_dump_json()))

    def event_count(self, namespace: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM events WHERE namespace=?", (namespace,))[0][0])

    def step_count(self, namespace: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM steps WHERE namespace=?", (namespace,))[0][0])

    def steps(self, namespace: str) -> list[StepRecord]:
        rows = self._rows("SELECT record FROM steps WHERE namespace=? ORDER BY step", (namespace,))
        return [StepRecord.model_validate_json(r[0]) for r in rows]

    # ------------------------------------------------------------------ events
    def put_event(self, event: Event, embedding: np.ndarray) -> None:
        self._exec(
            "INSERT OR REPLACE INTO events VALUES (?,?,?,?,?,?,?,?,?,?)",
            (event.namespace, event.id, event.step, event.summary, json.dumps(event.participants),
             event.time.model_dump_json(), json.dumps(event.observation_ids), event.topic_id,
             json.dumps(event.history), _blob(embedding)),
        )
        self._upsert_vec(event.namespace, "events", event.id, embedding)

    @staticmethod
    def _event(r: tuple) -> Event:
        return Event(namespace=r[0], id=r[1], step=r[2], summary=r[3], participants=json.loads(r[4]),
                     time=EventTime.model_validate_json(r[5]), observation_ids=json.loads(r[6]),
                     topic_id=r[7], history=json.loads(r[8]))

    _EVENT_COLS = "namespace,id,step,summary,participants,time,observation_ids,topic_id,history"

    def get_event(self, namespace: str, event_id: str) -> Event | None:
        rows = self._rows(f"SELECT {self._EVENT_COLS} FROM events WHERE namespace=? AND id=?", (namespace, event_id))
        return self._event(rows[0]) if rows else None

    def events(self, namespace: str) -> list[Event]:
        rows = self._rows(f"SELECT {self._EVENT_COLS} FROM events WHERE namespace=? ORDER BY rowid", (namespace,))
        return [self._event(r) for r in rows]

    def _matrix(self, namespace: str, table: str, col: str) -> tuple[list[str], np.ndarray]:
        with self._lock:
            return self._vectors(namespace, table, col).snapshot()

    def observation_vectors(self, namespace: str, ids: list[str]) -> np.ndarray:
        """Normalised rows for the given observation ids (zeros for an id without a vector), copying only
        those rows, never the namespace's whole matrix."""
        with self._lock:
            vectors = self._vectors(namespace, "observations", "embedding")
            known, mat = vectors.view()
            out = np.zeros((len(ids), mat.shape[1] if mat.ndim == 2 else 0), np.float32)
            for i, oid in enumerate(ids):
                row = vectors.pos.get(oid)
                if row is not None:
                    out[i] = mat[row]
            return out

    def _search(self, namespace: str, table: str, col: str, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        with self._lock:
            ids, mat = self._vectors(namespace, table, col).view()
            if not ids or k <= 0:
                return []
            q = np.asarray(query, dtype=np.float32)
            sims = dots(mat, q / (np.linalg.norm(q) or 1.0))
            k = min(k, len(ids))
            top = np.argpartition(-sims, k - 1)[:k]
            top = top[np.argsort(-sims[top], kind="stable")]
            return [(ids[i], float(sims[i])) for i in top]

    def _vectors(self, namespace: str, table: str, col: str) -> _Vectors:
        key = (namespace, table)
        with self._lock:
            if not self._depth:
                self._sync()
            cached = self._matrices.get(key)
            if cached is None:
                rows = self._conn.execute(
                    f"SELECT id, {col} FROM {table} WHERE namespace=? AND {col} IS NOT NULL ORDER BY rowid",
                    (namespace,)).fetchall()
                mat = _normalise(np.stack([_unblob(r[1]) for r in rows])) if rows else np.zeros((0, 0), np.float32)
                cached = self._matrices[key] = _Vectors([r[0] for r in rows], mat)
            return cached

    def event_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        return self._matrix(namespace, "events", "embedding")

    def observation_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        return self._matrix(namespace, "observations", "embedding")

    def search_events(self, namespace: str, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        return self._search(namespace, "events", "embedding", query, k)

    def search_topics(self, namespace: str, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        return self._search(namespace, "topics", "centroid", query, k)

    # ------------------------------------------------------------------ relations
    def add_relation(self, relation: Relation) -> None:
        r = relation
        self._exec("INSERT OR REPLACE INTO relations VALUES (?,?,?,?,?,?,?,?,?)",
                   (r.namespace, r.id, r.source, r.target, r.type, json.dumps(r.evidence), r.origin,
                    r.confidence, r.step))

    def relations(self, namespace: str) -> list[Relation]:
        rows = self._rows("SELECT * FROM relations WHERE namespace=? ORDER BY rowid", (namespace,))
        return [Relation(namespace=r[0], id=r[1], source=r[2], target=r[3], type=r[4],
                         evidence=json.loads(r[5]), origin=r[6], confidence=r[7], step=r[8]) for r in rows]

    # ------------------------------------------------------------------ topics
    def put_topic(self, topic: Topic, centroid: np.ndarray) -> None:
        self._exec("INSERT OR REPLACE INTO topics VALUES (?,?,?,?,?)",
                   (topic.namespace, topic.id, topic.label, topic.size, _blob(centroid)))
        self._upsert_vec(topic.namespace, "topics", topic.id, centroid)

    def delete_topic(self, namespace: str, topic_id: str) -> None:
        self._exec("DELETE FROM topics WHERE namespace=? AND id=?", (namespace, topic_id))
        cached = self._matrices.get((namespace, "topics"))
        if cached is not None:
            cached.remove(topic_id)

    def get_topic(self, namespace: str, topic_id: str) -> tuple[Topic, np.ndarray] | None:
        rows = self._rows("SELECT namespace,id,label,size,centroid FROM topics WHERE namespace=? AND id=?",
                          (namespace, topic_id))
        if not rows:
            return None
        r = rows[0]
        return Topic(namespace=r[0], id=r[1], label=r[2], size=r[3]), _unblob(r[4]).copy()

    def topics(self, namespace: str) -> list[Topic]:
        rows = self._rows("SELECT namespace,id,label,size FROM topics WHERE namespace=? ORDER BY rowid", (namespace,))
        return [Topic(namespace=r[0], id=r[1], label=r[2], size=r[3]) for r in rows]

    def topic_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        return self._matrix(namespace, "topics", "centroid")

    def set_event_topics(self, namespace: str, assignment: dict[str, str]) -> None:
        with self.transaction():
            for event_id, topic_id in assignment.items():
                self._exec("UPDATE events SET topic_id=? WHERE namespace=? AND id=?", (topic_id, namespace, event_id))

    def event_topics(self, namespace: str) -> dict[str, str | None]:
        return dict(self._rows("SELECT id, topic_id FROM events WHERE namespace=?", (namespace,)))

    # ------------------------------------------------------------------ meta
    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key=?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._exec("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------ cache
    def cache_get(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM llm_cache WHERE key=?", (key,))
        return rows[0][0] if rows else None

    def cache_put(self, key: str, value: str) -> None:
        self._exec("INSERT OR REPLACE INTO llm_cache VALUES (?,?,?)", (key, value, utcnow()))
