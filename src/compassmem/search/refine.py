"""Refinement: one gap-aware query when sub-goals stay open (the engine localises it and queues its starts).

The paper's refinement runs after exploration stops with sub-goals unmet. Offline (no call budget) that
is when the queue empties. In agentic mode the call budget (4 by default: plan, two rounds, answer)
would never leave room for it after exploring, so it runs between the rounds: after the first round,
if a sub-goal is open, the gap query is written — by the model when the budget still has a call for
it, else by the offline planner (the open sub-goals' words that the kept evidence lacks) — and its
best new events go to the front of the queue, so the next round reads them.
"""

from __future__ import annotations

from .frontier import Frontier
from .graph import GraphView
from .planner import Planner


def gap_query(planner: Planner, graph: GraphView, frontier: Frontier, question: str, subgoals: list[str]) -> str | None:
    """The planner's query for what is still missing, or None when it only restates the question."""
    kept, satisfied, _ = frontier.snapshot()
    evidence = "\n".join(line for k in kept for line in graph.source_lines(graph.events[k]))
    refined = planner.refine(question, subgoals, satisfied, evidence[-4000:])
    return refined if refined and refined.strip().lower() != question.strip().lower() else None
