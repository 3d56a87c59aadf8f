"""store/row_cache.py: what a store keeps between asks, and when it forgets it."""

from __future__ import annotations

from compassmem.store.row_cache import ReadCache


def _reader(log):
    def read(keys):
        log.append(list(keys))
        return {k: k * 10 for k in keys}
    return read


def test_reads_only_what_it_does_not_hold_while_the_state_is_the_same():
    cache, log = ReadCache(), []
    assert cache.fetch(1, "n", "k", [1, 2, 2], _reader(log)) == {1: 10, 2: 20}
    assert cache.fetch(1, "n", "k", [2, 3], _reader(log)) == {2: 20, 3: 30}
    assert log == [[1, 2], [3]]
    assert cache.fetch(1, "n", "other kind", [2], _reader(log)) == {2: 20} and log[-1] == [2]


def test_a_new_state_a_clear_or_an_unknown_state_reads_again():
    cache, log = ReadCache(), []
    cache.fetch(1, "n", "k", [1], _reader(log))
    cache.fetch(2, "n", "k", [1], _reader(log))
    cache.clear()
    cache.fetch(2, "n", "k", [1], _reader(log))
    cache.fetch(None, "n", "k", [1], _reader(log))
    cache.fetch(None, "n", "k", [1], _reader(log))
    assert log == [[1]] * 5


def test_it_starts_over_beyond_its_limit_and_still_answers():
    cache, log = ReadCache(limit=3), []
    assert cache.fetch(1, "n", "k", [1, 2], _reader(log)) == {1: 10, 2: 20}
    assert cache.fetch(1, "n", "k", [1, 3, 4], _reader(log)) == {1: 10, 3: 30, 4: 40}  # 1 kept, 3 and 4 overflow
    assert cache.fetch(1, "n", "k", [1, 3], _reader(log)) == {1: 10, 3: 30}
    assert log == [[1, 2], [3, 4], [1]]


def test_rows_read_under_an_older_state_are_not_kept_for_a_newer_one():
    cache, log = ReadCache(), []

    def racing(keys):  # another caller sees a newer state while this one reads
        cache.fetch(2, "n", "k", [9], _reader(log))
        return {k: "old" for k in keys}

    assert cache.fetch(1, "n", "k", [1], racing) == {1: "old"}
    assert cache.fetch(2, "n", "k", [1], _reader(log)) == {1: 10}


def test_a_namespace_that_changes_leaves_what_is_kept_of_the_others():
    cache, log = ReadCache(), []
    cache.fetch(1, "a", "k", [1], _reader(log))
    cache.fetch(1, "b", "k", [1], _reader(log))
    cache.fetch(2, "b", "k", [1], _reader(log))  # b was written to: read again
    cache.fetch(1, "a", "k", [1], _reader(log))  # a was not: kept
    assert log == [[1], [1], [1]]
    cache.fetch(1, "b", "k", [1], _reader(log))  # an older state of b is a change too, never served from 2's rows
    assert log == [[1]] * 4


def _turn(i: str, text: str) -> dict:
    return {"id": i, "speaker": "Ana", "text": text}


def test_a_store_keeps_a_namespace_while_another_is_written_and_sees_every_commit(db_factory):
    from compassmem import Memory

    blocks = ("derived by event", "event blocks")
    db = db_factory()
    mem = Memory(db, embedder="hash")
    mem.add([_turn("x1", "I adopted a puppy named Luna.")], namespace="x", step=1)
    mem.add([_turn("y1", "My sister plays the cello.")], namespace="y", step=1)
    mem.search("What is the puppy called?", "x")
    assert mem.store._reads.holds("x", blocks)
    assert not any(mem.store._reads.holds("x", rows) for rows in ("events", "observations", "relations"))  # not twice
    mem.add([_turn("y2", "She plays in an orchestra now.")], namespace="y", step=2)
    assert mem.store._reads.holds("x", blocks)  # another namespace's write leaves x's blocks
    other = Memory(db, embedder="hash")  # another connection writes to x itself
    other.add([_turn("x2", "I moved to Porto with Luna in spring.")], namespace="x", step=2)
    hits = mem.search("Where did Ana move with Luna?", "x")
    assert any(o.id == "x2" for h in hits for o in h.observations)
    mem.delete_all("x")  # deleted and made again: the counter never goes back, nothing old is served
    assert not mem.store.sql.rows("SELECT 1 FROM namespace_changes WHERE namespace='x'")  # nor is its name kept
    mem.add([_turn("x3", "I bought a bicycle.")], namespace="x", step=1)
    assert {o.id for h in mem.search("What did Ana buy?", "x") for o in h.observations} == {"x3"}


