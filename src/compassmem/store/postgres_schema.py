"""The PostgreSQL schema (pgvector), and its versioned migrations.

The tables mirror SQLite's (store/sqlite_schema.py), with three differences: vectors are pgvector
`vector` columns searched by pgvector (an HNSW index per kind is created once the dimension is known),
the lexical index is a postings table (`terms`: one row per observation and analysed term, with its
count) scored by the same BM25 formula FTS5 uses, and no vector log is needed because PostgreSQL keeps
its own indexes transactional.

v2 makes BM25 read only the query terms' postings: each posting carries its observation's length and
row id (so no join with `observations`), a covering index returns them without touching the table,
and each namespace keeps its document count and total length, updated by every store call that adds,
rewrites or removes observations (so no scan of the namespace per query). At 10 K events a BM25 query
went from two sequential scans of the observations to one index range scan. (Statement-level triggers
kept the totals at first; fired once per row of a batched insert they made a 40 K-row ingest
transaction quadratic, so the store does it in its own statements.)

v2 also keeps vectors inside their rows (STORAGE MAIN): pgvector's type defaults to out-of-line storage,
so every row of an exact scan was a TOAST lookup (a 10 K-event exact scan: 54 → 37 ms). MAIN still moves a
vector out of line when its row would not fit a page (~2,000 dimensions). Rows written before v2 keep
their vectors where they are: rewriting them in the migration re-inserted every row into the HNSW
graphs (longer than the original ingest at 100 K events). `compassmem export` and `import` of a
namespace writes it anew.

v3 drops the postings' foreign key to `observations`: its per-row check made the COPY of a step's
postings two thirds of a PostgreSQL build (600 events through the pipeline: 13.4 s with it, 4.5 s
without). The store deletes postings itself wherever observations go (`delete_observations`,
`delete_namespace`; a rewrite already replaced them), as it keeps the BM25 totals itself.

v4 is SQLite's v4 (store/changes.py): what each write touched, per namespace and event, so a write empties
what searches kept of its own namespace only, and of that only what concerns the events it touched.
Statement-level triggers read the statement's rows from transition tables (one log insert per statement,
not per row). Each first locks its namespaces' counter rows, then draws sequence numbers: a transaction
that writes a namespace holds that row to its commit, so a namespace's numbers are drawn by one
transaction at a time and a later state's counter is above every change committed before it.
"""

from __future__ import annotations

from . import tables
from .changes import LOGGED, ROW_IMAGES
from .tables import POSTGRES

SCHEMA_VERSION = 4


def _logged(table: str, columns: tuple[str, ...], op: str) -> str:
    """The function and statement-level trigger that log an `op` on `table` (v4)."""
    images = ROW_IMAGES[op]
    touched = " UNION ALL ".join(f"SELECT namespace, {c} FROM {image}_rows" for image in images
                                 for c in columns or ("NULL::text",))
    spaces = " UNION ".join(f"SELECT namespace FROM {image}_rows" for image in images)
    name = f"{table}_{op.lower()}_changes"
    referencing = " ".join(f"{image.upper()} TABLE AS {image}_rows" for image in images)
    return f"""CREATE OR REPLACE FUNCTION log_{name}() RETURNS trigger LANGUAGE plpgsql AS $log$
BEGIN
  INSERT INTO namespace_changes SELECT DISTINCT namespace, 0 FROM ({spaces}) AS s(namespace)
    ON CONFLICT (namespace) DO UPDATE SET version = namespace_changes.version;
  WITH logged AS (INSERT INTO changes (namespace, event) SELECT DISTINCT namespace, event FROM ({touched}) AS t(namespace, event)
                  RETURNING namespace, seq)
  UPDATE namespace_changes n SET version = l.seq FROM (SELECT namespace, MAX(seq) AS seq FROM logged GROUP BY namespace) l
    WHERE n.namespace = l.namespace;
  RETURN NULL;
END $log$;
DROP TRIGGER IF EXISTS {name} ON {table};
CREATE TRIGGER {name} AFTER {op} ON {table} REFERENCING {referencing} FOR EACH STATEMENT EXECUTE FUNCTION log_{name}();
"""


