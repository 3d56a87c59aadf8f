"""Editing a memory (issue #11): delete and update observations with re-derivation and a receipt, event
history, search filters, whole-database export, and a property test of random edit sequences."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from compassmem import AsyncMemory, Memory
from compassmem.errors import InputError
from compassmem.memory import _working_for

SECRET = "my locker code is 4417-BRAVO"
STEP1 = [{"id": "a1", "speaker": "Ana", "text": "I adopted a beagle puppy named Luna from the shelter."},
         {"id": "a2", "speaker": "Ben", "text": "What a lovely name! How old is Luna?"},
         {"id": "a3", "speaker": "Ana", "text": f"She is ten weeks old. By the way, {SECRET}.", "meta": {"topic": "private"}}]
STEP2 = [{"id": "b1", "speaker": "Ben", "text": "I ran the Oslo marathon last weekend in under four hours."},
         {"id": "b2", "speaker": "Ana", "text": "Congratulations on the marathon, Ben!"}]


def build(path) -> Memory:
    mem = Memory(path, embedder="hash")
    mem.add(STEP1, namespace="n", world_time="8 May 2023")
    mem.add(STEP2, namespace="n", world_time="20 June 2023")
    return mem


def invariants(mem: Memory, namespace: str = "n") -> None:
    """What every edit must keep, checked from the tables."""
    store = mem.store
    obs = {o.id for o in store.observations(namespace)}
    events = store.events(namespace)
    owned = [o for e in events for o in e.observation_ids]
    assert all(e.observation_ids for e in events), "an event without a source observation"
    assert len(owned) == len(set(owned)), "an observation in two events"
    assert set(owned) == obs, "an observation outside every event, or an event citing a missing one"
    assert store.owners(namespace, sorted(obs)) == {o: e.id for e in events for o in e.observation_ids}
    ids = {e.id for e in events}
    assert all(r.source in ids and r.target in ids for r in store.relations(namespace))
    assert all(set(r.evidence) <= obs for r in store.relations(namespace))
    members = {e.topic_id for e in events if e.topic_id}
    topics = {t.id: t for t in store.topics(namespace)}
    assert members <= set(topics)
    assert store.check_indexes(namespace) == []


@pytest.fixture()
def mem(db_factory):
    """The same memory on each backend (SQLite file, PostgreSQL database)."""
    m = build(db_factory())
    yield m
    m.close()


def sqlite_files(mem: Memory) -> list[Path]:
    """The SQLite database and WAL files (none for PostgreSQL, whose receipt scans the tables instead)."""
    path = getattr(mem.store, "path", None)
    return [f for f in (Path(f"{path}"), Path(f"{path}-wal")) if path and f.exists()]


def test_delete_rederives_the_event_and_leaves_the_text_nowhere(mem):
    owner = mem.store.owners("n", ["a3"])["a3"]
    with _working_for("n"):
        mem.store.cache.put("some-request", f"a cached answer quoting {SECRET}")
    receipt = mem.delete("a3", "n")
    assert receipt.events_rederived == [owner] and receipt.events_deleted == []
    assert receipt.removed["observations"] == 1 and receipt.removed["llm_cache"] == 1
    assert receipt.verified and receipt.scanned_texts == 1
    event = mem.get(owner, "n").event
    assert "a3" not in event.observation_ids and "4417" not in event.summary
    for f in sqlite_files(mem):
        assert SECRET.encode() not in f.read_bytes() and b"4417-BRAVO" not in f.read_bytes()
    assert all(o.id != "a3" for h in mem.search("locker code 4417 BRAVO", "n") for o in h.observations)
    actions = [(h.action, h.summary is None) for h in mem.history(owner, "n")]
    assert actions == [("created", True), ("observations_deleted", False)]
    invariants(mem)


def test_the_receipt_scan_leaves_the_connection_seeing_other_writers(mem):
    """Reading the database file in-process would drop SQLite's POSIX locks and freeze the connection on
    an old snapshot (found by the service tests): the scan runs in a child process. The same check on
    PostgreSQL: another process's write is seen after an edit."""
    target = getattr(mem.store, "path", None) or mem.store.url
    mem.delete("a3", "n")
    for value in ("one", "two", "three"):
        write = f"from compassmem.store import open_store; s = open_store({target!r}); " \
                f"s.meta.set('probe', '{value}'); s.close()"
        subprocess.run([sys.executable, "-c", write], check=True, timeout=120)
        assert mem.store.meta.get("probe") == value


