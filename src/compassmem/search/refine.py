"""Refinement: one gap-aware query when sub-goals stay open, and where its new start nodes enter the search.

The paper's refinement runs after exploration stops with sub-goals unmet. Offline (no call budget) that
is when the queue empties. In agentic mode the call budget (4 by default: plan, two rounds, answer)
would never leave room for it after exploring, so it runs between the rounds: after the first round,
if a sub-goal is open, the gap query is written — by the model when the budget still has a call for
it, else by the offline planner (the open sub-goals' words that the kept evidence lacks) — and its
best new events go to the front of the queue, so the next round reads them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..config import SearchSettings
from .frontier import Frontier
from .graph import GraphView
from .localize import candidates_for
from .planner import Planner

Embed = Callable[[list[str]], np.ndarray]
Starts = Callable[[str, list], list[str]]  # (refined query, its candidates) -> start event ids


def gap_query(planner: Planner, graph: GraphView, frontier: Frontier, question: str, subgoals: list[str]) -> str | None:
    """The planner's query for what is still missing, or None when it only restates the question."""
    kept, satisfied, _ = frontier.snapshot()
    evidence = "\n".join(line for k in kept for line in graph.source_lines(graph.events[k]))
    refined = planner.refine(question, subgoals, satisfied, evidence[-4000:])
    return refined if refined and refined.strip().lower() != question.strip().lower() else None


def push_refined(frontier: Frontier, graph: GraphView, refined: str, embed: Embed, starts: Starts,
                 settings: SearchSettings, first: int = 0) -> list[str]:
    """Localise the refined query among the events not seen yet and queue its starts; the best `first` of
    them are read before anything else queued (between budgeted rounds, so the round reads them)."""
    _, _, seen = frontier.snapshot()
    rv = embed([refined])[0]
    new = starts(refined, candidates_for(graph, rv, refined, settings, exclude=seen))
    frontier.push(new, first=first)
    return new
