"""A dependency-free lexical embedder: feature-hashed word and character n-grams.

Not semantic; it exists so unit tests and the scale benchmark run with no model at all, and as a
floor the default embedder must beat (see docs/embedders.md).
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from .base import l2_normalise

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    # BM25's weight beside it when the settings name none: it shares BM25's blind spots, and measured with
    # it (tests/quality_gate.json's slices) 0.6 beats the 0.2 that suits a semantic embedder by 2-6 points
    lexical_weight = 0.6
    # and a query that asks nothing keeps all of it: this cosine is word overlap too, so lowering BM25
    # leaves nothing better (the quality gate's hash slices: LoCoMo-Plus 3.66 -> 1.22, BEAM 34.86 -> 33.47)
    statement_lexical_share = 1.0

    def __init__(self, dim: int = 512) -> None:
        self.name = f"hash-{dim}"
        self.dim = dim

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, np.float32)
        words = _WORD.findall(text.lower())
        for w in words:
            v[zlib.crc32(w.encode()) % self.dim] += 1.0
            if len(w) > 4:
                for i in range(len(w) - 3):
                    v[zlib.crc32(b"#" + w[i : i + 4].encode()) % self.dim] += 0.3
        for a, b in zip(words, words[1:]):
            v[zlib.crc32(f"{a} {b}".encode()) % self.dim] += 0.5
        return v

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return l2_normalise(np.stack([self._vec(t) for t in texts]))
