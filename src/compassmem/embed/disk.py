"""Embeddings kept on disk: a text embedded once is never embedded again, in this process or the next.

MiniLM embeds ≈ 30 chat turns a CPU-second here, so rebuilding a benchmark memory, re-ingesting an
export, or growing a haystack of 10 K+ real texts (`bench haystack`) is mostly re-embedding texts that
were embedded before. Set COMPASSMEM_EMBED_CACHE to a file and every embedder made by `make_embedder`
keeps its vectors there, keyed by the embedder's name and the text's SHA-1. The file is a SQLite
database; several processes may share it (WAL, one short write per batch).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np

from .base import Embedder

ENV = "COMPASSMEM_EMBED_CACHE"


def text_key(name: str, text: str) -> str:
    return f"{name}:{hashlib.sha1(text.encode('utf-8', 'replace')).hexdigest()}"


class DiskEmbeddings:
    """An Embedder that asks `inner` only for texts it has not stored before."""

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        for own in ("lexical_weight", "statement_lexical_share"):  # the embedder's own search weights
            if hasattr(inner, own):
                setattr(self, own, getattr(inner, own))
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [text_key(self.name, t) for t in texts]
        found: dict[str, bytes] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = list(dict.fromkeys(keys[i : i + 500]))
                found.update(self._conn.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall())
        todo: dict[str, int] = {}  # each missing key once, with the first text that has it
        for i, k in enumerate(keys):
            if k not in found:
                todo.setdefault(k, i)
        if todo:
            fresh = np.asarray(self.inner.embed([texts[i] for i in todo.values()]), np.float32)
            rows = [(k, vec.tobytes()) for k, vec in zip(todo, fresh)]
            self._put(rows)
            found.update(rows)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.frombuffer(bytearray().join(found[k] for k in keys), np.float32).reshape(len(texts), -1)

    def seed(self, pairs: list[tuple[str, bytes]]) -> int:
        """Store (text, float32 vector bytes) pairs made by this embedder elsewhere (a memory's stored
        observations); returns how many were new."""
        return self._put([(text_key(self.name, t), v) for t, v in pairs if v is not None and len(v) == 4 * self.dim])

    def _put(self, rows: list[tuple[str, bytes]]) -> int:
        """Store (key, vector bytes) rows in one transaction; how many were new."""
        with self._lock:
            before = self._conn.total_changes
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?)", rows)
            self._conn.execute("COMMIT")
            return self._conn.total_changes - before

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
