"""Scale benchmark: synthetic namespaces grown to N events; ingest throughput, query latency, peak memory,
a cold `compassmem ask` process, and, in the same run, the primitives a query is built from (exact
scan, ANN lookup, BM25) so CompassMem's query time can be read as a multiple of them.

Sizes up to `direct_above` events go through the full construction pipeline (Memory.add, offline
roles); larger ones are written through the store API (observations, events, relations, topics and the
indexes exactly as a build leaves them, but without segmentation or fusion), which the results say.
Each phase of each size runs in its own process, so a peak RSS is that phase's own; every finished
phase is saved, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import json
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

NAMESPACE = "scale"


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports ru_maxrss in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "June"]
PLACES = ["Lisbon", "Porto", "Oslo", "Kyoto", "Lima", "Cairo", "Quito", "Perth", "Tunis", "Riga"]
TOPICS = [
    "adopted a {pet} named {name}", "ran a {n} km race in {place}", "started a pottery class and made {n} bowls",
    "moved to {place} for a new job at a {org}", "painted a {thing} for {person}",
    "read a book about {thing} on the train to {place}", "cooked {dish} for {n} friends", "fixed a bike and rode to {place}",
]
FILL = {"pet": ["dog", "cat", "parrot", "rabbit"], "name": ["Luna", "Max", "Kiwi", "Pixel", "Biscuit"],
        "org": ["bakery", "bank", "school", "hospital"], "thing": ["sunset", "river", "whale", "castle", "forest"],
        "dish": ["paella", "ramen", "curry", "lasagna"]}
_SYL = ["ka", "lo", "mi", "ren", "tu", "sa", "vo", "ne", "qui", "dar", "pel", "zo", "bri", "fen", "gol"]


def _word(rng: random.Random) -> str:
    """A made-up word from a Zipf-like vocabulary of ~50 K, so the lexical index sees rare and common terms."""
    rank = min(int(rng.paretovariate(1.1)), 50_000)
    r = random.Random(rank)
    return "".join(r.choice(_SYL) for _ in range(2 + rank % 3))


def synthetic_turn(rng: random.Random, step: int, i: int) -> str:
    template = TOPICS[(step + i // 5) % len(TOPICS)]
    text = template.format(pet=rng.choice(FILL["pet"]), name=rng.choice(FILL["name"]), n=rng.randint(2, 40),
                           place=rng.choice(PLACES), org=rng.choice(FILL["org"]), thing=rng.choice(FILL["thing"]),
                           person=rng.choice(PEOPLE), dish=rng.choice(FILL["dish"]))
    return f"Yesterday I {text} with {_word(rng)} and {_word(rng)}."


def synthetic_step(rng: random.Random, step: int, turns: int) -> list[dict]:
    return [{"id": f"S{step}:{i}", "speaker": PEOPLE[(step + i) % 2], "text": synthetic_turn(rng, step, i), "time": None}
            for i in range(turns)]


def questions(n: int) -> list[str]:
    return [f"When did {PEOPLE[i % len(PEOPLE)]} go to {PLACES[(3 * i) % len(PLACES)]} for the {FILL['thing'][i % 5]}?"
            for i in range(n)]


# ---------------------------------------------------------------------------------------------- phases
def ingest_pipeline(n_events: int, db: Path, embedder: str, turns_per_step: int, seed: int = 0) -> dict:
    """The full construction pipeline (offline roles), step by step, as a user's `add` calls would."""
    from .. import Memory

    rng = random.Random(seed)
    mem = Memory(db, embedder=embedder)
    t0 = time.perf_counter()
    step, observations, events = 0, 0, 0
    checkpoints = []
    while events < n_events:
        step += 1
        rec = mem.add(synthetic_step(rng, step, turns_per_step), namespace=NAMESPACE, step=step,
                      world_time=f"{1 + step % 28} May, 2023")
        observations += rec.observations
        events += rec.events_new
        if step % 50 == 0:
            checkpoints.append((observations, round(time.perf_counter() - t0, 2)))
    ingest_s = time.perf_counter() - t0
    mem.close()
    # throughput over the last tenth of the build: the rate at this size, not the average since empty
    tail = [c for c in checkpoints if c[0] >= 0.9 * observations] or [(0, 0.0)]
    rate_end = (observations - tail[0][0]) / max(ingest_s - tail[0][1], 1e-9)
    return {"path": "pipeline", "observations": observations, "events": events, "steps": step,
            "ingest_s": round(ingest_s, 2), "observations_per_s": round(observations / ingest_s, 1),
            "observations_per_s_at_size": round(rate_end, 1), "ingest_peak_rss_mb": peak_rss_mb()}


