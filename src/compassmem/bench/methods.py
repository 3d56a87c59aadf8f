"""Every method the harness compares, behind one interface: question → evidence handed to the SAME
responder. Baselines differ only in what they retrieve; CompassMem variants differ only in settings
or construction (ablations)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeVar

import numpy as np

from ..config import Settings
from ..construct.segment import DraftEvent, extractive_summary, observation_text, participants_of
from ..embed import CachedEmbedder, dots
from ..memory import Memory
from ..models import Observation, Usage
from ..search.graph import approx_tokens
from ..search.people import called, turns_saying
from ..text import content_words
from ..timeutil import from_iso, named_period
from ..search.presets import PRESETS
from ..search.rank import asker, without_people
from ..search.retrieve import Loading, lexical_share
from ..search.responder import Responder, evidence_lines

BASELINES = ("full_context", "rag512", "dense_turns", "bm25_turns", "hybrid_turns", "hybrid_speaker", "hybrid_people")
TURN_BASELINES = ("dense_turns", "bm25_turns", "hybrid_turns", "hybrid_speaker", "hybrid_people")  # accept ":K", e.g. bm25_turns:30
# the search's named variants (search/presets.py), and one of construction: fixed ~100-token chunks
ABLATIONS = (*(name for name in PRESETS if name != "compassmem"), "chunks100")
ALL_METHODS = ("compassmem", *BASELINES, *ABLATIONS)
RANKING_DEPTH = 400  # observations of a baseline's ranking kept: well past the largest budget (2,000 tokens)


@dataclass
class MethodResult:
    answer: str
    observation_ids: list[str]  # handed to the responder
    context_tokens: int
    usage: Usage
    latency_s: float
    search: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    ranking: list[str] = field(default_factory=list)  # observation ids best first (for recall at a budget)


class Method(Protocol):
    name: str

    def answer(self, namespace: str, question: str) -> MethodResult: ...


class FixedChunkSegmenter:
    """The 'events → fixed chunks' ablation: consecutive observations up to ~N tokens, no semantics."""

    def __init__(self, tokens: int = 100) -> None:
        self.tokens = tokens

    def segment(self, step: int, observations: list[Observation], world_time: str | None) -> list[DraftEvent]:
        groups: list[list[Observation]] = [[]]
        used = 0
        for o in observations:
            cost = approx_tokens(o.text)
            if groups[-1] and used + cost > self.tokens:
                groups.append([])
                used = 0
            groups[-1].append(o)
            used += cost
        return [DraftEvent(extractive_summary(g), [o.id for o in g], participants_of(g)) for g in groups if g]


class CompassMemMethod:
    def __init__(self, name: str, memory: Memory) -> None:
        self.name = name
        self.memory = memory

    def answer(self, namespace: str, question: str) -> MethodResult:
        t0 = time.perf_counter()
        a = self.memory.ask(question, namespace)
        latency = time.perf_counter() - t0
        actions = [s.action for s in a.trace]
        paths: dict[tuple[int, int], int] = {}
        for s in a.trace:
            paths[(s.round, s.explorer)] = paths.get((s.round, s.explorer), 0) + 1
        search = {
            "subgoals": len(a.subgoals), "satisfied": sum(g.satisfied for g in a.subgoals),
            "start_nodes": len(a.start_nodes), "steps": len(a.trace), "paths": len(paths),
            "path_lengths": list(paths.values()), "kept": len(a.evidence) if not a.used_fallback else 0,
            "skip": actions.count("SKIP"), "expand": actions.count("EXPAND"), "answer": actions.count("ANSWER"),
            "refined": a.refined_query is not None, "fallback": a.used_fallback,
            # decisions that had neighbours on offer, and those of them that moved along one or met a sub-goal
            "offered": sum(1 for s in a.trace if s.offered),
            "moved": sum(1 for s in a.trace if s.offered and (s.next or s.satisfied)),
            "refined_kept": sum(1 for s in a.trace if s.round >= 1 and s.action != "SKIP"),  # kept after refining
        }
        return MethodResult(a.answer, a.observation_ids(), a.context_tokens, a.usage, latency, search,
                            ranking=a.ranking)


class _Answering:
    """Shared tail of every baseline: hand observations to the common responder, account the cost."""

    def __init__(self, name: str, memory: Memory, responder: Responder, max_tokens: int) -> None:
        self.name = name
        self.memory = memory
        self.responder = responder
        self.max_tokens = max_tokens
        self._obs: dict[str, list[Observation]] = {}
        self._vecs: dict[str, tuple[list[str], np.ndarray]] = {}

    def observations(self, namespace: str) -> list[Observation]:
        if namespace not in self._obs:
            self._obs[namespace] = self.memory.store.observations(namespace)
        return self._obs[namespace]

    def respond(self, question: str, ranked: list[Observation], t0: float, budget: int | None = None,
                hand: int | None = None) -> MethodResult:
        """Hand the first `hand` ranked observations (all by default) to the responder in time order;
        the whole ranking is kept for recall at fixed budgets."""
        chosen = sorted(ranked[:hand] if hand is not None else ranked, key=lambda o: (o.step, o.seq))
        lines = evidence_lines(chosen, budget or self.max_tokens)
        handed = chosen[: len(lines)]
        llm = self.memory.llm
        if llm is not None:
            with llm.operation() as usage:
                text = self.responder.respond(question, [], handed, budget or self.max_tokens).text
        else:
            usage, text = Usage(), self.responder.respond(question, [], handed, budget or self.max_tokens).text
        return MethodResult(text, [o.id for o in handed], sum(approx_tokens(x) for x in lines), usage.model_copy(),
                            time.perf_counter() - t0, ranking=[o.id for o in ranked[:RANKING_DEPTH]])


class FullContext(_Answering):
    def __init__(self, memory: Memory, responder: Responder, limit_tokens: int) -> None:
        super().__init__("full_context", memory, responder, limit_tokens)

    def answer(self, namespace: str, question: str) -> MethodResult:
        t0 = time.perf_counter()
        obs = self.observations(namespace)
        total = sum(approx_tokens(o.render()) for o in obs)
        if total > self.max_tokens:
            return MethodResult("", [], total, Usage(), 0.0,
                                skipped=f"conversation is {total} tokens; full context limit {self.max_tokens}")
        return self.respond(question, obs, t0)


class DenseTurns(_Answering):
    def __init__(self, memory: Memory, responder: Responder, embedder: CachedEmbedder, k: int, max_tokens: int,
                 name: str = "dense_turns") -> None:
        super().__init__(name, memory, responder, max_tokens)
        self.embedder, self.k = embedder, k

    def rank(self, namespace: str, question: str) -> list[Observation]:
        """Every turn, most similar to the question first."""
        ids, mat = self.memory.store.observation_matrix(namespace)
        by_id = {o.id: o for o in self.observations(namespace)}
        sims = dots(mat, self.embedder.embed([question])[0])
        return [by_id[ids[i]] for i in np.argsort(-sims, kind="stable") if ids[i] in by_id]

    def answer(self, namespace: str, question: str) -> MethodResult:
        t0 = time.perf_counter()
        return self.respond(question, self.rank(namespace, question)[:RANKING_DEPTH], t0, hand=self.k)


class BM25Turns(_Answering):
    def __init__(self, memory: Memory, responder: Responder, k: int, max_tokens: int, name: str = "bm25_turns") -> None:
        super().__init__(name, memory, responder, max_tokens)
        self.k = k
        self._index: dict[str, Any] = {}

    def rank(self, namespace: str, question: str) -> list[Observation]:
        """Every turn, best BM25 score first."""
        from .bm25 import BM25

        obs = self.observations(namespace)
        if namespace not in self._index:
            # the same text CompassMem indexes (turn + image caption), so the comparison is like for like
            self._index[namespace] = BM25([content_words(observation_text(o)) or ["_"] for o in obs])
        scores = self._index[namespace].get_scores(content_words(question))
        return [obs[i] for i in np.argsort(-scores, kind="stable")]

    def answer(self, namespace: str, question: str) -> MethodResult:
        t0 = time.perf_counter()
        return self.respond(question, self.rank(namespace, question)[:RANKING_DEPTH], t0, hand=self.k)


T = TypeVar("T")


def rrf(rankings: list[list[T]], k: int = 60, weights: list[float] | None = None,
        key: Callable[[T], str] = lambda o: o.id) -> list[T]:
    """Reciprocal-rank fusion: each list adds weight / (k + rank) to an item's score (Cormack et al. 2009;
    the fusion Graphiti and most hybrid retrievers use; weights 1 by default). Ties keep the first list's
    order. Items are Observations, or anything `key` names (scripts/rerank-probe.py fuses stored ids)."""
    score: dict[str, float] = {}
    first: dict[str, T] = {}
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings)):
        for rank, o in enumerate(ranking, 1):
            oid = key(o)
            score[oid] = score.get(oid, 0.0) + weight / (k + rank)
            first.setdefault(oid, o)
    order = {oid: i for i, oid in enumerate(first)}
    return [first[oid] for oid in sorted(score, key=lambda x: (-score[x], order[x]))]


def named_speakers(question: str, speakers: list[str]) -> list[str]:
    """The speakers a question names, by any word of their name (case-insensitive, 3+ letters)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'-]+", question)}
    words |= {w[:-2] for w in words if w.endswith("'s")}
    return [s for s in speakers if any(part.lower() in words for part in re.findall(r"[A-Za-z]{3,}", s))]


