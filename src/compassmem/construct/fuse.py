"""Node fusion & expansion: each new event is merged into an equivalent existing event, linked to a
related one, or inserted. Only the nearest candidates are judged, so cost per step is bounded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..config import ConstructionSettings
from ..llm import LLMClient
from ..models import Event
from ..prompts import prompt
from ..schemas import JudgeOut
from ..timeutil import from_iso


class FusionJudge(Protocol):
    def judge(self, existing: Event, new: Event, sim: float) -> JudgeOut: ...


def times_compatible(a: Event, b: Event, days: int = 3) -> bool:
    da, db = from_iso(a.time.date), from_iso(b.time.date)
    if da is None or db is None:
        return True
    return abs((da - db).days) <= days


class OfflineFusionJudge:
    """Same event: near-identical meaning, overlapping participants, compatible times.
    Related: clearly similar meaning; typed follow_up when people recur, else related_to."""

    def __init__(self, settings: ConstructionSettings) -> None:
        self.settings = settings

    def judge(self, existing: Event, new: Event, sim: float) -> JudgeOut:
        shared = set(existing.participants) & set(new.participants)
        people_ok = bool(shared) or not existing.participants or not new.participants
        if sim > self.settings.merge_threshold and people_ok and times_compatible(existing, new):
            return JudgeOut(same_event=True, related=False)
        if sim >= self.settings.related_threshold:
            kind = "follow_up" if len(shared) >= 1 and new.step > existing.step else "related_to"
            return JudgeOut(same_event=False, related=True, relation_type=kind)
        return JudgeOut(same_event=False, related=False)


class LLMFusionJudge:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def judge(self, existing: Event, new: Event, sim: float) -> JudgeOut:
        return self.llm.structured(
            prompt("judge"), JudgeOut,
            old_time=existing.time.label(), old_people=", ".join(existing.participants) or "unknown",
            old_summary=existing.summary, new_time=new.time.label(),
            new_people=", ".join(new.participants) or "unknown", new_summary=new.summary)


@dataclass
class FusionDecision:
    kind: str  # "merge" | "link" | "insert"
    target: Event | None = None
    relation_type: str | None = None
    sim: float = 0.0


def decide(new: Event, candidates: list[tuple[Event, float]], judge: FusionJudge,
           settings: ConstructionSettings, calls_left: int) -> tuple[list[FusionDecision], int]:
    """Decisions for one new event against its nearest existing events (best first).

    The best candidate above the merge threshold is asked 'same event?'; every candidate above the
    related threshold may become a typed cross-step edge. Returns the decisions and judge calls used.
    """
    decisions: list[FusionDecision] = []
    used = 0
    for existing, sim in candidates[: settings.judge_candidates]:
        if sim < settings.related_threshold or used >= calls_left:
            break
        verdict = judge.judge(existing, new, sim)
        used += 1
        if verdict.same_event and sim > settings.merge_threshold and not decisions:
            return [FusionDecision("merge", existing, sim=sim)], used
        if verdict.related or verdict.same_event:
            decisions.append(FusionDecision("link", existing, verdict.relation_type or "related_to", sim))
    return decisions or [FusionDecision("insert")], used


def merge_into(existing: Event, new: Event, obs_order: dict[str, tuple[int, int]]) -> Event:
    """The fused event keeps both summaries (history), the union of spans and of participants."""
    ids = list(dict.fromkeys(existing.observation_ids + new.observation_ids))
    ids.sort(key=lambda x: obs_order.get(x, (10**9, 0)))
    people = list(dict.fromkeys(existing.participants + new.participants))[:3]
    return existing.model_copy(update={"observation_ids": ids, "participants": people,
                                       "history": existing.history + [new.summary]})
