"""The Embedder protocol and a text-hash cache every embedder shares."""

from __future__ import annotations

import hashlib
import threading
from typing import Protocol, runtime_checkable

import numpy as np

from ..config import LEXICAL_WEIGHT, STATEMENT_LEXICAL_SHARE


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Rows are L2-normalised float32 vectors, one per text, in order."""
        ...


def dots(mat: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """mat · q for each row (q 1-D → n, q k×d → n×k). Plain einsum instead of BLAS on purpose: these
    products are memory-bound, and OpenBLAS worker threads spin against llama.cpp's and the explorers'
    threads — a 5,000×512 search took 8 ms through BLAS next to a running model, 0.4 ms this way."""
    q = np.asarray(queries, dtype=mat.dtype)
    return np.einsum("ij,j->i", mat, q) if q.ndim == 1 else np.einsum("ij,kj->ik", mat, q)


def l2_normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


class CachedEmbedder:
    """Embeds each distinct text once per process; questions and subgoals repeat a lot in benchmarks."""

    def __init__(self, inner: Embedder, max_items: int = 200_000) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.lexical_weight: float = getattr(inner, "lexical_weight", LEXICAL_WEIGHT)  # see SearchSettings
        self.statement_lexical_share: float = getattr(inner, "statement_lexical_share", STATEMENT_LEXICAL_SHARE)
        self._cache: dict[str, np.ndarray] = {}
        self._max = max_items
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode("utf-8", "replace")).hexdigest() for t in texts]
        with self._lock:
            missing = [i for i, k in enumerate(keys) if k not in self._cache]
        if missing:
            fresh = self.inner.embed([texts[i] for i in missing])
            with self._lock:
                if len(self._cache) + len(missing) > self._max:
                    self._cache.clear()
                for i, vec in zip(missing, fresh):
                    self._cache[keys[i]] = vec
        with self._lock:
            rows = [self._cache.get(k) for k in keys]
        if any(r is None for r in rows):  # evicted between the two locks: recompute plainly
            return self.inner.embed(texts)
        return np.stack(rows) if rows else np.zeros((0, self.dim), np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
