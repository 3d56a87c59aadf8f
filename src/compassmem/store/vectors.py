"""The vector index a store keeps per (namespace, kind): an approximate-nearest-neighbour *base* written
to a file beside the database, plus an exact in-RAM *delta* of every row changed since that file.

Why this shape:
- the tables stay the only truth. Every write of a vector also appends (namespace, kind, rowid) to the
  `vector_log` table in the same transaction, so an index can always be brought level with the tables
  by replaying the log past its watermark; a SIGKILL at any point leaves nothing to repair, only
  something to replay;
- a base file is immutable and named by its watermark, written to a temporary name and renamed, so a
  reader memory-maps it (float16, usearch HNSW) without loading it, and a crash mid-write leaves the
  previous file in force;
- small namespaces never get a base: below `ann_min_rows` an exact scan is faster than an ANN lookup
  and needs no file;
- the delta is folded into a new base once it outgrows a fraction of it, so keeping the index current
  costs amortised O(1) per write (usearch adds incrementally to a loaded base).
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from ..embed.base import dots, l2_normalise


@dataclass
class IndexPolicy:
    ann_min_rows: int = 20_000  # rows below which search is an exact scan and no base file is written
    delta_fraction: float = 0.05  # fold the delta into a new base once it exceeds this share of the base
    delta_min_rows: int = 2_000  # ... and at least this many rows
    lexical_delta_fraction: float = 0.2  # the lexical base is rebuilt whole, so less often (amortised 5×)
    lexical_segment_fraction: float = 0.02  # ... and rows after it become a new segment every 2 % (bm25_base.py)
    # HNSW parameters from `compassmem bench ann` on 58,740 real MiniLM vectors and 1,895 real questions
    # (docs/benchmarks.md, "ANN on real embeddings"): i8 storage capped recall@10 at 0.947 whatever the
    # graph; f16 reaches 0.994 at ef 256 (recall@100 0.964) in 0.7 ms, as f32 does in 1.2 ms
    connectivity: int = 16  # HNSW M (32 bought < 0.01 recall)
    expansion_add: int = 128  # HNSW ef_construction (64: recall@100 0.92 → 0.94 at ef 256)
    expansion_search: int = 256  # HNSW ef floor at query time; the ef used is max(this, 2 × the candidates asked)
    dtype: str = "f16"  # base storage: half of float32's size; candidates are re-scored exactly from float32


@dataclass
class VectorIndex:
    """Keys are the rows' SQLite rowids (stable: rows are upserted in place, never replaced)."""

    seq: int = 0  # the vector_log position this index reflects
    base: object | None = None  # usearch Index (a memory-mapped view) or None
    base_size: int = 0
    base_path: str | None = None
    tombstones: set[int] = field(default_factory=set)  # base keys changed or deleted since the base
    keys: list[int] = field(default_factory=list)
    pos: dict[int, int] = field(default_factory=dict)
    buf: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))

    # ------------------------------------------------------------------ changes
    def apply(self, changes: dict[int, np.ndarray | None]) -> None:
        """Bring rows to their current table value: a vector upserts the key, None deletes it."""
        for key, vec in changes.items():
            if self.base is not None:
                self.tombstones.add(key)  # the base's copy (if any) is stale either way
            if vec is None:
                self._remove(key)
            else:
                self._upsert(key, vec)

    def _upsert(self, key: int, vec: np.ndarray) -> None:
        v = l2_normalise(vec)
        i = self.pos.get(key)
        if i is not None:
            self.buf[i] = v
            return
        n = len(self.keys)
        if self.buf.shape[0] == 0 or self.buf.shape[1] != v.shape[0]:
            self.buf = np.zeros((max(16, n), v.shape[0]), np.float32)
        elif n >= self.buf.shape[0]:
            self.buf = np.vstack([self.buf, np.zeros_like(self.buf)])
        self.buf[n] = v
        self.keys.append(key)
        self.pos[key] = n

    def _remove(self, key: int) -> None:
        i = self.pos.pop(key, None)
        if i is None:
            return
        last = len(self.keys) - 1
        if i != last:  # move the last row into the hole: O(dim), not O(n)
            self.buf[i] = self.buf[last]
            self.keys[i] = self.keys[last]
            self.pos[self.keys[i]] = i
        self.keys.pop()

    # ------------------------------------------------------------------ reading
    def search(self, query: np.ndarray, k: int, policy: IndexPolicy) -> tuple[np.ndarray, np.ndarray]:
        """(keys, cosine similarities) of the k nearest rows, best first."""
        q = l2_normalise(query)
        keys: list[np.ndarray] = []
        sims: list[np.ndarray] = []
        if self.keys:
            s = dots(self.buf[: len(self.keys)], q)
            top = top_k(s, k)
            keys.append(np.array([self.keys[i] for i in top.tolist()], np.int64))  # k of them, not every key
            sims.append(s[top])
        if self.base is not None and k > 0:
            # stale copies of changed rows are dropped below; their current versions are in the delta, so a
            # margin of k suffices (asking for k + every tombstone made ef, and the search, grow with them)
            want = min(self.base_size, k + min(len(self.tombstones), k))
            self.base.expansion_search = max(policy.expansion_search, 2 * want)
            found = self.base.search(q, want)
            fk = np.asarray(found.keys, np.int64)
            fs = 1.0 - np.asarray(found.distances, np.float32)
            if self.tombstones:
                live = np.array([x not in self.tombstones for x in fk.tolist()], bool)
                fk, fs = fk[live], fs[live]
            keys.append(fk)
            sims.append(fs)
        if not keys:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        allk, alls = np.concatenate(keys), np.concatenate(sims)
        top = top_k(alls, k)
        return allk[top], alls[top]

    def all_keys(self) -> set[int]:
        """Every live key (for the index/table agreement check)."""
        out = set(self.keys)
        if self.base is not None:
            out |= {int(x) for x in np.asarray(self.base.keys)} - self.tombstones
        return out

    # ------------------------------------------------------------------ base files
    def due(self, policy: IndexPolicy) -> bool:
        """Whether the delta should be folded into a (new) base."""
        if self.base is None:
            return len(self.keys) >= policy.ann_min_rows
        return len(self.keys) + len(self.tombstones) > max(policy.delta_min_rows, policy.delta_fraction * self.base_size)


