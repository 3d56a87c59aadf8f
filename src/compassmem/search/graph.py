"""A read-only snapshot of one namespace's Event Graph, loaded once per ask and shared by explorers.

Explorers run in threads; a snapshot means they never touch the database or see a half-written step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..embed.base import dots
from ..errors import NamespaceNotFound
from ..models import Event, Observation, Topic
from ..store import Store


@dataclass(frozen=True)
class Neighbour:
    event_id: str
    type: str
    outgoing: bool  # True: current -[type]-> neighbour

    def hint(self, current: str) -> str:
        return f"{current} -[{self.type}]-> {self.event_id}" if self.outgoing else f"{self.event_id} -[{self.type}]-> {current}"


@dataclass
class GraphView:
    namespace: str
    events: dict[str, Event]
    ids: list[str]
    matrix: np.ndarray
    adjacency: dict[str, list[Neighbour]]
    topics: dict[str, Topic]
    members: dict[str, list[str]]
    observations: dict[str, Observation] = field(default_factory=dict)
    obs_matrix: np.ndarray | None = None
    obs_event: np.ndarray | None = None  # row of obs_matrix -> row of matrix
    lexical_weight: float = 0.3

    @classmethod
    def load(cls, store: Store, namespace: str) -> "GraphView":
        if not store.has_namespace(namespace):
            known = store.namespaces()
            hint = f" (known: {', '.join(known[:10])})" if known else " (the database is empty)"
            raise NamespaceNotFound(f"unknown namespace '{namespace}'{hint}")
        events = {e.id: e for e in store.events(namespace)}
        ids, mat = store.event_matrix(namespace)
        adjacency: dict[str, list[Neighbour]] = {eid: [] for eid in events}
        for r in store.relations(namespace):
            if r.source in adjacency and r.target in adjacency and r.source != r.target:
                adjacency[r.source].append(Neighbour(r.target, r.type, True))
                adjacency[r.target].append(Neighbour(r.source, r.type, False))
        members: dict[str, list[str]] = {}
        for e in events.values():
            if e.topic_id:
                members.setdefault(e.topic_id, []).append(e.id)
        observations = {o.id: o for o in store.observations(namespace)}
        topics = {t.id: t for t in store.topics(namespace)}
        obs_ids, obs_mat = store.observation_matrix(namespace)
        row = {eid: i for i, eid in enumerate(ids)}
        owner = {o: row[e.id] for e in events.values() for o in e.observation_ids if e.id in row}
        keep = [i for i, o in enumerate(obs_ids) if o in owner]
        obs_event = np.array([owner[obs_ids[i]] for i in keep], dtype=np.int64)
        view = cls(namespace, events, ids, mat, adjacency, topics, members, observations,
                   obs_mat[keep] if keep else None, obs_event if keep else None)
        view._obs_order = [obs_ids[i] for i in keep]
        return view

    @property
    def empty(self) -> bool:
        return not self.ids

    def __post_init__(self) -> None:
        self._index = {eid: i for i, eid in enumerate(self.ids)}
        self._obs_order: list[str] = []

    def index(self, event_id: str) -> int:
        return self._index[event_id]

    def similarity(self, queries: np.ndarray, texts: list[str] | None = None) -> np.ndarray:
        """events × queries. Dense part: the better of an event's own embedding and its best source
        observation, so one precise turn inside a long event is not averaged away. Lexical part (when
        the query texts are given): BM25 of the best source observation, scaled to [0, 1] per query and
        weighted by lexical_weight, so rare exact words (names, objects) count as they do for BM25."""
        q = np.atleast_2d(queries)
        sims = dots(self.matrix, q)
        if self.obs_matrix is not None:
            per_obs = dots(self.obs_matrix, q)
            best = np.full_like(sims, -1.0)
            np.maximum.at(best, self.obs_event, per_obs)
            sims = np.maximum(sims, best)
        if texts is not None and self.lexical_weight > 0 and self.obs_event is not None:
            lex = np.zeros_like(sims)
            for j, text in enumerate(texts):
                scores = self._bm25_scores(text)
                if scores is None:
                    continue
                col = np.zeros(len(self.ids))
                np.maximum.at(col, self.obs_event, scores)
                top = col.max()
                if top > 0:
                    lex[:, j] = col / top
            sims = sims + self.lexical_weight * lex
        return sims

    def _bm25_scores(self, text: str) -> np.ndarray | None:
        from rank_bm25 import BM25Okapi

        from .planner import content_words

        if not hasattr(self, "_bm25"):
            docs = [content_words(self.observations[o].text) or ["_"] for o in self._obs_order]
            self._bm25 = BM25Okapi(docs) if docs else None
        words = content_words(text)
        if self._bm25 is None or not words:
            return None
        return np.asarray(self._bm25.get_scores(words))

    def rank(self, query: np.ndarray, limit: int | None = None, exclude: set[str] | None = None,
             text: str | None = None) -> list[tuple[str, float]]:
        if self.empty:
            return []
        sims = self.similarity(query, [text] if text is not None else None)[:, 0]
        order = np.argsort(-sims, kind="stable")
        out: list[tuple[str, float]] = []
        for i in order:
            eid = self.ids[i]
            if exclude and eid in exclude:
                continue
            out.append((eid, float(sims[i])))
            if limit is not None and len(out) >= limit:
                break
        return out

    def source_lines(self, event: Event) -> list[str]:
        """The raw observations behind an event, in stream order: what roles read as evidence."""
        return [self.observations[o].render() for o in event.observation_ids if o in self.observations]

    def neighbours(self, event_id: str, visited: set[str] | None = None) -> list[Neighbour]:
        seen: set[str] = set()
        out = []
        for n in self.adjacency.get(event_id, []):
            if n.event_id in seen or (visited and n.event_id in visited):
                continue
            seen.add(n.event_id)
            out.append(n)
        return out


def approx_tokens(text: str) -> int:
    """Words × 4/3: close to BPE counts for English prose, and model-independent for comparisons."""
    return math.ceil(len(text.split()) * 4 / 3)
