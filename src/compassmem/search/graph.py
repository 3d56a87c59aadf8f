"""A read-only snapshot of the part of a namespace's Event Graph one ask needs, shared by explorers.

Explorers run in threads; a snapshot means they never see a half-written step.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from ..config import LEXICAL_WEIGHT
from ..embed.base import dots
from ..models import Event, Observation, Topic
from ..store import Store
from ..store.base import require_namespace
from ..text import index_terms
from .blocks import EventBlock, Joined, Neighbour, blocks_of, topics_of, turn_columns, turn_numbers
from .people import TURNS_READ, called, turns_saying


_LOCK = threading.Lock()  # the per-text score and BM25 memos, shared by explorer threads


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
    lexical_weight: float = LEXICAL_WEIGHT

    store: Store | None = None  # where lexical scores come from (the store's full-text index)
    revised_by: dict[str, str] = field(default_factory=dict)  # earlier turn -> the later one revising it

    @classmethod
    def load(cls, store: Store, namespace: str) -> "GraphView":
        """The whole namespace (inspection, tests, small memories), with events of its own to change. Search
        loads only what a question needs (search/retrieve.py)."""
        with store.snapshot():  # another process may commit a step between these reads
            require_namespace(store, namespace)
            view = cls.build(store, namespace, blocks_of(store, namespace, list(store.event_topics(namespace))))
        view.events = {k: e.model_copy(deep=True) for k, e in view.events.items()}  # the blocks' are shared
        view.topics = {k: t.model_copy(deep=True) for k, t in view.topics.items()}
        return view

    @classmethod
    def build(cls, store: Store, namespace: str, blocks: list[EventBlock],
              allowed: set[str] | None = None) -> "GraphView":
        """The view of these events' blocks (search/blocks.py) and the typed relations among them; `allowed`:
        only these observations are loaded (a filter)."""
        ids = [b.event.id for b in blocks]
        by_id = {b.event.id: b.event for b in blocks}
        index = {eid: i for i, eid in enumerate(ids)}
        adjacency = {b.event.id: [n for n in b.neighbours if n.event_id in index] for b in blocks}
        revisions = sorted((r for b in blocks for r in b.revisions if r[1] in by_id), key=lambda r: r[0])
        members: dict[str, list[str]] = {}
        for e in by_id.values():
            if e.topic_id:
                members.setdefault(e.topic_id, []).append(e.id)
        mat = np.stack([b.vector for b in blocks]) if blocks else np.zeros((0, 0), np.float32)
        topics = dict(topics_of(store, namespace))  # the dict is the view's; the topics are shared
        rows = Joined(blocks, allowed)
        order = rows.ids.tolist()
        view = cls(namespace, by_id, ids, mat, adjacency, topics, members, dict(zip(order, rows.observations.tolist())),
                   rows.matrix if order else None, rows.owner if order else None)
        view.store = store
        view.speakers()  # read now, inside the caller's snapshot (every ask's ranking reads them)
        view.revised_by = {earlier: later for _, _, earlier, later in revisions}  # the newest revision wins
        view._obs_order = order
        view._obs_ids = rows.ids
        view._owner = dict(zip(order, np.array(ids + [""], dtype=object)[rows.owner].tolist()))
        view._assistant, view._passage_tokens, view._day_numbers, view._asked = rows.columns()
        return view

    @property
    def empty(self) -> bool:
        return not self.ids

    def __post_init__(self) -> None:
        self._index = {eid: i for i, eid in enumerate(self.ids)}
        self._obs_order: list[str] = []
        self._obs_ids: np.ndarray | None = None  # obs_order as an object array (a view cut from blocks)
        self._owner: dict[str, str] = {}
        self._score_memo: dict[str, np.ndarray] = {}
        self._lexical: dict[tuple[str, ...], list[tuple[str, float]]] = {}
        self._called: dict[str, dict[str, str]] = {}

    def remember_lexical(self, hits: dict[tuple[str, ...], list[tuple[str, float]]]) -> None:
        """BM25 hits already read for these index terms (retrieval's), so scoring does not ask again."""
        self._lexical.update(hits)

    def index(self, event_id: str) -> int:
        return self._index[event_id]

    def observation_scores(self, queries: np.ndarray, texts: list[str] | None = None) -> np.ndarray:
        """observations (rows of obs_matrix, in `obs_order`) × queries: embedding similarity plus BM25
        scaled to [0, 1] per query (by the namespace's best BM25 for it) and weighted by lexical_weight,
        so rare exact words (names, objects) count as they do for BM25 while paraphrases still meet
        through the embedding. A column given with its text is remembered by that text: one ask scores
        its question once, not per stage."""
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
                lex = self._lexical_scores(text) if self.lexical_weight > 0 else None
                if lex is not None:
                    memo = memo + self.lexical_weight * lex
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

    def _lexical_scores(self, text: str) -> np.ndarray | None:
        """BM25 of the loaded observations for a text, divided by the namespace's best (0 outside the
        store's top hits, which are at least as many as the candidates a search loads). Texts with the
        same index terms share one full-text query."""
        terms = tuple(index_terms(text))
        with _LOCK:
            hits = self._lexical.get(terms)
        if hits is None:
            if self.store is None:
                return None
            hits = self.store.lexical_search(self.namespace, text, max(len(self._obs_order), 1))
            with _LOCK:
                self._lexical[terms] = hits
        if not hits or hits[0][1] <= 0:
            return None
        row = self._obs_rows()
        out = np.zeros(len(self._obs_order))
        for oid, score in hits:
            i = row.get(oid)
            if i is not None:
                out[i] = score
        return out / hits[0][1]

    def row_of(self, observation_id: str) -> int | None:
        """The observation's row in obs_order / obs_matrix (None: not loaded)."""
        return self._obs_rows().get(observation_id)

    def _obs_rows(self) -> dict[str, int]:
        """observation id -> its row in obs_order / obs_matrix."""
        if not hasattr(self, "_obs_row"):
            self._obs_row = dict(zip(self._obs_order, range(len(self._obs_order))))
        return self._obs_row

    def event_of(self, observation_id: str) -> str | None:
        return self._owner.get(observation_id)

    def speakers(self) -> list[str]:
        """Everyone who speaks in the namespace (not only in the loaded part)."""
        if not hasattr(self, "_speakers"):
            store, ns = self.store, self.namespace  # kept by the store until the namespace is written to
            self._speakers = (list(store.derived(ns, "speakers", [""], lambda _: {"": tuple(store.speakers(ns))})[""])
                              if store is not None else sorted({o.speaker for o in self.observations.values() if o.speaker}))
        return self._speakers

    def called(self, question: str) -> dict[str, str]:
        """The names the question uses for this namespace's speakers other than their speaker field
        (search/people.py), name → speaker; worked out once per question (ranking and answering ask)."""
        with _LOCK:
            known = self._called.get(question)
        if known is None:
            known = called(question, self.speakers(), self.turns_saying)
            with _LOCK:
                self._called[question] = known
        return known

    def turns_saying(self, word: str) -> list[tuple[str | None, str]]:
        """(speaker, text) of the namespace's turns that contain `word` (search/people.py); the loaded ones
        without a store."""
        if self.store is None:
            return [(o.speaker, o.text) for o in self.observations.values() if word.lower() in o.text.lower()][:TURNS_READ]
        return turns_saying(self.store, self.namespace, word)

    def _turn_columns(self) -> None:
        """The per-turn columns below; GraphView.build cuts them from the blocks, and a view made by hand
        (tests) works them out here with the same code (search/blocks.py)."""
        if not hasattr(self, "_asked"):
            turns = [self.observations[o] for o in self._obs_order]
            self._assistant, self._passage_tokens, self._day_numbers, self._asked = \
                turn_columns(turn_numbers(turns), np.array([o.speaker for o in turns], dtype=object))

    def assistant_mask(self) -> np.ndarray:
        """True for the observations (in obs_order) an assistant (a machine role) said."""
        self._turn_columns()
        return self._assistant

    def speaker_mask(self, names: set[str]) -> np.ndarray:
        """1.0 for the observations (in obs_order) spoken by one of `names`."""
        if not hasattr(self, "_speaker_codes"):
            code = {name: i for i, name in enumerate(self.speakers())}
            self._speaker_codes = np.array([code.get(self.observations[o].speaker, -1) for o in self._obs_order],
                                           dtype=np.int64)
        wanted = [i for i, name in enumerate(self.speakers()) if name in names]
        return np.isin(self._speaker_codes, wanted).astype(float)

    def passage_lengths(self) -> np.ndarray:
        """Per observation (rows in obs_order), passage_tokens: its length when no one said it, else 0."""
        self._turn_columns()
        return self._passage_tokens

    def date_mask(self, first: date, last: date) -> np.ndarray:
        """1.0 for the observations (in obs_order) said between `first` and `last`, both included; an
        observation without a date is never inside."""
        self._turn_columns()  # days since year 1, -1 for no date
        return ((self._day_numbers >= first.toordinal()) & (self._day_numbers <= last.toordinal())).astype(float)

    def question_before(self) -> np.ndarray:
        """Per observation (rows in obs_order), the row of the turn it replies to, else -1: the turn just
        before it in its session (same step, previous seq) when that turn asks something ("…?") and was
        said by someone else, and the reply is a person's own (an assistant's long answer to a user's
        request is not what a question about the user's life wants; the user's answer to an assistant's
        question is). Segmentation never separates a question from its answer, so both are loaded
        together."""
        self._turn_columns()
        return self._asked

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

    def _edge_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source rows, target rows, degree floored at 1) of the typed relations among the loaded events,
        both directions, in event order; built once per view."""
        if not hasattr(self, "_edges"):
            index = self._index
            pairs = [(i, index[n.event_id]) for i, e in enumerate(self.ids) for n in self.adjacency.get(e, ())
                     if n.event_id in index]
            src = np.array([a for a, _ in pairs], dtype=np.int64)
            dst = np.array([b for _, b in pairs], dtype=np.int64)
            self._edges = (src, dst, np.maximum(np.bincount(src, minlength=len(self.ids)), 1).astype(float))
        return self._edges

    def neighbour_mean(self, values: np.ndarray) -> np.ndarray:
        """Per event, the mean of `values` over its typed neighbours (0 for an isolated event)."""
        src, dst, degree = self._edge_arrays()
        out = np.zeros(len(self.ids))
        if len(src):
            np.add.at(out, src, values[dst])
        return out / degree

    @property
    def linked(self) -> bool:
        """Whether any two loaded events are joined by a typed relation (a memory built without relations
        has no thread to follow)."""
        return any(self.adjacency.values())

    def hops_from(self, seeds: np.ndarray, max_hops: int) -> np.ndarray:
        """Per event (rows of `ids`), how many typed relations away it is from the nearest seed row (breadth
        first over the loaded graph); max_hops + 1 for an event farther away or not connected."""
        src, dst, _ = self._edge_arrays()
        hops = np.full(len(self.ids), max_hops + 1, dtype=np.int64)
        frontier = np.zeros(len(self.ids), dtype=bool)
        frontier[seeds] = True
        hops[frontier] = 0
        for h in range(1, max_hops + 1):
            reached = np.zeros(len(self.ids), dtype=bool)
            reached[dst[frontier[src]]] = True
            frontier = reached & (hops > max_hops)
            if not frontier.any():
                break
            hops[frontier] = h
        return hops

    def ids_at(self, rows: np.ndarray) -> list[str]:
        """The observation ids of these rows of obs_order."""
        if self._obs_ids is None:
            return [self._obs_order[i] for i in rows]
        return self._obs_ids[rows].tolist()

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

    def best_observation(self, event: Event, text: str) -> Observation | None:
        """The event's source observation that scores best for `text` (its memoised scores: the question's
        were computed when the ask began); None for an event without loaded observations."""
        ids = [o for o in event.observation_ids if o in self.observations]
        if not ids:
            return None
        with _LOCK:
            memo = self._score_memo.get(text)
        if memo is None:
            return self.observations[ids[0]]
        row = self._obs_rows()
        return self.observations[min(ids, key=lambda o: -float(memo[row[o]]) if o in row else 1.0)]

    def best_line(self, event: Event, text: str) -> str | None:
        """best_observation, rendered with its date and speaker."""
        best = self.best_observation(event, text)
        return best.render() if best is not None else None

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


def passage_tokens(o: Observation) -> int:
    """An observation's length in approximate tokens when no one said it (a passage of a document), else 0:
    the length the ranking's budget rule reads (rank.length_penalty)."""
    return 0 if o.speaker else approx_tokens(o.text)
