"""Retrieval: the part of a namespace one question needs, read from the store's indexes into a GraphView.

This is where a search's recall is decided (docs/benchmarks.md: most misses are loaded but ranked low,
the rest are never loaded), so it is its own module rather than a constructor of the graph snapshot.
For each query text (the question and its sub-goals): its nearest and its best-BM25 observations and its
nearest events. Each event found is scored as GraphView.similarity would score it (its own cosine, or its
best found observation's cosine + lexical_weight × BM25 / best BM25); the best are loaded with every one
of their observations, plus typed neighbours of the very best (taken in turn from each of them, best
first, so one hub event cannot fill the budget alone). Nothing else is read, whatever the namespace's size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..config import SearchSettings
from ..embed.base import CachedEmbedder, dots
from ..errors import InputError
from ..models import Filters
from ..store import Store
from ..store.base import require_namespace
from ..text import index_terms, is_question
from .blocks import blocks_of, owners_of
from .graph import GraphView

EXACT_FILTER_ROWS = 20_000  # a filter passing at most this many observations is searched exactly


@dataclass(frozen=True)
class Loading:
    """How much one search reads: SearchSettings' retrieval fields (their defaults and why live there and in
    docs/config.md), taken together so the loader has one argument instead of six."""

    candidates: int  # per query text: nearest and best-BM25 observations
    candidate_events: int  # per query text: nearest events
    expand: int  # best loaded events whose typed neighbours are loaded too
    max_events: int  # best-scoring events loaded, with all their observations
    neighbours: int  # at most this many of those neighbours beyond the loaded events
    lexical_weight: float
    statement_share: float = 1.0  # of lexical_weight, for a query that asks nothing

    @classmethod
    def of(cls, s: SearchSettings, lexical_weight: float, statement_share: float = 1.0) -> "Loading":
        """`lexical_weight` and `statement_share` resolved (the settings', else the embedder's own)."""
        return cls(s.candidates, s.candidate_events, s.expand_events, s.max_events, s.neighbour_events, lexical_weight,
                   statement_share)

    @classmethod
    def resolved(cls, s: SearchSettings, embedder: CachedEmbedder) -> "Loading":
        """`of` with BM25's weight and the statement share the settings', else the embedder's own where the
        settings leave them unset (a semantic embedder keeps a little BM25, word overlap is all BM25)."""
        own = (embedder.lexical_weight, embedder.statement_lexical_share)  # CachedEmbedder: always set
        return cls.of(s, own[0] if s.lexical_weight is None else s.lexical_weight,
                      own[1] if s.statement_lexical_share is None else s.statement_lexical_share)

    def for_query(self, query: str) -> "Loading":
        """The limits for one query: BM25 keeps `lexical_share` of its weight."""
        share = lexical_share(query, self.statement_share)
        return self if share == 1.0 else replace(self, lexical_weight=self.lexical_weight * share)


def lexical_share(query: str, statement_share: float) -> float:
    """The share of BM25's weight a query keeps: a message that asks nothing ("I finally got through a
    manga without a dictionary") recalls what it does not repeat ("I've started learning Japanese"), so
    the words it shares with a turn are mostly chance and it keeps `statement_share`; a question keeps
    all (the baseline hybrid_people weighs its BM25 list by the same rule)."""
    return 1.0 if is_question(query) else statement_share


def load_for(store: Store, namespace: str, texts: list[str], vectors: np.ndarray, limits: Loading,
             allowed: set[str] | None = None) -> GraphView:
    """The GraphView of what `texts` (with their `vectors`) need; `allowed`: only these observations
    (a filter), over-fetched from the indexes and checked, or scored exactly when few pass."""
    vectors = np.atleast_2d(vectors)
    limits = limits.for_query(texts[0])
    with store.snapshot():  # another process may commit a step between these reads
        require_namespace(store, namespace)
        wide, allowed_events, exact_pool = 1, None, None
        if allowed is not None:
            allowed_events = set(store.owners(namespace, sorted(allowed)).values())
            wide = 8  # over-fetch from the indexes, then keep what passes the filter
            if len(allowed) <= EXACT_FILTER_ROWS:
                ids = sorted(allowed)
                exact_pool = (ids, store.observation_vectors(namespace, ids))
        lexical: dict[tuple[str, ...], list[tuple[str, float]]] = {}  # by terms, as the view keeps them
        event_sim: dict[str, float] = {}
        obs_score: dict[str, float] = {}  # best over the texts of (cosine + weighted, scaled BM25)
        for text, vec in zip(texts, vectors):
            terms = tuple(index_terms(text))
            if terms in lexical:  # "When did X…?" and its subgoal "When did X…" find the same things
                continue
            # candidates only: the view re-scores everything it loads from the stored vectors
            for eid, sim in store.search_events(namespace, vec, limits.candidate_events * wide, exact=False):
                if allowed_events is None or eid in allowed_events:
                    event_sim[eid] = max(sim, event_sim.get(eid, -1.0))
            if exact_pool is not None:  # a selective filter: score its observations exactly
                sims = dots(exact_pool[1], vec)
                top = np.argsort(-sims, kind="stable")[: limits.candidates]
                score = {exact_pool[0][i]: float(sims[i]) for i in top}
            else:
                score = {o: v for o, v in store.search_observations(namespace, vec, limits.candidates * wide,
                                                                    exact=False)
                         if allowed is None or o in allowed}
            hits = lexical[terms] = [h for h in store.lexical_search(namespace, text, limits.candidates * wide)
                                     if allowed is None or h[0] in allowed]
            best_bm25 = hits[0][1] if hits else 1.0
            for oid, bm25 in hits:
                score[oid] = score.get(oid, 0.0) + limits.lexical_weight * bm25 / best_bm25
            for oid, v in score.items():
                obs_score[oid] = max(v, obs_score.get(oid, -1.0))
        seeds = dict(event_sim)
        owner = owners_of(store, namespace, list(obs_score))
        for oid in sorted(owner):  # events first met through observations, by observation id: ties keep that order
            seeds[owner[oid]] = max(obs_score[oid], seeds.get(owner[oid], -1.0))
        ranked = sorted(seeds, key=lambda e: -seeds[e])
        chosen, best = ranked[: limits.max_events], ranked[: limits.expand]
        blocks = blocks_of(store, namespace, chosen)
        anchors = set(best)
        near = neighbours_of([[n.event_id for n in b.neighbours] for b in blocks if b.event.id in anchors], set(chosen),
                             allowed_events, limits.neighbours)
        view = GraphView.build(store, namespace, blocks + blocks_of(store, namespace, near), allowed)
    view.remember_lexical(lexical)  # the question's BM25 is already known: keep it
    view.lexical_weight = limits.lexical_weight
    return view


def neighbours_of(anchors: list[list[str]], loaded: set[str], allowed: set[str] | None, limit: int) -> list[str]:
    """Up to `limit` events one typed relation away from the anchors (each given by its neighbours, in
    stored order) and not in `loaded`: the first new neighbour of each anchor in anchor order, then the
    second of each, and so on."""
    lists = [[n for n in a if n not in loaded and (allowed is None or n in allowed)] for a in anchors]
    out: dict[str, None] = {}
    for rank in range(max((len(v) for v in lists), default=0)):
        for found in lists:
            if len(out) >= limit:
                return list(out)
            if rank < len(found):
                out.setdefault(found[rank])
    return list(out)


def passing(store: Store, namespace: str, filters: Filters | None) -> set[str] | None:
    """The observations a search may read under `filters` (None: all); a filter that passes none is an
    error that says why, not an empty answer."""
    if filters is None:
        return None
    require_namespace(store, namespace)
    allowed = set(store.filter_observations(namespace, filters))
    if not allowed:
        hint = ""
        if filters.speaker:
            hint = f"; its speakers are {', '.join(store.speakers(namespace)[:10]) or 'not named'}"
        elif filters.since or filters.until:
            hint = "; an observation without a date (no world time) never passes a date filter"
        raise InputError(f"the filters ({filters.describe()}) match no observation in namespace '{namespace}'{hint}")
    return allowed
