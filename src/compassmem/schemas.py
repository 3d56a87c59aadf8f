"""Output schemas of every LLM role. The JSON schema sent to the model is generated from these,
and the same models validate what comes back."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, create_model

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
    """An explorer's decision as the search applies it (event ids, 0-based sub-goals), whoever made it."""

    action: Literal["EXPAND", "SKIP", "ANSWER"]
    next: list[Id] = Field(default_factory=list, max_length=3)
    satisfied: list[int] = Field(default_factory=list, max_length=5)
    why: str = Field("", max_length=200)


Why = Annotated[str, StringConstraints(max_length=60)]  # a reason, not an essay: every token costs ~0.1 s here


@lru_cache(maxsize=256)
def explore_choice(menu: int, goals: tuple[int, ...], max_next: int) -> type[BaseModel]:
    """What a model may say about one event. Its neighbours are a numbered menu and `next` an enum of those
    numbers, its open sub-goals an enum too, so constrained decoding cannot name an event or a sub-goal
    that is not on offer (with free-form ids the 1.5B model named no neighbour in 316 decisions). A field
    is required when there is something to choose (the model must decide, [] included) and absent
    otherwise; `why` comes first: the reason is written before the choice."""
    fields: dict = {"why": (Why, Field(description="a few words: what this event says about the question")),
                    "action": (Literal["EXPAND", "SKIP", "ANSWER"], ...)}
    if menu and max_next:
        fields["next"] = (list[Literal[tuple(range(1, menu + 1))]],  # type: ignore[misc]
                          Field(max_length=min(menu, max_next)))
    if goals:
        fields["satisfied"] = (list[Literal[goals]], Field(max_length=len(goals)))  # type: ignore[misc]
    return create_model(f"ExploreChoice{menu}_{len(goals)}", **fields)


@lru_cache(maxsize=256)
def explore_round(menus: tuple[int, ...], goals: tuple[int, ...], max_next: int) -> type[BaseModel]:
    """One round of several explorers in one call: a field per event, in the order shown (event_1, …),
    each with its own neighbour menu, so a decision can only move along that event's own edges."""
    return create_model(f"ExploreRound{len(menus)}", **{
        f"event_{i + 1}": (explore_choice(m, goals, max_next), ...) for i, m in enumerate(menus)})


@lru_cache(maxsize=16)
def revision_choice(n: int) -> type[BaseModel]:
    """Which of the n numbered earlier statements a new one revises (construct/revise.py): an enum of 0..n,
    0 for none, so the model cannot name a statement it was not shown."""
    return create_model(f"RevisionChoice{n}", why=(Why, Field(description="a few words: what changed, if anything")),
                        revises=(Literal[tuple(range(n + 1))], ...),  # type: ignore[misc]
                        kind=(Literal["updates", "contradicts"], ...))


class RefineOut(BaseModel):
    query: str = Field(min_length=1, max_length=300)


class GradeOut(BaseModel):
    label: Literal["CORRECT", "WRONG"]


class RespondOut(BaseModel):
    answer: str = Field(max_length=300)
