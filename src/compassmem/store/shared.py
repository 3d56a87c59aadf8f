"""What every backend does with the same SQL (store/sql.py spells the differences): which namespaces
exist, counts, speakers, which event owns a turn, relations, topic assignments, filters, the relations
that cite turns, and whether any text is still held. Writes that a backend's own indexes must follow
(observations, events, topic centroids) stay in the backend."""

from __future__ import annotations

import json
from typing import Callable

import numpy as np

from ..models import Event, Filters, Observation, Relation, Topic
from . import rows as records
from .rows import EVENT_COLS, OBS_COLS, REL_COLS
from .sql import SQL


class SharedSQL:
    """Mixed into each store; needs its public `sql` executor and `_vector` (a stored vector as float32)."""

    sql: SQL
    _vector: Callable[[object], np.ndarray]

    def namespaces(self) -> list[str]:
        return [r[0] for r in self.sql.rows("SELECT name FROM namespaces ORDER BY name")]

    def has_namespace(self, namespace: str) -> bool:
        return bool(self.sql.rows("SELECT 1 FROM namespaces WHERE name=?", (namespace,)))

    def observation_count(self, namespace: str) -> int:
        return int(self.sql.rows("SELECT COUNT(*) FROM observations WHERE namespace=?", (namespace,))[0][0])

    def event_count(self, namespace: str) -> int:
        return int(self.sql.rows("SELECT COUNT(*) FROM events WHERE namespace=?", (namespace,))[0][0])

    def speakers(self, namespace: str) -> list[str]:
        return [r[0] for r in self.sql.rows("SELECT name FROM speakers WHERE namespace=? ORDER BY name", (namespace,))]

    def owners(self, namespace: str, observation_ids: list[str]) -> dict[str, str]:
        """observation id → id of the event it belongs to (observations in no event are left out)."""
        out: dict[str, str] = {}
        for chunk in self.sql.chunks(list(dict.fromkeys(observation_ids))):
            where, args = self.sql.any_of("id", chunk)
            out.update((o, e) for o, e in self.sql.rows(
                f"SELECT id, event FROM observations WHERE namespace=? AND {where}", (namespace, *args)) if e is not None)
        return out

    def get_observations(self, namespace: str, ids: list[str]) -> list[Observation]:
        """These observations (unknown ids skipped), in stream order."""
        out: list[Observation] = []
        for chunk in self.sql.chunks(list(dict.fromkeys(ids))):
            where, args = self.sql.any_of("id", chunk)
            out += [records.observation(r) for r in self.sql.rows(
                f"SELECT {OBS_COLS} FROM observations WHERE namespace=? AND {where}", (namespace, *args))]
        return sorted(out, key=lambda o: (o.step, o.seq))

    def observations(self, namespace: str, step: int | None = None) -> list[Observation]:
        """A namespace's observations (or one step's), in stream order."""
        if step is None:
            rows = self.sql.rows(f"SELECT {OBS_COLS} FROM observations WHERE namespace=? ORDER BY step, seq",
                                 (namespace,))
        else:
            rows = self.sql.rows(f"SELECT {OBS_COLS} FROM observations WHERE namespace=? AND step=? ORDER BY seq",
                                 (namespace, step))
        return [records.observation(r) for r in rows]

    def get_event(self, namespace: str, event_id: str) -> Event | None:
        rows = self.sql.rows(f"SELECT {EVENT_COLS} FROM events WHERE namespace=? AND id=?", (namespace, event_id))
        return records.event(rows[0]) if rows else None

    def get_topic(self, namespace: str, topic_id: str) -> tuple[Topic, np.ndarray] | None:
        rows = self.sql.rows("SELECT namespace,id,label,size,centroid FROM topics WHERE namespace=? AND id=?",
                             (namespace, topic_id))
        if not rows:
            return None
        r = rows[0]
        return Topic(namespace=r[0], id=r[1], label=r[2], size=r[3]), self._vector(r[4]).copy()

    def utterances(self, namespace: str, ids: list[str]) -> list[tuple[str | None, str]]:
        """(speaker, text) of these observations, nothing else decoded: what reading who calls whom what
        needs (search/people.py), at a fraction of get_observations' cost."""
        out: list[tuple[str | None, str]] = []
        for chunk in self.sql.chunks(list(dict.fromkeys(ids))):
            where, args = self.sql.any_of("id", chunk)
            out += [(r[0], r[1]) for r in self.sql.rows(
                f"SELECT speaker, text FROM observations WHERE namespace=? AND {where}", (namespace, *args))]
        return out

    def add_relation(self, relation: Relation) -> None:
        self.add_relations([relation])

    def add_relations(self, relations: list[Relation]) -> None:
        if not relations:
            return
        self.sql.many("INSERT INTO relations (namespace, id, source, target, type, evidence, origin, confidence, step) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, id) DO UPDATE SET source=excluded.source, "
                      "target=excluded.target, type=excluded.type, evidence=excluded.evidence, origin=excluded.origin, "
                      "confidence=excluded.confidence, step=excluded.step",
                      [(r.namespace, r.id, r.source, r.target, r.type, json.dumps(r.evidence), r.origin, r.confidence,
                        r.step) for r in relations])

    def relations(self, namespace: str) -> list[Relation]:
        return [records.relation(r) for r in self.sql.rows(f"SELECT {REL_COLS} FROM relations WHERE namespace=? "
                                                           "ORDER BY rowid", (namespace,))]

    def events(self, namespace: str, offset: int = 0, limit: int | None = None) -> list[Event]:
        """A namespace's events in stored order; a page of them with offset/limit."""
        return [records.event(r) for r in self.sql.rows(
            f"SELECT {EVENT_COLS} FROM events WHERE namespace=? ORDER BY rowid LIMIT ? OFFSET ?",
            (namespace, self.sql.no_limit if limit is None else limit, offset))]

    def topics(self, namespace: str) -> list[Topic]:
        return [Topic(namespace=r[0], id=r[1], label=r[2], size=r[3]) for r in self.sql.rows(
            "SELECT namespace, id, label, size FROM topics WHERE namespace=? ORDER BY rowid", (namespace,))]

    def set_event_topics(self, namespace: str, assignment: dict[str, str]) -> None:
        with self.sql.transaction():
            self.sql.many("UPDATE events SET topic_id=? WHERE namespace=? AND id=?",
                          [(t, namespace, e) for e, t in assignment.items()])

    def event_topics(self, namespace: str) -> dict[str, str | None]:
        """event id → topic id, without loading whole events: re-clustering reads it every T steps."""
        return dict(self.sql.rows("SELECT id, topic_id FROM events WHERE namespace=? ORDER BY rowid", (namespace,)))

    def relations_citing(self, namespace: str, observation_ids: list[str]) -> list[Relation]:
        """Relations whose evidence cites any of these observations (whichever events they join)."""
        out: dict[str, Relation] = {}
        for chunk in self.sql.chunks(list(dict.fromkeys(observation_ids))):
            where, args = self.sql.any_of("value", chunk)
            for r in self.sql.rows(f"SELECT {REL_COLS} FROM relations r WHERE namespace=? AND EXISTS "
                                   f"(SELECT 1 FROM {self.sql.json_items('r.evidence')} WHERE {where}) ORDER BY rowid",
                                   (namespace, *args)):
                out[r[1]] = records.relation(r)
        return list(out.values())

    def filter_observations(self, namespace: str, filters: Filters) -> list[str]:
        """Ids of the observations that satisfy every condition (date: the observation's, else its
        event's), in stream order."""
        where, args = ["o.namespace=?"], [namespace]
        day = f"COALESCE(o.date, {self.sql.json_text('e.time', 'date')})"
        if filters.since:
            where.append(f"{day} >= ?")
            args.append(filters.since)
        if filters.until:
            where.append(f"{day} <= ?")
            args.append(filters.until)
        if filters.speaker:
            clause, values = self.sql.any_of("o.speaker", list(filters.speaker))
            where.append(clause)
            args += values
        for key, value in filters.meta.items():
            where.append(f"EXISTS (SELECT 1 FROM {self.sql.json_pairs('o.meta')} WHERE key=? AND value=?)")
            args += [key, value]
        return [r[0] for r in self.sql.rows(
            "SELECT o.id FROM observations o LEFT JOIN events e ON e.namespace=o.namespace AND e.id=o.event "
            f"WHERE {' AND '.join(where)} ORDER BY o.step, o.seq", args)]

    def text_held(self, text: str) -> bool:
        """Whether any observation, in any namespace, still contains `text` (a receipt does not look for those)."""
        return bool(self.sql.rows(f"SELECT 1 FROM observations WHERE {self.sql.position('text')} > 0 LIMIT 1", (text,)))
