"""Persistence: a Store protocol and its backends."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .base import Store
from .sqlite import SQLiteStore

__all__ = ["Store", "SQLiteStore", "open_store"]


def open_store(target: str | Path) -> Store:
    """Open a store from a path or URL; PostgreSQL URLs are reserved for the pgvector backend."""
    text = str(target)
    if text.startswith(("postgres://", "postgresql://")):
        raise ConfigError("the PostgreSQL backend is not available yet; use a SQLite file path")
    return SQLiteStore(text)
