"""The SQLite side of editing a memory (Memory.delete / update / history, and filters): row-level deletes
that keep the full-text table, the vector log and the speakers table level with the data, the event
history table, and the compaction that leaves deleted data in no index file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StoreError
from ..models import Filters, HistoryEntry, Observation, Relation, utcnow
from . import rows as records
from .sqlite_schema import chunks as _chunks, fts_name

if TYPE_CHECKING:
    from .sqlite import SQLiteStore

def delete_observations(store: "SQLiteStore", namespace: str, ids: list[str]) -> list[Observation]:
    """Remove observations with their full-text rows (vectors through the log); returns what was removed."""
    with store.transaction():
        rows = store._in(f"SELECT rowid, {records.OBS_COLS} FROM observations WHERE namespace=? AND id IN ({{marks}})",
                         namespace, list(dict.fromkeys(ids)))
        token = store._token(namespace)
        for r in rows:
            if token:
                store._exec(f'DELETE FROM "{fts_name(token)}" WHERE rowid=?', (r[0],))
            store._exec("DELETE FROM observations WHERE rowid=?", (r[0],))
            store._log(namespace, "observations", r[0])
        store._exec("DELETE FROM speakers WHERE namespace=? AND name NOT IN (SELECT speaker FROM observations "
                    "WHERE namespace=? AND speaker IS NOT NULL)", (namespace, namespace))
    return [records.observation(r[1:]) for r in rows]


def delete_events(store: "SQLiteStore", namespace: str, ids: list[str]) -> int:
    """Remove events (their relations cascade); returns the number of relations removed with them."""
    with store.transaction():
        before = store._rows("SELECT COUNT(*) FROM relations WHERE namespace=?", (namespace,))[0][0]
        for chunk in _chunks(list(dict.fromkeys(ids))):
            marks = ",".join("?" * len(chunk))
            for (rowid,) in store._rows(f"DELETE FROM events WHERE namespace=? AND id IN ({marks}) RETURNING rowid",
                                        (namespace, *chunk)):
                store._log(namespace, "events", rowid)
        return before - store._rows("SELECT COUNT(*) FROM relations WHERE namespace=?", (namespace,))[0][0]


def relations_citing(store: "SQLiteStore", namespace: str, observation_ids: list[str]) -> list[Relation]:
    """Relations whose evidence cites any of these observations (whichever events they join)."""
    out: dict[str, Relation] = {}
    for chunk in _chunks(list(dict.fromkeys(observation_ids))):
        for r in store._rows("SELECT * FROM relations r WHERE namespace=? AND EXISTS (SELECT 1 FROM "
                             f"json_each(r.evidence) WHERE value IN ({','.join('?' * len(chunk))}))", (namespace, *chunk)):
            out[r[1]] = records.relation(r)
    return list(out.values())


def filter_observations(store: "SQLiteStore", namespace: str, filters: Filters) -> list[str]:
    """Ids of the observations that satisfy every condition (date: the observation's, else its event's)."""
    where, args = ["o.namespace=?"], [namespace]
    day = "COALESCE(o.date, json_extract(e.time, '$.date'))"
    if filters.since:
        where.append(f"{day} >= ?")
        args.append(filters.since)
    if filters.until:
        where.append(f"{day} <= ?")
        args.append(filters.until)
    if filters.speaker:
        where.append(f"o.speaker IN ({','.join('?' * len(filters.speaker))})")
        args += filters.speaker
    for key, value in filters.meta.items():
        where.append("EXISTS (SELECT 1 FROM json_each(o.meta) WHERE key=? AND value=?)")
        args += [key, value]
    return [r[0] for r in store._rows(
        "SELECT o.id FROM observations o LEFT JOIN events e ON e.namespace=o.namespace AND e.id=o.event "
        f"WHERE {' AND '.join(where)} ORDER BY o.step, o.seq", tuple(args))]


def drop_cache(store: "SQLiteStore", namespace: str) -> int:
    """Remove every LLM-cache row the namespace's work wrote or replayed; returns how many."""
    removed = 0
    with store.transaction():
        keys = [r[0] for r in store._rows("SELECT key FROM llm_cache_refs WHERE namespace=?", (namespace,))]
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            removed += store._exec(f"DELETE FROM llm_cache WHERE key IN ({marks})", tuple(chunk)).rowcount
            store._exec(f"DELETE FROM llm_cache_refs WHERE key IN ({marks})", tuple(chunk))
    return removed


def compact(store: "SQLiteStore", namespace: str) -> int:
    """After a delete: merge the full-text index into one segment (old segments keep a deleted row's terms
    until merged), remove the namespace's index base files (an HNSW graph or impact list keeps a deleted
    row until rebuilt; the next search rebuilds them from the tables), and checkpoint the WAL. Returns the
    number of index files removed."""
    token = store._token(namespace)
    if token:
        with store.transaction():
            store._exec(f'INSERT INTO "{fts_name(token)}"("{fts_name(token)}") VALUES (\'optimize\')')
    files = store._drop_index_files(namespace, token)
    store.checkpoint()
    return files


def text_held(store: "SQLiteStore", text: str) -> bool:
    """Whether any observation (any namespace) still contains `text`: a receipt does not look for those."""
    return bool(store._rows("SELECT 1 FROM observations WHERE instr(text, ?) > 0 LIMIT 1", (text,)))


def add_history(store: "SQLiteStore", namespace: str, event_id: str, action: str, step: int | None,
                observation_ids: list[str], summary: str | None) -> None:
    store._exec("INSERT INTO event_history VALUES (?,?,?,?,?,?,?)",
                (namespace, event_id, utcnow(), action, step, json.dumps(observation_ids), summary))


def redact_history(store: "SQLiteStore", namespace: str, event_ids: list[str]) -> int:
    """Blank the summaries recorded so far for these events; returns how many were blanked."""
    n = 0
    for chunk in _chunks(list(dict.fromkeys(event_ids))):
        n += store._exec(f"UPDATE event_history SET summary=NULL WHERE namespace=? AND summary IS NOT NULL AND "
                         f"event_id IN ({','.join('?' * len(chunk))})", (namespace, *chunk)).rowcount
    return n


def history(store: "SQLiteStore", namespace: str, event_id: str) -> list[HistoryEntry]:
    rows = store._rows("SELECT event_id, at, action, step, observation_ids, summary FROM event_history "
                       "WHERE namespace=? AND event_id=? ORDER BY rowid", (namespace, event_id))
    return [HistoryEntry(event_id=r[0], at=r[1], action=r[2], step=r[3], observation_ids=json.loads(r[4]),
                         summary=r[5]) for r in rows]


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


def scan_files(db_path: str, texts: list[str]) -> tuple[list[str], list[str]]:
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
