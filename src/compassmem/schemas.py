"""Output schemas of every LLM role. The JSON schema sent to the model is generated from these,
and the same models validate what comes back."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

# Bounded strings and lists: the JSON schema carries maxLength/maxItems, so grammar-constrained decoding
# terminates, and the worst case of each role fits in llm.max_tokens (1536): segment ≈ 8 × 450 chars.
Id = Annotated[str, StringConstraints(min_length=1, max_length=24)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=40)]
Short = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class SegEvent(BaseModel):
    start: int = Field(ge=1, le=1000, description="number of the event's first line; it runs to the next event's start")
    summary: str = Field(min_length=1, max_length=240, description="keeps names, numbers, dates, places")
    time_expression: str | None = Field(default=None, max_length=60, description="time as said, e.g. 'last Saturday'")
    participants: list[Name] = Field(default_factory=list, max_length=3)


class SegmentOut(BaseModel):
    events: list[SegEvent] = Field(min_length=1, max_length=8)


class RelOut(BaseModel):
    source: Id = Field(description="event label, e.g. E1")
    target: Id
    type: Name = Field(description="causal, motivation, enablement, temporal_before, temporal_after, follow_up, "
                                  "part_of, contrast, elaboration, or another short label")
    evidence: list[Id] = Field(default_factory=list, max_length=4)


class RelateOut(BaseModel):
    relations: list[RelOut] = Field(default_factory=list, max_length=12)


class JudgeOut(BaseModel):
    same_event: bool
    related: bool
    relation_type: Name | None = None


class TopicLabelOut(BaseModel):
    label: str = Field(min_length=1, max_length=80)


class PlanOut(BaseModel):
    subgoals: list[Short] = Field(min_length=1, max_length=5)


class SelectOut(BaseModel):
    selected: list[Id] = Field(default_factory=list, max_length=5)


class ExploreOut(BaseModel):
    action: Literal["EXPAND", "SKIP", "ANSWER"]
    next: list[Id] = Field(default_factory=list, max_length=3)
    satisfied: list[int] = Field(default_factory=list, max_length=5)


class ExploreDecision(ExploreOut):
    event_id: Id


class ExploreBatchOut(BaseModel):
    decisions: list[ExploreDecision] = Field(min_length=1, max_length=8)


class RefineOut(BaseModel):
    query: str = Field(min_length=1, max_length=300)


class GradeOut(BaseModel):
    label: Literal["CORRECT", "WRONG"]


class RespondOut(BaseModel):
    answer: str = Field(max_length=300)
