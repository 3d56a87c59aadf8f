"""A process killed (SIGKILL) in the middle of a construction step leaves no half step behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from compassmem.store import SQLiteStore

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
        print("INSIDE", flush=True)   # observations are already written inside the open transaction
        time.sleep(60)
        return out

    segment.OfflineSegmenter.segment = slow
    mem.add(["second step turn one", "second step turn two"], namespace="n", step=2)
""")


def test_sigkill_mid_step_leaves_no_half_step(tmp_path):
    db = tmp_path / "crash.db"
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
    store = SQLiteStore(db)
    assert [r.step for r in store.steps("n")] == [1]
    assert {o.step for o in store.observations("n")} == {1}
    assert all(e.step == 1 for e in store.events("n"))
    store.close()
    # and the memory keeps working: step 2 can be added again
    from compassmem import Memory

    mem = Memory(db)
    rec = mem.add(["second step turn one", "second step turn two"], namespace="n", step=2)
    assert rec.step == 2 and len(mem.store.steps("n")) == 2
    mem.close()
