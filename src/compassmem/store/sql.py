"""The query executor a backend hands to the operations written once for every backend (store/meta.py,
store/history.py, store/steps.py, store/shared.py): SQL in SQLite's dialect with `?` marks, and the
few phrases the two databases spell differently. Nothing else of a backend is visible through it, so those modules import
no backend and no backend's private state.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Callable, Iterator, Sequence

from ..errors import InputError
from .sqlite_schema import chunks


class SQL:
    """Rows and row counts for a statement, inside the backend's transactions, plus its dialect."""

    no_limit: int | None = None  # a LIMIT argument that limits nothing

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        raise NotImplementedError

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Execute; the number of rows changed."""
        raise NotImplementedError

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute once per row of arguments."""
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def chunks(self, values: list) -> Iterator[list]:
        """`values` in pieces that one `any_of` can bind."""
        yield values

    def any_of(self, column: str, values: list) -> tuple[str, list]:
        """A condition true when `column` is one of `values`, and its arguments."""
        raise NotImplementedError

    def json_text(self, column: str, key: str) -> str:
        """The text of `key` (a name the code writes, never input: it is spelled into the SQL) in the
        JSON object stored in `column`."""
        raise NotImplementedError

    def json_pairs(self, column: str) -> str:
        """A table of the JSON object in `column`, one row per member, in columns `key` and `value`."""
        raise NotImplementedError

    def json_items(self, column: str) -> str:
        """A table of the JSON array in `column`, one row per element, its text in a column `value`."""
        raise NotImplementedError

    def position(self, column: str) -> str:
        """Where one `?` argument first occurs in `column` (0: nowhere)."""
        raise NotImplementedError


class SQLiteSQL(SQL):
    """One connection behind the store's lock: the store's own statements run through it too."""

    no_limit = -1

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock,
                 transaction: Callable[[], AbstractContextManager[None]]) -> None:
        self._conn, self._lock, self._transaction = conn, lock, transaction

    def cursor(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Execute; the cursor (a RETURNING clause's rows, the row count)."""
        with self._lock:
            return self._conn.execute(sql, tuple(args))

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self.cursor(sql, args).fetchall()

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self.cursor(sql, args).rowcount

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._lock:
            self._conn.executemany(sql, rows)

    def transaction(self) -> AbstractContextManager[None]:
        return self._transaction()

    def chunks(self, values: list) -> Iterator[list]:
        return chunks(values)

    def any_of(self, column: str, values: list) -> tuple[str, list]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def json_pairs(self, column: str) -> str:
        return f"json_each({column})"

    def json_items(self, column: str) -> str:
        return f"json_each({column})"

    def position(self, column: str) -> str:
        return f"instr({column}, ?)"


_MARK = re.compile(r"%|\?")


class PostgresSQL(SQL):
    """Statements on the calling thread's connection (its transaction's, else a pooled one). `query` and
    `execute` take psycopg's own `%s` marks (the PostgreSQL store's statements); `rows` and `run` the
    shared dialect's `?`."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Any]],
                 transaction: Callable[[], AbstractContextManager[None]], refused: tuple[type[Exception], ...]) -> None:
        self._connection, self._transaction, self._refused_by = connection, transaction, refused
        self._translated: dict[str, str] = {}

    def _pg(self, sql: str) -> str:
        """`?` → `%s`, a literal `%` → `%%` (psycopg's marks), remembered per statement."""
        out = self._translated.get(sql)
        if out is None:
            out = self._translated[sql] = _MARK.sub(lambda m: "%s" if m.group(0) == "?" else "%%", sql)
        return out

    @contextmanager
    def refusals(self) -> Iterator[None]:
        """A value PostgreSQL cannot store (validation should have caught it) is bad input, not a crash."""
        try:
            yield
        except self._refused_by as exc:
            raise InputError(f"PostgreSQL refused a value: {str(exc).strip().splitlines()[0]}") from None

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        """Rows in binary format: pgvector's text parsing was 60 % of an ask."""
        with self._connection() as c, self.refusals():
            return c.execute(sql, args, binary=True).fetchall()

    def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        with self._connection() as c, self.refusals():
            return c.execute(sql, args).rowcount

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        return self.query(self._pg(sql), list(args))

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self.execute(self._pg(sql), list(args))

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._connection() as c, self.refusals():
            c.cursor().executemany(self._pg(sql), rows)

    def transaction(self) -> AbstractContextManager[None]:
        return self._transaction()

    def any_of(self, column: str, values: list) -> tuple[str, list]:
        return f"{column} = ANY(?)", [list(values)]

    def json_text(self, column: str, key: str) -> str:
        return f"({column}::json ->> '{key}')"

    def json_pairs(self, column: str) -> str:
        return f"json_each_text({column}::json)"

    def json_items(self, column: str) -> str:
        return f"json_array_elements_text({column}::json) AS items(value)"

    def position(self, column: str) -> str:
        return f"strpos({column}, ?)"
