"""The data model: every row is namespaced and keeps the ids of the observations it came from.

Embeddings are not fields here: they live beside the rows in the store, so these objects stay
small, printable and JSON-serialisable.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .text import is_question, said

_SNAKE_RE = re.compile(r"[^a-z0-9]+")


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def normalise_relation_type(label: str) -> str:
    """Open vocabulary, one spelling: 'Temporal Before' and 'temporal-before' are the same edge type."""
    out = _SNAKE_RE.sub("_", label.strip().lower()).strip("_")
    return out or "related_to"


class Observation(BaseModel):
    """One input unit (dialogue turn, sentence, agent observation) as it arrived."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1, max_length=200)
    namespace: str
    step: int = Field(ge=0)
    seq: int = Field(default=0, ge=0, description="position inside its step")
    speaker: str | None = None
    text: str
    time: str | None = Field(default=None, description="world time as written in the source")
    date: str | None = Field(default=None, description="ISO date of the world time, when parseable")
    meta: dict[str, str] = Field(default_factory=dict)
    ingested_at: str = Field(default_factory=utcnow)

    @model_validator(mode="after")
    def _derive_date(self) -> "Observation":
        if self.date is None and self.time:
            from .timeutil import iso, parse_date

            object.__setattr__(self, "date", iso(parse_date(self.time)))
        return self

    def said(self) -> str:
        """Who said what: "speaker: text", or the text alone when no one did (a book's narration)."""
        return said(self.speaker, self.text)

    def render(self) -> str:
        """How an observation is shown to a role: time, speaker, text."""
        when = f"[{self.time}] " if self.time else ""
        extra = f" [shared image: {self.meta['image']}]" if self.meta.get("image") else ""
        return f"{when}{self.said()}{extra}"

    def answers(self, turn: "Observation") -> bool:
        """Whether this turn comes right after `turn` in its session and `turn` asks something ("…?"):
        the likely answer to it, for the offline answerer (search/blocks.replies is the same test over a
        view's columns, for the ranking's reply term)."""
        return turn.step == self.step and turn.seq == self.seq - 1 and is_question(turn.text)


class EventTime(BaseModel):
    explicit: str | None = Field(default=None, description="time expression as said, e.g. 'last week'")
    date: str | None = Field(default=None, description="normalised ISO date or range start")
    end: str | None = Field(default=None, description="range end when the time is a span")
    step: int = 0
    order: int = 0

    def label(self) -> str:
        if self.date and self.end and self.end != self.date:
            return f"{self.date}..{self.end}"
        return self.date or self.explicit or f"step {self.step}"


class Event(BaseModel):
    """⟨span, time, summary, participants⟩ plus graph bookkeeping."""

    id: str
    namespace: str
    step: int
    summary: str
    participants: list[str] = Field(default_factory=list)
    time: EventTime = Field(default_factory=EventTime)
    observation_ids: list[str] = Field(min_length=1)
    topic_id: str | None = None
    history: list[str] = Field(default_factory=list, description="summaries of events fused into this one")

    @field_validator("participants")
    @classmethod
    def _cap_participants(cls, v: list[str]) -> list[str]:
        seen: list[str] = []
        for p in v:
            p = p.strip()
            if p and p not in seen:
                seen.append(p)
        return seen[:3]

    def embed_text(self) -> str:
        """The text an event is embedded by: its summary, participants and fused history."""
        parts = [self.summary, *self.history]
        if self.participants:
            parts.append(", ".join(self.participants))
        return " | ".join(parts)


RelationOrigin = Literal["within_step", "cross_step", "judge"]
REVISION_TYPES = ("updates", "contradicts")  # later event → the earlier one it revises; evidence [old, new] turn


class Relation(BaseModel):
    id: str
    namespace: str
    source: str
    target: str
    type: str
    evidence: list[str] = Field(default_factory=list)
    origin: RelationOrigin = "within_step"
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    step: int = 0

    @field_validator("type")
    @classmethod
    def _norm(cls, v: str) -> str:
        return normalise_relation_type(v)


