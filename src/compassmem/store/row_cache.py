"""Rows a search reads on every ask, kept between asks while the database does not change.

An ask loads the ~100 events nearest its question with all of their observations and relations; the
next ask of the same memory loads mostly the same ones. Reading and decoding them again was 7 of an
ask's 19 ms at 1 K events (docs/benchmarks.md, Scale). A backend that can say cheaply whether anything
was committed since keeps what it read here (its `_state`: SQLite's `PRAGMA data_version` for other
connections and `total_changes` for its own; PostgreSQL's read snapshot, `pg_current_snapshot()`); any
change to the database, in any namespace, by anyone, empties the whole cache. The state must be read before the rows it keys, so a commit between
the two can only empty the cache once too often, never serve an old row.

Nothing a caller can change is shared: frozen Observations, vectors as bytes, and events' and relations'
decoded fields, from which each caller gets new objects (store/rows.py event_from, relation_from).
"""

from __future__ import annotations

import threading
from typing import Callable, Hashable, Iterable, TypeVar

V = TypeVar("V")

# entries kept in all (an event with its observations and their vectors counts one: ~10 KB at 384
# dimensions, so ~200 MB at most): beyond it the cache starts over. One ask adds ~400 entries.
LIMIT = 20_000


class ReadCache:
    """Per kind (what and which namespace: ("events", "conv-26")), key → value, valid for one database
    state. Thread-safe; its lock is never held while `read` runs (that takes the store's)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._state: Hashable = None
        self._kinds: dict[Hashable, dict[Hashable, object]] = {}
        self._size = 0

    def fetch(self, state: Hashable, kind: Hashable, keys: Iterable[Hashable],
              read: Callable[[list], dict[Hashable, V]]) -> dict[Hashable, V]:
        """The value of every key: kept ones from the cache, the others from `read(missing keys)` (which
        must return a value for each, an empty one for a key without rows), kept for next time. `state`:
        the database's state read before anything `read` returns; None means unknown (nothing kept)."""
        keys = list(dict.fromkeys(keys))
        if state is None:
            return read(keys) if keys else {}
        with self._lock:
            if state != self._state:
                self._empty()
                self._state = state
            known = self._kinds.setdefault(kind, {})
            kept = {k: known[k] for k in keys if k in known}
        missing = [k for k in keys if k not in kept]
        fresh = read(missing) if missing else {}
        with self._lock:
            if fresh and self._state == state:  # another caller may have seen a newer state meanwhile
                if self._size + len(fresh) > self.limit:
                    self._empty()
                self._kinds.setdefault(kind, {}).update(fresh)
                self._size += len(fresh)
        return {k: kept[k] if k in kept else fresh[k] for k in keys}

    def _empty(self) -> None:
        self._kinds.clear()
        self._size = 0

    def clear(self) -> None:
        """Forget everything: after a rollback, whose rows a read inside the transaction may have kept
        under a state the rollback does not change."""
        with self._lock:
            self._empty()
            self._state = None
