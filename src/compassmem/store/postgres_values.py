"""Values as the PostgreSQL store keeps them: an observation's postings, pgvector values as numpy, and
the export's column lists (the SQLite store's, so an export moves between backends)."""

from __future__ import annotations

import base64
from collections import Counter
from typing import Any

import numpy as np

from ..export_file import COLUMNS
from .sqlite_schema import observation_terms

EXPORT_TABLES = {table: ",".join(cols) for table, cols in COLUMNS.items()}  # as SQLite's: exports move between backends


MAX_TERM_CHARS = 200  # a B-tree entry holds ~2.7 KB: a longer "word" (a pasted blob) is indexed by its start


def _terms(text: str, meta: str) -> tuple[Counter, int]:
    tokens = [t[:MAX_TERM_CHARS] for t in observation_terms(text, meta).split()]
    return Counter(tokens), len(tokens)


def _np(value: Any) -> np.ndarray | None:
    """A pgvector value as float32 numpy (None stays None)."""
    if value is None:
        return None
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, np.float32)


def _portable(value: Any) -> Any:
    """A column value as the SQLite store exports it: vectors as base64 float32."""
    if value is not None and not isinstance(value, (str, int, float, bool)):
        return {"b64": base64.b64encode(_np(value).tobytes()).decode()}
    return value