class HybridTurns(_Answering):
    """The retriever a LangChain or Graphiti user would build: RRF (k = 60) of the BM25 and the dense turn
    rankings; with `speaker`, one more list — the turns said by a person the question names, in the
    fused order; with `people`, a person is also named the ways CompassMem's ranking knows (a name the
    chat calls a speaker by, "my" said to an assistant: search/people.py, rank.asker) and the BM25 and
    dense lists are asked the question less those names (rank.without_people, as the ranking's
    unnamed_weight does), for a query that asks nothing the BM25 list counts the ranking's
    `statement_lexical_share` of a list, and a question that names a day or a month gets one more list,
    the turns said then (the ranking's date_weight), so what those rules win is not counted as the
    graph's."""

    def __init__(self, memory: Memory, responder: Responder, embedder: CachedEmbedder, k: int, max_tokens: int,
                 name: str = "hybrid_turns", speaker: bool = False, people: bool = False) -> None:
        super().__init__(name, memory, responder, max_tokens)
        self.k, self.speaker, self.people = k, speaker, people
        self.dense = DenseTurns(memory, responder, embedder, k, max_tokens)
        self.bm25 = BM25Turns(memory, responder, k, max_tokens)

    def answer(self, namespace: str, question: str) -> MethodResult:
        t0 = time.perf_counter()
        named: set[str] = set()
        query = question
        if self.speaker:
            store = self.memory.store
            speakers = store.speakers(namespace)
            named = set(named_speakers(question, speakers))
            if self.people:
                aliases = called(question, speakers, lambda word: turns_saying(store, namespace, word))
                named |= asker(question, speakers) | set(aliases.values())
                words = [p for s in named for p in re.findall(r"[A-Za-z]{3,}", s)] + list(aliases)
                query = without_people(question, words) or question
        lists = [self.bm25.rank(namespace, query), self.dense.rank(namespace, query)]
        statement_share = Loading.resolved(self.memory.settings.search, self.memory.embedder).statement_share
        share = lexical_share(question, statement_share) if self.people else 1.0
        fused = rrf(lists, weights=[share, 1.0])
        prior = [[o for o in fused if o.speaker in named]] if named else []
        period = named_period(question, self.memory.settings.search.date_slack_days) if self.people else None
        if period:  # the ranking's date rule (date_weight): what was said on the day or in the month named
            prior.append([o for o in fused if (d := from_iso(o.date)) and period[0] <= d <= period[1]])
        if prior:
            fused = rrf([*lists, *prior], weights=[share, 1.0] + [1.0] * len(prior))
        return self.respond(question, fused[:RANKING_DEPTH], t0, hand=self.k)


