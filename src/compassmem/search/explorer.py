"""Explorers: each step looks at one event, its kept-evidence context and its typed neighbours and
chooses SKIP / EXPAND / ANSWER plus up to 3 neighbours to visit. Several explorers step in parallel
rounds over one Frontier."""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ..llm import LLMClient
from ..models import Event, TraceStep
from ..prompts import prompt
from ..schemas import ExploreOut, explore_choice, explore_round
from .frontier import Frontier
from .graph import GraphView, Neighbour
from ..text import clip, content_words


@dataclass
class StepContext:
    question: str
    subgoals: list[str]
    satisfied: list[bool]
    event: Event
    kept: list[Event]
    neighbours: list[Neighbour]
    max_next: int


class ExplorerPolicy(Protocol):
    def offer(self, ctx: StepContext) -> StepContext:
        """The step as this policy sees it (which neighbours it may choose from)."""
        ...

    def decide(self, ctx: StepContext) -> ExploreOut: ...

    def decide_batch(self, ctxs: list[StepContext]) -> list[ExploreOut]:
        """One round of several explorers at once (one LLM call instead of one per explorer)."""
        ...


class OfflinePolicy:
    """Similarity-calibrated decisions. Thresholds are fractions of the best similarity any event has to
    the question / subgoal, so they work for any embedder without retuning."""

    concurrent = False  # pure Python arithmetic: threads would only add start-up cost under the GIL

    def __init__(self, graph: GraphView, sims: np.ndarray, keep_ratio: float = 0.8, satisfy_ratio: float = 0.9,
                 follow_ratio: float = 0.7) -> None:
        self.graph = graph
        ref = sims.max(axis=0)
        ref[ref <= 0] = 1.0
        self.rel = sims / ref  # events × [question, subgoals], 1.0 = the best event for that column
        self.keep_ratio, self.satisfy_ratio, self.follow_ratio = keep_ratio, satisfy_ratio, follow_ratio

    def offer(self, ctx: StepContext) -> StepContext:
        return ctx  # scores every neighbour: arithmetic, not reading

    def _lexical(self, text: str, goal: str) -> float:
        want = set(content_words(goal))
        return len(want & set(content_words(text))) / len(want) if want else 0.0

    def decide(self, ctx: StepContext) -> ExploreOut:
        rel = self.rel[self.graph.index(ctx.event.id)]
        raw = " ".join(self.graph.source_lines(ctx.event)) + " " + ctx.event.summary
        satisfied = [j for j, goal in enumerate(ctx.subgoals)
                     if not ctx.satisfied[j] and rel[j + 1] >= self.satisfy_ratio and self._lexical(raw, goal) >= 0.5]
        open_cols = [j + 1 for j in range(len(ctx.subgoals)) if not ctx.satisfied[j]]
        relevance = float(rel[[0, *open_cols]].max())
        lexical = max(self._lexical(raw, g) for g in [ctx.question, *ctx.subgoals])
        keep = relevance >= self.keep_ratio or lexical >= 0.6 or bool(satisfied)
        after = [s or (j in satisfied) for j, s in enumerate(ctx.satisfied)]
        scored = []
        for n in ctx.neighbours:
            nrel = self.rel[self.graph.index(n.event_id)]
            score = float(nrel[[0] + [j + 1 for j, s in enumerate(after) if not s]].max())
            if score >= self.follow_ratio:
                scored.append((score, n.event_id))
        nxt = [eid for _, eid in sorted(scored, reverse=True)[: ctx.max_next]]
        action = "SKIP" if not keep else ("ANSWER" if all(after) and not nxt else "EXPAND")
        return ExploreOut(action=action, next=nxt, satisfied=satisfied)


    def decide_batch(self, ctxs: list[StepContext]) -> list[ExploreOut]:
        return [self.decide(c) for c in ctxs]