def top_k(s: np.ndarray, k: int) -> np.ndarray:
    """Rows of the k best scores, best first, ties in row order (as an exact SQL scan orders them)."""
    k = min(k, len(s))
    if k <= 0:
        return np.zeros(0, np.int64)
    top = np.argpartition(-s, k - 1)[:k] if k < len(s) else np.arange(len(s))
    return top[np.lexsort((top, -s[top]))]


_FILE = re.compile(r"^(?P<token>[0-9a-f]{32})-(?P<kind>[a-z]+)-(?P<seq>\d+)\.usearch$")


def base_files(folder: Path, token: str, kind: str) -> list[tuple[int, Path]]:
    """(watermark, path) of this index's base files, newest first."""
    if not folder.is_dir():
        return []
    out = []
    for p in folder.iterdir():
        m = _FILE.match(p.name)
        if m and m["token"] == token and m["kind"] == kind:
            out.append((int(m["seq"]), p))
    return sorted(out, reverse=True)


PARALLEL_ADD_ROWS = 50_000  # rows a graph holds before inserts into it use every core (see write_base)


def usearch_index() -> type:
    """usearch's Index class. onnxruntime (the default embedder's runtime) is imported first where it is
    installed: with usearch 2.26 and onnxruntime 1.32, `import usearch.index` followed by `import
    onnxruntime` kills the process (SIGSEGV, tests/test_indexes.py), so a store that opens an index before
    its embedder loads — or a program that embeds after searching — would crash."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        pass
    from usearch.index import Index

    return Index


def open_base(path: Path):
    return usearch_index().restore(str(path), view=True)


def write_base(folder: Path | None, token: str, kind: str, index: VectorIndex, policy: IndexPolicy,
               chunks: Iterable[tuple[list[int], np.ndarray]] | None = None) -> VectorIndex:
    """A new base at index.seq: the current base (loaded writable) minus tombstones plus the delta, or,
    given `chunks` (every row of the table as (keys, matrix) pieces), one built from scratch without
    holding the rows as float32 all at once. Returns the new index, delta empty. With no folder (an
    in-memory database) the base stays in RAM."""
    Index = usearch_index()

    def threads(graph) -> int:
        # concurrent inserts into a small graph link it worse: a 2-thread build of an 80-row test index found
        # 93 % of the exact top 5 in a CI run (tests/test_indexes.py asks 98 %); a large graph gains the cores
        return (os.cpu_count() or 1) if len(graph) >= PARALLEL_ADD_ROWS else 1

    if chunks is not None or index.base is None:
        ann = None
        for keys, mat in (chunks if chunks is not None else [(index.keys, index.buf[: len(index.keys)])]):
            if not len(keys):
                continue
            if ann is None:
                ann = Index(ndim=mat.shape[1], metric="ip", dtype=policy.dtype, connectivity=policy.connectivity,
                            expansion_add=policy.expansion_add, expansion_search=policy.expansion_search)
            ann.add(np.asarray(keys, np.uint64), l2_normalise(mat), threads=threads(ann))
        if ann is None:
            return index
    else:
        ann = Index.restore(index.base_path, view=False) if index.base_path is not None else index.base
        stale = [k for k in index.tombstones if k in ann]
        if stale:
            ann.remove(np.asarray(stale, np.uint64))
        if index.keys:
            ann.add(np.asarray(index.keys, np.uint64), index.buf[: len(index.keys)], threads=threads(ann))
    new = VectorIndex(seq=index.seq, base=ann, base_size=len(ann))
    if folder is None:
        return new
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{token}-{kind}-{index.seq}.usearch"
    tmp = folder / f".{final.name}.{uuid.uuid4().hex}.tmp"
    ann.save(str(tmp))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    for _, old in base_files(folder, token, kind)[1:]:
        old.unlink(missing_ok=True)
    for stray in folder.glob(f".{token}-{kind}-*.tmp"):  # left by a process killed mid-write
        stray.unlink(missing_ok=True)
    new.base = open_base(final)
    new.base_path = str(final)
    return new
