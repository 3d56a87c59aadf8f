"""KeptVectors (store/kept_vectors.py) on its own: what it reads, in which order, and what it drops."""

from __future__ import annotations

import numpy as np

from compassmem.store.kept_vectors import KeptVectors


def _row(rowid: int, eid: str) -> tuple[int, str, np.ndarray]:
    return rowid, eid, np.full(4, rowid, np.float32)


def _rows(rows: list) -> tuple[np.ndarray, list[str], np.ndarray]:
    """What a store reads: (rowids, ids, matrix)."""
    return (np.array([r[0] for r in rows], np.int64), [r[1] for r in rows],
            np.stack([r[2] for r in rows]) if rows else np.zeros((0, 0), np.float32))


def test_a_newer_state_reads_only_the_changed_rows_and_keeps_rowid_order():
    kept, reads = KeptVectors(), []

    def read_all():
        reads.append("all")
        return _rows([_row(1, "a"), _row(2, "b"), _row(5, "c")]), "made once"

    def read_changed(old, new):
        reads.append((old, new))
        return _rows([_row(2, "b"), _row(3, "d")]), {"b", "d", "gone"}, "made once"

    assert kept.get("ns", "events", 1, read_all, read_changed)[0] == ["a", "b", "c"]
    assert kept.get("ns", "events", 1, read_all, read_changed)[0] == ["a", "b", "c"]  # same state: no read
    ids, mat = kept.get("ns", "events", 2, read_all, read_changed)
    assert ids == ["a", "b", "d", "c"] and mat[:, 0].tolist() == [1, 2, 3, 5]
    assert reads == ["all", (1, 2)]


def test_a_namespace_made_again_or_a_log_that_cannot_say_reads_everything():
    kept = KeptVectors()
    rows = [_row(1, "a"), _row(2, "b")]
    kept.get("ns", "events", 1, lambda: (_rows(rows), "first"), None)
    assert kept.get("ns", "events", 2, lambda: (_rows(rows[:1]), "first"), lambda o, n: (_rows([]), set(), "first"))[0] == ["a", "b"]
    # deleted and made again elsewhere: the log names nothing that was lost
    assert kept.get("ns", "events", 3, lambda: (_rows(rows[:1]), "second"), lambda o, n: (_rows([]), set(), "second"))[0] == ["a"]
    assert kept.get("ns", "events", 4, lambda: (_rows(rows), "second"), lambda o, n: None)[0] == ["a", "b"]


def test_past_its_bound_the_namespace_used_least_recently_goes():
    kept = KeptVectors(max_rows=5)
    for ns in ("x", "y"):
        kept.get(ns, "events", 1, lambda: (_rows([_row(i, str(i)) for i in range(2)]), ns), None)
    kept.get("x", "events", 1, None, None)  # x used again: y is now the oldest
    kept.get("z", "events", 1, lambda: (_rows([_row(i, str(i)) for i in range(3)]), "z"), None)
    assert kept.has("x", "events") and kept.has("z", "events") and not kept.has("y", "events")
