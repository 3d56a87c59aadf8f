"""Export and import of a namespace's stored rows, exactly as stored (the SQLite side of Memory.export)."""

from __future__ import annotations

import base64
import sqlite3
from typing import TYPE_CHECKING, Iterable, Iterator

from ..errors import StoreError
from .sqlite_schema import index_namespace

if TYPE_CHECKING:
    from .sqlite import SQLiteStore

TABLES = ("namespaces", "observations", "steps", "events", "relations", "topics", "event_history")  # dependency order


def export_rows(store: "SQLiteStore", namespace: str) -> Iterator[tuple[str, dict]]:
    """(table, row) for every stored row of a namespace (vectors as base64 float32), from one snapshot.
    Derived rows (full-text index, speakers, vector log) are not exported: import rebuilds them."""
    with store.snapshot():
        for table in TABLES:
            key = "name" if table == "namespaces" else "namespace"
            cur = store._conn.execute(f"SELECT * FROM {table} WHERE {key}=? ORDER BY rowid", (namespace,))
            cols = [c[0] for c in cur.description]
            for values in cur.fetchall():
                yield table, {c: ({"b64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v)
                              for c, v in zip(cols, values)}


def import_rows(store: "SQLiteStore", rows: Iterable[tuple[str, dict]]) -> int:
    """Insert exported rows in one transaction (all or nothing), then index each namespace they create."""
    n = 0
    created: list[str] = []
    with store.transaction():
        for table, row in rows:
            if table not in TABLES:
                raise StoreError(f"unknown table '{table}' in import")
            cols = list(row)
            values = [base64.b64decode(v["b64"]) if isinstance(v, dict) and "b64" in v else v for v in row.values()]
            try:
                store._conn.execute(f"INSERT INTO {table} ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                                    values)
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"import refused: {exc} (table {table})") from None
            except sqlite3.OperationalError as exc:
                raise StoreError(f"import refused: {exc} (table {table}); is it a CompassMem export?") from None
            if table == "namespaces":
                created.append(row.get("name"))
            n += 1
        for namespace in created:
            index_namespace(store._conn, namespace)
        store._indexes.clear()
        store._lexicals.clear()
    return n