def test_deleting_every_source_deletes_the_event_with_its_relations_and_topic(mem):
    event = mem.get(mem.store.owners("n", ["b1"])["b1"], "n").event
    relations_before = len(mem.store.relations_of("n", [event.id]))
    receipt = mem.delete(list(event.observation_ids), "n")
    assert receipt.events_deleted == [event.id] and receipt.removed["relations"] == relations_before
    assert mem.store.get_event("n", event.id) is None
    assert [h.action for h in mem.history(event.id, "n")][-1] == "deleted"
    assert all(h.summary is None for h in mem.history(event.id, "n"))
    invariants(mem)


def test_update_rewrites_the_turn_and_its_event(mem):
    owner = mem.store.owners("n", ["b1"])["b1"]
    receipt = mem.update("b1", "I swam across Lake Bled last weekend.", "n")
    assert receipt.events_rederived == [owner] and receipt.verified
    assert mem.store.get_observations("n", ["b1"])[0].text == "I swam across Lake Bled last weekend."
    assert "Bled" in mem.get(owner, "n").event.summary and "Oslo" not in mem.get(owner, "n").event.summary
    assert all(b"Oslo marathon" not in f.read_bytes() for f in sqlite_files(mem))
    assert not mem.store.leak_scan(["Oslo marathon"])[1]
    hits = mem.search("swam lake Bled", "n", 1)
    assert hits[0].event_id == owner and hits[0].observations[0].id == "b1"
    assert [h.action for h in mem.history(owner, "n")] == ["created", "updated"]
    invariants(mem)


def test_edits_refuse_what_does_not_exist(mem):
    with pytest.raises(InputError, match="no observation 'zz'"):
        mem.delete(["a1", "zz"], "n")
    with pytest.raises(InputError, match="no observation 'zz'"):
        mem.update("zz", "text", "n")
    with pytest.raises(InputError, match="text is empty"):
        mem.update("a1", "  ", "n")
    with pytest.raises(InputError, match="no history for event 'zz'"):
        mem.history("zz", "n")
    assert mem.store.observation_count("n") == 5  # nothing half-done


def test_filters_restrict_search_and_ask_and_say_when_they_match_nothing(mem):
    by_ben = mem.search("Luna marathon", "n", filters={"speaker": "Ben"})
    assert by_ben and all(o.id in {"a2", "b1"} for h in by_ben for o in h.observations)
    june = mem.search("Luna marathon", "n", filters={"since": "2023-06-01"})
    assert {o.id for h in june for o in h.observations} <= {"b1", "b2"}
    private = mem.search("puppy", "n", filters={"meta": {"topic": "private"}})
    assert [o.id for h in private for o in h.observations] == ["a3"]
    answer = mem.ask("How old is Luna?", "n", filters={"speaker": ["Ana"], "until": "2023-05-31"})
    assert answer.evidence and set(answer.ranking) <= {"a1", "a3"}
    with pytest.raises(InputError, match=r"match no observation.*speakers are Ana, Ben"):
        mem.search("Luna", "n", filters={"speaker": "Zed"})
    with pytest.raises(InputError, match="not an ISO date"):
        mem.search("Luna", "n", filters={"since": "yesterday"})
    with pytest.raises(InputError, match="filters: colour"):
        mem.search("Luna", "n", filters={"colour": "red"})


def test_whole_database_export_round_trips_every_namespace(mem, db_factory, tmp_path):
    mem.add(["Cy planted tomatoes in the garden."], namespace="cy")
    mem.update("b1", "I swam across Lake Bled last weekend.", "n")
    first, second = tmp_path / "all1.jsonl", tmp_path / "all2.jsonl"
    mem.export(None, first)
    with Memory(db_factory(), embedder="hash") as copy:
        assert copy.import_file(first) == ["cy", "n"]
        copy.export(None, second)
        assert copy.history(copy.store.owners("n", ["b1"])["b1"], "n")[-1].action == "updated"
        invariants(copy)
    assert first.read_bytes() == second.read_bytes()