def ingest_direct(n_events: int, db: Path, embedder: str, per_event: int = 2, batch: int = 20_000,
                  seed: int = 0) -> dict:
    """Events written through the store API: `per_event` observations each, a temporal relation to the
    previous event, 50 topics; the indexes maintained as after any step."""
    import numpy as np

    from ..embed import make_embedder
    from ..models import Event, EventTime, Observation, Relation, Topic
    from ..store import open_store

    rng = random.Random(seed)
    emb = make_embedder(embedder)
    store = open_store(db)
    store.meta.set("embedder", embedder)
    store.ensure_namespace(NAMESPACE)
    t0 = time.perf_counter()
    done = store.event_count(NAMESPACE)
    topic_vecs: dict[str, list] = {}
    while done < n_events:
        m = min(batch, n_events - done)
        obs, events = [], []
        for j in range(done, done + m):
            step = j // 15 + 1
            for i in range(per_event):
                obs.append(Observation(id=f"S{step}:{j}:{i}", namespace=NAMESPACE, step=step, seq=(j % 15) * per_event + i,
                                       speaker=PEOPLE[(j + i) % 2], text=synthetic_turn(rng, step, i + j),
                                       time=f"{1 + step % 28} May, 2023"))
        vecs = emb.embed([o.text for o in obs])
        ev_vecs = vecs.reshape(m, per_event, -1).mean(axis=1)
        for k, j in enumerate(range(done, done + m)):
            span = obs[k * per_event:(k + 1) * per_event]
            events.append(Event(id=f"e{j}", namespace=NAMESPACE, step=span[0].step, summary=" ".join(o.text for o in span),
                                participants=sorted({o.speaker for o in span}), time=EventTime(explicit=span[0].time),
                                observation_ids=[o.id for o in span], topic_id=f"t{j % 50}"))
        with store.transaction():
            store.add_observations(obs, vecs)
            store.put_events(events, ev_vecs)
            for e, v in zip(events, ev_vecs):
                topic_vecs.setdefault(e.topic_id, []).append(v)
            store.add_relations([Relation(id=f"r{e.id}", namespace=NAMESPACE, source=f"e{int(e.id[1:]) - 1}",
                                          target=e.id, type="before", origin="within_step", step=e.step)
                                 for e in events if int(e.id[1:]) > 0])
        store.refresh_indexes(NAMESPACE)
        done += m
        print(f"direct: {done} events, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    with store.transaction():
        for tid, vs in topic_vecs.items():
            store.put_topic(Topic(id=tid, namespace=NAMESPACE, label=tid, size=len(vs)), np.mean(vs, axis=0))
    ingest_s = time.perf_counter() - t0
    n_obs = store.observation_count(NAMESPACE)
    store.close()
    return {"path": "store API", "observations": n_obs, "events": n_events, "steps": None,
            "ingest_s": round(ingest_s, 2), "observations_per_s": round(n_obs / ingest_s, 1),
            "ingest_peak_rss_mb": peak_rss_mb()}


def measure_queries(db: Path, embedder: str, queries: int) -> dict:
    """Per-question latency of `ask` and `search` over the finished database, in a fresh process."""
    from .. import Memory
    from .metrics import percentile

    mem = Memory(db, embedder=embedder)
    t0 = time.perf_counter()
    mem.ask("warm up", NAMESPACE)  # first ask: opens the index files, loads the embedder
    first_s = time.perf_counter() - t0
    asks, searches = [], []
    for q in questions(queries):
        t = time.perf_counter()
        mem.ask(q, NAMESPACE)
        asks.append(time.perf_counter() - t)
        t = time.perf_counter()
        mem.search(q, NAMESPACE)
        searches.append(time.perf_counter() - t)
    mem.close()
    return {"first_ask_s": round(first_s, 3), "query_p50_s": round(percentile(asks, 0.5), 4),
            "query_p95_s": round(percentile(asks, 0.95), 4), "search_p50_s": round(percentile(searches, 0.5), 4),
            "query_peak_rss_mb": peak_rss_mb(), "db_mb": _size_mb(db)}


def _size_mb(db: Path | str) -> float:
    if str(db).startswith("postgresql://"):
        from ..store import open_store

        store = open_store(str(db))
        mb = store.sql.rows("SELECT pg_database_size(current_database())")[0][0] / 2**20
        store.close()
        return round(mb, 1)
    return round(Path(db).stat().st_size / 2**20, 1)


def measure_primitives(db: Path, embedder: str, queries: int, k: int = 10, k_search: int = 100) -> dict:
    """The building blocks, timed alone on the same data: an exact numpy scan over every observation
    vector, one ANN lookup on the store's index, one BM25 top-k from the lexical index; and the ANN's
    quality against the exact scan: recall@k and @k_search (what a search asks for), ties counted as
    found, and how close the found rows' exact similarity is to the true top's (1.0: as good)."""
    import numpy as np

    from ..embed import make_embedder
    from ..store import open_store
    from .metrics import percentile

    emb = make_embedder(embedder)
    store = open_store(str(db))
    qs = questions(queries)
    qv = emb.embed(qs)
    store.search_observations(NAMESPACE, qv[0], k)  # open the index
    ann, bm25, found, found_wide = [], [], [], []
    for q, v in zip(qs, qv):
        t = time.perf_counter()
        found.append([i for i, _ in store.search_observations(NAMESPACE, v, k)])
        ann.append(time.perf_counter() - t)
        found_wide.append([i for i, _ in store.search_observations(NAMESPACE, v, k_search)])
        t = time.perf_counter()
        store.lexical_search(NAMESPACE, q, k_search)
        bm25.append(time.perf_counter() - t)
    ids, mat = store.observation_matrix(NAMESPACE)
    store.close()
    exact, recall, recall_wide, closeness = [], [], [], []
    for v, got, wide in zip(qv, found, found_wide):
        t = time.perf_counter()
        sims = mat @ v
        top = np.argpartition(-sims, k)[:k]
        exact.append(time.perf_counter() - t)
        # a found row counts if it scores at least the exact k-th best: synthetic turns repeat, and among
        # equal vectors any choice is right
        score = dict(zip(ids, sims.tolist()))
        recall.append(sum(score[i] >= sims[top].min() - 1e-6 for i in got) / k)
        kth_wide = np.partition(-sims, k_search)[k_search - 1] * -1
        recall_wide.append(sum(score[i] >= kth_wide - 1e-6 for i in wide) / k_search)
        closeness.append(float(np.mean([score[i] for i in got]) / np.mean(sims[top])))
    return {"exact_scan_p50_s": round(percentile(exact, 0.5), 5), "ann_p50_s": round(percentile(ann, 0.5), 5),
            "bm25_p50_s": round(percentile(bm25, 0.5), 5), f"ann_recall@{k}": round(float(np.mean(recall)), 4),
            f"ann_recall@{k_search}": round(float(np.mean(recall_wide)), 4),
            "ann_similarity_ratio": round(float(np.mean(closeness)), 4)}


def _wall(args: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:4])} failed: {proc.stderr.strip()[-300:]}")
    return wall