def test_a_write_drops_only_what_it_touched_of_its_own_namespace(db_factory):
    from compassmem import Memory
    from compassmem.search.blocks import KIND

    mem = Memory(db_factory(), embedder="hash")
    for step in range(1, 4):
        mem.add([_turn(f"s{step}", f"Step {step}: I planted {step} roses in the garden.")], namespace="x", step=step)
    before = set(mem.graph("x").ids)
    mem.search("How many roses?", "x")
    def kept() -> set[str]:
        with mem.store.snapshot():  # PostgreSQL keeps what is read inside one
            return {e for e in before if mem.store.derived("x", KIND, [e], lambda ids: {i: None for i in ids},
                                                            by_event=True)[e] is not None}
    assert kept() == before
    last = mem.store.sql.rows("SELECT MAX(seq) FROM changes")[0][0]
    mem.add([_turn("s4", "My cat sleeps all day.")], namespace="x", step=4)  # a new event, far from the roses
    touched = {r[0] for r in mem.store.sql.rows("SELECT DISTINCT event FROM changes WHERE seq > ?", (last,)) if r[0]}
    assert kept() == before - touched and kept()  # the events the step did not touch are still kept


WORDS = ["Luna", "puppy", "Porto", "cello", "bike", "race", "garden", "tea", "exam", "piano"]


def test_kept_reads_never_differ_from_a_fresh_stores(db_factory):
    """Random writes across two namespaces (adds, edits, deletions, a namespace deleted and made again),
    each followed by asks and searches in both: a memory that keeps what it read must answer exactly as one
    opened fresh on the same file, which keeps nothing yet. Hypothesis picks the sequences."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from compassmem import Memory

    op = st.tuples(st.sampled_from(["add", "add", "update", "delete", "drop"]), st.sampled_from(["a", "b"]),
                   st.lists(st.sampled_from(WORDS), min_size=2, max_size=5))

    @settings(max_examples=8, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(op, min_size=3, max_size=8))
    def run(ops):
        db = db_factory()
        mem, counter = Memory(db, embedder="hash"), iter(range(10**6))
        try:
            _replay(mem, db, ops, counter)
        finally:  # a PostgreSQL server allows ~100 connections: a failing example must not hold its pools
            mem.close()

    run()


def _replay(mem, db, ops, counter) -> None:
    from compassmem import Memory

    for kind, ns, words in ops:
        ids = [o.id for o in mem.store.observations(ns)] if mem.store.has_namespace(ns) else []
        if kind == "add" or not ids:
            mem.add([{"id": f"t{next(counter)}", "speaker": "Ana", "text": f"I talked about {' and '.join(words)}."}
                     for _ in range(2)], namespace=ns)
        elif kind == "update":
            mem.update(ids[-1], f"Now it is {' '.join(words)}.", ns)
        elif kind == "delete":
            mem.delete(ids[0], ns)
        else:
            mem.delete_all(ns)
            continue
        fresh = Memory(db, embedder="hash")
        try:
            for name in ("a", "b"):
                if not mem.store.has_namespace(name):
                    continue
                q = f"What about the {words[0]}?"
                kept, new = mem.ask(q, name), fresh.ask(q, name)
                assert (kept.answer, kept.ranking) == (new.answer, new.ranking)
                assert [(h.event_id, h.score) for h in mem.search(q, name)] == \
                       [(h.event_id, h.score) for h in fresh.search(q, name)]
        finally:
            fresh.close()


def test_the_change_log_is_pruned_and_a_cache_older_than_it_reads_everything_again(tmp_path, monkeypatch):
    import compassmem.store.changes as changes
    from compassmem import Memory

    monkeypatch.setattr(changes, "CHANGES_KEPT", 4)
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add([_turn("a1", "I planted roses.")], namespace="x")
    old = mem.store._state("x")
    for i in range(5):
        mem.add([_turn(f"b{i}", f"Then I planted {i} tulips.")], namespace="x")
    low = int(mem.store.meta.get("changes_pruned_through"))
    assert low > old and mem.store._rows("SELECT COUNT(*) FROM changes")[0][0] <= 6
    assert mem.store._changed("x", old, mem.store._state("x")) is None  # older than the log: unknown
    assert mem.store._changed("x", mem.store._state("x") - 1, mem.store._state("x")) is not None
