"""ANN benchmark on real embeddings: the HNSW parameters of the vector indexes (store/vectors.py) chosen by
measured recall against exact search and by latency, not by the synthetic scale memories (whose 8
templates make near-duplicates no index can tell apart).

Corpus: every distinct observation and event vector of the given memories (built with the same embedder);
queries: real questions of the given data sets, embedded once into a resumable cache. For each index
setting (connectivity M, expansion at build) the index is built as the store builds it (int8, inner
product); for each expansion at search, recall@10 and recall@k (the candidates a search asks for) of the
index's results against exact top-k, and the per-query latency.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..embed.base import l2_normalise

Progress = Callable[[str, int, int], None]


def corpus(dbs: list[Path]) -> np.ndarray:
    """Distinct observation and event vectors of these SQLite memories, normalised (one embedder)."""
    seen: set[bytes] = set()
    rows: list[bytes] = []
    dims: set[int] = set()
    for db in dbs:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for table in ("observations", "events"):
                for (blob,) in conn.execute(f"SELECT embedding FROM {table} WHERE embedding IS NOT NULL"):
                    if blob not in seen:
                        seen.add(blob)
                        rows.append(blob)
                        dims.add(len(blob))
        finally:
            conn.close()
    if len(dims) != 1:
        raise ValueError(f"the memories hold vectors of {len(dims)} sizes: give memories of one embedder")
    return l2_normalise(np.frombuffer(b"".join(rows), np.float32).reshape(len(rows), -1))


def query_vectors(questions: list[str], embedder: str, cache: Path) -> np.ndarray:
    """The questions' vectors, embedded once (kept in `cache` for a re-run)."""
    if cache.is_file():
        kept = np.load(cache)
        if len(kept) == len(questions):
            return kept
    from ..embed import make_embedder

    vecs = make_embedder(embedder).embed(questions)
    np.save(cache, vecs)
    return vecs


def exact_top(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    sims = queries @ data.T
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    return np.take_along_axis(top, np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1), axis=1)


def _recall(data: np.ndarray, queries: np.ndarray, found: list[np.ndarray], truth: np.ndarray, k: int) -> float:
    """Share of the exact top k the index returned in its first k; a returned row as similar as the exact
    k-th counts (rows tied with it are equally right answers)."""
    hits = []
    for q, f, tr in zip(queries, found, truth):
        floor = float(data[tr[k - 1]] @ q) - 1e-6
        f = f[:k].astype(np.int64)
        f = f[(f >= 0) & (f < len(data))]  # a short answer pads with a key no row has
        hits.append(min(k, int(np.sum(data[f] @ q >= floor))) / k if len(f) else 0.0)
    return statistics.mean(hits)


def run_ann(dbs: list[Path], questions: list[str], out: Path, embedder: str, connectivity: list[int],
            expansion_add: list[int], expansion_search: list[int], k: int = 100, dtypes: tuple[str, ...] = ("f16",),
            progress: Progress | None = None) -> list[dict]:
    """One row per (storage type, M, ef_add, ef_search), written to out/ann.json as it goes (a re-run skips
    done rows). The store keeps f16 (store/vectors.py IndexPolicy.dtype), chosen from this table."""
    from ..store.vectors import usearch_index

    Index = usearch_index()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "ann.json"
    rows = json.loads(path.read_text()) if path.is_file() else []
    done = {(r["dtype"], r["connectivity"], r["expansion_add"], r["expansion_search"]) for r in rows}
    data = corpus(dbs)
    queries = query_vectors(questions, embedder, out / "questions.npy")
    truth = exact_top(data, queries, k)
    t = time.perf_counter()
    for q in queries[:200]:
        _ = data @ q
    exact_ms = (time.perf_counter() - t) / min(200, len(queries)) * 1000
    settings = [(d, m, a) for d in dtypes for m in connectivity for a in expansion_add]
    for i, (dtype, m, add) in enumerate(settings):
        if progress:
            progress("index settings", i, len(settings))
        if all((dtype, m, add, s) in done for s in expansion_search):
            continue
        index = Index(ndim=data.shape[1], metric="ip", dtype=dtype, connectivity=m, expansion_add=add)
        t = time.perf_counter()
        index.add(np.arange(len(data)), data)
        build_s = time.perf_counter() - t
        for ef in expansion_search:
            if (dtype, m, add, ef) in done:
                continue
            index.expansion_search = ef
            found, lat = [], []
            for q in queries:
                t = time.perf_counter()
                hits = index.search(q, k)
                lat.append(time.perf_counter() - t)
                found.append(np.asarray(hits.keys))
            r10, rk = _recall(data, queries, found, truth, 10), _recall(data, queries, found, truth, k)
            rows.append({"vectors": len(data), "queries": len(queries), "dtype": dtype, "connectivity": m,
                         "expansion_add": add, "expansion_search": ef, "build_s": round(build_s, 2),
                         "recall@10": round(r10, 4), f"recall@{k}": round(rk, 4),
                         "query_p50_ms": round(statistics.median(lat) * 1000, 3),
                         "exact_scan_ms": round(exact_ms, 3)})
            path.write_text(json.dumps(rows, indent=2))
    if progress:
        progress("index settings", len(settings), len(settings))
    return rows
