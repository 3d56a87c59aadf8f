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
from typing import Iterable, Iterator

import numpy as np

from ..embed.base import dots, l2_normalise
from ..errors import StoreError
from ..models import Event, Filters, HistoryEntry, Observation, Relation, StepRecord, Topic, utcnow
from ..text import index_terms
from . import rows as records
from . import sqlite_edit, sqlite_io
from .rows import EVENT_COLS, KINDS as _KINDS, OBS_COLS, KindCalls
from .base import cache_namespace
from .sqlite_schema import (SCHEMA, SCHEMA_V2, SCHEMA_V3, SCHEMA_VERSION, fts_name, new_token, observation_terms,
                            statements, upgrade)
from .sqlite_schema import chunks as _chunks
from . import impact
from .impact import LexicalBase
from .vectors import IndexPolicy, VectorIndex, base_files, open_base, write_base



def _blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float32).tobytes()


def _unblob(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float32)


class SQLiteStore(KindCalls):
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
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA secure_delete=ON")  # deleted text is overwritten, not left in free pages
            self._conn.execute("PRAGMA cache_size=-65536")  # 64 MB of pages: a search re-reads its neighbourhood
            fresh = not self._conn.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone()
            self._conn.executescript(SCHEMA)
            row = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None and fresh:
                for sql in statements(SCHEMA_V2) + statements(SCHEMA_V3):
                    self._conn.execute(sql)
                self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif row is not None and int(row[0]) < SCHEMA_VERSION:
                upgrade(self._conn, int(row[0]))
            elif row is not None and int(row[0]) > SCHEMA_VERSION:
                raise StoreError(f"database {self.path} has schema v{row[0]}, this CompassMem reads "
                                 f"v{SCHEMA_VERSION}; upgrade CompassMem")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        self._lock = threading.RLock()
        self._depth = 0  # open transactions, read snapshots included
        self._writes = 0  # open write transactions: an index base must never be built from their rows
        self._indexes: dict[tuple[str, str, str], VectorIndex] = {}
        self._lexicals: dict[tuple[str, str], tuple[int, LexicalBase | None]] = {}  # (ns, token) -> (head, base)

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

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, args)

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _in(self, sql: str, namespace: str, ids: list, extra: tuple = ()) -> list[tuple]:
        """Run `sql` (with one `{marks}` placeholder for an IN list) over ids in chunks."""
        out: list[tuple] = []
        for chunk in _chunks(list(ids)):
            out += self._rows(sql.format(marks=",".join("?" * len(chunk))), (namespace, *extra, *chunk))
        return out

    # ------------------------------------------------------------------ namespaces
    def namespaces(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM namespaces ORDER BY name")]

    def ensure_namespace(self, namespace: str) -> None:
        with self.transaction():
            if self._exec("INSERT OR IGNORE INTO namespaces VALUES (?, ?)", (namespace, utcnow())).rowcount:
                new_token(self._conn, namespace)

    def has_namespace(self, namespace: str) -> bool:
        return bool(self._rows("SELECT 1 FROM namespaces WHERE name=?", (namespace,)))

    def _token(self, namespace: str) -> str | None:
        return self.get_meta(f"index_token/{namespace}")

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
            removed["llm_cache"] = self.drop_cache(namespace)
            if token:
                removed["full_text"] = self._rows(f'SELECT COUNT(*) FROM "{fts_name(token)}"')[0][0]
            self._exec("DELETE FROM namespaces WHERE name=?", (namespace,))
            self._exec("DELETE FROM meta WHERE key IN (?, ?)", (f"clustered_events/{namespace}", f"index_token/{namespace}"))
            self._exec("DELETE FROM vector_log WHERE namespace=?", (namespace,))
            if token:
                self._exec(f'DROP TABLE IF EXISTS "{fts_name(token)}"')
        removed["index_files"] = self._drop_index_files(namespace, token)
        self.checkpoint()
        return removed

    def _drop_index_files(self, namespace: str, token: str | None) -> int:
        """Forget the namespace's loaded indexes and remove their base files (the next search rebuilds
        what it needs from the tables). Returns the number of files removed."""
        with self._lock:
            self._indexes = {k: v for k, v in self._indexes.items() if k[0] != namespace}
            self._lexicals = {k: v for k, v in self._lexicals.items() if k[0] != namespace}
            files = 0
            if token and self.index_dir is not None:
                for kind in _KINDS:
                    for _, p in base_files(self.index_dir, token, kind):
                        p.unlink(missing_ok=True)
                        files += 1
                files += len(impact.bases(self.index_dir, token))
                impact.remove(self.index_dir, token)
            return files

    def checkpoint(self) -> None:
        """Copy the WAL into the database and empty it (deleted rows then live nowhere but zeroed pages)."""
        if self.path != ":memory:":
            with self._lock:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # ------------------------------------------------------------------ editing (store/sqlite_edit.py)
    def delete_observations(self, namespace: str, ids: list[str]) -> list[Observation]:
        return sqlite_edit.delete_observations(self, namespace, ids)

    def delete_events(self, namespace: str, ids: list[str]) -> int:
        return sqlite_edit.delete_events(self, namespace, ids)

    def relations_citing(self, namespace: str, observation_ids: list[str]) -> list[Relation]:
        return sqlite_edit.relations_citing(self, namespace, observation_ids)

    def filter_observations(self, namespace: str, filters: Filters) -> list[str]:
        return sqlite_edit.filter_observations(self, namespace, filters)

    def drop_cache(self, namespace: str) -> int:
        return sqlite_edit.drop_cache(self, namespace)

    def compact(self, namespace: str) -> int:
        return sqlite_edit.compact(self, namespace)

    def text_held(self, text: str) -> bool:
        return sqlite_edit.text_held(self, text)

    def leak_scan(self, texts: list[str]) -> tuple[list[str], list[str]]:
        """(files scanned, 'file: text' for each text still readable): the database file and its WAL."""
        return sqlite_edit.scan_files(self.path, texts)

    def add_history(self, namespace: str, event_id: str, action: str, step: int | None,
                    observation_ids: list[str], summary: str | None) -> None:
        sqlite_edit.add_history(self, namespace, event_id, action, step, observation_ids, summary)

    def redact_history(self, namespace: str, event_ids: list[str]) -> int:
        return sqlite_edit.redact_history(self, namespace, event_ids)

    def history(self, namespace: str, event_id: str) -> list[HistoryEntry]:
        return sqlite_edit.history(self, namespace, event_id)

    # ------------------------------------------------------------------ export / import
    def export_rows(self, namespace: str) -> Iterator[tuple[str, dict]]:
        return sqlite_io.export_rows(self, namespace)

    def import_rows(self, rows: Iterable[tuple[str, dict]]) -> int:
        return sqlite_io.import_rows(self, rows)

    # ------------------------------------------------------------------ observations
    def add_observations(self, observations: list[Observation], embeddings: np.ndarray | None = None) -> None:
        with self.transaction():
            tokens: dict[str, str | None] = {}
            for i, o in enumerate(observations):
                vec = _blob(embeddings[i]) if embeddings is not None else None
                meta = json.dumps(o.meta)
                rowid = self._exec(
                    "INSERT INTO observations (namespace,id,step,seq,speaker,text,time,date,meta,ingested_at,embedding) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(namespace, id) DO UPDATE SET step=excluded.step, "
                    "seq=excluded.seq, speaker=excluded.speaker, text=excluded.text, time=excluded.time, "
                    "date=excluded.date, meta=excluded.meta, ingested_at=excluded.ingested_at, "
                    "embedding=excluded.embedding RETURNING rowid",
                    (o.namespace, o.id, o.step, o.seq, o.speaker, o.text, o.time, o.date, meta, o.ingested_at, vec),
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



    def get_observations(self, namespace: str, ids: list[str]) -> list[Observation]:
        rows = self._in(f"SELECT {OBS_COLS} FROM observations WHERE namespace=? AND id IN ({{marks}})",
                        namespace, list(dict.fromkeys(ids)))
        return sorted((records.observation(r) for r in rows), key=lambda o: (o.step, o.seq))

    def observations(self, namespace: str, step: int | None = None) -> list[Observation]:
        if step is None:
            rows = self._rows(f"SELECT {OBS_COLS} FROM observations WHERE namespace=? ORDER BY step, seq", (namespace,))
        else:
            rows = self._rows(f"SELECT {OBS_COLS} FROM observations WHERE namespace=? AND step=? ORDER BY seq",
                              (namespace, step))
        return [records.observation(r) for r in rows]

    def observations_of(self, namespace: str, event_ids: list[str]) -> tuple[list[Observation], np.ndarray]:
        """The observations owned by these events, in stream order, with their normalised vectors (zero
        rows where none is stored): what a search loads for its candidate events, and nothing more."""
        rows = self._in(f"SELECT {OBS_COLS}, embedding FROM observations WHERE namespace=? "
                        "AND event IN ({marks})", namespace, list(dict.fromkeys(event_ids)))
        rows.sort(key=lambda r: (r[2], r[3]))
        return [records.observation(r) for r in rows], self._matrix_of([r[10] for r in rows])

    @staticmethod
    def _matrix_of(blobs: list[bytes | None]) -> np.ndarray:
        if blobs and all(b is not None for b in blobs):  # the usual case: one buffer, one reshape
            return l2_normalise(np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), -1))
        dim = next((len(b) // 4 for b in blobs if b is not None), 0)
        out = np.zeros((len(blobs), dim), np.float32)
        for i, b in enumerate(blobs):
            if b is not None:
                out[i] = _unblob(b)
        return l2_normalise(out) if len(blobs) else out

    def observation_vectors(self, namespace: str, ids: list[str]) -> np.ndarray:
        """Normalised rows for the given observation ids, in order (zeros for an id without a vector)."""
        found = dict(self._in("SELECT id, embedding FROM observations WHERE namespace=? AND id IN ({marks})",
                              namespace, list(dict.fromkeys(ids))))
        return self._matrix_of([found.get(i) for i in ids])

    def owners(self, namespace: str, observation_ids: list[str]) -> dict[str, str]:
        """observation id → id of the event it belongs to (observations in no event are left out)."""
        return {o: e for o, e in self._in("SELECT id, event FROM observations WHERE namespace=? AND id IN ({marks})",
                                          namespace, list(dict.fromkeys(observation_ids))) if e is not None}

    def observation_count(self, namespace: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM observations WHERE namespace=?", (namespace,))[0][0])

    def speakers(self, namespace: str) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM speakers WHERE namespace=? ORDER BY name", (namespace,))]

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
        with self.transaction():
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



    def get_event(self, namespace: str, event_id: str) -> Event | None:
        rows = self._rows(f"SELECT {EVENT_COLS} FROM events WHERE namespace=? AND id=?", (namespace, event_id))
        return records.event(rows[0]) if rows else None

    def get_events(self, namespace: str, ids: list[str]) -> tuple[list[Event], np.ndarray]:
        """These events (unknown ids skipped) in the order asked, with their normalised vectors."""
        rows = {r[1]: r for r in self._in(f"SELECT {EVENT_COLS}, embedding FROM events WHERE namespace=? "
                                          "AND id IN ({marks})", namespace, list(dict.fromkeys(ids)))}
        found = [rows[i] for i in dict.fromkeys(ids) if i in rows]
        return [records.event(r) for r in found], self._matrix_of([r[9] for r in found])

    def events(self, namespace: str, offset: int = 0, limit: int | None = None) -> list[Event]:
        """A namespace's events in stored order; a page of them with offset/limit."""
        rows = self._rows(f"SELECT {EVENT_COLS} FROM events WHERE namespace=? ORDER BY rowid LIMIT ? OFFSET ?",
                          (namespace, -1 if limit is None else limit, offset))
        return [records.event(r) for r in rows]

    def _table_matrix(self, namespace: str, kind: str) -> tuple[list[str], np.ndarray]:
        table, col = _KINDS[kind]
        rows = self._rows(f"SELECT id, {col} FROM {table} WHERE namespace=? AND {col} IS NOT NULL ORDER BY rowid",
                          (namespace,))
        return [r[0] for r in rows], self._matrix_of([r[1] for r in rows])




    # ------------------------------------------------------------------ ranked search (the store owns it)



    def lexical_search(self, namespace: str, text: str, k: int) -> list[tuple[str, float]]:
        """(observation id, BM25) of the k best observations for a text's terms (text.index_terms), best
        first: FTS5 over the namespace, or, for a large one, its impact base plus FTS5 over the rows added
        or changed since (store/impact.py)."""
        terms = index_terms(text)
        token = self._token(namespace)
        if not terms or not token or k <= 0:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        fts = fts_name(token)
        with self._lock:
            base = self._lexical_base(namespace, token)
            if base is None:
                rows = self._conn.execute(
                    f'SELECT rowid, -bm25("{fts}") AS s FROM "{fts}" WHERE "{fts}" MATCH ? ORDER BY s DESC LIMIT ?',
                    (match, k)).fetchall()
            else:
                dirty = self._lexical_dirty(namespace, base)
                ids, scores = base.search(terms, k, exclude=dirty)
                rows = list(zip(ids.tolist(), scores.tolist()))
                extra = f" OR rowid IN ({','.join(map(str, sorted(dirty)))})" if dirty else ""
                rows += self._conn.execute(
                    f'SELECT rowid, -bm25("{fts}") AS s FROM "{fts}" WHERE "{fts}" MATCH ? AND (rowid > ?{extra}) '
                    "ORDER BY s DESC LIMIT ?", (match, base.watermark, k)).fetchall()
                rows = sorted(rows, key=lambda r: (-r[1], r[0]))[:k]
            names = dict(self._by_rowid("observations", "rowid, id", namespace, [r[0] for r in rows]))
        return [(names[r], float(s)) for r, s in rows if r in names]

    def _lexical_base(self, namespace: str, token: str) -> LexicalBase | None:
        """The namespace's impact base, built (or rebuilt, once the rows after it exceed 20 %) outside
        transactions when the namespace is large enough; None for a small one."""
        key = (namespace, token)
        head = self._head()
        cached = self._lexicals.get(key)
        if cached is not None and cached[0] == head:
            return cached[1]
        base = cached[1] if cached is not None else None
        if base is None:
            for seq, path in impact.bases(self.index_dir, token):
                if seq <= head:
                    try:
                        base = impact.load(path)
                        break
                    except (OSError, ValueError):
                        continue
        fts = fts_name(token)
        if base is None:
            count = self._conn.execute(f'SELECT COUNT(*) FROM "{fts}_content"').fetchone()[0]
            due = count >= self.policy.ann_min_rows
        else:
            after = self._conn.execute(f'SELECT COUNT(*) FROM "{fts}_content" WHERE id > ?',
                                       (base.watermark,)).fetchone()[0] + len(self._lexical_dirty(namespace, base))
            due = after > max(self.policy.delta_min_rows, self.policy.lexical_delta_fraction * base.size)
        if due and not self._writes:  # a read snapshot sees committed rows only: building there is safe
            built = impact.build(self._conn.execute(f'SELECT rowid, terms FROM "{fts}"'), head)
            if built is not None:
                base = impact.save(built, self.index_dir, token) if self.index_dir is not None else built
        self._lexicals[key] = (head, base)
        return base

    def _lexical_dirty(self, namespace: str, base: LexicalBase) -> set[int]:
        """Rows the base holds that were rewritten after it was built: scored by FTS5 instead."""
        return {r[0] for r in self._conn.execute(
            "SELECT DISTINCT key FROM vector_log WHERE namespace=? AND kind='observations' AND seq>? AND key<=?",
            (namespace, base.seq, base.watermark))}

    def _search(self, namespace: str, kind: str, query: np.ndarray, k: int, exact: bool = True) -> list[tuple[str, float]]:
        """The index's k nearest rows, best first, re-scored exactly from the stored float32 vectors (an int8
        base only proposes candidates). exact=False returns the index's own top k and scores (int8 for
        base rows): enough for a caller that re-scores what it loads anyway, at a third of the reads."""
        if k <= 0:
            return []
        table, col = _KINDS[kind]
        with self._lock:
            index = self._index(namespace, kind)
            if index is None:
                return []
            keys, approx = index.search(query, max(2 * k, k + 16) if exact else k, self.policy)
            if not len(keys):
                return []
            if not exact:
                names = dict(self._by_rowid(table, "rowid, id", namespace, [int(x) for x in keys]))
                return [(names[int(r)], float(v)) for r, v in zip(keys, approx) if int(r) in names]
            rows = self._by_rowid(table, f"id, {col}", namespace, [int(x) for x in keys])
        sims = dots(self._matrix_of([r[1] for r in rows]), l2_normalise(query))
        order = np.lexsort((np.arange(len(rows)), -sims))
        return [(rows[i][0], float(sims[i])) for i in order[:k]]

    def _by_rowid(self, table: str, cols: str, namespace: str, rowids: list[int]) -> list[tuple]:
        """Rows by rowid, kept only if they are in `namespace` (a rowid freed in one namespace can be reused by
        another). Filtered here, not in SQL: `namespace=? AND rowid IN (…)` made SQLite walk the namespace's
        primary-key range instead of looking rows up by rowid (11 ms for 36 rows at 60 K)."""
        out: list[tuple] = []
        with self._lock:
            for chunk in _chunks(rowids):
                out += [r[1:] for r in self._conn.execute(
                    f"SELECT namespace, {cols} FROM {table} WHERE rowid IN ({','.join('?' * len(chunk))})", chunk)
                    if r[0] == namespace]
        return out

    # ------------------------------------------------------------------ vector indexes
    def _head(self) -> int:
        return int(self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM vector_log").fetchone()[0])

    def _index(self, namespace: str, kind: str) -> VectorIndex | None:
        """The (namespace, kind) index, caught up with the tables; folded into a new base file when due and
        no transaction is open (a base must never hold uncommitted rows)."""
        token = self._token(namespace)
        if token is None:
            return None
        key = (namespace, kind, token)
        head = self._head()  # read before any row: replaying a change twice is harmless, missing one is not
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = self._open(namespace, kind, token, head)
        elif index.seq < head:
            self._catch_up(index, namespace, kind, head)
        if not self._writes and index.due(self.policy):
            index = self._indexes[key] = write_base(self.index_dir, token, kind, index, self.policy)
        return index

    def _open(self, namespace: str, kind: str, token: str, head: int) -> VectorIndex:
        table, col = _KINDS[kind]
        for seq, path in (base_files(self.index_dir, token, kind) if self.index_dir is not None else []):
            if seq > head:
                continue  # written by a transaction this database never kept: not ours
            try:
                base = open_base(path)
            except Exception:  # an unreadable file is only a cache: fall back to the tables
                continue
            index = VectorIndex(seq=seq, base=base, base_size=len(base), base_path=str(path))
            self._catch_up(index, namespace, kind, head)
            return index
        index = VectorIndex(seq=head)
        select = f"SELECT rowid, {col} FROM {table} WHERE namespace=? AND {col} IS NOT NULL ORDER BY rowid"
        count = self._conn.execute(f"SELECT COUNT(*) FROM {table} WHERE namespace=?", (namespace,)).fetchone()[0]
        if count >= self.policy.ann_min_rows and not self._writes:  # large and no base yet: build it in pieces
            cur = self._conn.execute(select, (namespace,))
            chunks = ((([r[0] for r in b]), np.stack([_unblob(r[1]) for r in b])) for b in iter(lambda: cur.fetchmany(20_000), []))
            return write_base(self.index_dir, token, kind, index, self.policy, chunks)
        index.apply({r[0]: _unblob(r[1]) for r in self._conn.execute(select, (namespace,))})
        return index

    def _catch_up(self, index: VectorIndex, namespace: str, kind: str, head: int) -> None:
        table, col = _KINDS[kind]
        keys = [r[0] for r in self._conn.execute(
            "SELECT DISTINCT key FROM vector_log WHERE namespace=? AND kind=? AND seq>? AND seq<=?",
            (namespace, kind, index.seq, head))]
        current: dict[int, np.ndarray | None] = {k: None for k in keys}
        for rowid, blob in self._by_rowid(table, f"rowid, {col}", namespace, keys):
            current[rowid] = _unblob(blob) if blob is not None else None
        index.apply(current)
        index.seq = head

    def refresh_indexes(self, namespace: str) -> None:
        """Bring every index of a namespace level with the tables now (and fold due deltas into base
        files), instead of at the next search."""
        with self._lock:
            for kind in _KINDS:
                self._index(namespace, kind)
            token = self._token(namespace)
            if token:
                self._lexical_base(namespace, token)

    def check_indexes(self, namespace: str) -> list[str]:
        """Disagreements between the indexes and the tables (empty when they agree): every table row with a
        vector is in its index and nothing else is; every observation is in the full-text index once."""
        problems: list[str] = []
        with self.snapshot():
            for kind, (table, col) in _KINDS.items():
                index = self._index(namespace, kind)
                want = {r[0] for r in self._conn.execute(
                    f"SELECT rowid FROM {table} WHERE namespace=? AND {col} IS NOT NULL", (namespace,))}
                have = index.all_keys() if index is not None else set()
                if want != have:
                    problems.append(f"{kind}: {len(want - have)} rows missing from the index, "
                                    f"{len(have - want)} index entries without a row")
            token = self._token(namespace)
            if token is None:
                problems.append("no index token")
                return problems
            fts = fts_name(token)
            want = {r[0]: observation_terms(r[1], r[2]) for r in self._conn.execute(
                "SELECT rowid, text, meta FROM observations WHERE namespace=?", (namespace,))}
            have = dict(self._conn.execute(f'SELECT rowid, terms FROM "{fts}"').fetchall())
            if set(want) != set(have):
                problems.append(f"full-text: {len(set(want) - set(have))} observations missing, "
                                f"{len(set(have) - set(want))} entries without an observation")
            elif any(want[r] != have[r] for r in want):
                problems.append("full-text: entries disagree with their observation's text")
            base = self._lexical_base(namespace, token)
            if base is not None:
                dirty = self._lexical_dirty(namespace, base)
                held = set(base.rowids.tolist()) - dirty
                expected = {r for r in want if r <= base.watermark} - dirty
                if held != expected:
                    problems.append(f"lexical base: {len(expected - held)} rows missing, {len(held - expected)} extra")
        return problems

    # ------------------------------------------------------------------ relations
    def add_relation(self, relation: Relation) -> None:
        r = relation
        self._exec("INSERT OR REPLACE INTO relations VALUES (?,?,?,?,?,?,?,?,?)",
                   (r.namespace, r.id, r.source, r.target, r.type, json.dumps(r.evidence), r.origin,
                    r.confidence, r.step))


    def relations(self, namespace: str) -> list[Relation]:
        rows = self._rows("SELECT * FROM relations WHERE namespace=? ORDER BY rowid", (namespace,))
        return [records.relation(r) for r in rows]

    def relations_of(self, namespace: str, event_ids: list[str]) -> list[Relation]:
        """Relations with either end in these events (indexed lookups, stored order)."""
        ids = list(dict.fromkeys(event_ids))
        rows = {r[1]: r for end in ("source", "target")
                for r in self._in(f"SELECT rowid, * FROM relations WHERE namespace=? AND {end} IN ({{marks}})",
                                  namespace, ids)}
        return [records.relation(r[1:]) for r in sorted(rows.values(), key=lambda r: r[0])]

    # ------------------------------------------------------------------ topics
    def put_topic(self, topic: Topic, centroid: np.ndarray) -> None:
        with self.transaction():
            rowid = self._exec("INSERT INTO topics VALUES (?,?,?,?,?) ON CONFLICT(namespace, id) DO UPDATE SET "
                               "label=excluded.label, size=excluded.size, centroid=excluded.centroid RETURNING rowid",
                               (topic.namespace, topic.id, topic.label, topic.size, _blob(centroid))).fetchone()[0]
            self._log(topic.namespace, "topics", rowid)

    def delete_topic(self, namespace: str, topic_id: str) -> None:
        with self.transaction():
            for (rowid,) in self._rows("DELETE FROM topics WHERE namespace=? AND id=? RETURNING rowid",
                                       (namespace, topic_id)):
                self._log(namespace, "topics", rowid)

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

    def meta_items(self, prefix: str) -> list[tuple[str, str]]:
        """(key, value) of the settings whose key starts with `prefix`, by key."""
        return [(k, v) for k, v in self._rows("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key",
                                              (len(prefix), prefix))]

    # ------------------------------------------------------------------ cache
    def cache_get(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM llm_cache WHERE key=?", (key,))
        if rows:
            self._ref(key)
        return rows[0][0] if rows else None

    def cache_put(self, key: str, value: str) -> None:
        with self.transaction():
            self._exec("INSERT OR REPLACE INTO llm_cache VALUES (?,?,?)", (key, value, utcnow()))
            self._ref(key)

    def _ref(self, key: str) -> None:
        namespace = cache_namespace.get()
        if namespace is not None:
            self._exec("INSERT OR IGNORE INTO llm_cache_refs VALUES (?, ?)", (key, namespace))