MIGRATIONS: dict[int, str] = {1: "\nCREATE EXTENSION IF NOT EXISTS vector;\n" + tables.meta() + """\
CREATE TABLE IF NOT EXISTS observations (
  rowid BIGSERIAL UNIQUE,
  namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
  id TEXT NOT NULL, step INTEGER NOT NULL, seq INTEGER NOT NULL, speaker TEXT, text TEXT NOT NULL,
  time TEXT, date TEXT, meta TEXT NOT NULL, ingested_at TEXT NOT NULL, embedding vector, event TEXT,
  doc_len INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (namespace, id));
CREATE INDEX IF NOT EXISTS obs_step ON observations(namespace, step, seq);
CREATE INDEX IF NOT EXISTS obs_event ON observations(namespace, event);
CREATE TABLE IF NOT EXISTS terms (
  namespace TEXT NOT NULL, obs_id TEXT NOT NULL, term TEXT NOT NULL, tf INTEGER NOT NULL,
  PRIMARY KEY (namespace, term, obs_id),
  FOREIGN KEY (namespace, obs_id) REFERENCES observations(namespace, id) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS terms_obs ON terms(namespace, obs_id);
""" + tables.speakers() + tables.steps() + tables.events(POSTGRES)
    + "CREATE INDEX IF NOT EXISTS event_topic ON events(namespace, topic_id);\n" + tables.relations(POSTGRES)
    + tables.topics(POSTGRES) + tables.event_history("  rowid BIGSERIAL PRIMARY KEY,\n") + tables.cache(), 2: """
ALTER TABLE terms ADD COLUMN IF NOT EXISTS doc_len INTEGER NOT NULL DEFAULT 0;
ALTER TABLE terms ADD COLUMN IF NOT EXISTS obs_rowid BIGINT NOT NULL DEFAULT 0;
UPDATE terms t SET doc_len = o.doc_len, obs_rowid = o.rowid
  FROM observations o WHERE o.namespace = t.namespace AND o.id = t.obs_id;
CREATE INDEX IF NOT EXISTS terms_bm25 ON terms (namespace, term) INCLUDE (obs_id, tf, doc_len, obs_rowid);
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS docs BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS total_len BIGINT NOT NULL DEFAULT 0;
UPDATE namespaces n SET docs = s.docs, total_len = s.total_len
  FROM (SELECT namespace, COUNT(*) AS docs, SUM(doc_len) AS total_len FROM observations GROUP BY namespace) s
  WHERE s.namespace = n.name;
ALTER TABLE observations ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE events ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE topics ALTER COLUMN centroid SET STORAGE MAIN;
""", 3: """
ALTER TABLE terms DROP CONSTRAINT IF EXISTS terms_namespace_obs_id_fkey;
DELETE FROM terms t WHERE NOT EXISTS (SELECT 1 FROM observations o WHERE o.namespace = t.namespace AND o.id = t.obs_id);
""", 4: """
CREATE TABLE IF NOT EXISTS changes (seq BIGSERIAL PRIMARY KEY, namespace TEXT NOT NULL, event TEXT);
CREATE INDEX IF NOT EXISTS changes_ns ON changes(namespace, seq);
CREATE TABLE IF NOT EXISTS namespace_changes (namespace TEXT PRIMARY KEY, version BIGINT NOT NULL);
""" + "".join(_logged(table, columns, op) for table, columns in LOGGED.items() for op in ROW_IMAGES)}


def hnsw_index(table: str, col: str, dim: int, upto: int | None = None) -> str:
    """A pgvector HNSW (cosine) index for one vector kind; queries cast to vector(dim) so the planner can use
    it. With `upto`, over the rows up to that rowid only (refresh_indexes): rows written later are not
    inserted into the graph one by one but scanned exactly until the next build covers them."""
    if upto is None:  # the whole table: how databases before the prefix indexes were built
        return f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw (({col}::vector({dim})) vector_cosine_ops)"
    return (f"CREATE INDEX IF NOT EXISTS {table}_hnsw_{int(upto)} ON {table} USING hnsw "
            f"(({col}::vector({dim})) vector_cosine_ops) WHERE rowid <= {int(upto)}")
