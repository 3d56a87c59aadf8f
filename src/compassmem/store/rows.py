"""What every backend shares: the column lists, rows → models, and the per-kind protocol calls expressed
through a backend's own `_table_matrix` and `_search`. Both stores select the same columns in the same
order, so one converter serves both."""

from __future__ import annotations

import json

import numpy as np
from pydantic import BaseModel

from ..models import Event, EventTime, Observation, Relation

_FIELDS_SET: dict[type, set[str]] = {}
_setattr = object.__setattr__


def trusted(cls: type[BaseModel], fields: dict) -> BaseModel:
    """An instance from values that were validated when they were written (rows read back from the
    store), without validating again: a search reads ~1,000 rows per ask, and pydantic's
    `model_construct` was a quarter of its time. `fields` must hold every field. A frozen model's
    instances share one fields-set (nothing can add to it); a mutable one gets its own."""
    obj = cls.__new__(cls)
    _setattr(obj, "__dict__", fields)
    if cls.model_config.get("frozen"):
        shared = _FIELDS_SET.get(cls)
        if shared is None:
            shared = _FIELDS_SET[cls] = set(cls.model_fields)
        _setattr(obj, "__pydantic_fields_set__", shared)
    else:
        _setattr(obj, "__pydantic_fields_set__", set(fields))
    _setattr(obj, "__pydantic_extra__", None)
    _setattr(obj, "__pydantic_private__", None)
    return obj


OBS_COLS = "namespace,id,step,seq,speaker,text,time,date,meta,ingested_at"
EVENT_COLS = "namespace,id,step,summary,participants,time,observation_ids,topic_id,history"
REL_COLS = "namespace,id,source,target,type,evidence,origin,confidence,step"
KINDS = {"observations": ("observations", "embedding"), "events": ("events", "embedding"),
         "topics": ("topics", "centroid")}


def observation(r: tuple) -> Observation:
    return trusted(Observation, {"id": r[1], "namespace": r[0], "step": r[2], "seq": r[3], "speaker": r[4],
                                 "text": r[5], "time": r[6], "date": r[7],
                                 "meta": json.loads(r[8]) if r[8] != "{}" else {}, "ingested_at": r[9]})


_TIME_FIELDS = tuple(EventTime.model_fields)


def _list(text: str) -> list:
    return json.loads(text) if text != "[]" else []  # most events were never fused: no history to parse


def event_fields(r: tuple) -> dict:
    """An event row's fields, decoded (the JSON columns parsed): what event_from builds Events from."""
    t = json.loads(r[5])
    return {"id": r[1], "namespace": r[0], "step": r[2], "summary": r[3], "participants": _list(r[4]),
            "time": {f: t.get(f) for f in _TIME_FIELDS}, "observation_ids": json.loads(r[6]), "topic_id": r[7],
            "history": _list(r[8])}


def event_from(fields: dict) -> Event:
    """A new Event of decoded fields, its lists and time its own: fields kept between asks
    (store/row_cache.py) are never shared with a caller that changes its Event."""
    return trusted(Event, {**fields, "participants": list(fields["participants"]),
                           "time": trusted(EventTime, dict(fields["time"])),
                           "observation_ids": list(fields["observation_ids"]), "history": list(fields["history"])})


def event(r: tuple) -> Event:
    return event_from(event_fields(r))


def relation_fields(r: tuple) -> dict:
    return {"id": r[1], "namespace": r[0], "source": r[2], "target": r[3], "type": r[4], "evidence": _list(r[5]),
            "origin": r[6], "confidence": r[7], "step": r[8]}


def relation_from(fields: dict) -> Relation:
    """A new Relation of decoded fields (see event_from)."""
    return trusted(Relation, {**fields, "evidence": list(fields["evidence"])})


def relation(r: tuple) -> Relation:
    return relation_from(relation_fields(r))


class KindCalls:
    """The protocol's per-kind calls, for a backend with an `sql` executor that defines _matrix_of (its
    stored vectors → a normalised matrix) and _search."""

    def _table_matrix(self, namespace: str, kind: str) -> tuple[list[str], np.ndarray]:
        table, col = KINDS[kind]
        rows = self.sql.rows(f"SELECT id, {col} FROM {table} WHERE namespace=? AND {col} IS NOT NULL ORDER BY rowid",
                             (namespace,))
        return [r[0] for r in rows], self._matrix_of([r[1] for r in rows])

    def observation_vectors(self, namespace: str, ids: list[str]) -> np.ndarray:
        """Normalised rows for the given observation ids, in order (zeros for an id without a vector)."""
        found: dict[str, object] = {}
        for chunk in self.sql.chunks(list(dict.fromkeys(ids))):
            where, args = self.sql.any_of("id", chunk)
            found.update(self.sql.rows(f"SELECT id, embedding FROM observations WHERE namespace=? AND {where}",
                                       (namespace, *args)))
        return self._matrix_of([found.get(i) for i in ids])

    def event_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        """Every event's vector: re-clustering reads it (on a geometric schedule); search never does."""
        return self._table_matrix(namespace, "events")

    def observation_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        return self._table_matrix(namespace, "observations")

    def topic_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        return self._table_matrix(namespace, "topics")

    def search_events(self, namespace: str, query: np.ndarray, k: int, exact: bool = True) -> list[tuple[str, float]]:
        return self._search(namespace, "events", query, k, exact)

    def search_observations(self, namespace: str, query: np.ndarray, k: int,
                            exact: bool = True) -> list[tuple[str, float]]:
        return self._search(namespace, "observations", query, k, exact)

    def search_topics(self, namespace: str, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        return self._search(namespace, "topics", query, k)
