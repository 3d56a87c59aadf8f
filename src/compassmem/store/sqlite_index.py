"""The SQLite store's search indexes: ranked vector search over per-namespace usearch bases plus exact
deltas replayed from `vector_log`, and BM25 over FTS5 with an impact base for large namespaces. A mixin
of SQLiteStore (store/sqlite.py), which owns the connection, the lock and the tables.
"""

from __future__ import annotations

import numpy as np

from ..embed.base import dots, l2_normalise
from ..text import index_terms
from . import bm25_base
from .bm25_base import LexicalBase
from .rows import KINDS as _KINDS
from .sqlite_schema import chunks as _chunks, fts_name, observation_terms
from .vectors import VectorIndex, base_files, open_base, write_base


def _unblob(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float32)


class SQLiteIndexes:
    """Needs from its host: _conn, _lock, _writes, _indexes, _lexicals, _reads, _state, policy, index_dir,
    _token, _matrix_of, snapshot, prune_changes."""

    def lexical_search(self, namespace: str, text: str, k: int) -> list[tuple[str, float]]:
        """(observation id, BM25) of the k best observations for a text's terms (text.index_terms), best
        first: FTS5 over the namespace, or, for a large one, its impact base and segments plus FTS5 over
        the rows added or changed since (store/bm25_base.py)."""
        terms = index_terms(text)
        if not terms or k <= 0:
            return []
        key = (tuple(terms), k)  # a name looked up by every ask that says it (search/people.py)
        return self._reads.fetch(self._state(namespace), namespace, "lexical", [key],
                                 lambda keys: {key: self._bm25(namespace, terms, k)} if keys else {})[key][:]

    def _bm25(self, namespace: str, terms: list[str], k: int) -> list[tuple[str, float]]:
        token = self._token(namespace)
        if not token:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        fts = fts_name(token)
        with self._lock:
            head = self._head()
            tiers = self._lexical_bases(namespace, token, head)
            if not tiers:
                rows = self._conn.execute(
                    f'SELECT rowid, -bm25("{fts}") AS s FROM "{fts}" WHERE "{fts}" MATCH ? ORDER BY s DESC LIMIT ?',
                    (match, k)).fetchall()
            else:
                rows, dirty = [], set()
                for base in tiers:
                    stale = self._lexical_dirty(namespace, base, head)
                    ids, scores = base.search(terms, k, exclude=stale)
                    rows += zip(ids.tolist(), scores.tolist())
                    dirty |= stale
                extra = f" OR rowid IN ({','.join(map(str, sorted(dirty)))})" if dirty else ""
                rows += self._conn.execute(
                    f'SELECT rowid, -bm25("{fts}") AS s FROM "{fts}" WHERE "{fts}" MATCH ? AND (rowid > ?{extra}) '
                    "ORDER BY s DESC LIMIT ?", (match, tiers[-1].watermark, k)).fetchall()
                rows = sorted(rows, key=lambda r: (-r[1], r[0]))[:k]
            names = dict(self._by_rowid("observations", "rowid, id", namespace, [r[0] for r in rows]))
        return [(names[r], float(s)) for r, s in rows if r in names]

    def _lexical_bases(self, namespace: str, token: str, head: int | None = None) -> list[LexicalBase]:
        """The namespace's impact base followed by its segments (empty for a small namespace). Outside
        write transactions (a read snapshot sees committed rows only, so building there is safe): the
        base is built once the namespace is large enough and rebuilt once the rows after it exceed 20 %
        of it; in between, each 2 % of growth becomes a new segment."""
        key = (namespace, token)
        head = self._head() if head is None else head
        cached = self._lexicals.get(key)
        if cached is not None and cached[0] == head:
            return cached[1]
        tiers = list(cached[1]) if cached is not None else self._load_lexical(token, head)
        fts = fts_name(token)
        policy = self.policy
        if not self._writes:
            if not tiers:
                count = self._conn.execute(f'SELECT COUNT(*) FROM "{fts}_content"').fetchone()[0]
                rebuild = count >= policy.ann_min_rows
            else:
                main = tiers[0]
                after = self._conn.execute(f'SELECT COUNT(*) FROM "{fts}_content" WHERE id > ?',
                                           (main.watermark,)).fetchone()[0] + len(self._lexical_dirty(namespace, main, head))
                rebuild = after > max(policy.delta_min_rows, policy.lexical_delta_fraction * main.size)
            if rebuild:
                built = bm25_base.build(self._conn.execute(f'SELECT rowid, terms FROM "{fts}"'), head)
                if built is not None:
                    tiers = [bm25_base.save(built, self.index_dir, token) if self.index_dir is not None else built]
            elif tiers:
                last = tiers[-1].watermark
                tail = self._conn.execute(f'SELECT COUNT(*) FROM "{fts}_content" WHERE id > ?', (last,)).fetchone()[0]
                if tail > max(policy.delta_min_rows, policy.lexical_segment_fraction * tiers[0].size):
                    seg = bm25_base.build(self._conn.execute(f'SELECT rowid, terms FROM "{fts}" WHERE rowid > ?',
                                                          (last,)), head, main=tiers[0], lo=last)
                    if seg is not None:
                        tiers.append(bm25_base.save(seg, self.index_dir, token, main_seq=tiers[0].seq)
                                     if self.index_dir is not None else seg)
        self._lexicals[key] = (head, tiers)
        return tiers

    def _load_lexical(self, token: str, head: int) -> list[LexicalBase]:
        """The newest readable main base this database's log has reached, and its segments in order (a
        segment that cannot be read ends the chain: the rows after the last good one go to FTS5)."""
        for seq, path in bm25_base.bases(self.index_dir, token):
            if seq > head:
                continue  # built by a process whose transaction this database never kept: not ours
            try:
                tiers = [bm25_base.load(path)]
            except (OSError, ValueError, KeyError):
                continue
            for seg_seq, seg_path in bm25_base.segments(self.index_dir, token, seq):
                try:
                    seg = bm25_base.load(seg_path)
                except (OSError, ValueError, KeyError):
                    break
                if seg_seq > head or seg.lo != tiers[-1].watermark:
                    break
                tiers.append(seg)
            return tiers
        return []

    def _lexical_dirty(self, namespace: str, base: LexicalBase, head: int | None = None) -> set[int]:
        """Rows in the base's range that were rewritten after it was built: scored by FTS5 instead. Kept
        up from the log's newest entries only (scanning every entry since a base was built cost 20 ms
        per search at 640 K observations); never advanced inside a write transaction, whose log
        positions a rollback would give back. `head`: the log's newest position, when the caller has it."""
        head = self._head() if head is None else head
        if base.dirty_seq < 0:
            base.dirty_seq = base.seq
        if head <= base.dirty_seq:
            return base.dirty
        new = {r[0] for r in self._conn.execute(
            "SELECT DISTINCT key FROM vector_log WHERE namespace=? AND kind='observations' AND seq>? AND seq<=? "
            "AND key>? AND key<=?", (namespace, base.dirty_seq, head, base.lo, base.watermark))}
        if self._writes:
            return base.dirty | new
        base.dirty |= new
        base.dirty_seq = head
        return base.dirty

    def _search(self, namespace: str, kind: str, query: np.ndarray, k: int, exact: bool = True) -> list[tuple[str, float]]:
        """The index's k nearest rows, best first, re-scored exactly from the stored float32 vectors (a float16
        base only proposes candidates). exact=False returns the index's own top k and scores (float16 for
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
            if not exact:  # rowid -> id kept between asks (store/row_cache.py): the same rows come back
                def read(rowids: list[int]) -> dict[int, str | None]:
                    found = dict(self._by_rowid(table, "rowid, id", namespace, rowids))
                    return {r: found.get(r) for r in rowids}
                names = self._reads.fetch(self._state(namespace), namespace, ("ids by rowid", table),
                                         [int(x) for x in keys], read)
                return [(names[int(r)], float(v)) for r, v in zip(keys, approx) if names[int(r)] is not None]
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
                self._lexical_bases(namespace, token)
        self.prune_changes()

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
            for base in self._lexical_bases(namespace, token):
                dirty = self._lexical_dirty(namespace, base)
                held = set(base.rowids.tolist()) - dirty
                expected = {r for r in want if base.lo < r <= base.watermark} - dirty
                if held != expected:
                    problems.append(f"lexical base (rows {base.lo}-{base.watermark}): {len(expected - held)} rows "
                                    f"missing, {len(held - expected)} extra")
        return problems


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
                files += bm25_base.remove(self.index_dir, token)
            return files
