"""Active multi-path search for one question: plan → localise → explore → (refine → explore) → respond."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from ..config import SearchSettings
from ..embed import CachedEmbedder
from ..embed.base import dots
from ..errors import InputError
from ..llm import LLMClient
from ..models import Answer, Event, EvidenceItem, Observation, ObservationHit, SearchHit, SubgoalState, Usage
from .explorer import ExplorerPolicy, run_rounds
from .frontier import Frontier
from .graph import GraphView, approx_tokens
from .localize import Candidate, OfflineStartSelector, StartSelector, candidates_for
from .planner import OfflinePlanner, Planner
from .refine import gap_query
from .people import as_called
from .rank import RankWeights, names_used, rank_observations, subject_of, without_people
from .responder import Responder, evidence_line, evidence_lines

_OFFLINE_SELECTOR = OfflineStartSelector()
_OFFLINE_PLANNER = OfflinePlanner()  # the gap query when the call budget has no call left for the model's
RANK_DEPTH = 1000  # observations ranked per ask: far more than the largest evidence budget needs
PolicyFactory = Callable[[GraphView, np.ndarray], ExplorerPolicy]  # (graph, events × [q, subgoals] sims)
# A whole GraphView, or a loader of the part of the graph some query texts need (search/retrieve.load_for)
GraphSource = Union[GraphView, Callable[[list[str], np.ndarray], GraphView]]


@dataclass
class _Searched:
    """What the search found in one namespace: its graph, the explorers' frontier, the evidence ranking."""

    graph: GraphView
    frontier: Frontier
    starts: list[str]
    refined: str | None
    ranking: list[str]
    scores: np.ndarray


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

    def ask(self, graph: GraphSource | list[GraphSource], question: str) -> Answer:
        """`graph`: one namespace's graph (or its loader), or several: a scope that covers them."""
        s = self.settings
        question = check_question(question, s)
        sources = graph if isinstance(graph, list) else [graph]
        scope = (self.llm.operation(deadline_s=self.llm.settings.ask_deadline_s, label="ask")
                 if self.llm is not None else nullcontext(Usage()))
        with scope as usage:
            answer = self._ask(sources, question, usage)
        answer.usage = usage.model_copy()
        answer.usage.latency_s = round(answer.usage.latency_s, 3)
        return answer

    def _starts(self, query: str, subgoals: list[str], cands: list[Candidate], graph: GraphView,
                sv: np.ndarray, usage: Usage) -> list[str]:
        """The model picks the starts only when the call budget leaves more than two rounds (so two remain
        after its call); otherwise they are chosen offline (greedy sub-goal coverage): with 4 calls, a
        model's start selection left one round, so the neighbours the explorers chose were never visited;
        now the 4 calls are plan, two rounds, answer."""
        s = self.settings
        rounds = self._rounds_left(usage)
        selector = self.roles.selector if rounds is None or rounds > 2 else _OFFLINE_SELECTOR
        picks = selector.select(query, subgoals, cands, graph, sv, s.max_start_nodes)
        return with_anchors(picks, cands, s.anchor_starts, s.max_start_nodes)

    def _rounds_left(self, usage: Usage, reserve: int = 1) -> int | None:
        """Exploration rounds the call budget still allows, keeping `reserve` calls (the answer's); a replay
        from the response cache counts like a call, so a re-ask takes the same path."""
        if self.call_budget is None:
            return None
        return max(0, self.call_budget - usage.llm_calls - usage.cached_calls - reserve)

    def _explore(self, frontier: Frontier, graph: GraphView, policy: ExplorerPolicy, question: str, subgoals: list[str],
                 usage: Usage, rounds: int | None = None) -> None:
        """Explore until the queue empties, the steps run out, or (under a call budget) the calls do;
        `rounds`: at most that many rounds."""
        s = self.settings
        budget = self._rounds_left(usage)
        limit = budget if rounds is None else (rounds if budget is None else min(rounds, budget))
        if limit == 0:
            return
        run_rounds(s.explorers, frontier, graph, policy, question, subgoals, s.max_next, s.use_relations,
                   batched=budget is not None, max_rounds=limit)

    def _ask(self, sources: list[GraphSource], question: str, usage: Usage) -> Answer:
        """Plan once, then localise, explore and rank in each namespace (a scope that covers several), and
        answer from the best evidence of all of them, merged by score."""
        s, roles = self.settings, self.roles
        subgoals = roles.planner.plan(question, s.max_subgoals) if s.use_planner else [question]
        subgoals = subgoals or [question]
        texts = [question, *subgoals]
        vectors = self._embed_with_subject(question, texts)
        qv, sv = vectors[0], vectors[1:]
        graphs = [view_of(src, texts, vectors) for src in sources]
        searched = [w for w in (self._search_one(g, question, subgoals, qv, sv, usage) for g in graphs)
                    if w is not None]
        if not searched:
            return Answer(question=question, namespace=graphs[0].namespace,
                          answer="Nothing is stored in this memory yet.", used_fallback=True)
        if len(searched) == 1:
            ranked = [(searched[0].graph, searched[0].graph.observations[oid]) for oid in searched[0].ranking]
        else:
            merged = sorted(((float(score), k, oid) for k, w in enumerate(searched)
                             for oid, score in zip(w.ranking, w.scores)),
                            key=lambda x: -x[0])  # stable: one namespace's order is kept among equal scores
            ranked = [(searched[k].graph, searched[k].graph.observations[oid]) for _, k, oid in merged]
        ranked_obs = [o for _, o in ranked]
        n_handed = len(evidence_lines(ranked_obs, min(s.evidence_tokens, s.max_context_tokens)))
        if len(searched) == 1:
            handed = sorted(ranked[:n_handed], key=lambda go: (go[1].step, go[1].seq))
        else:  # step numbers of different namespaces do not compare; dates do
            handed = sorted(ranked[:n_handed], key=lambda go: (go[1].date or "", go[1].step, go[1].seq))
        events = self._events_of(ranked[:n_handed])
        shown = [as_called(o, g.called(question)) for g, o in handed]
        reply = roles.responder.respond(question, [e for _, e in events], shown, s.evidence_tokens)
        handed_ids = {(g.namespace, o.id) for g, o in handed}
        kept = {(w.graph.namespace, e): goals for w in searched for e, goals in w.frontier.kept_subgoals.items()}
        first = searched[0]
        return Answer(
            question=question, namespace=first.graph.namespace, answer=reply.text or "No answer could be formed.",
            answer_kind=reply.kind if reply.text else "none",
            evidence=[EvidenceItem(event_id=e.id, summary=e.summary, namespace=g.namespace,
                                   observation_ids=[o for o in e.observation_ids if (g.namespace, o) in handed_ids],
                                   time=e.time.label(), subgoals=kept.get((g.namespace, e.id), []))
                      for g, e in events],
            subgoals=[SubgoalState(text=g, satisfied=any(w.frontier.satisfied[i] for w in searched))
                      for i, g in enumerate(subgoals)],
            trace=[t for w in searched for t in w.frontier.trace], start_nodes=[x for w in searched for x in w.starts],
            refined_query=next((w.refined for w in searched if w.refined), None),
            used_fallback=not any(w.frontier.kept for w in searched),
            context_tokens=sum(approx_tokens(evidence_line(o)) for _, o in handed),
            ranking=[o.id for o in ranked_obs[: len(evidence_lines(ranked_obs, s.ranking_tokens))]])

    def _search_one(self, graph: GraphView, question: str, subgoals: list[str], qv: np.ndarray, sv: np.ndarray,
                    usage: Usage) -> "_Searched | None":
        """Localise, explore (and refine) in one namespace's graph, then rank its evidence."""
        s, roles = self.settings, self.roles
        if graph.empty:
            return None
        texts = [question, *subgoals]
        sims = graph.similarity(np.vstack([qv[None], sv]), texts)
        policy = roles.policy(graph, sims)
        frontier = Frontier(sims, graph.index, s.max_steps)

        cands = candidates_for(graph, qv, question, s)
        starts = self._starts(question, subgoals, cands, graph, sv, usage)
        frontier.push(starts)
        budgeted = self.call_budget is not None
        self._explore(frontier, graph, policy, question, subgoals, usage, rounds=1 if budgeted else None)

        refined: str | None = None
        # offline: when the queue has emptied; under a budget: between rounds, if a round is still left
        gap_time = (self._rounds_left(usage) or 0) >= 1 if budgeted else frontier.queue_size() == 0
        if s.refinement and not all(frontier.satisfied) and gap_time:
            model_call = not budgeted or (self._rounds_left(usage, reserve=2) or 0) >= 1  # refine + a round + answer
            refined = gap_query(roles.planner if model_call else _OFFLINE_PLANNER, graph, frontier, question, subgoals)
            if refined:  # localised among the events not seen yet; between budgeted rounds, read first
                _, _, seen = frontier.snapshot()
                more = candidates_for(graph, self.embedder.embed([refined])[0], refined, s, exclude=seen)
                frontier.reopen(s.max_steps)
                frontier.push(self._starts(refined, subgoals, more, graph, sv, usage),
                              first=max(s.explorers - 1, 1) if budgeted else 0)
        if refined or budgeted:
            self._explore(frontier, graph, policy, question, subgoals, usage)
        ranking, scores = self.rank(graph, question, qv, list(frontier.kept))
        return _Searched(graph, frontier, list(starts), refined, ranking, scores)

    def _embed_with_subject(self, question: str, texts: list[str]) -> np.ndarray:
        """The vectors of `texts`, in one model run with the question's subject (~4 ms a run here, the
        texts little): rank reads the subject's vector from the embedding cache."""
        subject = subject_of(question) if self.settings.subject_weight else None
        return self.embedder.embed(texts + ([subject] if subject else []))[: len(texts)]

    def rank(self, graph: GraphView, query: str, qv: np.ndarray | None = None,
             kept: list[str] | None = None) -> tuple[list[str], np.ndarray]:
        """The evidence ranking (search/rank.py) of a query: observation ids best first and their scores."""
        s = self.settings
        if graph.empty:
            return [], np.zeros(0)
        qv = self.embedder.embed([query])[0] if qv is None else qv
        own = graph.observation_scores(qv, [query])[:, 0]
        unnamed = without_people(query, names_used(graph, query)) if s.unnamed_weight else None
        if unnamed:
            uv = self.embedder.embed([unnamed])[0]
            own = (1 - s.unnamed_weight) * own + s.unnamed_weight * graph.observation_scores(uv, [unnamed])[:, 0]
        subject = subject_of(query) if s.subject_weight and graph.obs_matrix is not None else None
        if subject:
            own = own + s.subject_weight * dots(graph.obs_matrix, self.embedder.embed([subject]))[:, 0]
        return rank_observations(graph, own, query, kept or [], RankWeights.from_settings(s),
                                 limit=max(RANK_DEPTH, max(s.ranking_tokens, s.evidence_tokens) // 4))

    def search(self, source: GraphSource, query: str, limit: int = 10) -> list[SearchHit]:
        """Events ranked for a query, each with its matching observations and their scores: the graph's
        ranking without exploration or answering, so it makes no model call in any mode."""
        query = check_question(query, self.settings)
        qv = self._embed_with_subject(query, [query])[0]
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
                                      namespace=graph.namespace,
                                      participants=e.participants, topic_id=e.topic_id, observations=[])
            o = graph.observations[oid]
            hits[eid].observations.append(ObservationHit(id=o.id, speaker=o.speaker, text=o.text, date=o.date,
                                                         score=round(float(score), 4)))
        return list(hits.values())

    @staticmethod
    def _events_of(observations: list[tuple[GraphView, Observation]]) -> list[tuple[GraphView, Event]]:
        """The events behind the handed observations, in the order their best observation ranks."""
        seen: dict[tuple[str, str], tuple[GraphView, Event]] = {}
        for g, o in observations:
            e = g.event_of(o.id)
            if e and (g.namespace, e) not in seen:
                seen[(g.namespace, e)] = (g, g.events[e])
        return list(seen.values())
