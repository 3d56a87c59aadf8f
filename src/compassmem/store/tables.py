"""The tables both stores share, written once: each backend's schema (store/sqlite_schema.py,
store/postgres_schema.py) is made of these with its own column types and, in PostgreSQL, an explicit
`rowid` (SQLite has one built in). What only one backend has (SQLite's vector log, PostgreSQL's
postings and document lengths) stays in its own schema module."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    vector: str  # a stored embedding
    real: str  # a float
    rowid: str  # what a table needs to have a stable insertion order (SQLite: nothing, it has one)


SQLITE = Dialect(vector="BLOB", real="REAL", rowid="")
POSTGRES = Dialect(vector="vector", real="DOUBLE PRECISION", rowid="  rowid BIGSERIAL UNIQUE,\n")

_OWNED = "  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,\n"


def meta() -> str:
    return ("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
            "CREATE TABLE IF NOT EXISTS namespaces (name TEXT PRIMARY KEY, created_at TEXT NOT NULL);\n")


def steps() -> str:
    return ("CREATE TABLE IF NOT EXISTS steps (\n" + _OWNED +
            "  step INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (namespace, step));\n")


def events(d: Dialect) -> str:
    return ("CREATE TABLE IF NOT EXISTS events (\n" + d.rowid + _OWNED +
            "  id TEXT NOT NULL, step INTEGER NOT NULL, summary TEXT NOT NULL, participants TEXT NOT NULL,\n"
            "  time TEXT NOT NULL, observation_ids TEXT NOT NULL, topic_id TEXT, history TEXT NOT NULL,\n"
            f"  embedding {d.vector} NOT NULL, PRIMARY KEY (namespace, id));\n")


def relations(d: Dialect) -> str:
    return ("CREATE TABLE IF NOT EXISTS relations (\n" + d.rowid + _OWNED +
            "  id TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, type TEXT NOT NULL,\n"
            f"  evidence TEXT NOT NULL, origin TEXT NOT NULL, confidence {d.real} NOT NULL, step INTEGER NOT NULL,\n"
            "  PRIMARY KEY (namespace, id),\n"
            "  FOREIGN KEY (namespace, source) REFERENCES events(namespace, id) ON DELETE CASCADE,\n"
            "  FOREIGN KEY (namespace, target) REFERENCES events(namespace, id) ON DELETE CASCADE);\n"
            "CREATE INDEX IF NOT EXISTS rel_source ON relations(namespace, source);\n"
            "CREATE INDEX IF NOT EXISTS rel_target ON relations(namespace, target);\n")


def topics(d: Dialect) -> str:
    return ("CREATE TABLE IF NOT EXISTS topics (\n" + d.rowid + _OWNED +
            f"  id TEXT NOT NULL, label TEXT NOT NULL, size INTEGER NOT NULL, centroid {d.vector} NOT NULL,\n"
            "  PRIMARY KEY (namespace, id));\n")


def speakers() -> str:
    return ("CREATE TABLE IF NOT EXISTS speakers (\n" + _OWNED +
            "  name TEXT NOT NULL, PRIMARY KEY (namespace, name));\n")


def event_history(rowid: str = "") -> str:
    return ("CREATE TABLE IF NOT EXISTS event_history (\n" + rowid + _OWNED +
            "  event_id TEXT NOT NULL, at TEXT NOT NULL, action TEXT NOT NULL, step INTEGER, observation_ids TEXT NOT NULL,\n"
            "  summary TEXT);\n"
            "CREATE INDEX IF NOT EXISTS event_history_event ON event_history(namespace, event_id);\n")


def cache() -> str:
    return ("CREATE TABLE IF NOT EXISTS llm_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at TEXT NOT NULL);\n"
            "CREATE TABLE IF NOT EXISTS llm_cache_refs (key TEXT NOT NULL, namespace TEXT NOT NULL, "
            "PRIMARY KEY (namespace, key));\n")
