"""Many processes on one database: writers of different namespaces and readers at the same time lose
nothing, and end where a sequential build ends."""

from __future__ import annotations

import multiprocessing as mp
import random

import pytest

from compassmem import Memory

WORDS = ("garden hiking pottery camping guitar painting recipe puppy museum concert bicycle library beach "
         "marathon sunrise violin novel festival kayak bakery").split()


def _steps(namespace: str, n_steps: int = 5, turns: int = 8) -> list[tuple[int, list[dict], str]]:
    rng = random.Random(namespace)
    out = []
    for step in range(1, n_steps + 1):
        obs = [{"id": f"{namespace}-{step}-{i}", "speaker": ("Ana", "Ben")[i % 2],
                "text": " ".join(rng.choice(WORDS) for _ in range(8)) + "."} for i in range(turns)]
        out.append((step, obs, f"{step} May 2023"))
    return out


def _writer(db: str, namespace: str, errors) -> None:
    try:
        with Memory(db, embedder="hash") as mem:
            for step, obs, when in _steps(namespace):
                mem.add(obs, namespace=namespace, step=step, world_time=when)
    except Exception as exc:  # reported to the parent, which fails the test
        errors.put(f"writer {namespace}: {type(exc).__name__}: {exc}")


def _reader(db: str, namespace: str, errors) -> None:
    try:
        with Memory(db, embedder="hash") as mem:
            for _ in range(15):
                if mem.store.has_namespace(namespace):
                    a = mem.ask("Who went camping at the beach?", namespace)
                    assert a.answer
    except Exception as exc:
        errors.put(f"reader {namespace}: {type(exc).__name__}: {exc}")


def _snapshot(db: str) -> dict:
    with Memory(db, embedder="hash") as mem:
        out = {}
        for ns in mem.namespaces():
            st = mem.stats(ns)
            out[ns] = (st["observations"], st["steps"], st["events"], st["relations"], st["topics"],
                       sorted(e.summary for e in mem.events(ns)))
        return out


def _run_all(procs: list, errors) -> None:
    """Start the processes, wait for them, and fail with whatever they reported."""
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    assert not problems, problems
    assert all(p.exitcode == 0 for p in procs)


@pytest.mark.slow
def test_four_writers_and_four_readers_lose_nothing(db_factory):
    """On each backend: 4 writer and 4 reader processes on one database equal a sequential build."""
    db = db_factory()
    Memory(db, embedder="hash").close()  # the file exists before the processes race to create it
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    names = [f"agent-{i}" for i in range(4)]
    _run_all([ctx.Process(target=_writer, args=(db, ns, errors)) for ns in names]
             + [ctx.Process(target=_reader, args=(db, ns, errors)) for ns in names], errors)

    sequential = db_factory()
    for ns in names:
        _writer(sequential, ns, errors)
    assert _snapshot(db) == _snapshot(sequential)


def test_a_writer_holds_no_lock_while_its_model_works(tmp_path):
    """The slow part of a step (segmentation: a model call in LLM mode) runs before the write lock is
    taken: while it runs, another writer with a tiny busy timeout commits a whole step."""
    from compassmem.store.sqlite import SQLiteStore

    db = str(tmp_path / "slow.db")
    slow = Memory(db, embedder="hash")
    other = Memory(store=SQLiteStore(db, busy_timeout_s=0.2), embedder="hash")
    inner = slow.constructor.roles.segmenter
    (_, obs2, when2), = _steps("other", n_steps=1)

    class ModelLikeSegmenter:
        def segment(self, *args):
            other.add(obs2, namespace="other", step=1, world_time=when2)  # would fail 'busy' under a held lock
            return inner.segment(*args)

    slow.constructor.roles.segmenter = ModelLikeSegmenter()
    (_, obs, when), = _steps("slow", n_steps=1)
    slow.add(obs, namespace="slow", step=1, world_time=when)
    assert set(slow.namespaces()) == {"slow", "other"}


