"""Output schemas of every LLM role. The JSON schema sent to the model is generated from these,
and the same models validate what comes back."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class SegEvent(BaseModel):
    summary: str = Field(min_length=1, description="keeps names, numbers, dates, places")
    observation_ids: list[str] = Field(min_length=1, description="ids of the turns this event spans")
    time_expression: str | None = Field(default=None, description="time as said, e.g. 'last Saturday'")
    participants: list[str] = Field(default_factory=list, max_length=3)


class SegmentOut(BaseModel):
    events: list[SegEvent] = Field(min_length=1, max_length=12)


class RelOut(BaseModel):
    source: str = Field(description="event label, e.g. E1")
    target: str
    type: str = Field(description="causal, motivation, enablement, temporal_before, temporal_after, follow_up, "
                                  "part_of, contrast, elaboration, or another short label")
    evidence: list[str] = Field(default_factory=list, max_length=4)


class RelateOut(BaseModel):
    relations: list[RelOut] = Field(default_factory=list, max_length=20)


class JudgeOut(BaseModel):
    same_event: bool
    related: bool
    relation_type: str | None = None


class TopicLabelOut(BaseModel):
    label: str = Field(min_length=1, max_length=80)


class PlanOut(BaseModel):
    subgoals: list[str] = Field(min_length=1, max_length=5)


class SelectOut(BaseModel):
    selected: list[str] = Field(default_factory=list, max_length=5)


class ExploreOut(BaseModel):
    action: Literal["EXPAND", "SKIP", "ANSWER"]
    next: list[str] = Field(default_factory=list, max_length=3)
    satisfied: list[int] = Field(default_factory=list, max_length=5)


class ExploreDecision(ExploreOut):
    event_id: str


class ExploreBatchOut(BaseModel):
    decisions: list[ExploreDecision] = Field(min_length=1, max_length=8)


class RefineOut(BaseModel):
    query: str = Field(min_length=1, max_length=300)


class RespondOut(BaseModel):
    answer: str
