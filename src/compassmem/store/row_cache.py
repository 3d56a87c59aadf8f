"""Rows a search reads on every ask, kept between asks while the database does not change.

An ask loads the ~200 events nearest its question with all of their observations and relations; the
next ask of the same memory loads mostly the same ones. Reading and decoding them again was 7 of an
ask's 19 ms at 1 K events (docs/benchmarks.md, Scale). A backend that can say cheaply whether a
namespace changed keeps what it read of it here (its `_state(namespace)`: the namespace's change
counter, which triggers on its tables raise with every write any connection makes; PostgreSQL reads
it inside the ask's snapshot, store/changes.py). A change empties what was kept of that namespace only
(one tenant's writes leave another's asks fast) and, as the change log names the events a write
touched, keeps what is keyed by the other events. The state must be read before the rows it keys, so a
commit between the two can only empty the cache once too often, never serve an old row.

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


Changed = Callable[[str, Hashable, Hashable], "set[str] | frozenset[str] | None"]


class ReadCache:
    """Per namespace, per kind (what: "events", ("derived", "event blocks")), key → value, valid for one
    state of that namespace. Thread-safe; its lock is never held while `read` or `changed` runs (they take
    the store's).

    `changed(namespace, old state, new state)`: the events written to in between, or None when the
    backend cannot say (then everything kept of the namespace is read again). Kinds in `by_event` (a
    predicate) are keyed by event id: of those, a change drops only the touched events' entries."""

    def __init__(self, limit: int = LIMIT, changed: Changed | None = None,
                 by_event: Callable[[Hashable], bool] = lambda kind: False) -> None:
        self.limit = limit
        self._changed = changed
        self._by_event = by_event
        self._lock = threading.Lock()
        self._spaces: dict[str, tuple[Hashable, dict[Hashable, dict[Hashable, object]]]] = {}  # ns -> (state, kinds)
        self._size = 0

    def fetch(self, state: Hashable, namespace: str, kind: Hashable, keys: Iterable[Hashable],
              read: Callable[[list], dict[Hashable, V]]) -> dict[Hashable, V]:
        """The value of every key: kept ones from the cache, the others from `read(missing keys)` (which
        must return a value for each, an empty one for a key without rows), kept for next time. `state`:
        the namespace's state read before anything `read` returns; None means unknown (nothing kept)."""
        keys = list(dict.fromkeys(keys))
        if state is None:
            return read(keys) if keys else {}
        with self._lock:
            old = self._spaces.get(namespace)
        touched = None
        if old is not None and old[0] != state and self._changed is not None and any(self._by_event(k) for k in old[1]):
            touched = self._changed(namespace, old[0], state)
        with self._lock:
            space = self._spaces.get(namespace)
            if space is None or space[0] != state:  # the namespace changed: what it touched is gone
                survivors: dict[Hashable, dict[Hashable, object]] = {}
                if space is not None and space is old and touched is not None:
                    survivors = {k: {e: v for e, v in d.items() if e not in touched}
                                 for k, d in space[1].items() if self._by_event(k)}
                self._size += sum(len(d) for d in survivors.values()) - (sum(len(d) for d in space[1].values()) if space else 0)
                space = self._spaces[namespace] = (state, survivors)
            known = space[1].setdefault(kind, {})
            kept = {k: known[k] for k in keys if k in known}
        missing = [k for k in keys if k not in kept]
        fresh = read(missing) if missing else {}
        with self._lock:
            space = self._spaces.get(namespace)
            if fresh and space is not None and space[0] == state:  # another caller may have seen a newer state
                if self._size + len(fresh) > self.limit:
                    self._empty()
                    space = self._spaces[namespace] = (state, {})
                space[1].setdefault(kind, {}).update(fresh)
                self._size += len(fresh)
        return {k: kept[k] if k in kept else fresh[k] for k in keys}

    def holds(self, namespace: str, kind: Hashable) -> bool:
        """Whether anything of this kind is kept for the namespace (tests, diagnostics)."""
        with self._lock:
            space = self._spaces.get(namespace)
            return bool(space and space[1].get(kind))

    def _empty(self) -> None:
        self._spaces.clear()
        self._size = 0

    def clear(self) -> None:
        """Forget everything: after a rollback, whose rows a read inside the transaction may have kept
        under a state the rollback takes back."""
        with self._lock:
            self._empty()
