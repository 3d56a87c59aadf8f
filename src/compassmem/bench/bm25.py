"""Okapi BM25 over pre-tokenised documents, as one sparse matrix: the `bm25_turns` baseline's scorer.

Not the product's BM25: a memory's lexical search is the store's own index (store/bm25_base.py over SQLite,
postings in PostgreSQL), which the search reads. The baseline keeps the textbook formula a user of
rank_bm25 would get, so "BM25 turns" in every table means what it says.

The scores are rank_bm25's `BM25Okapi` (k1 = 1.5, b = 0.75, negative idf floored at 0.25 × the mean idf),
which the tuned settings were chosen with, but a query costs one sparse column sum instead of a pass
over every document per query word: rank_bm25 was 80 % of an ask at 10 K events (issue #10).
tests/test_lexical.py checks equality with rank_bm25 on generated corpora.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from scipy.sparse import csc_matrix


class BM25:
    def __init__(self, docs: list[list[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.size = len(docs)
        self.vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[float] = []
        lengths = np.array([len(d) for d in docs], dtype=float)
        df: Counter[str] = Counter()
        for i, doc in enumerate(docs):
            counts = Counter(doc)
            df.update(counts.keys())
            for word, tf in counts.items():
                rows.append(i)
                cols.append(self.vocab.setdefault(word, len(self.vocab)))
                tfs.append(tf)
        idf = np.zeros(len(self.vocab))
        for word, j in self.vocab.items():
            idf[j] = math.log(self.size - df[word] + 0.5) - math.log(df[word] + 0.5)
        if len(idf):
            floor = epsilon * idf.mean()
            idf[idf < 0] = floor
        avgdl = lengths.mean() if self.size else 1.0
        r, c, tf = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64), np.array(tfs, dtype=float)
        weight = idf[c] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[r] / avgdl)) if len(tf) else tf
        self._matrix = csc_matrix((weight, (r, c)), shape=(self.size, len(self.vocab)))

    def get_scores(self, query: list[str]) -> np.ndarray:
        """One score per document; a repeated query word counts again, an unknown one adds nothing."""
        cols = [self.vocab[w] for w in query if w in self.vocab]
        if not cols:
            return np.zeros(self.size)
        counts = Counter(cols)
        idx = np.array(list(counts), dtype=np.int64)
        reps = np.array([counts[j] for j in idx], dtype=float)
        return np.asarray(self._matrix[:, idx] @ reps).ravel()
