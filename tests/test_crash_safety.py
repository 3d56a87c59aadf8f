"""A process killed (SIGKILL) in the middle of a construction step leaves no half step behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from compassmem.store import SQLiteStore
from compassmem.store.vectors import IndexPolicy

CHILD = textwrap.dedent("""
    import sys, time
    from compassmem import Memory
    from compassmem.construct import segment

    db = sys.argv[1]
    mem = Memory(db, embedder="hash")
    mem.add(["first step turn one", "first step turn two"], namespace="n", step=1, world_time="8 May 2023")
    original = segment.OfflineSegmenter.segment

    def slow(self, *a, **k):
        out = original(self, *a, **k)
        print("INSIDE", flush=True)   # the step is being computed; nothing of it may survive a kill
        time.sleep(60)
        return out

    segment.OfflineSegmenter.segment = slow
    mem.add(["second step turn one", "second step turn two"], namespace="n", step=2)
""")


def test_sigkill_mid_step_leaves_no_half_step(db_factory):
    """On each backend (a SQLite file, a PostgreSQL database)."""
    from compassmem.store import open_store

    db = db_factory()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    line = ""
    while time.time() < deadline:
        line = proc.stdout.readline()
        if "INSIDE" in line:
            break
    assert "INSIDE" in line, "child never reached the middle of step 2"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = open_store(db)
    assert [r.step for r in store.steps.all("n")] == [1]
    assert {o.step for o in store.observations("n")} == {1}
    assert all(e.step == 1 for e in store.events("n"))
    store.close()
    # and the memory keeps working: step 2 can be added again
    from compassmem import Memory

    mem = Memory(db, embedder="hash")
    rec = mem.add(["second step turn one", "second step turn two"], namespace="n", step=2)
    assert rec.step == 2 and len(mem.store.steps.all("n")) == 2
    mem.close()


KILL_CHILD = textwrap.dedent("""
    import sys
    from compassmem import Memory
    sys.path.insert(0, sys.argv[2])
    from test_concurrency import _steps
    from test_crash_safety import open_for_kills

    mem = Memory(store=open_for_kills(sys.argv[1]), embedder="hash")
    print("READY", flush=True)
    for step, obs, when in _steps("k", n_steps=12, turns=6):
        mem.add(obs, namespace="k", step=step, world_time=when)
    print("DONE", flush=True)
""")


def open_for_kills(db: str):
    """The store a kill test writes: a SQLite file with tiny index thresholds (base files are written, and
    can be killed mid-write, every few steps), or a PostgreSQL database."""
    from compassmem.store import open_store

    if db.startswith("postgresql://"):
        return open_store(db)
    return SQLiteStore(db, index_policy=IndexPolicy(ann_min_rows=20, delta_min_rows=4))


def _consistent(db: str) -> int:
    """Whole steps only: every recorded step has all its observations, nothing exists of an unrecorded
    step, every event's span and every relation's ends exist, and the full-text and vector indexes agree
    with the tables. Returns the number of steps present."""
    import sqlite3

    if not db.startswith("postgresql://"):
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = open_for_kills(db)
    try:
        if not store.has_namespace("k"):
            return 0
        records = {r.step: r for r in store.steps.all("k")}
        obs = store.observations("k")
        by_step: dict[int, int] = {}
        for o in obs:
            by_step[o.step] = by_step.get(o.step, 0) + 1
        assert set(by_step) == set(records), "observations of a step that was never committed"
        assert all(by_step[s] == r.observations for s, r in records.items()), "a step is half written"
        ids = {o.id for o in obs}
        events = {e.id: e for e in store.events("k")}
        assert all(set(e.observation_ids) <= ids and e.step in records for e in events.values())
        assert all(r.source in events and r.target in events for r in store.relations("k"))
        assert store.check_indexes("k") == []
        return len(records)
    finally:
        store.close()


def test_random_kill_points_leave_whole_steps_and_resume_to_the_same_memory(tmp_path, db_factory):
    """50 kills on SQLite; 15 on PostgreSQL, whose build of the same steps takes longer, so the kills are
    spread over a longer window."""
    import random
    from pathlib import Path

    from compassmem import Memory

    from test_concurrency import _snapshot, _steps

    kills, window = (15, 2.0) if db_factory().startswith("postgresql://") else (50, 0.5)
    clean = str(tmp_path / "clean.db")
    with Memory(clean, embedder="hash") as mem:
        for step, obs, when in _steps("k", n_steps=12, turns=6):
            mem.add(obs, namespace="k", step=step, world_time=when)
    expected = _snapshot(clean)
    rng = random.Random(7)
    tests_dir = str(Path(__file__).parent)
    partial = 0
    for i in range(kills):
        db = db_factory()
        proc = subprocess.Popen([sys.executable, "-c", KILL_CHILD, db, tests_dir], stdout=subprocess.PIPE, text=True)
        assert "READY" in proc.stdout.readline()
        time.sleep(rng.uniform(0.0, window))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        present = _consistent(db)
        partial += 0 < present < 12
        with Memory(db, embedder="hash") as mem:  # resume: re-adding every step finishes the build
            for step, obs, when in _steps("k", n_steps=12, turns=6):
                mem.add(obs, namespace="k", step=step, world_time=when)
        assert _snapshot(db) == expected, f"kill {i} (after {present} steps) resumed to a different memory"
    assert partial >= kills // 5, f"only {partial} of {kills} kills landed inside the build: the test lost its teeth"


EDIT_CHILD = textwrap.dedent("""
    import sys
    from compassmem import Memory
    from compassmem.store import SQLiteStore
    from compassmem.store.vectors import IndexPolicy

    store = SQLiteStore(sys.argv[1], index_policy=IndexPolicy(ann_min_rows=20, delta_min_rows=4))
    mem = Memory(store=store, embedder="hash")
    ids = [o.id for o in store.observations("k")]
    print("READY", flush=True)
    for i, oid in enumerate(ids):
        if i % 3 == 0:
            mem.delete([oid], "k")
        elif i % 3 == 1:
            mem.update(oid, f"rewritten turn number {i} about a kayak trip", "k")
    print("DONE", flush=True)
""")


def test_random_kill_points_during_edits_leave_whole_edits(tmp_path):
    """A delete or update killed at any point is there whole or not at all, and the indexes agree."""
    import random
    import shutil

    from compassmem import Memory
    from compassmem.store import SQLiteStore

    from test_concurrency import _steps
    from test_edit import invariants

    base = str(tmp_path / "base.db")
    with Memory(store=SQLiteStore(base, index_policy=IndexPolicy(ann_min_rows=20, delta_min_rows=4)), embedder="hash") as mem:
        for step, obs, when in _steps("k", n_steps=6, turns=6):
            mem.add(obs, namespace="k", step=step, world_time=when)
    rng = random.Random(11)
    inside = 0
    for i in range(20):
        db = str(tmp_path / f"edit-{i}.db")
        shutil.copy(base, db)
        proc = subprocess.Popen([sys.executable, "-c", EDIT_CHILD, db], stdout=subprocess.PIPE, text=True)
        assert "READY" in proc.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.45))  # the 24 edits take ~0.4 s here
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        store = SQLiteStore(db, index_policy=IndexPolicy(ann_min_rows=20, delta_min_rows=4))
        with Memory(store=store, embedder="hash") as mem:
            invariants(mem, "k")
            n = mem.store.observation_count("k")
            rewritten = sum("kayak" in o.text for o in mem.store.observations("k"))
            inside += 0 < rewritten and n > 24  # killed after the first edit and before the last
    assert inside >= 8, f"only {inside} of 20 kills landed inside the edits: the test lost its teeth"