class LLMPolicy:
    """The model decides. Each event's unvisited neighbours are shown as a numbered menu and its open
    sub-goals by number; the output schema (schemas.explore_choice) only admits those numbers, and the
    answer is mapped back to event ids here, with the model's one-line reason kept for the trace."""

    def __init__(self, llm: LLMClient, graph: GraphView, show_relations: bool = True, sims: np.ndarray | None = None,
                 menu_size: int | None = None) -> None:
        self.llm = llm
        self.graph = graph
        self.show_relations = show_relations
        self.sims = sims  # events × [question, sub-goals], as the offline policy gets them
        self.menu_size = menu_size  # search.menu_size; None: every neighbour

    def offer(self, ctx: StepContext) -> StepContext:
        """Only the `menu_size` neighbours most similar to the question or an open sub-goal: a LoCoMo event
        has a median of 17 neighbours (p90 40), and a menu of all of them made one round's prompt several
        thousand tokens for a 1.5B model to choose from."""
        if self.sims is None or self.menu_size is None or len(ctx.neighbours) <= self.menu_size:
            return ctx
        cols = [0, *(j + 1 for j, s in enumerate(ctx.satisfied) if not s)]
        best = sorted(ctx.neighbours, key=lambda n: -float(self.sims[self.graph.index(n.event_id), cols].max()))
        return replace(ctx, neighbours=best[: self.menu_size])

    @staticmethod
    def _open(ctx: StepContext) -> tuple[int, ...]:
        """Numbers (1-based, as shown) of the sub-goals still open."""
        return tuple(j + 1 for j, s in enumerate(ctx.satisfied) if not s)

    def _goals(self, ctx: StepContext) -> str:
        return "\n".join(f"{j + 1}. [{'met' if s else 'open'}] {t}"
                         for j, (t, s) in enumerate(zip(ctx.subgoals, ctx.satisfied)))

    def _kept(self, ctx: StepContext) -> str:
        """Kept events by their summaries, newest last: whole spans made prompts of 6 K characters."""
        return "\n".join(f"- ({e.time.label()}) {clip(e.summary, 160)}" for e in ctx.kept)[-1000:] or "(none)"

    def _menu(self, ctx: StepContext) -> str:
        """A neighbour is previewed by its turn closest to the question, not by the start of its summary
        (an offline summary opens with the event's first turns: "Hey Mel! Good to see you!")."""
        rows = []
        for k, n in enumerate(ctx.neighbours, 1):
            e = self.graph.events[n.event_id]
            how = (f"{n.type} {'→' if n.outgoing else '←'} " if self.show_relations else "")
            best = self.graph.best_observation(e, ctx.question)
            preview = e.summary if best is None else best.said()
            rows.append(f"{k}. {how}({e.time.label()}; {', '.join(e.participants) or 'unknown'}) {clip(preview, 120)}")
        return "\n".join(rows) or "(none: this event has no unvisited neighbour)"

    def _current(self, ctx: StepContext) -> str:
        """The event's summary and the one source turn that best matches the question, not its whole span."""
        line = self.graph.best_line(ctx.event, ctx.question)
        summary = clip(ctx.event.summary, 250)  # offline summaries run to a median 724 characters on LoCoMo
        return f"{summary}\nBest matching turn: {clip(line, 300)}" if line else summary

    @staticmethod
    def _decision(ctx: StepContext, choice) -> ExploreOut:
        """The model's numbers as the search's ids: menu k is the k-th neighbour, sub-goal j is index j-1."""
        nxt = [ctx.neighbours[k - 1].event_id for k in dict.fromkeys(getattr(choice, "next", [])) if 0 < k <= len(ctx.neighbours)]
        met = [j - 1 for j in dict.fromkeys(getattr(choice, "satisfied", []))]
        return ExploreOut(action=choice.action, next=nxt[: ctx.max_next], satisfied=met, why=choice.why)

    def _schema(self, ctx: StepContext) -> type:
        return explore_choice(len(ctx.neighbours), self._open(ctx), ctx.max_next)

    def decide(self, ctx: StepContext) -> ExploreOut:
        choice = self.llm.structured(
            prompt("explore"), self._schema(ctx), question=ctx.question, subgoals=self._goals(ctx),
            kept=self._kept(ctx), current_time=ctx.event.time.label(),
            current_people=", ".join(ctx.event.participants) or "unknown", current_text=self._current(ctx),
            neighbours=self._menu(ctx), max_next=ctx.max_next)
        return self._decision(ctx, choice)

    def decide_batch(self, ctxs: list[StepContext]) -> list[ExploreOut]:
        if len(ctxs) == 1:
            return [self.decide(ctxs[0])]
        blocks = []
        for i, c in enumerate(ctxs, 1):
            e = c.event
            blocks.append(f"### event_{i} ({e.time.label()}; people: {', '.join(e.participants) or 'unknown'})\n"
                          f"{self._current(c)}\nIts unvisited neighbours:\n{self._menu(c)}")
        schema = explore_round(tuple(len(c.neighbours) for c in ctxs), self._open(ctxs[0]), ctxs[0].max_next)
        out = self.llm.structured(prompt("explore_batch"), schema, question=ctxs[0].question,
                                  subgoals=self._goals(ctxs[0]), kept=self._kept(ctxs[0]), events="\n\n".join(blocks),
                                  max_next=ctxs[0].max_next, n=len(ctxs))
        return [self._decision(c, getattr(out, f"event_{i}")) for i, c in enumerate(ctxs, 1)]