class Topic(BaseModel):
    id: str
    namespace: str
    label: str = ""
    size: int = 0


class StepRecord(BaseModel):
    """What one construction step did; kept so stats and re-ingest checks need no recomputation."""

    namespace: str
    step: int
    content_hash: str
    observations: int = 0
    events_new: int = 0
    events_merged: int = 0
    relations: int = 0
    cross_relations: int = 0
    topics_reclustered: bool = False
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    skipped: list[str] = Field(default_factory=list)
    committed_at: str = Field(default_factory=utcnow)


# ---------------------------------------------------------------- search results


class Usage(BaseModel):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached_calls: int = 0

    def add(self, other: "Usage") -> None:
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.latency_s += other.latency_s
        self.cached_calls += other.cached_calls


class EvidenceItem(BaseModel):
    event_id: str
    summary: str
    namespace: str | None = Field(None, description="where the event lives (a scope may cover several namespaces)")
    observation_ids: list[str]
    time: str | None = None
    subgoals: list[int] = Field(default_factory=list, description="subgoals this event supports")


class SubgoalState(BaseModel):
    text: str
    satisfied: bool = False


Action = Literal["SKIP", "EXPAND", "ANSWER"]


class TraceStep(BaseModel):
    explorer: int
    round: int = 0
    event_id: str
    action: Action
    next: list[str] = Field(default_factory=list)
    satisfied: list[int] = Field(default_factory=list)
    rejected_next: list[str] = Field(default_factory=list, description="ids the policy named that were not neighbours")
    offered: int = Field(0, description="unvisited neighbours the decision could choose from")
    why: str = Field("", description="the model's reason for its decision (empty offline)")


AnswerKind = Literal["generated", "resolved_date", "span", "evidence_turn", "none"]


class Answer(BaseModel):
    question: str
    namespace: str
    answer: str
    answer_kind: AnswerKind = Field("generated", description="how the answer was made: 'generated' by a model; "
                                    "without one, extracted: 'resolved_date' (the date a turn states), 'span' "
                                    "(copied from an evidence turn), 'evidence_turn' (that turn itself, with its "
                                    "speaker and date), 'none' (nothing to answer from)")
    evidence: list[EvidenceItem] = Field(default_factory=list)
    subgoals: list[SubgoalState] = Field(default_factory=list)
    trace: list[TraceStep] = Field(default_factory=list)
    start_nodes: list[str] = Field(default_factory=list)
    refined_query: str | None = None
    used_fallback: bool = False
    context_tokens: int = 0
    ranking: list[str] = Field(default_factory=list, description="observation ids, best first; the evidence "
                               "handed to the responder is its top, re-ordered by time")
    usage: Usage = Field(default_factory=Usage)

    def observation_ids(self) -> list[str]:
        out: list[str] = []
        for ev in self.evidence:
            for oid in ev.observation_ids:
                if oid not in out:
                    out.append(oid)
        return out


class ObservationHit(BaseModel):
    id: str
    speaker: str | None = None
    text: str
    date: str | None = None
    score: float

    def said(self) -> str:
        """Who said what, as Observation.said."""
        return said(self.speaker, self.text)


class EventDetail(BaseModel):
    """One event with its source observations and the typed relations touching it (`Memory.get`)."""

    event: Event
    observations: list[Observation]
    relations: list[Relation]


class EventPage(BaseModel):
    """A page of a namespace's events in stored order (`Memory.list`)."""

    namespace: str
    offset: int
    limit: int
    total: int
    items: list[Event]


class ForgetReceipt(BaseModel):
    """What `Memory.forget` removed, and the proof: a scan of the database files afterwards."""

    namespace: str
    removed: dict[str, int] = Field(description="rows removed per table (derived tables included)")
    index_files_removed: int = 0
    scanned_texts: int = Field(0, description="distinct observation texts searched for in the files afterwards")
    scanned_files: list[str] = Field(default_factory=list)
    found: list[str] = Field(default_factory=list, description="'file: text' for any text still readable")

    @property
    def verified(self) -> bool:
        return bool(self.scanned_files) and not self.found