def cold_ask(db: Path, embedder: str, repeats: int = 5) -> dict:
    """Wall times of whole processes, median of `repeats`: `compassmem ask` on this database (import,
    open, first search, answer; the embedder it was built with), and, size-independent but measured
    here so every run has them, `import compassmem`, `compassmem --help` and `compassmem --version`."""
    py = sys.executable
    runs = {
        "cold_ask_s": [py, "-m", "compassmem", "ask", questions(1)[0], "--db", str(db), "--namespace", NAMESPACE],
        "import_s": [py, "-c", "import compassmem"],
        "help_s": [py, "-m", "compassmem", "--help"],
        "version_s": [py, "-m", "compassmem", "--version"],
    }
    return {key: round(sorted(_wall(args) for _ in range(repeats))[repeats // 2], 3) for key, args in runs.items()}


# ---------------------------------------------------------------------------------------------- driver
PHASES = ("ingest", "queries", "primitives", "cold")


def run_scale(sizes: list[int], out: Path, embedder: str = "hash", turns_per_step: int = 100, queries: int = 20,
              direct_above: int = 100_000, log=print, keep_db: bool = False, pg: str | None = None) -> list[dict]:
    """Each phase of each size in its own subprocess; every finished phase lands in out/scale.json at
    once, and a rerun skips what is already measured with the same embedder, step size and backend (drop
    a phase from a row's "done" list to measure it again on a database kept with keep_db). `pg`: a
    PostgreSQL server URL; each size then gets its own database `scale_<n>` there."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "scale.json"
    backend = "postgres" if pg else "sqlite"
    results = {r["target_events"]: r for r in (json.loads(path.read_text()) if path.is_file() else [])
               if r.get("embedder") == embedder and r.get("turns_per_step") == turns_per_step
               and r.get("backend", "sqlite") == backend}
    for n in sizes:
        row = results.setdefault(n, {"target_events": n, "embedder": embedder, "turns_per_step": turns_per_step,
                                     "backend": backend})
        db = _pg_database(pg, n) if pg else out / f"scale-{n}.db"
        if all(p in row.get("done", []) for p in PHASES):
            log(f"scale: {n} events already measured, kept")
            continue
        for phase in PHASES:
            if phase in row.get("done", []):
                continue
            if phase == "ingest":
                _remove(out, n, pg)
            log(f"scale: {n} events, {phase} …")
            args = [sys.executable, "-m", "compassmem.bench.scale", phase, str(n), str(db), embedder,
                    str(turns_per_step), str(queries), str(direct_above)]
            proc = subprocess.run(args, stdout=subprocess.PIPE, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"scale {phase} for {n} events failed (exit {proc.returncode})")
            row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
            row["done"] = row.get("done", []) + [phase]
            path.write_text(json.dumps(sorted(results.values(), key=lambda r: r["target_events"]), indent=2))
            log(json.dumps(row))
        for name in ("exact_scan", "ann", "bm25"):
            prim = row.get(f"{name}_p50_s")
            if prim:
                row[f"query_over_{name}"] = round(row["query_p50_s"] / prim, 1)
        if not keep_db:
            _remove(out, n, pg)  # every phase is measured: the database (GBs at 1 M) is not needed again
        path.write_text(json.dumps(sorted(results.values(), key=lambda r: r["target_events"]), indent=2))
    return sorted(results.values(), key=lambda r: r["target_events"])


def _pg_database(server: str, n: int) -> str:
    """The URL of database scale_<n> on the server `server` points at."""
    from .pgdb import database_url

    return database_url(server, f"scale_{n}")


def _remove(out: Path, n: int, pg: str | None = None) -> None:
    if pg:  # a fresh database for this size
        from .pgdb import fresh_database

        fresh_database(pg, f"scale_{n}")
        return
    for p in out.glob(f"scale-{n}.db*"):
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def _phase(phase: str, n: int, db: Path, embedder: str, turns: int, queries: int, direct_above: int) -> dict:
    if phase == "ingest":
        return ingest_direct(n, db, embedder) if n > direct_above else ingest_pipeline(n, db, embedder, turns)
    if phase == "queries":
        return measure_queries(db, embedder, queries)
    if phase == "primitives":
        return measure_primitives(db, embedder, queries)
    return cold_ask(db, embedder, repeats=max(1, min(5, queries)))


if __name__ == "__main__":
    phase, n, db, emb, turns, queries, direct_above = sys.argv[1:8]
    target = db if db.startswith("postgresql://") else Path(db)
    print(json.dumps(_phase(phase, int(n), target, emb, int(turns), int(queries), int(direct_above))))
