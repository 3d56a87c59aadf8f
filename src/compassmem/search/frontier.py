"""The state all explorers share: one priority queue, one visited set, one kept-evidence list and the
satisfaction vector, behind one condition variable.

Guarantees the reference code lacked: popping marks a node visited in the same critical section (no
duplicate visits, no stuck path on a visited node); an explorer waits on the condition instead of a
blocking get (no deadlock); termination is 'queue empty and nobody working'; kept evidence is only
ever appended to this one list (nothing lost); priorities are recomputed when the vector changes.
"""

from __future__ import annotations

import heapq
import itertools
import threading

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
        self.cond = threading.Condition()
        self._heap: list[tuple[float, int, str]] = []
        self._queued: set[str] = set()
        self._counter = itertools.count()
        self._active = 0
        self._done = False
        self.error: BaseException | None = None

    # ------------------------------------------------------------------ priorities
    def priority(self, event_id: str) -> float:
        """max over unsatisfied subgoals of sim(event, subgoal); the question itself once all are met."""
        row = self.sims[self.index_of(event_id)]
        open_cols = [j + 1 for j, s in enumerate(self.satisfied) if not s]
        return float(row[open_cols].max()) if open_cols else float(row[0])

    def _reprioritise(self) -> None:
        items = [(-self.priority(eid), c, eid) for _, c, eid in self._heap]
        heapq.heapify(items)
        self._heap = items

    # ------------------------------------------------------------------ queue (call with cond held)
    def push(self, event_ids: list[str]) -> list[str]:
        added = []
        for eid in event_ids:
            if eid in self.visited or eid in self._queued:
                continue
            heapq.heappush(self._heap, (-self.priority(eid), next(self._counter), eid))
            self._queued.add(eid)
            added.append(eid)
        if added:
            self.cond.notify_all()
        return added

    def queue_size(self) -> int:
        return len(self._heap)

    def queued(self) -> list[str]:
        return [eid for _, _, eid in sorted(self._heap)]

    def take(self) -> str | None:
        """Block until a node is available (returned visited and claimed) or the search is over (None)."""
        with self.cond:
            while True:
                if self._done or self.error is not None:
                    return None
                if self._heap and self.steps < self.max_steps:
                    _, _, eid = heapq.heappop(self._heap)
                    self._queued.discard(eid)
                    self.visited.add(eid)
                    self.steps += 1
                    self._active += 1
                    return eid
                if self._active == 0 or self.steps >= self.max_steps:
                    self._done = True
                    self.cond.notify_all()
                    return None
                self.cond.wait()

    def take_many(self, n: int) -> list[str]:
        """Claim up to n nodes at once without waiting (one synchronous round of the batched mode)."""
        with self.cond:
            out: list[str] = []
            while self._heap and len(out) < n and self.steps < self.max_steps and self.error is None:
                _, _, eid = heapq.heappop(self._heap)
                self._queued.discard(eid)
                self.visited.add(eid)
                self.steps += 1
                self._active += 1
                out.append(eid)
            return out

    def finish(self, event_id: str, step: TraceStep, keep: bool, newly_satisfied: list[int],
               next_ids: list[str]) -> None:
        with self.cond:
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
            self._active -= 1
            self.cond.notify_all()

    def fail(self, exc: BaseException, claimed: int = 1) -> None:
        with self.cond:
            self.error = exc
            self._active -= claimed
            self.cond.notify_all()

    def reopen(self, extra_steps: int) -> None:
        """Start another round (refinement) on the same visited set, kept list and vector."""
        with self.cond:
            self._done = False
            self.max_steps = self.steps + extra_steps
            self.round += 1

    def snapshot(self) -> tuple[list[str], list[bool], set[str]]:
        with self.cond:
            return list(self.kept), list(self.satisfied), set(self.visited) | set(self._queued)
