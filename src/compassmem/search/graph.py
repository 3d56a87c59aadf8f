"""A read-only snapshot of one namespace's Event Graph, loaded once per ask and shared by explorers.

Explorers run in threads; a snapshot means they never touch the database or see a half-written step.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np

from ..embed.base import dots
from ..errors import NamespaceNotFound
from ..models import Event, Observation, Topic
from ..store import Store


_LOCK = threading.Lock()  # lazy BM25 build and the per-text score memo, shared by explorer threads


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
        with store.snapshot():  # another process may commit a step between these reads
            return cls._load(store, namespace)

    @classmethod
    def _load(cls, store: Store, namespace: str) -> "GraphView":
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
        view._owner = {o: e.id for e in events.values() for o in e.observation_ids}
        return view

    @property
    def empty(self) -> bool:
        return not self.ids

    def __post_init__(self) -> None:
        self._index = {eid: i for i, eid in enumerate(self.ids)}
        self._obs_order: list[str] = []
        self._owner: dict[str, str] = {}
        self._score_memo: dict[str, np.ndarray] = {}

    def index(self, event_id: str) -> int:
        return self._index[event_id]

    def observation_scores(self, queries: np.ndarray, texts: list[str] | None = None) -> np.ndarray:
        """observations (rows of obs_matrix, in `obs_order`) × queries: embedding similarity plus BM25
        scaled to [0, 1] per query and weighted by lexical_weight, so rare exact words (names, objects)
        count as they do for BM25 while paraphrases still meet through the embedding. A column given
        with its text is remembered by that text: one ask scores its question once, not per stage."""
        q = np.atleast_2d(queries)
        if self.obs_matrix is None:
            return np.zeros((0, q.shape[0]))
        if texts is None:
            return dots(self.obs_matrix, q)
        cols = []
        for j, text in enumerate(texts):
            with _LOCK:
                memo = self._score_memo.get(text)
            if memo is None:
                memo = dots(self.obs_matrix, q[j : j + 1])[:, 0]
                lex = self._bm25_scores(text) if self.lexical_weight > 0 else None
                if lex is not None and lex.max() > 0:
                    memo = memo + self.lexical_weight * lex / lex.max()
                with _LOCK:
                    if len(self._score_memo) >= 8:
                        self._score_memo.pop(next(iter(self._score_memo)))
                    self._score_memo[text] = memo
            cols.append(memo)
        return np.stack(cols, axis=1)

    def similarity(self, queries: np.ndarray, texts: list[str] | None = None) -> np.ndarray:
        """events × queries: the better of an event's own embedding and its best source observation (see
        observation_scores), so one precise turn inside a long event is not averaged away."""
        q = np.atleast_2d(queries)
        sims = dots(self.matrix, q)
        if self.obs_matrix is not None:
            sims = np.maximum(sims, self.event_max(self.observation_scores(q, texts), fill=-1.0))
        return sims

    def _bm25_scores(self, text: str) -> np.ndarray | None:
        """BM25 of every observation (text plus image caption) for one query text. Not memoised here:
        observation_scores remembers the combined score per text."""
        from .planner import content_words

        with _LOCK:
            if not hasattr(self, "_bm25"):
                self._build_bm25()
        words = content_words(text)
        return np.asarray(self._bm25.get_scores(words)) if self._bm25 is not None and words else None

    def _build_bm25(self) -> None:
        from ..construct.segment import observation_text
        from .lexical import BM25
        from .planner import content_words

        docs = [content_words(observation_text(self.observations[o])) or ["_"] for o in self._obs_order]
        self._bm25 = BM25(docs) if docs else None

    def event_of(self, observation_id: str) -> str | None:
        return self._owner.get(observation_id)

    def speakers(self) -> list[str]:
        if not hasattr(self, "_speakers"):
            self._speakers = sorted({o.speaker for o in self.observations.values() if o.speaker})
        return self._speakers

    def speaker_mask(self, names: set[str]) -> np.ndarray:
        """1.0 for the observations (in obs_order) spoken by one of `names`."""
        if not hasattr(self, "_speaker_codes"):
            code = {name: i for i, name in enumerate(self.speakers())}
            self._speaker_codes = np.array([code.get(self.observations[o].speaker, -1) for o in self._obs_order],
                                           dtype=np.int64)
        wanted = [i for i, name in enumerate(self.speakers()) if name in names]
        return np.isin(self._speaker_codes, wanted).astype(float)

    def event_max(self, values: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """Per event (rows of `ids`), the max of per-observation `values` (rows in obs_order; 1-D or 2-D);
        `fill` for an event without observations. One sorted reduce, not a scattered ufunc.at."""
        if not hasattr(self, "_groups"):
            order = np.argsort(self.obs_event, kind="stable")
            owners, starts = np.unique(self.obs_event[order], return_index=True)
            self._groups = (order, owners, starts)
        order, owners, starts = self._groups
        out = np.full((len(self.ids),) + values.shape[1:], fill, dtype=float)
        if len(order):
            out[owners] = np.maximum.reduceat(values[order], starts, axis=0)
        return out

    def neighbour_mean(self, values: np.ndarray) -> np.ndarray:
        """Per event, the mean of `values` over its typed neighbours (0 for an isolated event)."""
        if not hasattr(self, "_edges"):
            pairs = [(self._index[a], self._index[n.event_id]) for a, ns in self.adjacency.items()
                     for n in ns if a in self._index and n.event_id in self._index]
            src = np.array([a for a, _ in pairs], dtype=np.int64)
            dst = np.array([b for _, b in pairs], dtype=np.int64)
            degree = np.bincount(src, minlength=len(self.ids)).astype(float) if pairs else np.zeros(len(self.ids))
            self._edges = (src, dst, np.maximum(degree, 1.0))
        src, dst, degree = self._edges
        out = np.zeros(len(self.ids))
        if len(src):
            np.add.at(out, src, values[dst])
        return out / degree

    @property
    def obs_order(self) -> list[str]:
        """Observation ids in the row order of obs_matrix / observation_scores."""
        return self._obs_order

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
