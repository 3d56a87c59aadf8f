"""Persistence: a Store protocol and its backends."""

from __future__ import annotations

from pathlib import Path

from .base import Store
from .sqlite import SQLiteStore

__all__ = ["Store", "SQLiteStore", "open_store"]


def open_store(target: str | Path) -> Store:
    """A SQLite file path (or ':memory:'), or a postgresql:// URL (PostgreSQL with pgvector)."""
    text = str(target)
    if text.startswith(("postgres://", "postgresql://")):
        from .postgres import PostgresStore  # psycopg only for those who use it

        return PostgresStore(text)
    return SQLiteStore(text)
