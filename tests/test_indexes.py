"""The store's own indexes (issue #10): the vector indexes and the full-text index agree with the tables,
an index kept up incrementally answers like one rebuilt from scratch, and an older database upgrades."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from compassmem import Memory
from compassmem.store import SQLiteStore
from compassmem.store.sqlite_schema import fts_name
from compassmem.store.vectors import IndexPolicy, base_files

from test_concurrency import _steps

SMALL = IndexPolicy(ann_min_rows=40, delta_min_rows=8, delta_fraction=0.05)


def _build(db, policy=SMALL, n_steps=10, namespace="k") -> None:
    with Memory(store=SQLiteStore(db, index_policy=policy), embedder="hash") as mem:
        for step, obs, when in _steps(namespace, n_steps=n_steps, turns=8):
            mem.add(obs, namespace=namespace, step=step, world_time=when)


def _exact(store: SQLiteStore, namespace: str, kind: str, q: np.ndarray, k: int) -> list[str]:
    ids, mat = store.observation_matrix(namespace) if kind == "observations" else store.event_matrix(namespace)
    sims = mat @ (q / np.linalg.norm(q))
    return [ids[i] for i in np.lexsort((np.arange(len(ids)), -sims))[:k]]


def _built_store(tmp_path) -> tuple[SQLiteStore, str]:
    """A store over a 10-step build with the small policy, indexes refreshed; and its index token."""
    db = str(tmp_path / "m.db")
    _build(db)
    store = SQLiteStore(db, index_policy=SMALL)
    store.refresh_indexes("k")
    return store, store.meta.get("index_token/k")


def test_base_files_are_written_and_the_indexes_agree_with_the_tables(tmp_path):
    store, token = _built_store(tmp_path)
    assert base_files(store.index_dir, token, "observations"), "80 observations > 40: a base file is expected"
    assert store.check_indexes("k") == []
    store.close()


def _queries(store: SQLiteStore, namespace: str = "k") -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    ids, mat = store.observation_matrix(namespace)
    return [mat[i] + 0.3 * rng.standard_normal(mat.shape[1]) for i in range(0, len(ids), 9)]


def test_an_index_kept_up_step_by_step_equals_one_rebuilt_from_the_tables(tmp_path):
    exact = IndexPolicy(ann_min_rows=10**9)
    db = str(tmp_path / "m.db")
    store = SQLiteStore(db, index_policy=exact)
    with Memory(store=store, embedder="hash") as mem:
        incremental = []
        for step, obs, when in _steps("k", n_steps=10, turns=8):
            mem.add(obs, namespace="k", step=step, world_time=when)
            incremental = [store.search_observations("k", q, 5) for q in _queries(store)]  # replays the log each step
            events_inc = [store.search_events("k", q, 5) for q in _queries(store)]
        rebuilt_store = SQLiteStore(db, index_policy=exact)
        assert [rebuilt_store.search_observations("k", q, 5) for q in _queries(store)] == incremental
        assert [rebuilt_store.search_events("k", q, 5) for q in _queries(store)] == events_inc
        assert incremental[0][0][0] == _exact(store, "k", "observations", _queries(store)[0], 1)[0]
        rebuilt_store.close()


def test_the_ann_path_holds_the_same_rows_and_finds_what_exact_search_finds(tmp_path):
    db = str(tmp_path / "m.db")
    _build(db)  # base files written along the way, deltas replayed on top
    live = SQLiteStore(db, index_policy=SMALL)
    queries = _queries(live)
    ann = [[i for i, _ in live.search_observations("k", q, 5)] for q in queries]
    exact = [_exact(live, "k", "observations", q, 5) for q in queries]
    assert live.check_indexes("k") == []
    recall = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(ann, exact)])
    assert recall >= 0.98, f"ANN recall@5 {recall:.2f} against exact search"  # threaded builds: 0.93-0.98
    live.close()


def test_scores_returned_by_vector_search_are_exact(tmp_path):
    db = str(tmp_path / "m.db")
    _build(db)
    store = SQLiteStore(db, index_policy=SMALL)
    q = store.event_matrix("k")[1][3]
    ids, mat = store.event_matrix("k")
    want = dict(zip(ids, (mat @ q).tolist()))
    for eid, sim in store.search_events("k", q, 5):
        assert sim == pytest.approx(want[eid], abs=1e-5)
    store.close()


def test_lexical_search_is_bm25_over_the_namespace_only(tmp_path):
    with Memory(tmp_path / "m.db", embedder="hash") as mem:
        mem.add(["Ana adopted a parrot named Kiwi", "Ben fixed his bike", "the weather was fine"], namespace="a")
        mem.add(["a parrot in another namespace"], namespace="b")
        hits = mem.store.lexical_search("a", "Who adopted the parrot?", 10)
        assert [h[0] for h in hits][:1] == [o.id for o in mem.store.observations("a") if "parrot" in o.text]
        assert all(score > 0 for _, score in hits)
        assert {o for o, _ in hits} <= {o.id for o in mem.store.observations("a")}
        assert mem.store.lexical_search("a", "the of and", 10) == []  # stopwords only: nothing to match


def test_forget_drops_the_full_text_table_and_the_index_files(tmp_path):
    store, token = _built_store(tmp_path)
    store.delete_namespace("k")
    assert not base_files(store.index_dir, token, "observations")
    assert not store._rows("SELECT 1 FROM sqlite_master WHERE name=?", (fts_name(token),))
    assert not store._rows("SELECT 1 FROM vector_log WHERE namespace='k'")
    store.close()


def test_a_version_1_database_is_upgraded_in_place(tmp_path):
    db = str(tmp_path / "old.db")
    _build(db, policy=IndexPolicy())
    with Memory(db, embedder="hash") as mem:
        before = [(h.event_id, h.score) for h in mem.search("parrot kiwi bike", "k")]
    conn = sqlite3.connect(db)  # turn it back into what CompassMem v1 wrote
    token = conn.execute("SELECT value FROM meta WHERE key='index_token/k'").fetchone()[0]
    for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")  # v4's, which read the column dropped below
    conn.execute("DROP TABLE namespace_changes")
    conn.execute("DROP TABLE changes")
    conn.commit()
    conn.executescript(f"""
        DROP TABLE "{fts_name(token)}"; DROP TABLE speakers; DROP TABLE vector_log; DROP TABLE event_history;
        DROP INDEX obs_event; DROP INDEX event_topic; ALTER TABLE observations DROP COLUMN event;
        DELETE FROM meta WHERE key LIKE 'index_token/%'; UPDATE meta SET value='1' WHERE key='schema_version';""")
    conn.close()
    store = SQLiteStore(db)
    assert store.meta.get("schema_version") == "4"
    triggers = store._rows("SELECT COUNT(*) FROM sqlite_master WHERE type='trigger' AND name LIKE '%_changes'")[0][0]
    assert triggers == 12  # v4: every write to what a search keeps raises its namespace's counter
    assert store.history.of("k", "e1.0") == []  # the v3 table exists; history starts at the upgrade
    assert store.check_indexes("k") == []
    store.close()
    with Memory(db, embedder="hash") as mem:
        assert [(h.event_id, h.score) for h in mem.search("parrot kiwi bike", "k")] == before


def _fts5(store: SQLiteStore, namespace: str, text: str, k: int) -> list[tuple[str, float]]:
    """The reference: SQLite's own bm25() over the namespace's full-text table."""
    from compassmem.text import index_terms

    fts = fts_name(store.meta.get(f"index_token/{namespace}"))
    match = " OR ".join(f'"{t}"' for t in index_terms(text))
    rows = store._rows(f'SELECT o.id, -bm25("{fts}") AS s FROM "{fts}" JOIN observations o ON o.rowid = "{fts}".rowid '
                       f'WHERE "{fts}" MATCH ? ORDER BY s DESC LIMIT ?', (match, k))
    return [(i, float(s)) for i, s in rows]


def test_the_impact_base_scores_like_fts5_and_keeps_up_with_new_rows(tmp_path):
    from compassmem.store import bm25_base as lexical

    store, token = _built_store(tmp_path)
    assert lexical.bases(store.index_dir, token), "80 observations > 40: an impact base is expected"
    lexical.remove(store.index_dir, token)  # a base built now, from all rows: its statistics are FTS5's
    store = SQLiteStore(store.path, index_policy=SMALL)
    store.refresh_indexes("k")
    for q in ["garden pottery", "violin kayak festival", "puppy and the museum concert"]:
        got, want = store.lexical_search("k", q, 10), _fts5(store, "k", q, 10)
        assert len(got) == 10 and [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-4)
        # same documents, except where scores tie at the cut
        cut = want[-1][1]
        assert {i for i, s in got if s > cut + 1e-4} == {i for i, s in want if s > cut + 1e-4}
    # rows added after the base are found through FTS5 until the next rebuild
    with Memory(store=store, embedder="hash") as mem:
        mem.add(["a zebracorn appeared at the lantern festival"], namespace="k")
        assert store.lexical_search("k", "zebracorn", 5)[0][0] == mem.store.observations("k")[-1].id
        assert store.check_indexes("k") == []


def test_forget_leaves_the_text_nowhere_and_says_what_it_removed(tmp_path):
    """The deleted text is neither in the .db nor in the -wal file (byte scans), nor in the LLM cache."""
    from compassmem.store.base import cache_namespace

    db = tmp_path / "m.db"
    marker = "Ana hid the zq-7731 lighthouse key under the blue stone"
    with Memory(db, embedder="hash") as mem:
        mem.add([marker, "Ben painted the boat", "the tide came in slowly that evening"], namespace="secret")
        mem.add(["an unrelated turn about cooking paella"], namespace="other")
        token = cache_namespace.set(("secret",))  # as an LLM call made for this namespace would
        mem.store.cache.put("k1", f'{{"summary": "{marker}"}}')
        cache_namespace.reset(token)
        mem.store.cache.put("k2", '{"summary": "kept"}')
        receipt = mem.forget("secret")
        assert receipt.verified and receipt.scanned_texts == 3
        assert receipt.removed["observations"] == 3 and receipt.removed["llm_cache"] == 1
        assert receipt.removed["events"] >= 1 and receipt.removed["full_text"] == 3
        assert mem.store.cache.get("k1") is None and mem.store.cache.get("k2") is not None
        assert mem.namespaces() == ["other"]
        for path in (db, tmp_path / "m.db-wal"):
            if path.exists():
                assert marker.encode() not in path.read_bytes(), f"the forgotten text is readable in {path.name}"


def test_a_segment_scores_its_rows_as_a_base_rebuilt_over_everything_would():
    """Segments (bm25_base.py) carry the main base's statistics plus their own, so the BM25 of a row in a
    segment is what a full rebuild would give it, and they compare with each other."""
    from compassmem.store import bm25_base

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(60)]
    docs = [(rowid, " ".join(rng.choice(words, size=int(rng.integers(3, 12))))) for rowid in range(1, 301)]
    main = bm25_base.build(docs[:200], seq=1)
    segment = bm25_base.build(docs[200:], seq=2, main=main, lo=200)
    whole = bm25_base.build(docs, seq=2)
    assert segment.lo == 200 and segment.n_docs == whole.n_docs and segment.avgdl == pytest.approx(whole.avgdl)
    for terms in (["w1"], ["w7", "w30"], ["w59", "w2", "w2"]):
        got = dict(zip(*(a.tolist() for a in segment.search(terms, 100))))
        want = {r: s for r, s in zip(*(a.tolist() for a in whole.search(terms, 300))) if r > 200}
        assert got.keys() == want.keys() and all(got[r] == pytest.approx(want[r], rel=1e-5) for r in got)


def test_rows_after_the_base_become_segments_and_the_indexes_still_agree(tmp_path):
    from compassmem.store import bm25_base

    policy = IndexPolicy(ann_min_rows=40, delta_min_rows=8, lexical_delta_fraction=0.9, lexical_segment_fraction=0.1)
    db = str(tmp_path / "m.db")
    _build(db, policy=policy, n_steps=6)
    store = SQLiteStore(db, index_policy=policy)
    store.refresh_indexes("k")
    token = store.meta.get("index_token/k")
    main_seq = bm25_base.bases(store.index_dir, token)[0][0]
    with Memory(store=store, embedder="hash") as mem:
        for step, obs, when in _steps("k", n_steps=9, turns=8)[6:]:
            mem.add(obs, namespace="k", step=step, world_time=when)
            assert store.check_indexes("k") == []
        mem.add(["a zebracorn appeared at the lantern festival"], namespace="k")
        segs = bm25_base.segments(store.index_dir, token, main_seq)
        assert bm25_base.bases(store.index_dir, token)[0][0] == main_seq, "under 90 % growth: the same main base"
        assert len(segs) >= 2, "25 new rows, a segment past every 8: segments are expected"
        assert [bm25_base.load(p).lo for _, p in segs][1:] == [bm25_base.load(p).watermark for _, p in segs][:-1]
        assert store.lexical_search("k", "zebracorn", 5)[0][0] == store.observations("k")[-1].id
        # a fresh process reads the same chain of files and answers the same
        before = store.lexical_search("k", "garden pottery violin", 10)
        again = SQLiteStore(db, index_policy=policy)
        assert again.lexical_search("k", "garden pottery violin", 10) == before
        assert again.check_indexes("k") == []
        again.close()


def test_a_process_that_opens_an_index_first_can_still_load_the_embedder_runtime():
    """usearch imported before onnxruntime crashes the process at the second import (usearch 2.26,
    onnxruntime 1.32); the store's one way in to usearch imports them in the order that works."""
    import subprocess
    import sys

    code = ("from compassmem.store.vectors import usearch_index\nusearch_index()\n"
            "import onnxruntime\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-500:]
