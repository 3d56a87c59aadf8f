"""The SQLite store's editing and export/import (Memory.delete / update / export): row-level deletes that
keep the full-text table, the vector log and the speakers table level with the data, the compaction
that leaves deleted data in no index file, and a namespace's rows exactly as stored. A mixin of
SQLiteStore (store/sqlite.py), which owns the connection and the transactions, as PostgresEditing is
of the PostgreSQL store.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from ..errors import StoreError
from ..export_file import COLUMNS
from ..models import Observation
from . import rows as records
from .sqlite_schema import chunks as _chunks, fts_name, index_namespace


class SQLiteEditing:
    """Needs from its host: _conn, _in, _exec, _rows, _token, _log, _drop_index_files, _indexes, _lexicals,
    path, transaction, snapshot, checkpoint."""

    def delete_observations(self, namespace: str, ids: list[str]) -> list[Observation]:
        """Remove observations with their full-text rows (vectors through the log); returns what was removed."""
        with self.transaction():
            rows = self._in(f"SELECT rowid, {records.OBS_COLS} FROM observations WHERE namespace=? AND id IN ({{marks}})",
                            namespace, list(dict.fromkeys(ids)))
            token = self._token(namespace)
            for r in rows:
                if token:
                    self._exec(f'DELETE FROM "{fts_name(token)}" WHERE rowid=?', (r[0],))
                self._exec("DELETE FROM observations WHERE rowid=?", (r[0],))
                self._log(namespace, "observations", r[0])
            self._exec("DELETE FROM speakers WHERE namespace=? AND name NOT IN (SELECT speaker FROM observations "
                       "WHERE namespace=? AND speaker IS NOT NULL)", (namespace, namespace))
        return [records.observation(r[1:]) for r in rows]

    def delete_events(self, namespace: str, ids: list[str]) -> int:
        """Remove events (their relations cascade); returns the number of relations removed with them."""
        with self.transaction():
            before = self._rows("SELECT COUNT(*) FROM relations WHERE namespace=?", (namespace,))[0][0]
            for chunk in _chunks(list(dict.fromkeys(ids))):
                marks = ",".join("?" * len(chunk))
                for (rowid,) in self._rows(f"DELETE FROM events WHERE namespace=? AND id IN ({marks}) RETURNING rowid",
                                           (namespace, *chunk)):
                    self._log(namespace, "events", rowid)
            return before - self._rows("SELECT COUNT(*) FROM relations WHERE namespace=?", (namespace,))[0][0]

    def compact(self, namespace: str) -> int:
        """After a delete: merge the full-text index into one segment (old segments keep a deleted row's terms
        until merged), remove the namespace's index base files (an HNSW graph or impact list keeps a deleted
        row until rebuilt; the next search rebuilds them from the tables), and checkpoint the WAL. Returns the
        number of index files removed."""
        token = self._token(namespace)
        if token:
            with self.transaction():
                self._exec(f'INSERT INTO "{fts_name(token)}"("{fts_name(token)}") VALUES (\'optimize\')')
        files = self._drop_index_files(namespace, token)
        self.checkpoint()
        return files

    def leak_scan(self, texts: list[str]) -> tuple[list[str], list[str]]:
        """(files scanned, 'file: text' for each text still readable): the database file and its WAL."""
        return _scan_files(self.path, texts)

    def export_rows(self, namespace: str) -> Iterator[tuple[str, dict]]:
        """(table, row) for every stored row of a namespace (vectors as base64 float32), from one snapshot.
        Derived rows (full-text index, speakers, vector log) are not exported: import rebuilds them."""
        with self.snapshot():
            for table, cols in COLUMNS.items():
                key = "name" if table == "namespaces" else "namespace"
                cur = self._conn.execute(f"SELECT {','.join(cols)} FROM {table} WHERE {key}=? ORDER BY rowid", (namespace,))
                for values in cur.fetchall():
                    yield table, {c: ({"b64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v)
                                  for c, v in zip(cols, values)}

    def import_rows(self, rows: Iterable[tuple[str, dict]]) -> int:
        """Insert rows that export_file.read checked, in one transaction (all or nothing), then index each
        namespace they create. Columns come from export_file.COLUMNS, never from the rows' keys."""
        n = 0
        created: list[str] = []
        with self.transaction():
            for table, row in rows:
                cols = COLUMNS[table]
                values = [row[c].astype("<f4").tobytes() if isinstance(row[c], np.ndarray) else row[c] for c in cols]
                try:
                    self._conn.execute(f"INSERT INTO {table} ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                                       values)
                except sqlite3.IntegrityError as exc:
                    raise StoreError(f"import refused: {exc} (table {table})") from None
                if table == "namespaces":
                    created.append(row["name"])
                n += 1
            for namespace in created:
                index_namespace(self._conn, namespace)
            self._indexes.clear()
            self._lexicals.clear()
        return n


_SCAN = """
import json, sys
texts = json.load(sys.stdin)
found = []
for name in sys.argv[1:]:
    with open(name, "rb") as fh:
        data = fh.read()
    found += [[name, t] for t in texts if t.encode() in data]
json.dump(found, sys.stdout)
"""


def _scan_files(db_path: str, texts: list[str]) -> tuple[list[str], list[str]]:
    """(files scanned, 'file: text' for each text still readable in them): the database and its WAL.

    The scan runs in a child process: closing any descriptor of the database file releases every POSIX
    lock this process holds on it, SQLite's included, which left the store's connection reading a frozen
    snapshot (and would let another writer in under a reader)."""
    if db_path == ":memory:":
        return [], []
    files = [str(f) for f in (Path(db_path), Path(f"{db_path}-wal")) if f.is_file()]
    if not files:
        return [], []
    done = subprocess.run([sys.executable, "-I", "-c", _SCAN, *files], input=json.dumps(texts), text=True,
                          capture_output=True, timeout=600)
    if done.returncode != 0:
        raise StoreError(f"the deletion scan of {db_path} failed: {done.stderr.strip().splitlines()[-1:]}")
    return files, [f"{Path(name).name}: {t[:60]}" for name, t in json.loads(done.stdout)]
