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
    assert cache.fetch(1, "k", [1, 2, 2], _reader(log)) == {1: 10, 2: 20}
    assert cache.fetch(1, "k", [2, 3], _reader(log)) == {2: 20, 3: 30}
    assert log == [[1, 2], [3]]
    assert cache.fetch(1, "other kind", [2], _reader(log)) == {2: 20} and log[-1] == [2]


def test_a_new_state_a_clear_or_an_unknown_state_reads_again():
    cache, log = ReadCache(), []
    cache.fetch(1, "k", [1], _reader(log))
    cache.fetch(2, "k", [1], _reader(log))
    cache.clear()
    cache.fetch(2, "k", [1], _reader(log))
    cache.fetch(None, "k", [1], _reader(log))
    cache.fetch(None, "k", [1], _reader(log))
    assert log == [[1]] * 5


def test_it_starts_over_beyond_its_limit_and_still_answers():
    cache, log = ReadCache(limit=3), []
    assert cache.fetch(1, "k", [1, 2], _reader(log)) == {1: 10, 2: 20}
    assert cache.fetch(1, "k", [1, 3, 4], _reader(log)) == {1: 10, 3: 30, 4: 40}  # 1 kept, 3 and 4 overflow
    assert cache.fetch(1, "k", [1, 3], _reader(log)) == {1: 10, 3: 30}
    assert log == [[1, 2], [3, 4], [1]]


def test_rows_read_under_an_older_state_are_not_kept_for_a_newer_one():
    cache, log = ReadCache(), []

    def racing(keys):  # another caller sees a newer state while this one reads
        cache.fetch(2, "k", [9], _reader(log))
        return {k: "old" for k in keys}

    assert cache.fetch(1, "k", [1], racing) == {1: "old"}
    assert cache.fetch(2, "k", [1], _reader(log)) == {1: 10}
