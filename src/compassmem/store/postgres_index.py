"""The PostgreSQL store's search: ranked vector search through pgvector (an exact scan for small
namespaces, HNSW once a namespace is large), BM25 over the postings table, and the index upkeep after
each step. A mixin of PostgresStore (store/postgres.py), which owns the pool and the transactions.
"""

from __future__ import annotations

import time

import numpy as np

from ..embed.base import dots, l2_normalise
from ..text import index_terms
from . import bm25_base
from .bm25_base import LexicalBase
from .postgres_schema import hnsw_index
from .postgres_values import _terms
from .rows import KINDS as _KINDS
from .vectors import top_k

EXACT_BELOW = 20_000  # rows per namespace and kind under which a search scans exactly (IndexPolicy.ann_min_rows)
# rows under which a namespace's vectors may be kept in memory between asks and scanned exactly in numpy
# (~77 MB at 384 dimensions): reading them is worth it once a second search comes before the next write
KEPT_BELOW = 50_000
# observations under which a namespace's postings may be kept as an impact base between asks (~12 bytes
# a posting: ~25 MB for 200 K observations of chat turns)
POSTINGS_KEPT_BELOW = 500_000


class PostgresIndexes:
    """Needs from its host: _q, _x, _conn, _local, _dim, _counts, _marks, _matrix_of, _table_matrix, _reads,
    _kept_vectors, _changed, _state, _scans, transaction, snapshot, meta, prune_changes."""

    def _search(self, namespace: str, kind: str, query: np.ndarray, k: int, exact: bool = True) -> list[tuple[str, float]]:
        """pgvector proposes candidates by cosine distance (HNSW; an exhaustive scan below EXACT_BELOW rows, as
        the SQLite store has no ANN base there); they are re-scored from the stored vectors, so both stores
        rank alike (`exact` changes nothing here: scores are always exact). Never an exhaustive scan of a
        large namespace because `exact` was asked: that made every merge-candidate lookup of a large namespace's
        ingest, and the scale harness's "ANN" primitive, a full scan (616 ms at 200 K rows)."""
        if self._dim is None:  # another process may have stored the first vector since we opened
            self._dim = int(self.meta.get("vector_dim") or 0) or None
        if k <= 0 or self._dim is None or len(query) != self._dim:
            return []
        table, col = _KINDS[kind]
        rows = self._rows_in(namespace, table)
        scan = rows < EXACT_BELOW  # as SQLite: no ANN for small namespaces
        state = self._state(namespace) if rows < KEPT_BELOW else None
        if state is not None and (kind == "events" and self._kept_vectors.has(namespace, kind)
                                  or self._worth_keeping(state, namespace, kind)):
            return self._scan(state, namespace, kind, np.asarray(query, np.float32), k)
        want = max(2 * k, k + 16)
        # the ANN path orders by distance alone, on the expression the HNSW index is built over (the column
        # cast to its dimension); the exact path adds a second sort key (rowid), which keeps the planner from
        # walking the index and makes it sort every row of the namespace (160 ms at 64 K rows), and compares
        # the column as it is stored: the cast per row was a third of a 1 K-event scan. Candidates are
        # re-scored and tie-broken below, so the exact path's rowid order is all that ties need
        select = f"SELECT id, {col} FROM {table} WHERE namespace=%s AND {col} IS NOT NULL"
        exact_sql = select + "{} ORDER BY " + f"{col} <=> %s::vector, rowid LIMIT %s"
        ann_sql = select + "{} ORDER BY " + f"{col}::vector({self._dim}) <=> %s::vector({self._dim}) LIMIT %s"
        mark = None if scan else self._hnsw_mark(table)
        q = np.asarray(query, np.float32)
        with self._conn() as c:
            if mark is None:  # one statement: pgvector's index serves only an order by distance alone, so the
                # second key makes this read every row of the namespace whatever the planner settings (a savepoint
                # and four SETs around it were most of an ingest's nearest-neighbour time)
                rows = c.execute(exact_sql.format(""), (namespace, q, want), binary=True).fetchall()
            else:  # the graph's rows (all of them, or those up to its build's rowid) by HNSW, later ones exactly;
                # the literal bound is what lets the planner match the partial index
                head = f" AND rowid <= {mark}" if mark else ""
                with c.transaction():  # SET LOCAL inside a step's transaction is undone below, not at its commit
                    c.execute("SET LOCAL hnsw.ef_search = %s" % max(40, min(1000, 2 * want)))
                    rows = c.execute(ann_sql.format(head), (namespace, q, want), binary=True).fetchall()
                    if len(rows) < min(k, want):  # a filtered HNSW walk can come back short
                        c.execute("SET LOCAL enable_indexscan = off")
                        rows = c.execute(exact_sql.format(head), (namespace, q, want), binary=True).fetchall()
                        c.execute("SET LOCAL enable_indexscan TO DEFAULT")
                    c.execute("SET LOCAL hnsw.ef_search TO DEFAULT")
                if mark:
                    rows += c.execute(exact_sql.format(f" AND rowid > {mark}"), (namespace, q, want),
                                      binary=True).fetchall()
        if not rows:
            return []
        sims = dots(self._matrix_of([r[1] for r in rows]), l2_normalise(q))
        order = np.lexsort((np.arange(len(rows)), -sims))
        return [(rows[i][0], float(sims[i])) for i in order[:k]]

    def _worth_keeping(self, state: int, namespace: str, kind: str, after: int = 2) -> bool:
        """Whether to read all of a kind ("observations", "events", "topics" vectors, or "postings") into
        memory: once this namespace state has served `after` searches of it. Reading them costs several SQL
        scans (~200 ms for 10 K events), so a memory written between every two asks keeps using SQL, and
        one asked repeatedly reads them once."""
        key = (namespace, kind)
        last = self._scans.get(key)
        count = last[1] + 1 if last is not None and last[0] == state else 1
        self._scans[key] = (state, count)
        return count >= after

    def _scan(self, state: int, namespace: str, kind: str, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The exact scan of a small namespace in numpy over its vectors, read once per namespace state
        (store/row_cache.py) instead of pgvector casting and comparing every row on every call (31 of a
        10 K-event search's 55 ms). Ties in row order, as the SQL scan orders them."""
        def read(keys: list) -> dict:
            return {key: self._table_matrix(namespace, kind) for key in keys}

        if kind == "events":  # kept across writes, brought up to date from the change log (kept_vectors.py)
            ids, mat = self._kept_vectors.get(namespace, kind, state,
                                              lambda: (self._vector_rows(namespace, kind), self._identity(namespace)),
                                              lambda old, new: self._changed_vector_rows(namespace, kind, old, new))
        else:  # an observation or topic written is not named in the log by its own id
            ids, mat = self._reads.fetch(state, namespace, "vectors", [kind], read)[kind]
        if not ids:
            return []
        sims = dots(mat, l2_normalise(query))
        return [(ids[i], float(sims[i])) for i in top_k(sims, k)]

    def _vector_rows(self, namespace: str, kind: str,
                     ids: list[str] | None = None) -> tuple[np.ndarray, list[str], np.ndarray]:
        """(rowids, ids, normalised matrix) of a kind's rows with a vector, in rowid order; only `ids` if given."""
        table, col = _KINDS[kind]
        some = "" if ids is None else " AND id = ANY(%s)"
        rows = self._q(f"SELECT rowid, id, {col} FROM {table} WHERE namespace=%s AND {col} IS NOT NULL{some} "
                       "ORDER BY rowid", (namespace,) if ids is None else (namespace, ids))
        return (np.fromiter((r[0] for r in rows), np.int64, len(rows)), [r[1] for r in rows],
                self._matrix_of([r[2] for r in rows]))

    def _changed_vector_rows(self, namespace: str, kind: str, old: int, new: int):
        """What KeptVectors needs to go from state `old` to `new` (this snapshot's): the rows of the events
        written in between, their ids, and the namespace's identity; None when the log cannot say."""
        touched = self._changed(namespace, old, new)
        if touched is None:
            return None
        nothing = (np.zeros(0, np.int64), [], np.zeros((0, 0), np.float32))
        rows = self._vector_rows(namespace, kind, sorted(touched)) if touched else nothing
        return rows, touched, self._identity(namespace)

    def _identity(self, namespace: str) -> tuple:
        """When the namespace was made, and how many namespaces the database has deleted: either differs
        if it was deleted and made again since (within the second its creation time is stamped to)."""
        return tuple(self._q("SELECT (SELECT created_at FROM namespaces WHERE name=%s), "
                             "(SELECT value FROM meta WHERE key='namespaces_deleted')", (namespace,))[0])

    def _rows_in(self, namespace: str, table: str) -> int:
        """A namespace's row count in a table, remembered for a few seconds (it only decides exact vs ANN)."""
        key, now = (namespace, table), time.monotonic()
        cached = self._counts.get(key)
        if cached is None or now - cached[1] > 30:
            cached = self._counts[key] = (self._q(f"SELECT COUNT(*) FROM {table} WHERE namespace=%s", (namespace,))[0][0], now)
        return cached[0]

    def _hnsw_mark(self, table: str, fresh: bool = False) -> int | None:
        """Which HNSW graph a large namespace's search may walk: None for none yet, 0 for one over the whole
        table (databases indexed before the prefix graphs), else the rowid its newest build covers. Remembered
        for a few seconds: a search that reads an older mark walks the graph before it, kept one build longer."""
        now = time.monotonic()
        cached = self._marks.get(table)
        if fresh or cached is None or now - cached[1] > 30:
            if self.meta.get("hnsw_indexes") or self.meta.get(f"hnsw/{table}"):
                mark = 0
            else:
                upto = self.meta.get(f"hnsw_upto/{table}")
                mark = int(upto) if upto else None
            cached = self._marks[table] = (mark, now)
        return cached[0]

    def lexical_search(self, namespace: str, text: str, k: int) -> list[tuple[str, float]]:
        """BM25 with FTS5's formula and parameters (k1 1.2, b 0.75, idf floored at 1e-6), from the query
        terms' postings (an index-only range scan) and the namespace's document count and total length.
        Each score sums its terms in one order, so equal documents tie exactly and the row id decides.
        Always read in a snapshot (its caller's, else its own), so hits are kept per namespace state; once
        a state has served enough BM25 queries, from the namespace's postings kept in memory instead
        (`_kept_postings`)."""
        terms = sorted(set(index_terms(text)))
        if not terms or k <= 0:
            return []
        key = (tuple(terms), k)  # a name looked up by every ask that says it (search/people.py)
        # ranking looks names up after the graph's snapshot: in one of its own (snapshot() joins the
        # caller's when there is one), what it reads is kept (equal snapshots, one state)
        with self.snapshot():
            state = self._state(namespace)

            def compute(keys: list) -> dict:
                if not keys:
                    return {}
                kept = self._kept_postings(state, namespace) if state is not None else None
                if kept is None:
                    return {key: self._bm25(namespace, terms, k)}
                base, ids = kept
                rowids, scores = base.search(terms, k)
                return {key: [(ids[int(r)], float(v)) for r, v in zip(rowids, scores)]}

            return self._reads.fetch(state, namespace, "lexical", [key], compute)[key][:]

    def _kept_postings(self, state: int, namespace: str) -> tuple[LexicalBase, dict[int, str]] | None:
        """The namespace's postings as an impact base (store/bm25_base.py: the SQLite store's BM25 for large
        namespaces), read once per namespace state, once that state has served enough BM25 queries and
        the namespace is under POSTINGS_KEPT_BELOW observations: each new question and name then costs a
        few posting slices in numpy instead of an aggregate in SQL (5 ms at 10 K events, 40 ms at 100 K).
        None: use SQL."""
        rows = self._rows_in(namespace, "observations")
        # rent, then buy: one BM25 query in SQL costs about what reading 10 K observations' postings costs,
        # so a state reads them only after as many queries as reading them would cost (1.3 s at 200 K rows,
        # ~40 ms a query there): never more than twice what either way alone would have cost
        if rows >= POSTINGS_KEPT_BELOW or not self._worth_keeping(state, namespace, "postings", 2 + rows // 10_000):
            return None

        def read(keys: list) -> dict:
            docs = self._q("SELECT rowid, id, doc_len FROM observations WHERE namespace=%s ORDER BY rowid",
                           (namespace,))
            totals = self._q("SELECT docs, total_len FROM namespaces WHERE name=%s", (namespace,))
            postings = self._q("SELECT term, obs_rowid, tf FROM terms WHERE namespace=%s", (namespace,))
            if not docs or not totals or not postings:
                return {key: None for key in keys}
            rowids = np.fromiter((r[0] for r in docs), np.int64, len(docs))
            vocab: dict[str, int] = {}
            term = np.fromiter((vocab.setdefault(p[0], len(vocab)) for p in postings), np.int64, len(postings))
            doc = np.searchsorted(rowids, np.fromiter((p[1] for p in postings), np.int64, len(postings)))
            tf = np.fromiter((p[2] for p in postings), np.float64, len(postings))
            order = np.argsort(term, kind="stable")
            n, total = int(totals[0][0]), float(totals[0][1])
            base = bm25_base.from_postings(rowids, np.fromiter((r[2] for r in docs), np.int64, len(docs)),
                                        term[order], doc[order], tf[order], vocab, n, max(total / max(n, 1), 1e-9))
            return {key: (base, {r[0]: r[1] for r in docs}) if base is not None else None for key in keys}

        return self._reads.fetch(state, namespace, "postings", ["base"], read)["base"]

    def _bm25(self, namespace: str, terms: list[str], k: int) -> list[tuple[str, float]]:
        rows = self._q("""
            WITH p AS (SELECT term, obs_id, obs_rowid, tf, doc_len, COUNT(*) OVER (PARTITION BY term)::float8 AS df
                       FROM terms WHERE namespace=%(ns)s AND term = ANY(%(t)s)),
                 s AS (SELECT docs::float8 AS n, GREATEST(total_len::float8 / GREATEST(docs, 1), 1e-9) AS avgdl
                       FROM namespaces WHERE name=%(ns)s)
            SELECT p.obs_id, SUM(GREATEST(LN((s.n - p.df + 0.5) / (p.df + 0.5)), 1e-6)
                                 * (p.tf * 2.2) / (p.tf + 1.2 * (0.25 + 0.75 * p.doc_len / s.avgdl))
                                 ORDER BY p.term) AS score
            FROM p, s GROUP BY p.obs_id, p.obs_rowid ORDER BY score DESC, p.obs_rowid LIMIT %(k)s""",
                       {"ns": namespace, "t": terms, "k": k})
        return [(r[0], float(r[1])) for r in rows if r[1] > 0]

    def refresh_indexes(self, namespace: str) -> None:
        """PostgreSQL keeps its indexes current inside each transaction; what is left is to create the HNSW
        indexes once a namespace is large enough to search approximately (below EXACT_BELOW rows every
        search scans exactly, and maintaining an HNSW graph made small ingests several times slower).
        Called after each step, outside its transaction, like the SQLite store's base builds. It also refreshes
        the planner's statistics each time a namespace has doubled since the last time (from 1,000 rows): right
        after a bulk ingest, before autovacuum had analysed the new rows, a BM25 query over the postings took
        12 s instead of 70 ms."""
        if getattr(self._local, "conn", None) is not None:
            return
        self.prune_changes()
        if self._dim is None:
            return
        rows = self._rows_in(namespace, "observations")  # a count up to 30 s old is close enough
        analysed = int(self.meta.get(f"analysed/{namespace}") or 0)
        if rows >= max(1000, 2 * analysed):
            self._x("ANALYZE observations, terms, events, relations, topics")
            self.meta.set(f"analysed/{namespace}", str(rows))
        for table, col in _KINDS.values():
            self._refresh_graph(namespace, table, col)

    def _refresh_graph(self, namespace: str, table: str, col: str) -> None:
        """A kind's HNSW graph once this namespace holds EXACT_BELOW rows of it (a 40 K-turn namespace of 11 K
        events paid an HNSW insert for every event and topic written, and searched neither by it), built over
        the rows written so far; built again over all rows once the rows after it reach EXACT_BELOW or an
        eighth of the graph, whichever is more. pgvector inserted each row into a live graph at ~2 ms (5.5 ms
        at 100 K rows) against ~0.3 ms a row for a build, so the rebuilds (about twice the rows, or eight times
        for a very large table) cost less than the inserts did, and a search scans at most that tail exactly.
        A database an earlier version indexed keeps its graph over the whole table ("hnsw_indexes",
        "hnsw/<table>")."""
        mark = self._hnsw_mark(table)
        if mark == 0 or (mark is None and self._rows_in(namespace, table) < EXACT_BELOW):
            return  # the counts are kept 30 s, so a small namespace's step reads nothing here
        if mark is not None and self._build_due(table, mark) is None:
            return
        with self.transaction():  # under the writers' lock: one process builds it, the check made again there
            mark = self._hnsw_mark(table, fresh=True)
            top = None if mark == 0 else self._build_due(table, mark)
            if top is None:
                return
            self._x("SET LOCAL maintenance_work_mem = '512MB'")  # a build in memory, not in passes over disk
            self._x(hnsw_index(table, col, self._dim, upto=top))
            self._x(f"ANALYZE {table}")  # without fresh statistics the planner may not take the new graph
            for (name,) in self._q("SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname LIKE %s",
                                   (table, f"{table}_hnsw_%")):
                if name not in (f"{table}_hnsw_{top}", f"{table}_hnsw_{mark}"):  # the last one serves stale marks
                    self._x(f"DROP INDEX IF EXISTS {name}")
            self.meta.set(f"hnsw_upto/{table}", str(top))
        self._marks[table] = (top, time.monotonic())

    def _build_due(self, table: str, mark: int | None) -> int | None:
        """The table's last rowid when a graph is due over the rows up to it (none yet: `mark` None, or the
        rows after `mark` are EXACT_BELOW or an eighth of the graph, whichever is more), else None."""
        top = self._q(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}")[0][0]
        return top if mark is None or top - mark >= max(EXACT_BELOW, mark // 8) else None

    def check_indexes(self, namespace: str) -> list[str]:
        problems: list[str] = []
        with self.snapshot():
            want = {}
            for oid, text, meta in self._q("SELECT id, text, meta FROM observations WHERE namespace=%s", (namespace,)):
                want[oid] = dict(_terms(text, meta)[0])
            have: dict[str, dict[str, int]] = {}
            for oid, term, tf in self._q("SELECT obs_id, term, tf FROM terms WHERE namespace=%s", (namespace,)):
                have.setdefault(oid, {})[term] = tf
            have.update({o: {} for o in want if o not in have and not want[o]})
            if set(want) != set(have):
                problems.append(f"full-text: {len(set(want) - set(have))} observations missing, "
                                f"{len(set(have) - set(want))} entries without an observation")
            elif any(want[o] != have[o] for o in want):
                problems.append("full-text: entries disagree with their observation's text")
            stale = self._q("SELECT COUNT(*) FROM terms t JOIN observations o ON o.namespace = t.namespace "
                            "AND o.id = t.obs_id WHERE t.namespace=%s AND (t.doc_len <> o.doc_len OR "
                            "t.obs_rowid <> o.rowid)", (namespace,))[0][0]
            if stale:
                problems.append(f"full-text: {stale} entries carry a stale length or row id")
            kept = self._q("SELECT docs, total_len FROM namespaces WHERE name=%s", (namespace,))
            truth = self._q("SELECT COUNT(*), COALESCE(SUM(doc_len), 0) FROM observations WHERE namespace=%s",
                            (namespace,))[0]
            if kept and tuple(kept[0]) != tuple(truth):
                problems.append(f"full-text: namespace totals {tuple(kept[0])} disagree with its observations "
                                f"{tuple(truth)} (documents, total length)")
        return problems
