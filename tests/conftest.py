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