class SearchHit(BaseModel):
    """One event found by `Memory.search`, with the observations of it that the ranking reached."""

    event_id: str
    summary: str
    time: str | None = None
    score: float = Field(description="the best score of its observations in the evidence ranking")
    namespace: str | None = Field(None, description="where the event lives (a scope may cover several namespaces)")
    participants: list[str] = Field(default_factory=list)
    topic_id: str | None = None
    observations: list[ObservationHit] = Field(default_factory=list)


HistoryAction = Literal["created", "merged", "updated", "observations_deleted", "deleted", "superseded"]


class HistoryEntry(BaseModel):
    """One change to an event (Memory.history): what happened, when, to which observations, the summary it
    left. Summaries written before an update or delete are redacted (None): they may hold the text removed."""

    event_id: str
    at: str
    action: HistoryAction
    step: int | None = None
    observation_ids: list[str] = Field(default_factory=list, description="the observations the change touched")
    summary: str | None = Field(default=None, description="what the change wrote: the summary (created, updated, "
                                "observations_deleted), the part merged in, 'by <event id>' (superseded); None: redacted")


def _storable(text: str) -> str:
    """Text no store can hold (NUL) or encode (an unpaired surrogate) is refused where it comes in."""
    if "\x00" in text:
        raise ValueError("contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"is not valid Unicode (unpaired surrogate at position {exc.start})") from None
    return text


class Filters(BaseModel):
    """Which observations a search or ask may use (all given conditions must hold). `since`/`until` are
    ISO dates compared with the observation's date (its event's date when it has none); `speaker` is one
    name or a list; `meta` is equality on observation metadata."""

    model_config = ConfigDict(extra="forbid")

    since: str | None = None
    until: str | None = None
    speaker: list[str] | None = None
    meta: dict[str, str] = Field(default_factory=dict)

    @field_validator("speaker", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("speaker", "meta")
    @classmethod
    def _no_nul(cls, v: object) -> object:
        texts = list(v) if isinstance(v, list) else [*v.keys(), *v.values()] if isinstance(v, dict) else []
        for t in texts:
            _storable(t)
        return v

    @field_validator("since", "until")
    @classmethod
    def _iso_date(cls, v: str | None) -> str | None:
        if v is not None:
            _storable(v)
            try:
                return datetime.fromisoformat(v.strip()).date().isoformat()
            except ValueError:
                raise ValueError(f"'{v}' is not an ISO date (YYYY-MM-DD)") from None
        return v

    @property
    def empty(self) -> bool:
        return self.since is None and self.until is None and not self.speaker and not self.meta

    def describe(self) -> str:
        parts = [f"since {self.since}" if self.since else "", f"until {self.until}" if self.until else "",
                 f"speaker in {self.speaker}" if self.speaker else "",
                 *(f"meta.{k} = {v!r}" for k, v in self.meta.items())]
        return ", ".join(p for p in parts if p)


class EditReceipt(BaseModel):
    """What `Memory.delete` or `Memory.update` changed, and the proof that the old text is gone: a byte
    scan of the database files afterwards."""

    namespace: str
    action: Literal["delete", "update"]
    observation_ids: list[str]
    events_deleted: list[str] = Field(default_factory=list)
    events_rederived: list[str] = Field(default_factory=list)
    removed: dict[str, int] = Field(default_factory=dict, description="rows removed per table")
    scanned_texts: int = Field(0, description="old texts searched for in the files afterwards")
    skipped_texts: int = Field(0, description="old texts not scanned: shorter than 12 characters or still "
                                              "held by another observation")
    scanned_files: list[str] = Field(default_factory=list)
    found: list[str] = Field(default_factory=list, description="'file: text' for any old text still readable")
    usage: Usage = Field(default_factory=Usage, description="LLM calls made to re-derive events and label topics")

    @property
    def verified(self) -> bool:
        return bool(self.scanned_files) and not self.found