def _context(frontier: Frontier, graph: GraphView, eid: str, question: str, subgoals: list[str], max_next: int,
             use_relations: bool) -> StepContext:
    kept_ids, satisfied, seen = frontier.snapshot()
    neighbours = graph.neighbours(eid, visited=seen) if use_relations else []
    return StepContext(question, subgoals, satisfied, graph.events[eid], [graph.events[k] for k in kept_ids],
                       neighbours, max_next)


def _apply(frontier: Frontier, worker: int, ctx: StepContext, out: ExploreOut, max_next: int) -> None:
    allowed = {n.event_id for n in ctx.neighbours}
    nxt = [x for x in dict.fromkeys(out.next) if x in allowed][:max_next]
    rejected = [x for x in out.next if x not in allowed]
    newly = [j for j in out.satisfied if 0 <= j < len(ctx.subgoals)] if out.action != "SKIP" else []
    step = TraceStep(explorer=worker, round=frontier.round, event_id=ctx.event.id, action=out.action, next=nxt,
                     satisfied=newly, rejected_next=rejected, offered=len(ctx.neighbours), why=out.why)
    frontier.finish(ctx.event.id, step, keep=out.action != "SKIP", newly_satisfied=newly, next_ids=nxt)


def run_rounds(n: int, frontier: Frontier, graph: GraphView, policy: ExplorerPolicy, question: str,
               subgoals: list[str], max_next: int, use_relations: bool, batched: bool = False,
               max_rounds: int | None = None) -> None:
    """The explorers step in synchronous rounds over one frontier: each round the n active explorers claim
    the n best nodes, decide in parallel (threads, or one call for all when `batched`), and the decisions
    are applied in explorer order. Every decision of a round sees the same state, so a search is
    reproducible (same prompts, so LLM-cache hits on a re-ask) whatever the threads' timing. An explorer
    that said ANSWER sits out the following rounds. `max_rounds`: stop after that many rounds (a batched
    LLM policy makes one call per round)."""
    active = list(range(n))
    rounds = 0
    threads = n if getattr(policy, "concurrent", True) else 0
    with ThreadPoolExecutor(max_workers=max(threads, 1), thread_name_prefix="explorer") as pool:
        while active and (max_rounds is None or rounds < max_rounds):
            claimed = frontier.take_many(len(active))
            if not claimed:
                return
            rounds += 1
            ctxs = [policy.offer(_context(frontier, graph, eid, question, subgoals, max_next, use_relations))
                    for eid in claimed]
            if batched:
                outs = policy.decide_batch(ctxs)
            elif len(ctxs) == 1 or not threads:
                outs = [policy.decide(c) for c in ctxs]
            else:  # each explorer's call runs in a copy of this context: it counts for this ask
                futures = [pool.submit(contextvars.copy_context().run, policy.decide, c) for c in ctxs]
                outs = [f.result() for f in futures]  # an error surfaces here, after the round's calls end
            for worker, ctx, out in zip(active, ctxs, outs):
                _apply(frontier, worker, ctx, out, max_next)
            active = [w for w, out in zip(active, outs) if out.action != "ANSWER"] + active[len(outs):]
