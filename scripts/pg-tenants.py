#!/usr/bin/env python
"""Two tenants on one PostgreSQL database: how fast namespace x answers when each ask follows nothing,
a one-turn `add` to another namespace, or one to x itself (docs/benchmarks.md, "What a write leaves kept").

    python scripts/pg-tenants.py                     # this checkout
    python scripts/pg-tenants.py --src /tmp/old/src  # another checkout's code (a git worktree), to compare

Starts a private PostgreSQL 16 + pgvector from the `pgserver` wheel (the test suite's), builds x from
1,000 synthetic `bench scale` turns in 20 steps with the hash embedder, then asks `bench scale`'s 20
questions three times. Prints the build time and each ask p50.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", help="the source folder to import compassmem from (default: the installed one)")
    args = p.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
    import pgserver
    import psycopg

    from compassmem import Memory
    from compassmem.bench.scale import questions, synthetic_turn

    srv = pgserver.get_server(tempfile.mkdtemp(prefix="pg-tenants-") + "/data", cleanup_mode="stop")
    admin = srv.get_uri()
    name = "t" + uuid.uuid4().hex[:8]
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    # the URL spelt out here, not compassmem.bench.pgdb's: `--src` may point at a checkout from before it
    base, sep, query = admin.partition("?")
    mem = Memory(f"{base.rsplit('/', 1)[0]}/{name}{sep}{query}", embedder="hash")
    rng, t0 = random.Random(0), time.perf_counter()
    for step in range(1, 21):
        mem.add([{"id": f"x{step}-{i}", "speaker": ["Ana", "Ben"][i % 2], "text": synthetic_turn(rng, step, i)}
                 for i in range(50)], namespace="x", step=step)
    print(f"build {time.perf_counter() - t0:.1f} s")
    mem.add([{"id": "y0", "speaker": "Cy", "text": "I started a new job."}], namespace="y", step=1)
    asked = questions(20)
    for q in asked:
        mem.ask(q, "x")

    def p50(before) -> float:
        took = []
        for i, q in enumerate(asked):
            before(i)
            t = time.perf_counter()
            mem.ask(q, "x")
            took.append(time.perf_counter() - t)
        return 1000 * statistics.median(took)

    def add(namespace: str, text: str):
        return lambda i: mem.add([{"id": f"{namespace}{i}-{uuid.uuid4().hex[:6]}", "speaker": "Cy",
                                   "text": f"Day {i}: {text}"}], namespace=namespace)

    warm = p50(lambda i: None)
    other = p50(add("y", "work was fine."))
    own = p50(add("x", "I fed the cat."))
    print(f"ask p50: warm {warm:.1f} ms, after an add to another namespace {other:.1f} ms, "
          f"after an add to its own {own:.1f} ms")
    mem.close()
    srv.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
