"""The state all explorers share: one priority queue, one visited set, one kept-evidence list and the
satisfaction vector.

The explorers step in synchronous rounds (search/explorer.py): each round claims its nodes here, the
decisions are made (in threads when each is a model call), and they are applied here one by one on the
calling thread. So the Frontier is touched by one thread at a time and needs no lock; the guarantees
the reference code lacked hold by construction: claiming a node marks it visited (no duplicate visits,
no stuck path on a visited node), kept evidence is only ever appended to this one list (nothing lost),
priorities are recomputed when the vector changes, and the search ends when the queue is empty or the
step budget is spent.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from ..models import TraceStep


class Frontier:
    def __init__(self, sims: np.ndarray, index_of, max_steps: int) -> None:
        self.sims = sims  # events × (question, subgoal 1..K) similarity table
        self.index_of = index_of  # event id -> row of sims
        self.satisfied = [False] * (sims.shape[1] - 1)
        self.visited: set[str] = set()
        self.kept: list[str] = []
        self.kept_subgoals: dict[str, list[int]] = {}
        self.trace: list[TraceStep] = []
        self.max_steps = max_steps
        self.steps = 0
        self.round = 0
        self._heap: list[tuple[bool, float, int, str]] = []  # (not first, -priority, arrival, id)
        self._queued: set[str] = set()
        self._counter = itertools.count()
        self._first: set[str] = set()  # read before anything else queued (a refined query's best starts)

    def priority(self, event_id: str) -> float:
        """max over unsatisfied subgoals of sim(event, subgoal); the question itself once all are met."""
        row = self.sims[self.index_of(event_id)]
        open_cols = [j + 1 for j, s in enumerate(self.satisfied) if not s]
        return float(row[open_cols].max()) if open_cols else float(row[0])

    def _entry(self, event_id: str, arrival: int) -> tuple[bool, float, int, str]:
        """Heap order: events to read first (a refined query's best starts), then by priority, then arrival."""
        return (event_id not in self._first, -self.priority(event_id), arrival, event_id)

    def _reprioritise(self) -> None:
        items = [self._entry(eid, c) for _, _, c, eid in self._heap]
        heapq.heapify(items)
        self._heap = items

    def push(self, event_ids: list[str], first: int = 0) -> list[str]:
        """Queue the ids not visited or queued yet; returns those added. The first `first` added are read
        before anything else queued."""
        added = []
        for eid in event_ids:
            if eid in self.visited or eid in self._queued:
                continue
            if len(added) < first:
                self._first.add(eid)
            heapq.heappush(self._heap, self._entry(eid, next(self._counter)))
            self._queued.add(eid)
            added.append(eid)
        return added

    def queue_size(self) -> int:
        return len(self._heap)

    def queued(self) -> list[str]:
        return [eid for *_, eid in sorted(self._heap)]

    def take_many(self, n: int) -> list[str]:
        """Claim (and mark visited) up to n best nodes within the step budget: one round's nodes; [] when
        the queue is empty or the budget spent, which ends the search."""
        out: list[str] = []
        while self._heap and len(out) < n and self.steps < self.max_steps:
            *_, eid = heapq.heappop(self._heap)
            self._queued.discard(eid)
            self.visited.add(eid)
            self.steps += 1
            out.append(eid)
        return out

    def finish(self, event_id: str, step: TraceStep, keep: bool, newly_satisfied: list[int],
               next_ids: list[str]) -> None:
        """Apply one decision: trace it, keep the event, mark sub-goals met, queue the chosen neighbours."""
        self.trace.append(step)
        if keep and event_id not in self.kept:
            self.kept.append(event_id)
            self.kept_subgoals[event_id] = list(newly_satisfied)
        changed = False
        for j in newly_satisfied:
            if 0 <= j < len(self.satisfied) and not self.satisfied[j]:
                self.satisfied[j] = True
                changed = True
        if changed:
            self._reprioritise()
        self.push(next_ids)

    def reopen(self, extra_steps: int) -> None:
        """Start another round (refinement) on the same visited set, kept list and vector."""
        self.max_steps = self.steps + extra_steps
        self.round += 1

    def snapshot(self) -> tuple[list[str], list[bool], set[str]]:
        return list(self.kept), list(self.satisfied), set(self.visited) | set(self._queued)
