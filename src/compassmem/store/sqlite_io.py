"""Export and import of a namespace's stored rows, exactly as stored (the SQLite side of Memory.export)."""

from __future__ import annotations

import base64
import sqlite3
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

from ..errors import StoreError
from ..export_file import COLUMNS
from .sqlite_schema import index_namespace

if TYPE_CHECKING:
    from .sqlite import SQLiteStore


def export_rows(store: "SQLiteStore", namespace: str) -> Iterator[tuple[str, dict]]:
    """(table, row) for every stored row of a namespace (vectors as base64 float32), from one snapshot.
    Derived rows (full-text index, speakers, vector log) are not exported: import rebuilds them."""
    with store.snapshot():
        for table, cols in COLUMNS.items():
            key = "name" if table == "namespaces" else "namespace"
            cur = store._conn.execute(f"SELECT {','.join(cols)} FROM {table} WHERE {key}=? ORDER BY rowid", (namespace,))
            for values in cur.fetchall():
                yield table, {c: ({"b64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v)
                              for c, v in zip(cols, values)}


def import_rows(store: "SQLiteStore", rows: Iterable[tuple[str, dict]]) -> int:
    """Insert rows that export_file.read checked, in one transaction (all or nothing), then index each
    namespace they create. Columns come from export_file.COLUMNS, never from the rows' keys."""
    n = 0
    created: list[str] = []
    with store.transaction():
        for table, row in rows:
            cols = COLUMNS[table]
            values = [row[c].astype("<f4").tobytes() if isinstance(row[c], np.ndarray) else row[c] for c in cols]
            try:
                store._conn.execute(f"INSERT INTO {table} ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                                    values)
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"import refused: {exc} (table {table})") from None
            if table == "namespaces":
                created.append(row["name"])
            n += 1
        for namespace in created:
            index_namespace(store._conn, namespace)
        store._indexes.clear()
        store._lexicals.clear()
    return n
