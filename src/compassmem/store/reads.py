"""What a search reads on every ask — the candidate events, their observations with vectors, and the
relations touching them — written once for every backend over its `sql` executor, and kept between asks
(store/row_cache.py) while the backend's state says nothing was committed since."""

from __future__ import annotations

from typing import Any, Callable, Hashable

import numpy as np

from ..models import Event, Observation, Relation
from . import rows as records
from .row_cache import ReadCache
from .rows import EVENT_COLS, OBS_COLS, REL_COLS
from .sql import SQL


def stack(vectors: list[bytes | None]) -> np.ndarray:
    """Float32 vectors kept as bytes as one writable matrix, zero rows where there is none: in the usual
    case one join and one reshape."""
    dim = next((len(v) // 4 for v in vectors if v is not None), 0)
    if vectors and dim and all(v is not None for v in vectors):
        return np.frombuffer(bytearray().join(vectors), np.float32).reshape(len(vectors), dim)  # writable
    out = np.zeros((len(vectors), dim), np.float32)
    for i, v in enumerate(vectors):
        if v is not None:
            out[i] = np.frombuffer(v, np.float32)
    return out


# what a search keeps that is keyed by event id and depends only on that event's rows (store/row_cache.py)
BY_EVENT = frozenset({"observations", "events", "relations", ("derived by event",)})


def by_event(kind) -> bool:
    return kind in BY_EVENT or (isinstance(kind, tuple) and kind[:1] in BY_EVENT)


class SearchReads:
    """Mixed into each store. Needs from its host: `sql`, `_reads` (a ReadCache), `_state(namespace)` (the
    database's state, read before the rows it keys; None: unknown, keep nothing) and `_matrix_of`
    (stored vectors → a normalised matrix)."""

    sql: SQL
    _reads: ReadCache
    _state: Callable[[], Hashable | None]
    _matrix_of: Callable[[list], np.ndarray]

    def _vectors_of(self, stored: list) -> list[bytes | None]:
        """Each stored vector normalised, as bytes (immutable: kept between asks), None where none is
        stored; normalised in one batch."""
        mat = self._matrix_of(stored)
        return [mat[i].tobytes() if v is not None else None for i, v in enumerate(stored)]

    def _where_in(self, sql: str, namespace: str, column: str, values: list) -> list[tuple]:
        """Rows of `sql` (its `{cond}`: `column` is one of `values`) for one namespace, in chunks."""
        out: list[tuple] = []
        for chunk in self.sql.chunks(list(values)):
            cond, args = self.sql.any_of(column, chunk)
            out += self.sql.rows(sql.format(cond=cond), (namespace, *args))
        return out

    def derived(self, namespace: str, kind: str, keys: list[str],
                work_out: Callable[[list[str]], dict[str, Any]], by_event: bool = False) -> dict[str, Any]:
        """What a caller works out from this namespace's rows, per key, kept like the rows themselves:
        `work_out(keys not kept)` gives a value for each; kept values are shared between callers, so
        they must never be changed. `by_event`: the keys are event ids and a value depends only on its
        event's rows (the event, its observations, the relations touching it), so a write drops only the
        values of the events it touched."""
        what = ("derived by event" if by_event else "derived", kind)
        return self._reads.fetch(self._state(namespace), namespace, what, keys, work_out)

    def _fetch(self, keep: bool, namespace: str, kind: str, keys: list[str],
               read: Callable[[list], dict[Hashable, Any]]) -> dict[Hashable, Any]:
        """Through the read cache, or (`keep` False: the caller keeps what it makes of them) read as they are."""
        if not keep:
            return read(list(dict.fromkeys(keys))) if keys else {}
        return self._reads.fetch(self._state(namespace), namespace, kind, keys, read)

    def observations_of(self, namespace: str, event_ids: list[str], keep: bool = True) -> tuple[list[Observation], np.ndarray]:
        """The observations owned by these events, in stream order, with their normalised vectors (zero
        rows where none is stored): what a search loads for its candidate events, and nothing more."""
        def read(events: list[str]) -> dict[str, list[tuple]]:
            out: dict[str, list[tuple]] = {e: [] for e in events}
            rows = self._where_in(f"SELECT {OBS_COLS}, embedding, event FROM observations WHERE namespace=? AND {{cond}}",
                                  namespace, "event", events)
            for r, vec in zip(rows, self._vectors_of([r[10] for r in rows])):
                out[r[11]].append((r[2], r[3], records.observation(r), vec))  # Observation is frozen
            return out

        found = self._fetch(keep, namespace, "observations", event_ids, read)
        rows = sorted((r for rs in found.values() for r in rs), key=lambda r: (r[0], r[1]))
        return [r[2] for r in rows], stack([r[3] for r in rows])

    def get_events(self, namespace: str, ids: list[str], keep: bool = True) -> tuple[list[Event], np.ndarray]:
        """These events (unknown ids skipped) in the order asked, with their normalised vectors."""
        def read(wanted: list[str]) -> dict[str, tuple | None]:
            rows = self._where_in(f"SELECT {EVENT_COLS}, embedding FROM events WHERE namespace=? AND {{cond}}",
                                  namespace, "id", wanted)
            got = {r[1]: (records.event_fields(r), vec) for r, vec in zip(rows, self._vectors_of([r[9] for r in rows]))}
            return {i: got.get(i) for i in wanted}

        rows = self._fetch(keep, namespace, "events", ids, read)
        found = [r for r in rows.values() if r is not None]
        return [records.event_from(r[0]) for r in found], stack([r[1] for r in found])

    def relations_of(self, namespace: str, event_ids: list[str], within: bool = False,
                     keep: bool = True) -> list[Relation]:
        """Relations touching these events (both ends among them when `within`), in stored order; read by
        source and by target per event."""
        def read(events: list[str]) -> dict[str, list[tuple]]:
            out: dict[str, list[tuple]] = {e: [] for e in events}
            for end in ("source", "target"):
                for r in self._where_in(f"SELECT rowid, {REL_COLS} FROM relations WHERE namespace=? AND {{cond}}",
                                        namespace, end, events):
                    out[r[3] if end == "source" else r[4]].append((r[0], records.relation_fields(r[1:])))
            return out

        touching = self._fetch(keep, namespace, "relations", event_ids, read)
        wanted = set(touching)
        rows = {r[0]: r[1] for rs in touching.values() for r in rs  # by rowid: both ends may match
                if not within or (r[1]["source"] in wanted and r[1]["target"] in wanted)}
        return [records.relation_from(rows[k]) for k in sorted(rows)]
