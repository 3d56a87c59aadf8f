"""`compassmem bench load`: a bounded load test of the REST service on loopback.

It starts a real `compassmem serve` process on a fresh database (SQLite, or PostgreSQL with `--pg`) with
a key, seeds it, then runs N client threads for S seconds, each mixing adds (one new step of turns, to its own namespace) and
searches (over every namespace's words), and reports per endpoint: requests, errors, p50/p95/max
latency and throughput. Any non-2xx answer counts as an error.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .metrics import percentile
from .pgdb import fresh_database

WORDS = ("garden tomatoes bicycle marathon piano recipe beagle puppy concert museum lake kayak "
         "painting pottery guitar novel ferry mountain festival camera").split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _turns(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.choice(['Ana', 'Ben', 'Cy'])} talked about the {rng.choice(WORDS)} and the {rng.choice(WORDS)} "
            f"after the {rng.choice(WORDS)}." for _ in range(n)]


def run_load(clients: int = 8, seconds: float = 60.0, add_share: float = 0.2, embedder: str = "hash",
             seed: int = 0, out: Path | None = None, pg: str | None = None) -> dict[str, Any]:
    """`pg`: a PostgreSQL server URL; the service then runs on a fresh database `load_bench` there."""
    import httpx

    with tempfile.TemporaryDirectory() as tmp:
        db = fresh_database(pg, "load_bench") if pg else str(Path(tmp) / "load.db")
        made = subprocess.run([sys.executable, "-m", "compassmem", "keys", "create", "--db", db, "--tenant", "load"],
                              capture_output=True, text=True, check=True)
        key = made.stdout.strip().splitlines()[-1]
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([sys.executable, "-m", "compassmem", "serve", "--db", db, "--port", str(port),
                                   "--embedder", embedder], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            for _ in range(600):
                try:
                    if httpx.get(base + "/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            headers = {"Authorization": f"Bearer {key}"}
            rng = random.Random(seed)
            with httpx.Client(base_url=base, headers=headers, timeout=120) as c:
                for i in range(clients):  # every client's namespace exists before the clock starts
                    c.post("/v1/memories", json={"namespace": f"c{i}", "messages": _turns(rng, 6)}).raise_for_status()
            samples: dict[str, list[float]] = {"add": [], "search": []}
            errors: dict[str, list[str]] = {"add": [], "search": []}
            lock = threading.Lock()
            stop = time.monotonic() + seconds

            def worker(i: int) -> None:
                r = random.Random(seed * 1000 + i)
                with httpx.Client(base_url=base, headers=headers, timeout=120) as c:
                    while time.monotonic() < stop:
                        if r.random() < add_share:
                            kind, call = "add", lambda: c.post("/v1/memories", json={
                                "namespace": f"c{i}", "messages": _turns(r, r.randint(2, 6))})
                        else:
                            kind, call = "search", lambda: c.post("/v1/search", json={
                                "namespace": f"c{r.randrange(clients)}", "query": " ".join(r.sample(WORDS, 3)),
                                "limit": 10})
                        t0 = time.perf_counter()
                        try:
                            resp = call()
                            bad = None if resp.is_success else f"{resp.status_code} {resp.text[:200]}"
                        except httpx.HTTPError as exc:
                            bad = f"{type(exc).__name__}: {exc}"
                        elapsed = time.perf_counter() - t0
                        with lock:
                            samples[kind].append(elapsed)
                            if bad:
                                errors[kind].append(bad)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.monotonic() - started
        finally:
            server.terminate()
            server.wait(timeout=60)
    report = {"clients": clients, "seconds": round(wall, 1), "add_share": add_share, "embedder": embedder,
              "backend": "postgresql" if pg else "sqlite",
              "endpoints": {kind: {"requests": len(v), "errors": len(errors[kind]),
                                   "p50_ms": round(1000 * percentile(v, 0.5), 1),
                                   "p95_ms": round(1000 * percentile(v, 0.95), 1),
                                   "max_ms": round(1000 * max(v, default=0.0), 1),
                                   "per_s": round(len(v) / wall, 1), "first_errors": errors[kind][:3]}
                            for kind, v in samples.items()}}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "load.json").write_text(json.dumps(report, indent=2))
    return report
