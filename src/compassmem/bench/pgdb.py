"""A fresh database on a PostgreSQL server, for the benchmarks that measure the PostgreSQL store."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import StoreError


def database_url(server: str, name: str) -> str:
    """The URL of database `name` on the server `server` points at (the database part replaced)."""
    base, _, query = server.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


@contextmanager
def _server(server: str) -> Iterator[Any]:
    """A connection to the server for creating databases; a server that cannot be reached (or refuses) is
    one line, as the store says it (store/postgres.py), not a psycopg traceback."""
    import psycopg

    try:
        with psycopg.connect(server, autocommit=True) as conn:
            yield conn
    except psycopg.Error as exc:
        raise StoreError(f"cannot use the PostgreSQL server: {str(exc).strip().splitlines()[0]}") from None


def fresh_database(server: str, name: str) -> str:
    """Drop and create database `name` on the server; its URL."""
    with _server(server) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return database_url(server, name)


def existing_database(server: str, name: str) -> str:
    """Database `name` on the server, created if it is missing and kept if it is there (a resumed run
    finds the steps it already built); its URL."""
    with _server(server) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f"CREATE DATABASE {name}")
    return database_url(server, name)