class RAGChunks(_Answering):
    """The paper's chunk baseline: 512-token chunks of the stream, top-5 by embedding similarity."""

    def __init__(self, memory: Memory, responder: Responder, embedder: CachedEmbedder, chunk_tokens: int = 512,
                 k: int = 5) -> None:
        super().__init__("rag512", memory, responder, chunk_tokens * k)
        self.embedder, self.chunk_tokens, self.k = embedder, chunk_tokens, k
        self._chunks: dict[str, tuple[list[list[Observation]], np.ndarray]] = {}

    def _build(self, namespace: str) -> tuple[list[list[Observation]], np.ndarray]:
        if namespace not in self._chunks:
            chunks: list[list[Observation]] = [[]]
            used = 0
            for o in self.observations(namespace):
                cost = approx_tokens(o.render())
                if chunks[-1] and used + cost > self.chunk_tokens:
                    chunks.append([])
                    used = 0
                chunks[-1].append(o)
                used += cost
            vecs = self.embedder.embed([" ".join(o.render() for o in c) for c in chunks])
            self._chunks[namespace] = (chunks, vecs)
        return self._chunks[namespace]

    def answer(self, namespace: str, question: str) -> MethodResult:
        t0 = time.perf_counter()
        chunks, vecs = self._build(namespace)
        top = np.argsort(-dots(vecs, self.embedder.embed([question])[0]), kind="stable")
        ranked = [o for i in top for o in chunks[i]]
        hand = sum(len(chunks[i]) for i in top[: self.k])
        return self.respond(question, ranked, t0, budget=self.chunk_tokens * self.k + 200, hand=hand)


def variant_settings(base: Settings, method: str) -> Settings:
    return PRESETS[method].apply(base) if method in PRESETS else base