def test_a_topic_label_from_a_model_is_asked_for_outside_the_write_lock(tmp_path):
    """A new topic's label is a model call in LLM mode (40 s on a small local model); it ran inside the
    step's write transaction, and another writer failed 'busy'. Now the topic is labelled after the
    commit: while the model works, a writer with a tiny busy timeout commits a whole step."""
    from compassmem.store.sqlite import SQLiteStore

    db = str(tmp_path / "label.db")
    slow = Memory(db, embedder="hash")
    other = Memory(store=SQLiteStore(db, busy_timeout_s=0.2), embedder="hash")
    (_, obs2, when2), = _steps("other", n_steps=1)
    asked = []

    class ModelLikeLabeler:
        def label(self, events):
            asked.append([e.id for e in events])
            if len(asked) == 1:
                other.add(obs2, namespace="other", step=1, world_time=when2)  # fails 'busy' under a held lock
            return f"model label {len(asked)}"

    slow.constructor.roles.labeler = ModelLikeLabeler()
    (_, obs, when), = _steps("slow", n_steps=1)
    record = slow.add(obs, namespace="slow", step=1, world_time=when)
    assert asked and set(slow.namespaces()) == {"slow", "other"}
    assert sorted(t.label for t in slow.store.topics("slow")) == [f"model label {i + 1}" for i in range(len(asked))]
    assert slow.store.steps.get("slow", 1) == record


def test_a_failed_model_label_keeps_the_keyword_label_and_the_step(tmp_path):
    from compassmem.errors import LLMError

    mem = Memory(tmp_path / "fail.db", embedder="hash")

    class Failing:
        def label(self, events):
            raise LLMError("topic_label", "failed after 3 attempt(s): invalid output")

    mem.constructor.roles.labeler = Failing()
    (_, obs, when), = _steps("n", n_steps=1)
    record = mem.add(obs, namespace="n", step=1, world_time=when)
    assert mem.store.steps.count("n") == 1 and all(t.label for t in mem.store.topics("n"))
    assert any("kept its keyword label" in s for s in record.skipped)
    assert mem.store.steps.get("n", 1).skipped == record.skipped


def test_busy_database_is_one_clear_error_and_writes_nothing(tmp_path):
    from compassmem.errors import StoreError
    from compassmem.store.sqlite import SQLiteStore

    db = str(tmp_path / "busy.db")
    holder = SQLiteStore(db)
    waiter = Memory(store=SQLiteStore(db, busy_timeout_s=0.1), embedder="hash")
    (_, obs, when), = _steps("w", n_steps=1)
    with holder.transaction():
        with pytest.raises(StoreError, match="is busy: another writer held it"):
            waiter.add(obs, namespace="w", step=1, world_time=when)
    assert waiter.namespaces() == []


def test_two_processes_adding_the_same_steps_write_each_once(db_factory):
    """Two ingests of the same conversation racing on one database (each backend): every step is there
    once, and the memory equals one ingest alone."""
    db, alone = db_factory(), db_factory()
    Memory(db, embedder="hash").close()
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    _run_all([ctx.Process(target=_writer, args=(db, "shared", errors)) for _ in range(2)], errors)
    _writer(alone, "shared", errors)
    assert _snapshot(db) == _snapshot(alone)
    with Memory(db, embedder="hash") as mem:
        steps = [r.step for r in mem.store.steps.all("shared")]
        assert steps == sorted(set(steps)) == list(range(1, len(_steps("shared")) + 1))


def _appender(db: str, namespace: str, client: int, n: int, errors) -> None:
    """One client adding n turns without step numbers, one after another."""
    try:
        with Memory(db, embedder="hash") as mem:
            for i in range(n):
                mem.add([f"client {client} turn {i}: {' '.join(random.Random(i).sample(WORDS, 6))}."],
                        namespace=namespace)
    except Exception as exc:
        errors.put(f"appender {client}: {type(exc).__name__}: {exc}")


