"""The BM25 impact base: full-text search that stays fast at millions of observations.

FTS5 scores every document that matches any query term, in C but one row at a time: ~2 µs per match,
so a common word at 2 M observations costs a quarter of a second. Above a size, a namespace therefore
also gets an *impact base*: a term × document matrix of precomputed BM25 contributions (FTS5's own
formula and constants, so the scores are the same kind), stored as flat numpy arrays in a folder
beside the database and memory-mapped. A query sums a few posting slices with one `bincount`
(milliseconds), and FTS5 scores only the rows added or changed since the base (`rowid > watermark`,
plus rows the vector_log names). The base's statistics (N, average length, document frequencies) are
those of its build; it is rebuilt once the rows after it exceed 20 % of it, so they never drift far.

Between rebuilds, rows added after the base would leave FTS5 scoring up to a fifth of the namespace
(25 ms of a 48 ms ask at 640 K observations). So new rows are also folded, every 2 % of growth, into
small *segments* (an LSM): each covers a rowid range (lo, watermark] and is built once, from its own
rows only, with the main base's statistics plus its own, so its scores are on the main base's scale.
FTS5 then scores only the rows after the last segment. A rebuild of the main base drops its segments.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

K1, B = 1.2, 0.75  # FTS5's bm25() defaults
_DIR = re.compile(r"^(?P<token>[0-9a-f]{32})-lexical-(?P<seq>\d+)$")
_SEGMENT = re.compile(r"^(?P<token>[0-9a-f]{32})-lexical-(?P<main>\d+)-(?P<seq>\d+)$")


@dataclass
class LexicalBase:
    seq: int  # vector_log position at build: later changes to rows it holds are replayed over it
    watermark: int  # highest observation rowid it holds
    rowids: np.ndarray  # document position -> observation rowid
    indptr: np.ndarray  # term -> [start, end) in docs/impact
    docs: np.ndarray  # document positions
    impact: np.ndarray  # BM25 contribution of (term, document)
    vocab: dict[str, int]
    lo: int = 0  # rows it holds have rowid > lo: 0 for a main base, the previous watermark for a segment
    n_docs: int = 0  # the statistics it was scored with (a segment reads its main base's)
    avgdl: float = 0.0
    # rows in its range rewritten since it was built (scored by FTS5 instead), as of vector_log position
    # dirty_seq: kept up incrementally by the store, so a search reads only the log's newest entries
    dirty: set[int] = field(default_factory=set)
    dirty_seq: int = -1

    @property
    def size(self) -> int:
        return len(self.rowids)

    def document_frequencies(self, terms: list[str]) -> np.ndarray:
        """How many of its documents hold each term (0 for a term it does not know)."""
        cols = np.array([self.vocab.get(t, -1) for t in terms], np.int64)
        out = np.zeros(len(terms))
        known = cols >= 0
        out[known] = self.indptr[cols[known] + 1] - self.indptr[cols[known]]
        return out

    def search(self, terms: list[str], k: int, exclude: set[int] = frozenset()) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, BM25) of the k best documents for the terms (repeats count, as in FTS5)."""
        cols = [self.vocab[t] for t in terms if t in self.vocab]
        if not cols or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        # a dense accumulator, not np.unique over the postings: O(postings + documents) instead of a sort
        # (5.0 -> 3.1 ms for common words at 640 K documents); a term's postings hold each document once
        acc = np.zeros(len(self.rowids))
        for c in cols:
            start, end = self.indptr[c], self.indptr[c + 1]
            acc[self.docs[start:end]] += self.impact[start:end]
        touched = np.flatnonzero(acc)
        scores = acc[touched].astype(np.float32)
        rowids = self.rowids[touched]
        if exclude:
            keep = ~np.isin(rowids, np.fromiter(exclude, np.int64))
            rowids, scores = rowids[keep], scores[keep]
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((rowids[top], -scores[top]))]
        return rowids[top], scores[top]


