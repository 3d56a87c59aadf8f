"""Active multi-path search for one question: plan → localise → explore → (refine → explore) → respond."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from ..config import SearchSettings
from ..embed import CachedEmbedder
from ..errors import InputError
from ..llm import LLMClient
from ..models import Answer, Event, EvidenceItem, Observation, ObservationHit, SearchHit, SubgoalState, Usage
from .explorer import ExplorerPolicy, run_rounds
from .frontier import Frontier
from .graph import GraphView, approx_tokens
from .localize import Candidate, StartSelector, candidates_for
from .planner import Planner
from .rank import RankWeights, rank_observations
from .responder import Responder, evidence_line, evidence_lines

RANK_DEPTH = 1000  # observations ranked per ask: far more than the largest evidence budget needs
PolicyFactory = Callable[[GraphView, np.ndarray], ExplorerPolicy]  # (graph, events × [q, subgoals] sims)
# A whole GraphView, or a loader of the part of the graph some query texts need (GraphView.around)
GraphSource = Union[GraphView, Callable[[list[str], np.ndarray], GraphView]]


def view_of(source: GraphSource, texts: list[str], vectors: np.ndarray) -> GraphView:
    return source if isinstance(source, GraphView) else source(texts, vectors)


@dataclass
class SearchRoles:
    """The search roles; LLM-driven or offline, the engine cannot tell."""

    planner: Planner
    selector: StartSelector
    policy: PolicyFactory
    responder: Responder


def with_anchors(picks: list[str], candidates: list[Candidate], n: int, cap: int) -> list[str]:
    """The n best-ranked candidates start first, then the selector's picks. With Qwen 0.5B as selector,
    the first LoCoMo question lost its only relevant node (similarity 0.87) to a pick at 0.45; the
    selector still adds the diverse starts the paper wants."""
    top = [c.event_id for c in sorted(candidates, key=lambda c: -c.sim)[:n]]
    return list(dict.fromkeys(top + picks))[: max(cap, n)]


def check_question(question: str, settings: SearchSettings) -> str:
    q = " ".join((question or "").split())
    if not q:
        raise InputError("the question is empty")
    if len(q) > settings.max_question_chars:
        raise InputError(f"the question is {len(q)} characters long; the limit is {settings.max_question_chars} "
                         "(search.max_question_chars)")
    return q


class SearchEngine:
    """`call_budget`: model calls per question when the roles are the model's (agentic mode): exploration
    then decides a whole round of explorers per call and stops while the answer's call is still free.
    None: no budget (offline roles, or graph mode, whose only call is the answer)."""

    def __init__(self, embedder: CachedEmbedder, roles: SearchRoles, settings: SearchSettings | None = None,
                 llm: LLMClient | None = None, call_budget: int | None = None) -> None:
        self.embedder = embedder
        self.roles = roles
        self.settings = settings or SearchSettings()
        self.llm = llm
        self.call_budget = call_budget

    def ask(self, graph: GraphSource, question: str) -> Answer:
        s = self.settings
        question = check_question(question, s)
        scope = (self.llm.operation(deadline_s=self.llm.settings.ask_deadline_s, label="ask")
                 if self.llm is not None else nullcontext(Usage()))
        with scope as usage:
            answer = self._ask(graph, question, usage)
        answer.usage = usage.model_copy()
        answer.usage.latency_s = round(answer.usage.latency_s, 3)
        return answer

    def _starts(self, query: str, subgoals: list[str], cands: list[Candidate], graph: GraphView,
                sv: np.ndarray) -> list[str]:
        s = self.settings
        picks = self.roles.selector.select(query, subgoals, cands, graph, sv, s.max_start_nodes)
        return with_anchors(picks, cands, s.anchor_starts, s.max_start_nodes)

    def _rounds_left(self, usage: Usage, reserve: int = 1) -> int | None:
        """Exploration rounds the call budget still allows, keeping `reserve` calls (the answer's); a replay
        from the response cache counts like a call, so a re-ask takes the same path."""
        if self.call_budget is None:
            return None
        return max(0, self.call_budget - usage.llm_calls - usage.cached_calls - reserve)

    def _explore(self, frontier: Frontier, graph: GraphView, policy: ExplorerPolicy, question: str, subgoals: list[str],
                 usage: Usage) -> None:
        s = self.settings
        budget = self._rounds_left(usage)
        if budget == 0:
            return
        run_rounds(s.explorers, frontier, graph, policy, question, subgoals, s.max_next, s.use_relations,
                   s.batch_explorers or budget is not None, max_rounds=budget)

    def _ask(self, source: GraphSource, question: str, usage: Usage) -> Answer:
        s, roles = self.settings, self.roles
        subgoals = roles.planner.plan(question, s.max_subgoals) if s.use_planner else [question]
        subgoals = subgoals or [question]
        qv = self.embedder.embed([question])[0]
        sv = self.embedder.embed(subgoals)
        texts, vectors = [question, *subgoals], np.vstack([qv[None], sv])
        graph = view_of(source, texts, vectors)
        if graph.empty:
            return Answer(question=question, namespace=graph.namespace,
                          answer="Nothing is stored in this memory yet.", used_fallback=True)
        sims = graph.similarity(vectors, texts)
        policy = roles.policy(graph, sims)
        frontier = Frontier(sims, graph.index, s.max_steps)

        cands = candidates_for(graph, qv, question, s)
        starts = self._starts(question, subgoals, cands, graph, sv)
        with frontier.cond:
            frontier.push(starts)
        self._explore(frontier, graph, policy, question, subgoals, usage)

        refined: str | None = None
        room = self._rounds_left(usage, reserve=3)  # calls for the refined query, its start selection, a round, the answer
        if s.refinement and not all(frontier.satisfied) and frontier.queue_size() == 0 and room != 0:
            kept, satisfied, seen = frontier.snapshot()
            evidence = "\n".join(line for k in kept for line in graph.source_lines(graph.events[k]))
            refined = roles.planner.refine(question, subgoals, satisfied, evidence[-4000:])
            if refined and refined.strip().lower() != question.lower():
                rv = self.embedder.embed([refined])[0]
                more = candidates_for(graph, rv, refined, s, exclude=seen)
                new_starts = self._starts(refined, subgoals, more, graph, sv)
                frontier.reopen(s.max_steps)
                with frontier.cond:
                    frontier.push(new_starts)
                self._explore(frontier, graph, policy, question, subgoals, usage)

        kept = list(frontier.kept)
        ranking, _ = self.rank(graph, question, qv, kept)
        ranked = [graph.observations[o] for o in ranking]
        handed = sorted(ranked[: len(evidence_lines(ranked, min(s.evidence_tokens, s.max_context_tokens)))],
                        key=lambda o: (o.step, o.seq))
        events = self._events_of(graph, ranked[: len(handed)])
        text = roles.responder.respond(question, events, handed, s.evidence_tokens)
        handed_ids = {o.id for o in handed}
        return Answer(
            question=question, namespace=graph.namespace, answer=text or "No answer could be formed.",
            evidence=[EvidenceItem(event_id=e.id, summary=e.summary,
                                   observation_ids=[o for o in e.observation_ids if o in handed_ids],
                                   time=e.time.label(), subgoals=frontier.kept_subgoals.get(e.id, []))
                      for e in events],
            subgoals=[SubgoalState(text=g, satisfied=v) for g, v in zip(subgoals, frontier.satisfied)],
            trace=list(frontier.trace), start_nodes=list(starts), refined_query=refined, used_fallback=not kept,
            context_tokens=sum(approx_tokens(evidence_line(o)) for o in handed),
            ranking=ranking[: len(evidence_lines(ranked, s.ranking_tokens))])

    def rank(self, graph: GraphView, query: str, qv: np.ndarray | None = None,
             kept: list[str] | None = None) -> tuple[list[str], np.ndarray]:
        """The evidence ranking (search/rank.py) of a query: observation ids best first and their scores."""
        s = self.settings
        if graph.empty:
            return [], np.zeros(0)
        qv = self.embedder.embed([query])[0] if qv is None else qv
        own = graph.observation_scores(qv, [query])[:, 0]
        return rank_observations(graph, own, query, kept or [], RankWeights(
            s.participant_weight, s.event_weight, s.relation_weight if s.use_relations else 0.0, s.kept_weight,
            s.newer_window, s.newer_margin),
            limit=max(RANK_DEPTH, max(s.ranking_tokens, s.evidence_tokens) // 4))

    def search(self, source: GraphSource, query: str, limit: int = 10) -> list[SearchHit]:
        """Events ranked for a query, each with its matching observations and their scores: the graph's
        ranking without exploration or answering, so it makes no model call in any mode."""
        query = check_question(query, self.settings)
        qv = self.embedder.embed([query])[0]
        graph = view_of(source, [query], qv[None])
        ids, scores = self.rank(graph, query, qv)
        hits: dict[str, SearchHit] = {}
        for oid, score in zip(ids, scores):
            eid = graph.event_of(oid)
            if eid is None:
                continue
            if eid not in hits:
                if len(hits) >= limit:
                    continue
                e = graph.events[eid]
                hits[eid] = SearchHit(event_id=eid, summary=e.summary, time=e.time.label(), score=round(float(score), 4),
                                      participants=e.participants, topic_id=e.topic_id, observations=[])
            o = graph.observations[oid]
            hits[eid].observations.append(ObservationHit(id=o.id, speaker=o.speaker, text=o.text, date=o.date,
                                                         score=round(float(score), 4)))
        return list(hits.values())

    @staticmethod
    def _events_of(graph: GraphView, observations: list[Observation]) -> list[Event]:
        """The events behind the handed observations, in the order their best observation ranks."""
        ids = [graph.event_of(o.id) for o in observations]
        return [graph.events[e] for e in dict.fromkeys(e for e in ids if e)]
