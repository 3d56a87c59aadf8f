"""Scale benchmark: synthetic namespaces grown to N events on the offline path; ingest throughput,
query latency and peak memory per size. Each size runs in its own process so peak RSS is its own."""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports ru_maxrss in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "June"]
PLACES = ["Lisbon", "Porto", "Oslo", "Kyoto", "Lima", "Cairo", "Quito", "Perth", "Tunis", "Riga"]
TOPICS = [
    ("adopted a {pet} named {name}", ["pet", "name"]),
    ("ran a {n} km race in {place}", ["n", "place"]),
    ("started a pottery class and made {n} bowls", ["n"]),
    ("moved to {place} for a new job at a {org}", ["place", "org"]),
    ("painted a {thing} for {person}", ["thing", "person"]),
    ("read a book about {thing} on the train to {place}", ["thing", "place"]),
    ("cooked {dish} for {n} friends", ["dish", "n"]),
    ("fixed a bike and rode to {place}", ["place"]),
]
FILL = {"pet": ["dog", "cat", "parrot", "rabbit"], "name": ["Luna", "Max", "Kiwi", "Pixel", "Biscuit"],
        "org": ["bakery", "bank", "school", "hospital"], "thing": ["sunset", "river", "whale", "castle", "forest"],
        "dish": ["paella", "ramen", "curry", "lasagna"]}


def synthetic_step(rng: random.Random, step: int, turns: int) -> list[dict]:
    out = []
    for i in range(turns):
        template, _ = TOPICS[(step + i // 5) % len(TOPICS)]
        text = template.format(pet=rng.choice(FILL["pet"]), name=rng.choice(FILL["name"]), n=rng.randint(2, 40),
                               place=rng.choice(PLACES), org=rng.choice(FILL["org"]), thing=rng.choice(FILL["thing"]),
                               person=rng.choice(PEOPLE), dish=rng.choice(FILL["dish"]))
        who = PEOPLE[(step + i) % 2]
        out.append({"id": f"S{step}:{i}", "speaker": who, "text": f"Yesterday I {text}.", "time": None})
    return out


def run_size(n_events: int, db: Path, embedder: str, turns_per_step: int, queries: int, seed: int = 0) -> dict:
    from .. import Memory

    rng = random.Random(seed)
    if db.exists():
        db.unlink()
    mem = Memory(db, embedder=embedder)
    t0 = time.perf_counter()
    step, observations, events = 0, 0, 0
    while events < n_events:  # counted from step records: re-reading the matrix each step is O(n) itself
        step += 1
        day = 1 + step % 28
        rec = mem.add(synthetic_step(rng, step, turns_per_step), namespace="scale", step=step,
                      world_time=f"{day} May, 2023")
        observations += rec.observations
        events += rec.events_new
    ingest_s = time.perf_counter() - t0
    mem.close()
    row = {"target_events": n_events, "observations": observations, "steps": step, "ingest_s": round(ingest_s, 2),
           "observations_per_s": round(observations / ingest_s, 1), "events_per_s": round(events / ingest_s, 1)}
    row.update(query_latency(db, embedder, queries))
    return row | {"peak_rss_mb": peak_rss_mb(), "embedder": embedder, "turns_per_step": turns_per_step}


def query_latency(db: Path, embedder: str, queries: int) -> dict:
    """Graph load and per-question latency over an existing scale database (also usable on its own when
    an ingest has already been paid for)."""
    from .. import Memory
    from .metrics import percentile

    mem = Memory(db, embedder=embedder)
    t1 = time.perf_counter()
    mem.graph("scale")
    load_s = time.perf_counter() - t1
    lat = []
    for i in range(queries):
        q = f"When did {PEOPLE[i % len(PEOPLE)]} go to {PLACES[i % len(PLACES)]}?"
        t2 = time.perf_counter()
        mem.ask(q, "scale")
        lat.append(time.perf_counter() - t2)
    events = len(mem.store.event_matrix("scale")[0])
    mem.close()
    return {"events": events, "graph_load_s": round(load_s, 3), "query_p50_s": round(percentile(lat, 0.5), 4),
            "query_p95_s": round(percentile(lat, 0.95), 4), "db_mb": round(db.stat().st_size / 2**20, 1)}


def run_scale(sizes: list[int], out: Path, embedder: str = "hash", turns_per_step: int = 100, queries: int = 20,
              log=print) -> list[dict]:
    """One subprocess per size; each result lands in out/scale.json as soon as it ends, and a rerun
    skips the sizes already measured with the same embedder and step size."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "scale.json"
    results = json.loads(path.read_text()) if path.is_file() else []
    same = {r["target_events"] for r in results
            if r.get("embedder") == embedder and r.get("turns_per_step", turns_per_step) == turns_per_step}
    for n in sizes:
        if n in same:
            log(f"scale: {n} events already measured, kept")
            continue
        log(f"scale: {n} events …")
        proc = subprocess.run([sys.executable, "-m", "compassmem.bench.scale", str(n), str(out / f"scale-{n}.db"),
                               embedder, str(turns_per_step), str(queries)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"scale run for {n} events failed: {proc.stderr.strip()[-500:]}")
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        (out / f"scale-{n}.db").unlink(missing_ok=True)
        log(json.dumps(row))
        results = sorted([r for r in results if r["target_events"] != n] + [row], key=lambda r: r["target_events"])
        path.write_text(json.dumps(results, indent=2))
    _plot(results, out / "scale.png")
    return results


def _plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["events"] for r in results]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ax[0].plot(xs, [r["query_p50_s"] for r in results], "o-", label="p50")
    ax[0].plot(xs, [r["query_p95_s"] for r in results], "o-", label="p95")
    ax[0].set(xscale="log", xlabel="events", ylabel="query latency (s)", title="latency vs memory size")
    ax[0].legend()
    ax[1].plot(xs, [r["peak_rss_mb"] for r in results], "o-")
    ax[1].set(xscale="log", xlabel="events", ylabel="peak RSS (MB)", title="memory vs size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    n, db, emb, turns, queries = sys.argv[1:6]
    print(json.dumps(run_size(int(n), Path(db), emb, int(turns), int(queries))))
