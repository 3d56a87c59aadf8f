"""Every Store backend must pass this suite (add a backend to BACKENDS)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from compassmem.errors import StoreError
from compassmem.models import Event, Observation, Relation, StepRecord, Topic
from compassmem.store import SQLiteStore


def _sqlite(tmp_path):
    return SQLiteStore(tmp_path / "store.db")


def _postgres(request, tmp_path):
    from compassmem.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_url"))


BACKENDS = {"sqlite": lambda request, tmp_path: _sqlite(tmp_path), "postgres": _postgres}


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path):
    s = BACKENDS[request.param](request, tmp_path)
    yield s
    s.close()


def _obs(ns="a", step=1, n=3):
    return [Observation(id=f"D{step}:{i}", namespace=ns, step=step, seq=i, speaker="X", text=f"turn {i}")
            for i in range(n)]


def _event(eid, ns="a", obs=("D1:0",), step=1, topic=None):
    return Event(id=eid, namespace=ns, step=step, summary=f"summary {eid}", observation_ids=list(obs), topic_id=topic)


def _vec(seed, dim=8):
    return np.random.default_rng(seed).normal(size=dim).astype(np.float32)


def test_namespaces_are_isolated(store):
    for ns in ("a", "b"):
        store.ensure_namespace(ns)
        store.add_observations(_obs(ns))
        store.put_event(_event("e1", ns), _vec(1 if ns == "a" else 2))
    assert store.namespaces() == ["a", "b"]
    assert [o.namespace for o in store.observations("a")] == ["a"] * 3
    store.delete_namespace("a")
    assert not store.has_namespace("a") and store.events("a") == [] and store.observations("a") == []
    assert len(store.events("b")) == 1


def test_observation_roundtrip_and_order(store):
    store.ensure_namespace("a")
    store.add_observations(_obs(step=2) + _obs(step=1))
    got = store.observations("a")
    assert [o.id for o in got] == ["D1:0", "D1:1", "D1:2", "D2:0", "D2:1", "D2:2"]
    assert [o.id for o in store.get_observations("a", ["D2:1", "D1:0", "missing"])] == ["D1:0", "D2:1"]


def test_utterances_are_who_said_what_of_the_ids_asked(store):
    store.ensure_namespace("a")
    store.add_observations(_obs())
    store.ensure_namespace("b")
    store.add_observations(_obs("b"))
    assert sorted(store.utterances("a", ["D1:2", "missing", "D1:0", "D1:0"])) == [("X", "turn 0"), ("X", "turn 2")]
    assert store.utterances("a", []) == []


def test_observation_vectors_by_id(store):
    store.ensure_namespace("a")
    vecs = np.stack([_vec(i) for i in range(3)])
    store.add_observations(_obs(), vecs)
    got = store.observation_vectors("a", ["D1:2", "missing", "D1:0"])
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    assert np.allclose(got[0], unit[2], atol=1e-6) and np.allclose(got[2], unit[0], atol=1e-6)
    assert not got[1].any()


def test_event_vector_search_matches_bruteforce(store):
    store.ensure_namespace("a")
    store.add_observations(_obs())
    vecs = {f"e{i}": _vec(i) for i in range(20)}
    for eid, v in vecs.items():
        store.put_event(_event(eid), v)
    q = _vec(99)
    got = store.search_events("a", q, 5)
    norm = {k: v / np.linalg.norm(v) for k, v in vecs.items()}
    expect = sorted(norm, key=lambda k: -float(norm[k] @ (q / np.linalg.norm(q))))[:5]
    assert [g[0] for g in got] == expect
    # an update replaces the row, never duplicates it
    store.put_event(_event("e0"), q)
    assert store.search_events("a", q, 1)[0][0] == "e0"
    ids, mat = store.event_matrix("a")
    assert len(ids) == 20 and mat.shape == (20, 8)


def test_relations_topics_and_membership(store):
    store.ensure_namespace("a")
    store.add_observations(_obs())
    store.put_event(_event("e1"), _vec(1))
    store.put_event(_event("e2"), _vec(2))
    store.add_relation(Relation(id="r1", namespace="a", source="e1", target="e2", type="Temporal Before"))
    assert store.relations("a")[0].type == "temporal_before"
    store.put_topic(Topic(id="t0", namespace="a", label="x", size=2), _vec(3))
    store.set_event_topics("a", {"e1": "t0", "e2": "t0"})
    assert {e.topic_id for e in store.events("a")} == {"t0"}
    assert store.event_topics("a") == {"e1": "t0", "e2": "t0"} and store.event_topics("b") == {}
    assert store.topic_matrix("a")[0] == ["t0"]
    store.delete_topics("a", ["t0"])
    assert store.topics("a") == [] and store.topic_matrix("a")[0] == []
    store.put_topics([(Topic(id=f"t{i}", namespace="a", label=f"l{i}", size=i), _vec(i)) for i in (1, 2, 3)])
    store.put_topics([(Topic(id="t2", namespace="a", label="again", size=9), _vec(4))])  # an upsert
    assert [(t.id, t.label, t.size) for t in store.topics("a")] == [("t1", "l1", 1), ("t2", "again", 9), ("t3", "l3", 3)]
    assert store.search_topics("a", _vec(4), 1)[0][0] == "t2"
    store.delete_topics("a", ["t1", "t3", "nope"])
    assert [t.id for t in store.topics("a")] == ["t2"] and store.topic_matrix("a")[0] == ["t2"]


def test_relations_of_returns_every_relation_touching_the_events(store):
    """Search expands the graph and ranks by neighbours through relations_of: every relation with either
    end in the set, each once, in stored order (SQLite once keyed its rows by namespace and returned one)."""
    store.ensure_namespace("a")
    store.ensure_namespace("b")
    store.add_observations(_obs())
    for i in range(5):
        store.put_event(_event(f"e{i}"), _vec(i))
    pairs = [("e0", "e1"), ("e1", "e2"), ("e2", "e0"), ("e3", "e4"), ("e0", "e3")]
    for i, (s, t) in enumerate(pairs):
        store.add_relation(Relation(id=f"r{i}", namespace="a", source=s, target=t, type="causal"))
    store.add_observations(_obs("b"))
    for i in range(2):
        store.put_event(_event(f"e{i}", "b"), _vec(i))
    store.add_relation(Relation(id="rb", namespace="b", source="e0", target="e1", type="causal"))
    assert [r.id for r in store.relations_of("a", ["e0", "e1"])] == ["r0", "r1", "r2", "r4"]
    assert [r.id for r in store.relations_of("a", ["e4"])] == ["r3"]
    assert [r.id for r in store.relations_of("a", ["e0", "e1", "e2", "e3", "e4"])] == [f"r{i}" for i in range(5)]
    assert store.relations_of("a", []) == [] and [r.id for r in store.relations_of("b", ["e1"])] == ["rb"]
    assert [r.id for r in store.relations_of("a", ["e0", "e1", "e2"], within=True)] == ["r0", "r1", "r2"]
    assert [r.id for r in store.relations_of("a", ["e3", "e0", "e3"], within=True)] == ["r4"]
    assert store.relations_of("a", ["e4"], within=True) == []
    assert store.relations_of("a", ["e0"])[0] == Relation(id="r0", namespace="a", source="e0", target="e1", type="causal")


def test_batched_writes_equal_one_by_one(store):
    """A construction step writes its events, relations and history in batches (put_events, add_relations,
    history.add_many): the rows must be what one call per row would leave, an observation claimed twice in a
    batch belonging to the later event, an upsert replacing the earlier row, and an empty batch a no-op."""
    store.ensure_namespace("a")
    store.add_observations(_obs(n=4))
    store.put_events([], np.zeros((0, 8), np.float32))
    store.add_relations([])
    store.history.add_many([])
    events = [_event("e1", obs=("D1:0", "D1:1")), _event("e2", obs=("D1:2",)), _event("e3", obs=("D1:1", "D1:3"))]
    store.put_events(events, np.stack([_vec(i) for i in range(3)]))
    assert [e.id for e in store.events("a")] == ["e1", "e2", "e3"]
    assert store.owners("a", ["D1:0", "D1:1", "D1:2", "D1:3"]) == {"D1:0": "e1", "D1:1": "e3", "D1:2": "e2", "D1:3": "e3"}
    found, vecs = store.get_events("a", ["e2"])
    assert found[0].summary == "summary e2" and np.allclose(vecs[0], _vec(1) / np.linalg.norm(_vec(1)), atol=1e-6)
    store.put_events([events[1].model_copy(update={"summary": "changed"})], _vec(7)[None, :])
    assert store.get_event("a", "e2").summary == "changed" and len(store.events("a")) == 3
    assert store.search_events("a", _vec(7), 1)[0][0] == "e2"
    rels = [Relation(id=f"r{i}", namespace="a", source=s, target=t, type="causal")
            for i, (s, t) in enumerate([("e1", "e2"), ("e2", "e3")])]
    store.add_relations(rels)
    store.add_relations([rels[0].model_copy(update={"type": "motivation"})])
    assert [(r.id, r.type) for r in store.relations("a")] == [("r0", "motivation"), ("r1", "causal")]
    store.history.add_many([("a", "e1", "created", 1, ["D1:0"], "x"), ("a", "e1", "merged", 2, ["D1:1"], "y")])
    assert [h.action for h in store.history.of("a", "e1")] == ["created", "merged"]


def test_transaction_rolls_back_everything(store):
    store.ensure_namespace("a")
    store.add_observations(_obs())
    store.put_event(_event("e1"), _vec(1))
    before = store.event_matrix("a")[0]
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.put_event(_event("e2"), _vec(2))
            store.steps.put(StepRecord(namespace="a", step=1, content_hash="h"))
            raise RuntimeError("crash inside a step")
    assert [e.id for e in store.events("a")] == ["e1"]
    assert store.steps.get("a", 1) is None
    assert store.event_matrix("a")[0] == before


def _search_reads(store, ns="a"):
    """What a search reads of a namespace (search/retrieve.py, GraphView.build), inside a read snapshot
    as a search reads it: stores may keep these between asks (store/row_cache.py), so each must see every
    later write."""
    ids = ["e1", "e2"]
    with store.snapshot():
        events, vecs = store.get_events(ns, ids)
        obs, _ = store.observations_of(ns, ids)
        return ([(e.id, e.summary, e.observation_ids) for e in events], [(o.id, o.text) for o in obs],
                [(r.id, r.type) for r in store.relations_of(ns, ids)],
                [(r.id, r.type) for r in store.relations_of(ns, ids, within=True)],
                [(e, round(s, 5)) for e, s in store.search_events(ns, _vec(1), 2)],
                store.lexical_search(ns, "turn", 10), np.round(vecs, 5).tolist())


def test_search_reads_see_every_write_rollback_and_other_connection(store, request, tmp_path):
    store.ensure_namespace("a")
    store.add_observations(_obs(n=4))
    store.put_event(_event("e1", obs=("D1:0", "D1:1")), _vec(1))
    store.put_event(_event("e2", obs=("D1:2",)), _vec(2))
    store.add_relation(Relation(id="r1", namespace="a", source="e1", target="e2", type="causal"))
    first = _search_reads(store)
    assert _search_reads(store) == first  # read twice: the second may come from what the store kept
    events, _ = store.get_events("a", ["e1"])
    events[0].observation_ids.append("D9:9")  # a caller changing its Event changes nobody else's
    events[0].summary = "changed by a caller"
    assert _search_reads(store) == first

    # this connection's own writes
    store.put_event(_event("e2", obs=("D1:2", "D1:3")), _vec(2))
    store.add_relation(Relation(id="r2", namespace="a", source="e2", target="e1", type="temporal"))
    store.add_observations([Observation(id="D1:9", namespace="a", step=1, seq=9, speaker="X", text="turn nine")])
    mine = _search_reads(store)
    assert "D1:9" in [oid for oid, _ in mine[5]] and "D1:9" not in [oid for oid, _ in first[5]]
    assert mine[0][1] == ("e2", "summary e2", ["D1:2", "D1:3"]) and ("D1:3", "turn 3") in mine[1]
    assert ("r2", "temporal") in mine[2] and ("r2", "temporal") in mine[3]

    # a transaction that read its own writes, then rolled back
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.put_event(_event("e1", obs=("D1:0",)), _vec(3))
            assert _search_reads(store)[0][0] == ("e1", "summary e1", ["D1:0"])
            raise RuntimeError("crash inside a step")
    assert _search_reads(store) == mine

    # another connection (another process, in real use)
    other = BACKENDS[request.node.callspec.params["store"]](request, tmp_path)
    try:
        other.put_event(Event(id="e1", namespace="a", step=1, summary="rewritten elsewhere",
                              observation_ids=["D1:0", "D1:1"]), _vec(5))
        other.add_relation(Relation(id="r3", namespace="a", source="e1", target="e2", type="motivation"))
    finally:
        other.close()
    theirs = _search_reads(store)
    assert theirs[0][0] == ("e1", "rewritten elsewhere", ["D1:0", "D1:1"]) and ("r3", "motivation") in theirs[2]
    assert theirs[4] != mine[4] and theirs[6] != mine[6]  # the new vector, in the vector search too
    assert _search_reads(store) == theirs  # read again: a store may now answer from what it kept

    # another namespace with the same event ids
    store.ensure_namespace("b")
    store.add_observations(_obs("b"))
    store.put_event(_event("e1", ns="b"), _vec(4))
    assert _search_reads(store, "b")[0] == [("e1", "summary e1", ["D1:0"])]
    assert _search_reads(store) == theirs


def test_steps_meta_and_cache(store):
    store.ensure_namespace("a")
    store.steps.put(StepRecord(namespace="a", step=3, content_hash="abc", events_new=2))
    assert store.steps.get("a", 3).events_new == 2 and store.steps.count("a") == 1
    store.meta.set("embedder", "hash")
    assert store.meta.get("embedder") == "hash" and store.meta.get("nope") is None
    store.cache.put("k", "v")
    assert store.cache.get("k") == "v" and store.cache.get("other") is None


def test_concurrent_readers(store):
    store.ensure_namespace("a")
    store.add_observations(_obs())
    for i in range(50):
        store.put_event(_event(f"e{i}"), _vec(i))
    errors = []

    def read():
        try:
            for _ in range(20):
                assert len(store.search_events("a", _vec(7), 3)) == 3
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors


def test_bad_path_and_corrupt_file(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(tmp_path / "no" / "such" / "dir.db")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(bad)


def test_bm25_is_the_same_on_every_backend(tmp_path, pg_url):
    """PostgreSQL's SQL BM25 reproduces SQLite's FTS5 bm25(): same hits, same order, same scores — also
    after texts are rewritten, observations deleted and a namespace exported and imported (PostgreSQL keeps
    each posting's length and each namespace's totals beside the rows, which must follow every write); and
    the same from the postings kept in memory as an impact base."""
    from compassmem.store.postgres import PostgresStore
    from compassmem.text import index_terms

    words = "garden tomatoes bicycle marathon piano recipe beagle puppy concert museum lake kayak".split()

    def texts(n, seed):
        r = np.random.default_rng(seed)
        return [" ".join(r.choice(words, size=int(r.integers(3, 12)))) for _ in range(n)]

    obs = [Observation(id=f"o{i}", namespace="a", step=1, seq=i, speaker="X", text=t)
           for i, t in enumerate(texts(200, 5))]
    rewritten = [o.model_copy(update={"text": t}) for o, t in zip(obs[:40], texts(40, 6))]
    stores = [SQLiteStore(tmp_path / "bm25.db"), PostgresStore(pg_url)]
    pg = stores[1]

    def same_rankings(namespace="a"):
        queries = ("beagle puppy", "marathon in the garden", "kayak lake museum concert", "piano")
        with pg.snapshot():  # the first query in SQL, the others from the postings kept as an impact base
            from_bases = [pg.lexical_search(namespace, query, 20) for query in queries]
        assert pg._reads.holds(namespace, "postings")
        for query, from_base in zip(queries, from_bases):
            lite = stores[0].lexical_search(namespace, query, 20)
            in_sql = pg._bm25(namespace, sorted(set(index_terms(query))), 20)  # the SQL path, whatever is kept
            assert [h[0] for h in lite] == [h[0] for h in in_sql] == [h[0] for h in from_base] and lite
            assert np.allclose([h[1] for h in lite], [h[1] for h in in_sql], rtol=1e-6)
            assert np.allclose([h[1] for h in lite], [h[1] for h in from_base], rtol=1e-5)
        kept = pg._q("SELECT docs, total_len FROM namespaces WHERE name=%s", (namespace,))[0]
        truth = pg._q("SELECT COUNT(*), SUM(doc_len) FROM observations WHERE namespace=%s", (namespace,))[0]
        assert tuple(kept) == tuple(truth)
        assert not pg._q("SELECT 1 FROM terms t JOIN observations o ON o.namespace = t.namespace AND o.id = t.obs_id "
                         "WHERE t.doc_len <> o.doc_len OR t.obs_rowid <> o.rowid LIMIT 1")
        assert pg.check_indexes(namespace) == []

    try:
        for s in stores:
            s.ensure_namespace("a")
            s.add_observations(obs)
        same_rankings()
        for s in stores:
            s.add_observations(rewritten)  # upserts: new lengths, same rows
            with s.transaction():
                s.delete_observations("a", [f"o{i}" for i in range(100, 130)])
        same_rankings()
        exported = [(t, {**r, "namespace": "b"} if "namespace" in r else {**r, "name": "b"})
                    for t, r in pg.export_rows("a")]
        for s in stores:
            s.import_rows(exported)
        same_rankings("b")
        assert dict(pg._q("SELECT name, docs FROM namespaces WHERE name IN ('a', 'b')")) == {"a": 170, "b": 170}
        for s in stores:
            s.delete_namespace("b")
        same_rankings()
        assert not pg._q("SELECT 1 FROM terms WHERE namespace='b'")  # no foreign key cascades them (v3)
        # the store's own check notices totals or postings that drifted from the rows
        pg._x("UPDATE namespaces SET total_len = total_len + 1 WHERE name = 'a'")
        pg._x("UPDATE terms SET doc_len = doc_len + 1 WHERE obs_id = 'o0'")
        problems = pg.check_indexes("a")
        assert len(problems) == 2 and "totals" in problems[1] and "stale length" in problems[0]
    finally:
        for s in stores:
            s.close()


def test_postgres_v1_database_migrates_to_postings_with_lengths(pg_url):
    """A database written by schema v1 (postings without lengths, no namespace totals) is upgraded in place
    when opened (through v3, which drops the postings' foreign key, and v4, the change log), and its BM25
    equals that of the same rows written by the current schema."""
    import psycopg

    from compassmem.store.postgres import PostgresStore
    from compassmem.store.postgres_schema import MIGRATIONS

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(MIGRATIONS[1])
        c.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        c.execute("INSERT INTO namespaces VALUES ('a', 'now')")
        for i, (text, n) in enumerate([("piano lesson piano", 3), ("garden piano", 2), ("lake kayak", 2)]):
            c.execute("INSERT INTO observations (namespace,id,step,seq,text,meta,ingested_at,doc_len) "
                      "VALUES ('a', %s, 1, %s, %s, '{}', 'now', %s)", (f"o{i}", i, text, n))
            for term in set(text.split()):
                c.execute("INSERT INTO terms VALUES ('a', %s, %s, %s)", (f"o{i}", term, text.split().count(term)))
        c.execute("UPDATE observations SET embedding = %s::vector WHERE id = 'o0'", (str(_vec(7, 512).tolist()),))
        c.execute("INSERT INTO meta VALUES ('vector_dim', '512')")
    store = PostgresStore(pg_url)
    try:
        assert store.meta.get("schema_version") == "4"
        assert not store._q("SELECT 1 FROM namespace_changes")  # nothing written since: no counter yet
        assert not store._q("SELECT 1 FROM pg_constraint WHERE conrelid = 'terms'::regclass AND contype = 'f'")
        assert tuple(store._q("SELECT docs, total_len FROM namespaces WHERE name='a'")[0]) == (3, 7)
        hits = store.lexical_search("a", "piano", 5)
        assert [h[0] for h in hits] == ["o0", "o1"] and hits[0][1] > hits[1][1] > 0
        v = _vec(7, 512)  # an old vector is untouched
        stored = store._q("SELECT embedding FROM observations WHERE id = 'o0'")[0][0]
        assert np.array_equal(np.asarray(stored.to_numpy(), np.float32), v)
        store.delete_observations("a", ["o2"])  # the v4 triggers log what a write touches
        assert store._q("SELECT version FROM namespace_changes WHERE namespace='a'")[0][0] > 0
    finally:
        store.close()


def test_postgres_keeps_vectors_in_their_rows_and_still_takes_wide_ones(pg_url):
    """Vectors are stored inline (an exact scan read a TOAST table per row), yet a 3,072-dimension vector
    (text-embedding-3-large), whose row cannot fit a page inline, is still stored and found."""
    from compassmem.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    try:
        storage = dict(store._q("SELECT attrelid::regclass::text, attstorage FROM pg_attribute WHERE attname IN "
                                "('embedding', 'centroid') AND attrelid::regclass::text IN ('observations', 'events', 'topics')"))
        assert storage == {"observations": "m", "events": "m", "topics": "m"}
        store.ensure_namespace("a")
        vecs = np.stack([_vec(i, dim=3072) for i in range(3)])
        store.add_observations(_obs(), vecs)
        for i in range(3):
            store.put_event(_event(f"e{i}", obs=(f"D1:{i}",)), vecs[i])
        assert store.search_events("a", vecs[1], 1)[0][0] == "e1"
        assert np.allclose(store.observation_vectors("a", ["D1:2"])[0], vecs[2] / np.linalg.norm(vecs[2]), atol=1e-6)
    finally:
        store.close()


def _pg_events(pg_url, monkeypatch, n: int):
    """A PostgreSQL store that searches approximately past 10 rows of a kind, its namespace "a" holding
    events e0 … e{n-1}."""
    from compassmem.store import postgres, postgres_index

    monkeypatch.setattr(postgres_index, "EXACT_BELOW", 10)
    store = postgres.PostgresStore(pg_url)
    store.ensure_namespace("a")
    store.add_observations(_obs())
    for i in range(n):
        store.put_event(_event(f"e{i}"), _vec(i))
    return store


def _nearest_events(store, q, n: int = 5) -> list[str]:
    """The true nearest events of namespace "a", from its whole event matrix."""
    ids, mat = store.event_matrix("a")
    return [ids[i] for i in np.argsort(-(mat @ (q / np.linalg.norm(q))), kind="stable")[:n]]


def test_postgres_builds_hnsw_once_a_namespace_is_large_and_still_finds_the_nearest(pg_url, monkeypatch):
    """Below EXACT_BELOW rows every search scans exactly and no HNSW graph is maintained; past it the first
    refresh builds a graph over the rows so far, later rows are scanned exactly until they are many enough
    for a new build, and search keeps returning the true nearest events, old rows and new alike."""
    from compassmem.store import postgres, postgres_index

    store = _pg_events(pg_url, monkeypatch, 5)
    try:
        store.refresh_indexes("a")

        def built():
            return {r[0] for r in store._q("SELECT indexname FROM pg_indexes WHERE indexname LIKE %s", ("%hnsw%",))}

        def rowid_of(event_id):
            return store._q("SELECT rowid FROM events WHERE namespace='a' AND id=%s", (event_id,))[0][0]

        def truth(q):
            return _nearest_events(store, q)

        assert store.meta.get("hnsw_upto/events") is None and not built()
        for i in range(5, 40):
            store.put_event(_event(f"e{i}"), _vec(i))
        store._counts.clear()
        store.refresh_indexes("a")
        # only the kind that is large: observations (3) and topics (0) keep no graph to maintain on every write
        first = rowid_of("e39")
        assert store.meta.get("hnsw_upto/events") == str(first) and built() == {f"events_hnsw_{first}"}
        for i in range(40, 45):  # fewer than EXACT_BELOW new rows: no new build, searched exactly
            store.put_event(_event(f"e{i}"), _vec(i))
        store.refresh_indexes("a")
        assert built() == {f"events_hnsw_{first}"}
        for q in (_vec(99), _vec(42)):  # the nearest may be new rows past the graph
            assert [e for e, _ in store.search_events("a", q, 5, exact=False)] == truth(q)
            assert [e for e, _ in store.search_events("a", q, 5)] == truth(q)
        # the ANN query is one the HNSW index can answer (a second sort key made pgvector sort every row)
        psycopg = pytest.importorskip("psycopg")
        from pgvector.psycopg import register_vector

        seen: list[str] = []
        real_execute = psycopg.Connection.execute

        def spy(self, query, params=None, **kw):
            if "ORDER BY" in str(query) and "<=>" in str(query):
                seen.append(str(query))
            return real_execute(self, query, params, **kw)

        monkeypatch.setattr(psycopg.Connection, "execute", spy)
        q = _vec(99)
        store.search_events("a", q, 5)
        monkeypatch.undo()
        monkeypatch.setattr(postgres_index, "EXACT_BELOW", 10)
        ann = [s for s in seen if "::vector(" in s]
        assert len(seen) == 2 and len(ann) == 1 and f"rowid <= {first}" in ann[0]
        with psycopg.connect(pg_url) as conn:
            register_vector(conn)
            conn.execute("SET enable_seqscan = off")
            conn.execute("SET enable_sort = off")  # only an index that yields the order can avoid a sort
            plan = conn.execute("EXPLAIN " + ann[0], ("a", q.astype(np.float32), 26), binary=True).fetchall()
        assert f"events_hnsw_{first}" in " ".join(r[0] for r in plan), plan
        # enough new rows: a build over all of them; the graph before it stays for searches that read the
        # older mark, the one before that is dropped
        for round_ in range(2):
            for i in range(45 + 10 * round_, 55 + 10 * round_):
                store.put_event(_event(f"e{i}"), _vec(i))
            store.refresh_indexes("a")
        second, third = rowid_of("e54"), rowid_of("e64")
        assert store.meta.get("hnsw_upto/events") == str(third)
        assert built() == {f"events_hnsw_{second}", f"events_hnsw_{third}"}
        for q in (_vec(99), _vec(60), _vec(3)):
            assert [e for e, _ in store.search_events("a", q, 5)] == truth(q)
        other = postgres.PostgresStore(pg_url)  # another process reads the mark from the database
        try:
            assert [e for e, _ in other.search_events("a", _vec(60), 5)] == truth(_vec(60))
        finally:
            other.close()
    finally:
        store.close()


def test_postgres_keeps_searching_a_graph_an_earlier_version_built_over_the_whole_table(pg_url, monkeypatch):
    """A database indexed before the prefix graphs has one HNSW index over all rows ("hnsw/<table>"): it is
    searched as it is, with no exact tail and no second graph built beside it."""
    from compassmem.store.postgres_schema import hnsw_index
    from compassmem.store.rows import KINDS

    store = _pg_events(pg_url, monkeypatch, 30)
    try:
        store._x(hnsw_index(*KINDS["events"], store._dim))
        store.meta.set("hnsw/events", "1")
        for i in range(30, 60):
            store.put_event(_event(f"e{i}"), _vec(i))
        store._counts.clear()
        store.refresh_indexes("a")
        names = {r[0] for r in store._q("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'events_hnsw%%'")}
        assert names == {"events_hnsw"} and store.meta.get("hnsw_upto/events") is None
        q = _vec(45)
        assert [e for e, _ in store.search_events("a", q, 5)] == _nearest_events(store, q)
    finally:
        store.close()


def test_nearest_events_follow_every_write_even_another_connections(store, request, tmp_path):
    """PostgreSQL keeps a namespace's event vectors across writes and reads only what the change log names
    (store/kept_vectors.py); whatever is written — new events, a changed vector, a deletion, the namespace
    deleted and made again by another connection — the nearest events must be a fresh store's."""
    other = BACKENDS[request.node.callspec.params["store"]](request, tmp_path)
    try:
        qs = [_vec(100 + i, 16) for i in range(4)]

        def nearest(s):
            with s.snapshot():
                return [[e for e, _ in s.search_events("a", q, 3)] for q in qs]

        def same():
            fresh = BACKENDS[request.node.callspec.params["store"]](request, tmp_path)
            try:
                assert nearest(store) == nearest(store) == nearest(fresh)  # twice: the second may be kept
            finally:
                fresh.close()

        store.ensure_namespace("a")
        store.add_observations(_obs())
        store.put_events([_event(f"e{i}") for i in range(6)], np.stack([_vec(i, 16) for i in range(6)]))
        same()
        store.put_events([_event(f"e{i}") for i in range(6, 9)], np.stack([_vec(i, 16) for i in range(6, 9)]))
        same()
        store.put_event(_event("e2"), qs[0])  # a vector changed: e2 now answers the first query
        same()
        assert nearest(store)[0][0] == "e2"
        store.delete_events("a", ["e2", "e7"])
        same()
        other.delete_namespace("a")  # another connection: this store's log says nothing of the lost rows
        other.ensure_namespace("a")
        other.add_observations(_obs())
        other.put_events([_event("e1"), _event("e30")], np.stack([_vec(1, 16), qs[1]]))
        same()
        assert nearest(store)[1][0] == "e30" and {e for r in nearest(store) for e in r} == {"e1", "e30"}
    finally:
        other.close()


def test_postgres_writes_each_turn_once_with_its_event(pg_url, monkeypatch):
    """A step writes its turns with their events already known: setting `event` afterwards rewrote every
    row (a new row version, and a new HNSW entry once the index exists), 159 ms a step at 40 K turns. No
    UPDATE of observations may touch a row while a conversation with merges is built; every turn still
    names its event."""
    psycopg = pytest.importorskip("psycopg")
    from compassmem import Memory

    touched: list[int] = []
    real_execute = psycopg.Connection.execute

    def spy(self, query, params=None, **kw):
        cur = real_execute(self, query, params, **kw)
        if str(query).lstrip().startswith("UPDATE observations"):
            touched.append(cur.rowcount)
        return cur

    monkeypatch.setattr(psycopg.Connection, "execute", spy)
    mem = Memory(pg_url, embedder="hash")
    try:
        for step in (1, 2, 3):  # the same topic every step: later drafts merge into earlier events
            mem.add([{"id": f"s{step}:{i}", "speaker": "Ana" if i % 2 else "Ben",
                      "text": f"We talked about the garden again, the tomatoes and the roses, part {i}."}
                     for i in range(6)], namespace="g", step=step)
        events = mem.store.events("g")
        assert any(len(e.observation_ids) > 6 for e in events) or len(events) < 18  # something merged
        owners = dict(mem.store.sql.rows("SELECT id, event FROM observations WHERE namespace=?", ("g",)))
        assert owners == {oid: e.id for e in events for oid in e.observation_ids}
        assert touched and not any(touched)
    finally:
        mem.close()


def test_relations_written_together_keep_order_and_the_last_values(store):
    """add_relations upserts in one batch (PostgreSQL: one statement over unnest): a relation given twice
    keeps its first place in stored order and takes its last values, as writing them one by one does."""
    store.ensure_namespace("a")
    store.add_observations(_obs())
    store.put_events([_event(f"e{i}") for i in range(3)], np.stack([_vec(i) for i in range(3)]))
    first = Relation(id="r1", namespace="a", source="e0", target="e1", type="causal", evidence=["D1:0"], step=1)
    store.add_relations([first, Relation(id="r2", namespace="a", source="e1", target="e2", type="follow_up"),
                         first.model_copy(update={"type": "motivation", "confidence": 0.25, "step": 3})])
    got = [(r.id, r.type, r.confidence, r.step, r.evidence) for r in store.relations("a")]
    assert got == [("r1", "motivation", 0.25, 3, ["D1:0"]), ("r2", "follow_up", 1.0, 0, [])]
    store.add_relations([])
    assert len(store.relations("a")) == 2


def test_an_observation_given_twice_in_one_write_keeps_its_place_and_its_last_text(store):
    """add_observations writes a batch (PostgreSQL: one statement over unnest): as writing them one by one,
    an id given twice keeps its first place and its last values, and only its last text is searchable."""
    store.ensure_namespace("a")
    one = Observation(id="D1:0", namespace="a", step=1, seq=0, speaker="X", text="violin lessons on monday")
    two = Observation(id="D1:1", namespace="a", step=1, seq=1, speaker="Y", text="the garden is full of roses")
    store.add_observations([one, two, one.model_copy(update={"text": "kayak trip on the lake"})],
                           np.stack([_vec(1, 8), _vec(2, 8), _vec(3, 8)]))
    assert [(o.id, o.text) for o in store.observations("a")] == [("D1:0", "kayak trip on the lake"),
                                                                 ("D1:1", "the garden is full of roses")]
    assert [h[0] for h in store.lexical_search("a", "kayak lake", 5)] == ["D1:0"]
    assert store.lexical_search("a", "violin", 5) == []
    assert store.search_observations("a", _vec(3, 8), 1)[0][0] == "D1:0"