def test_async_memory_edits(tmp_path):
    async def main():
        async with AsyncMemory(tmp_path / "a.db", embedder="hash") as amem:
            await amem.add(STEP1, namespace="n")
            r1, r2 = await asyncio.gather(amem.delete("a3", "n"), amem.update("a1", "I adopted a cat.", "n"))
            owner = amem.sync.store.owners("n", ["a1"])["a1"]
            return r1, r2, await amem.history(owner, "n")
    deleted, updated, history = asyncio.run(main())
    assert deleted.verified and updated.verified and history[0].action == "created"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compassmem", *args], capture_output=True, text=True, timeout=300)


def test_cli_delete_update_history_and_filters(tmp_path):
    data = tmp_path / "obs.jsonl"
    data.write_text("\n".join(json.dumps({"namespace": "n", "step": 1, **o}) for o in STEP1))
    db = str(tmp_path / "c.db")
    assert cli("ingest", str(data), "--db", db, "--format", "jsonl", "--embedder", "hash").returncode == 0
    r = cli("search", "Luna", "--db", db, "-n", "n", "--speaker", "Ben", "--json")
    assert r.returncode == 0 and {o["id"] for h in json.loads(r.stdout) for o in h["observations"]} == {"a2"}
    r = cli("search", "Luna", "--db", db, "-n", "n", "--meta", "topic=nothing")
    assert r.returncode == 2 and "match no observation" in r.stderr
    r = cli("update", "a1", "I adopted a grey cat named Luna.", "--db", db, "-n", "n")
    assert r.returncode == 0 and "verified" in r.stdout
    r = cli("delete", "a3", "--db", db, "-n", "n", "--yes")
    assert r.returncode == 0 and "verified" in r.stdout
    assert SECRET.encode() not in Path(db).read_bytes()
    owner = json.loads(cli("list", "--db", db, "-n", "n", "--json").stdout)["items"][0]["id"]
    r = cli("history", owner, "--db", db, "-n", "n")
    assert r.returncode == 0 and "created" in r.stdout
    r = cli("delete", "nope", "--db", db, "-n", "n", "--yes")
    assert r.returncode == 2 and "no observation 'nope'" in r.stderr


# ---------------------------------------------------------------------------------------------- property
WORDS = ["beagle", "marathon", "garden", "tomatoes", "piano", "Oslo", "Luna", "recipe", "bicycle", "concert"]
turn = st.lists(st.sampled_from(WORDS), min_size=2, max_size=5).map(lambda ws: "We talked about " + " and ".join(ws) + ".")
op = st.one_of(
    st.tuples(st.just("add"), st.lists(turn, min_size=1, max_size=3)),
    st.tuples(st.just("update"), st.integers(0, 50), turn),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 50), min_size=1, max_size=3)),
    st.tuples(st.just("forget")),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=1, max_size=8))
def test_random_edit_sequences_keep_every_invariant(db_factory, ops):
    mem = Memory(db_factory(), embedder="hash")
    try:
        for action, *args in ops:
            have = sorted(o.id for o in mem.store.observations("n")) if mem.store.has_namespace("n") else []
            if action == "add":
                mem.add(args[0], namespace="n")
            elif action == "update" and have:
                mem.update(have[args[0] % len(have)], args[1], "n")
            elif action == "delete" and have:
                ids = sorted({have[i % len(have)] for i in args[0]})
                assert mem.delete(ids, "n").observation_ids == ids
            elif action == "forget" and have:
                mem.forget("n")
            if mem.store.has_namespace("n"):
                invariants(mem)
                found = {o.id for text in WORDS[:3] for h in mem.search(text, "n", 50) for o in h.observations}
                live = {o.id for o in mem.store.observations("n")}
                assert found <= live, "search returned a deleted observation"
    finally:
        mem.close()