def build(rows: Iterable[tuple[int, str]], seq: int, main: LexicalBase | None = None,
          lo: int = 0) -> LexicalBase | None:
    """An impact base over (rowid, space-separated terms) rows, streamed: terms become integer ids as
    they are read (no per-token Python objects kept), then numpy does the rest. With `main`, a segment
    of rows after it (rowid > lo): scored with main's N, average length and document frequencies plus
    its own, so its scores compare with main's."""
    vocab: dict[str, int] = {}
    rowid_list = array("q")
    lengths = array("q")
    term_ids = array("l")
    for rowid, terms in rows:
        words = terms.split()
        rowid_list.append(rowid)
        lengths.append(len(words))
        term_ids.extend([vocab.setdefault(w, len(vocab)) for w in words])
    n = len(rowid_list)
    if not n or not len(term_ids):
        return None
    rowids = np.frombuffer(rowid_list, np.int64).copy()
    lens = np.frombuffer(lengths, np.int64)
    term_of = np.frombuffer(term_ids, np.int64)
    doc_of = np.repeat(np.arange(n, dtype=np.int64), lens)
    pair, tf = np.unique(term_of * n + doc_of, return_counts=True)
    df = np.bincount(pair // n, minlength=len(vocab)).astype(np.float64)
    n_docs, avgdl = n, float(lens.mean()) or 1.0
    if main is not None and main.n_docs:
        df += main.document_frequencies(list(vocab))
        n_docs = main.n_docs + n
        avgdl = (main.avgdl * main.n_docs + float(lens.sum())) / n_docs
    return _scored(seq, rowids, lens, pair // n, pair % n, tf, vocab, df, n_docs, avgdl, lo)


def from_postings(rowids: np.ndarray, lengths: np.ndarray, term: np.ndarray, doc: np.ndarray, tf: np.ndarray,
                  vocab: dict[str, int], n_docs: int, avgdl: float) -> LexicalBase | None:
    """An impact base over postings already counted — document positions `doc` (into rowids/lengths),
    term ids, counts, sorted by term — scored with the given N and average length: the PostgreSQL store
    keeps one of its postings table, so BM25 is one formula in one place for both stores."""
    if not len(rowids) or not len(term):
        return None
    df = np.bincount(term, minlength=len(vocab)).astype(np.float64)
    return _scored(0, rowids, lengths, term, doc, tf, vocab, df, n_docs, avgdl or 1.0, 0)


def _scored(seq: int, rowids: np.ndarray, lens: np.ndarray, term: np.ndarray, doc: np.ndarray, tf: np.ndarray,
            vocab: dict[str, int], df: np.ndarray, n_docs: int, avgdl: float, lo: int) -> LexicalBase:
    """FTS5's BM25 contribution of each (term, document) posting; postings sorted by term."""
    idf = np.log((n_docs - df + 0.5) / (df + 0.5))
    idf[idf <= 0] = 1e-6  # FTS5 floors non-positive idf the same way
    norm = K1 * (1 - B + B * lens[doc] / avgdl)
    impact = (idf[term] * tf * (K1 + 1) / (tf + norm)).astype(np.float32)
    indptr = np.zeros(len(vocab) + 1, np.int64)
    indptr[1:] = np.cumsum(np.bincount(term, minlength=len(vocab)))
    return LexicalBase(seq, int(rowids.max()), rowids, indptr, doc.astype(np.int32), impact, vocab, lo=lo,
                       n_docs=n_docs, avgdl=avgdl)


def save(base: LexicalBase, folder: Path, token: str, main_seq: int | None = None) -> LexicalBase:
    """Write to a temporary folder, then rename it into place (a crash leaves the previous base); returns
    the base re-opened memory-mapped. `main_seq`: the base is a segment of that main base. Saving a main
    base removes older ones and every segment (its rows are in the new base)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{token}-lexical-{base.seq}" if main_seq is None else f"{token}-lexical-{main_seq}-{base.seq}"
    final = folder / name
    tmp = folder / f".{final.name}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir()
    for array_name in ("rowids", "indptr", "docs", "impact"):
        np.save(tmp / f"{array_name}.npy", getattr(base, array_name))
    (tmp / "vocab.json").write_text(json.dumps(base.vocab))
    (tmp / "meta.json").write_text(json.dumps({"seq": base.seq, "watermark": base.watermark, "lo": base.lo,
                                               "n_docs": base.n_docs, "avgdl": base.avgdl}))
    for p in tmp.iterdir():
        with open(p, "rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():
        shutil.rmtree(tmp)
    else:
        os.replace(tmp, final)
    if main_seq is None:
        for seq, old in bases(folder, token)[1:]:
            shutil.rmtree(old, ignore_errors=True)
        for old in folder.iterdir():
            m = _SEGMENT.match(old.name)
            if m and m["token"] == token and int(m["main"]) < base.seq:
                shutil.rmtree(old, ignore_errors=True)
    for stray in folder.glob(f".{token}-lexical-*.tmp"):
        if stray != tmp:
            shutil.rmtree(stray, ignore_errors=True)
    return load(final)


def load(path: Path) -> LexicalBase:
    meta = json.loads((path / "meta.json").read_text())
    arrays = {n: np.load(path / f"{n}.npy", mmap_mode="r") for n in ("rowids", "indptr", "docs", "impact")}
    return LexicalBase(meta["seq"], meta["watermark"], vocab=json.loads((path / "vocab.json").read_text()),
                       lo=meta.get("lo", 0), n_docs=meta.get("n_docs", 0), avgdl=meta.get("avgdl", 0.0), **arrays)


def bases(folder: Path | None, token: str) -> list[tuple[int, Path]]:
    """(seq, folder) of a namespace's main impact bases, newest first."""
    if folder is None or not folder.is_dir():
        return []
    found = [(int(m["seq"]), p) for p in folder.iterdir() if (m := _DIR.match(p.name)) and m["token"] == token]
    return sorted(found, reverse=True)


def segments(folder: Path | None, token: str, main_seq: int) -> list[tuple[int, Path]]:
    """(seq, folder) of the segments added after main base `main_seq`, oldest first."""
    if folder is None or not folder.is_dir():
        return []
    found = [(int(m["seq"]), p) for p in folder.iterdir()
             if (m := _SEGMENT.match(p.name)) and m["token"] == token and int(m["main"]) == main_seq]
    return sorted(found)


def remove(folder: Path | None, token: str) -> int:
    """Remove every impact base and segment of a namespace; returns how many."""
    if folder is None or not folder.is_dir():
        return 0
    gone = 0
    for p in folder.iterdir():
        if (m := _DIR.match(p.name) or _SEGMENT.match(p.name)) and m["token"] == token:
            shutil.rmtree(p, ignore_errors=True)
            gone += 1
    return gone
