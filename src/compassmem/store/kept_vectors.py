"""A namespace's event vectors kept in memory across writes, brought up to date from the change log.

PostgreSQL answers an exact nearest-neighbour query by casting and comparing every row of the namespace
in SQL: about 1 ms per thousand events, for each of a construction step's ~10 fusion lookups and again
for the next step, so a 15 K-event namespace spent most of an ingest step scanning. The store's
ReadCache (row_cache.py) keeps a matrix for one namespace state only, and ingest changes the state with
every step. Here the matrix outlives the state: a newer state reads only the events the change log says
were written in between (store/changes.py), one statement for a step's dozen rows. The log says nothing
of a namespace deleted and made again by another connection (its rows go with it), so the matrix also
remembers the namespace's identity (its creation time and the database's count of namespaces deleted)
and reads everything when that differs.

Rows stay in rowid order, so ties rank as the SQL scan ranks them. Bounded: past MAX_ROWS vectors in
all, the namespace used least recently is dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Hashable

import numpy as np

MAX_ROWS = 100_000  # ~150 MB at 384 dimensions
Rows = tuple[np.ndarray, list[str], np.ndarray]  # (rowids, ids, normalised matrix), in rowid order


@dataclass(frozen=True)
class _Kept:
    state: int
    identity: Hashable
    rowids: np.ndarray
    ids: list[str]
    mat: np.ndarray


class KeptVectors:
    """Per (namespace, kind): the state it reflects, rowids, ids and the normalised matrix. Thread-safe:
    an update builds new arrays, so a caller keeps using what it was handed."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()

    def has(self, namespace: str, kind: str) -> bool:
        with self._lock:
            return (namespace, kind) in self._kept

    def get(self, namespace: str, kind: str, state: int, read_all: Callable[[], tuple[Rows, Hashable]],
            read_changed: Callable[[int, int], tuple[Rows, set[str], Hashable] | None]) -> tuple[list[str], np.ndarray]:
        """(ids, matrix) as of `state`. `read_changed(old state, state)`: the rows of the events written in
        between that still have a vector, those events' ids, and the namespace's identity; None when the
        log cannot say. `read_all()`: every row, in rowid order, and the namespace's identity."""
        key = (namespace, kind)
        with self._lock:
            old = self._kept.get(key)
            if old is not None:
                self._kept.move_to_end(key)
        if old is not None and old.state == state:
            return old.ids, old.mat
        new = self._delta(old, state, read_changed) if old is not None and state > old.state else None
        if new is None:
            (rowids, ids, mat), identity = read_all()
            new = _Kept(state, identity, np.asarray(rowids, np.int64), list(ids), mat)
        with self._lock:
            current = self._kept.get(key)
            if current is None or current.state <= state:  # another thread may have stored a newer state
                self._kept[key] = new
                self._kept.move_to_end(key)
                self._trim()
        return new.ids, new.mat

    @staticmethod
    def _delta(old: _Kept, state: int, read_changed) -> _Kept | None:
        got = read_changed(old.state, state)
        if got is None:
            return None
        (new_rowids, new_ids, new_mat), touched, identity = got
        if identity != old.identity:  # deleted and made again: the log has no rows of what it lost
            return None
        keep = np.fromiter((i not in touched for i in old.ids), bool, len(old.ids))
        rowids = np.concatenate([old.rowids[keep], np.asarray(new_rowids, np.int64)])
        ids = [i for i, k in zip(old.ids, keep) if k] + list(new_ids)
        # an empty matrix may have no columns yet: only non-empty parts are joined
        parts = [m for m in (old.mat[keep], new_mat) if len(m)]
        mat = np.concatenate(parts) if parts else old.mat[keep]
        order = np.argsort(rowids, kind="stable")
        return _Kept(state, identity, rowids[order], [ids[i] for i in order], mat[order])

    def _trim(self) -> None:
        total = sum(len(k.ids) for k in self._kept.values())
        while total > self.max_rows and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            total -= len(dropped.ids)

    def forget(self, namespace: str) -> None:
        with self._lock:
            for key in [k for k in self._kept if k[0] == namespace]:
                del self._kept[key]