def _order_kept(mem: Memory, namespace: str, clients: int, per_client: int) -> None:
    """Every add is stored as its own step, and each client's turns are in the order it sent them."""
    texts = [o.text for o in mem.store.observations(namespace)]  # in step order
    assert len(texts) == len(set(texts)) == clients * per_client
    for c in range(clients):
        mine = [int(t.split(":")[0].split()[-1]) for t in texts if t.startswith(f"client {c} turn ")]
        assert mine == list(range(per_client))


def test_concurrent_adds_without_a_step_all_land_in_order(tmp_path):
    """200 adds from 8 threads sharing one Memory, none naming a step: 200 steps, none refused."""
    from concurrent.futures import ThreadPoolExecutor

    mem = Memory(tmp_path / "threads.db", embedder="hash")

    def client(c: int) -> None:
        for i in range(25):
            mem.add([f"client {c} turn {i}: {' '.join(random.Random(i).sample(WORDS, 6))}."], namespace="busy")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(client, range(8)))
    assert mem.store.steps.count("busy") == 200
    _order_kept(mem, "busy", 8, 25)
    mem.close()


def test_processes_adding_without_a_step_take_the_next_free_number(db_factory):
    """Across processes (no shared lock) a taken number is met inside the write transaction, and the add is
    built again under the next one: 4 processes × 10 adds store 40 steps, on each backend."""
    db = db_factory()
    Memory(db, embedder="hash").close()
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    _run_all([ctx.Process(target=_appender, args=(db, "shared", c, 10, errors)) for c in range(4)], errors)
    with Memory(db, embedder="hash") as mem:
        assert mem.store.steps.count("shared") == 40
        _order_kept(mem, "shared", 4, 10)


def test_a_named_step_that_holds_other_content_is_a_conflict(hash_memory):
    from compassmem.errors import StepConflict

    hash_memory.add(["first"], namespace="n", step=3)
    with pytest.raises(StepConflict, match="already ingested with different content") as info:
        hash_memory.add(["second"], namespace="n", step=3)
    assert not info.value.retryable
    assert hash_memory.add(["second"], namespace="n").step == 4


def _open_at_once(db: str, barrier, errors) -> None:
    from compassmem.store import open_store

    try:
        barrier.wait(timeout=120)
        store = open_store(db)
        store.meta.set(f"opened/{mp.current_process().name}", "yes")
        store.close()
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("n", [100])
def test_processes_opening_one_new_database_at_once_all_succeed(db_factory, n):
    """The schema of a new database is made inside one write transaction: 100 processes (16 on PostgreSQL,
    whose server allows 100 connections in all) released at the same moment on a file that does not exist
    yet all open it (the bug: 'UNIQUE constraint failed: meta.key' for 2 of 100)."""
    db = db_factory()
    n = n if "://" not in db else 16
    ctx = mp.get_context("fork")
    barrier, errors = ctx.Barrier(n), ctx.Queue()
    _run_all([ctx.Process(target=_open_at_once, args=(db, barrier, errors)) for _ in range(n)], errors)
    from compassmem.store import open_store

    store = open_store(db)
    assert len(store.meta.items("opened/")) == n
    store.close()


def test_a_topic_relabelled_by_keywords_later_in_the_step_is_not_sent_to_the_model():
    from compassmem.construct.topics import DeferredLabels
    from compassmem.models import Event

    class Model:
        def label(self, events):
            return "model label"

    namer = DeferredLabels(Model())
    first = Event(id="e1.0", namespace="n", step=1, summary="Ana bakes bread", observation_ids=["a"])
    second = Event(id="e1.1", namespace="n", step=1, summary="Ben rides bicycles", observation_ids=["b"])
    namer.label("t0", [first])
    namer.label("t1", [first])
    namer.label("t0", [second], model=False)  # a re-clustering past its cap names t0 by keywords
    assert list(namer.wanted) == ["t1"]
