"""The SQLite schema, and the upgrade of an older database in place.

v2 (issue #10) adds what lets search touch only what it needs: each observation's owning event, a
speakers table, a per-namespace FTS5 table (`fts_<token>`, BM25 in C over the analyzer's terms) and the
`vector_log` that keeps vector indexes level with the tables. v3 (issue #11) adds `event_history`: what
happened to each event (created, merged, updated, observations deleted, deleted).
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

from ..text import index_terms
from . import tables
from .changes import LOGGED, ROW_IMAGES
from .tables import SQLITE

SCHEMA_VERSION = 4

SCHEMA = "\n" + tables.meta() + """CREATE TABLE IF NOT EXISTS observations (
  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
  id TEXT NOT NULL, step INTEGER NOT NULL, seq INTEGER NOT NULL, speaker TEXT, text TEXT NOT NULL,
  time TEXT, date TEXT, meta TEXT NOT NULL, ingested_at TEXT NOT NULL, embedding BLOB, event TEXT,
  PRIMARY KEY (namespace, id));
CREATE INDEX IF NOT EXISTS obs_step ON observations(namespace, step, seq);
""" + tables.steps() + tables.events(SQLITE) + tables.relations(SQLITE) + tables.topics(SQLITE) + tables.cache()

SCHEMA_V2 = """
CREATE INDEX IF NOT EXISTS obs_event ON observations(namespace, event);
CREATE INDEX IF NOT EXISTS event_topic ON events(namespace, topic_id);
""" + tables.speakers() + """CREATE TABLE IF NOT EXISTS vector_log (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, kind TEXT NOT NULL, key INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS vector_log_ns ON vector_log(namespace, kind, seq);
"""

SCHEMA_V3 = "\n" + tables.event_history()

# v4: what changed, per namespace and event: triggers log every row written to what a search reads and
# keeps between asks (store/row_cache.py) as (seq, namespace, event it touches), and set the namespace's
# counter to that seq. A write empties what was kept of its own namespace only, and of that only what
# concerns the events it touched. `changes.seq` never repeats (AUTOINCREMENT), so a namespace deleted (its
# rows with it) and made again never meets a value it had before.
def _events(op: str, columns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{row.upper()}.{c}" for row in ROW_IMAGES[op] for c in columns) or ("NULL",)


SCHEMA_V4 = ("CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, event TEXT)",
             "CREATE INDEX IF NOT EXISTS changes_ns ON changes(namespace, seq)",
             "CREATE TABLE IF NOT EXISTS namespace_changes (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL)",
             *(f"CREATE TRIGGER IF NOT EXISTS {table}_{op.lower()}_changes AFTER {op} ON {table} BEGIN "
               + "".join(f"INSERT INTO changes (namespace, event) VALUES ({'OLD' if op == 'DELETE' else 'NEW'}.namespace, "
                         f"{event}); " for event in _events(op, cols))
               + f"INSERT INTO namespace_changes VALUES ({'OLD' if op == 'DELETE' else 'NEW'}.namespace, last_insert_rowid()) "
               "ON CONFLICT (namespace) DO UPDATE SET version = excluded.version; END"
               for table, cols in LOGGED.items() for op in ROW_IMAGES))  # statements, not a script: a
# trigger's body has semicolons of its own


def chunks(ids: list, n: int = 500) -> Iterator[list]:
    """ids in pieces of n: one IN (...) list each, well below SQLite's limit on bound parameters."""
    for i in range(0, len(ids), n):
        yield ids[i : i + n]


def fts_name(token: str) -> str:
    return f"fts_{token}"


def create_fts(conn: sqlite3.Connection, token: str) -> None:
    conn.execute(f'CREATE VIRTUAL TABLE IF NOT EXISTS "{fts_name(token)}" USING fts5(terms, '
                 "tokenize='unicode61 remove_diacritics 0')")


def observation_terms(text: str, meta: str | dict) -> str:
    """What the full-text index stores for an observation: its text and a shared image's caption."""
    m = json.loads(meta) if isinstance(meta, str) else meta
    caption = m.get("image") if isinstance(m, dict) else None
    return " ".join(index_terms(text + (f" [image: {caption}]" if caption else "")))


def new_token(conn: sqlite3.Connection, namespace: str) -> str:
    """A fresh index token for a namespace: FTS table and vector files are named by it, so a namespace
    forgotten and created again never meets its predecessor's files."""
    token = uuid.uuid4().hex
    conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"index_token/{namespace}", token))
    create_fts(conn, token)
    return token


def index_namespace(conn: sqlite3.Connection, namespace: str) -> str:
    """Build a namespace's derived rows from its tables (upgrade, import): token + FTS rows, speakers,
    observation owners. Returns the token."""
    token = new_token(conn, namespace)
    fts = fts_name(token)
    rows = conn.execute("SELECT rowid, text, meta FROM observations WHERE namespace=?", (namespace,)).fetchall()
    conn.executemany(f'INSERT INTO "{fts}"(rowid, terms) VALUES (?, ?)',
                     [(r[0], observation_terms(r[1], r[2])) for r in rows])
    conn.execute("INSERT OR IGNORE INTO speakers SELECT DISTINCT namespace, speaker FROM observations "
                 "WHERE namespace=? AND speaker IS NOT NULL", (namespace,))
    for eid, obs in conn.execute("SELECT id, observation_ids FROM events WHERE namespace=?", (namespace,)).fetchall():
        ids = json.loads(obs)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            conn.execute(f"UPDATE observations SET event=? WHERE namespace=? AND id IN ({','.join('?' * len(chunk))})",
                         (eid, namespace, *chunk))
    return token


def statements(script: str) -> list[str]:
    """A script's statements one by one: executescript would COMMIT an open transaction first."""
    return [x.strip() for x in script.split(";") if x.strip()]


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction on a bare connection (schema work, before the store's own `transaction`
    exists): BEGIN IMMEDIATE waits for the write lock, so concurrent openers take turns."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def wal_mode(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Switch to write-ahead logging, waiting for the lock: SQLite does not call the busy handler for a
    journal-mode change, so among 100 processes opening one new file at once 1 in ~300 was refused with
    'database is locked' (measured) although the others held the lock for milliseconds."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.2)


def upgrade(conn: sqlite3.Connection) -> None:
    """v1 → v2 → v3 in one transaction: the new column, tables and indexes, then each namespace indexed
    (v2); the history table (v3: events built before it have no history entries)."""
    with immediate(conn):  # the version is read under the lock: another process may have upgraded meanwhile
        version = int(conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
        if version < 2:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(observations)")}
            if "event" not in cols:
                conn.execute("ALTER TABLE observations ADD COLUMN event TEXT")
            for sql in statements(SCHEMA_V2):
                conn.execute(sql)
            for (namespace,) in conn.execute("SELECT name FROM namespaces").fetchall():
                index_namespace(conn, namespace)
        if version < 3:
            for sql in statements(SCHEMA_V3):
                conn.execute(sql)
        if version < 4:
            for sql in SCHEMA_V4:
                conn.execute(sql)
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
