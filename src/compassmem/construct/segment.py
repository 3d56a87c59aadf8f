"""Event segmentation (Event Segmentation Theory): a step's observation stream → events.

Both implementations return drafts; the pipeline validates spans and resolves times for both, so
neither can invent an observation id or disagree on what a date means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..config import ConstructionSettings
from ..embed import CachedEmbedder
from ..llm import LLMClient
from ..models import Observation
from ..prompts import prompt
from ..schemas import SegmentOut
from ..text import clip, is_question, said
from ..timeutil import find_expressions


@dataclass
class DraftEvent:
    summary: str
    observation_ids: list[str]
    participants: list[str] = field(default_factory=list)
    time_expression: str | None = None


class Segmenter(Protocol):
    def segment(self, step: int, observations: list[Observation], world_time: str | None) -> list[DraftEvent]: ...


_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]{2,})\b")
_NOT_NAMES = {
    "The", "This", "That", "What", "When", "Where", "Which", "Who", "Why", "How", "And", "But", "Yes", "Yeah",
    "Thanks", "Thank", "Hey", "Wow", "Oh", "Sure", "Great", "Good", "Also", "Just", "Really", "Well", "Sounds",
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "January", "February",
    "March", "April", "May", "June", "July", "August", "September", "October", "November", "December",
    "It's", "I'm", "That's", "You", "Your", "They", "There", "Here", "Have", "Had", "Did", "Can", "Let",
}


def participants_of(observations: list[Observation], limit: int = 3) -> list[str]:
    """Speakers first, then capitalised names mentioned mid-sentence."""
    out: list[str] = []
    for o in observations:
        if o.speaker and o.speaker not in out:
            out.append(o.speaker)
    for o in observations:
        for m in _NAME.finditer(o.text):
            name = m.group(1)
            if name not in _NOT_NAMES and name not in out:
                out.append(name)
    return out[:limit]


def observation_text(o: Observation) -> str:
    """What an observation is embedded by: its text plus the caption of a shared image."""
    return o.text + (f" [image: {o.meta['image']}]" if o.meta.get("image") else "")


def extractive_summary(observations: list[Observation], per_turn: int = 320, total: int = 1400) -> str:
    parts: list[str] = []
    used = 0
    for o in observations:
        text = clip(o.text, per_turn)
        if o.meta.get("image"):
            text += f" [image: {o.meta['image']}]"
        piece = said(o.speaker, text)
        if used + len(piece) > total and parts:
            break
        parts.append(piece)
        used += len(piece)
    return " ".join(parts)


class OfflineSegmenter:
    """Boundaries where the stream's meaning shifts (embedding drop against the running event), with a
    length cap; a question is never split from its answer."""

    def __init__(self, embedder: CachedEmbedder, settings: ConstructionSettings) -> None:
        self.embedder = embedder
        self.settings = settings

    def segment(self, step: int, observations: list[Observation], world_time: str | None) -> list[DraftEvent]:
        if not observations:
            return []
        vecs = self.embedder.embed([observation_text(o) for o in observations])
        groups: list[list[int]] = [[0]]
        centroid = vecs[0].copy()
        for i in range(1, len(observations)):
            group = groups[-1]
            sim = max(float(vecs[i] @ (centroid / (np.linalg.norm(centroid) or 1.0))), float(vecs[i] @ vecs[i - 1]))
            asked = is_question(observations[i - 1].text)
            shift = sim < self.settings.boundary_threshold and len(group) >= 2 and not asked
            if shift or len(group) >= self.settings.max_event_turns:
                groups.append([i])
                centroid = vecs[i].copy()
            else:
                group.append(i)
                centroid = centroid + vecs[i]
        drafts = []
        for g in groups:
            obs = [observations[i] for i in g]
            text = " ".join(o.text for o in obs)
            exprs = find_expressions(text)
            drafts.append(DraftEvent(summary=extractive_summary(obs), observation_ids=[o.id for o in obs],
                                     participants=participants_of(obs), time_expression=exprs[0] if exprs else None))
        return drafts


def render_observations(observations: list[Observation]) -> str:
    return "\n".join(f"[{o.id}] {o.render()}" for o in observations)


class LLMSegmenter:
    """One schema-constrained call per step."""

    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def segment(self, step: int, observations: list[Observation], world_time: str | None) -> list[DraftEvent]:
        if not observations:
            return []
        target = max(1, min(10, round(len(observations) / 3)))
        out = self.llm.structured(prompt("segment"), SegmentOut, step=step, world_time=world_time or "unknown",
                                  observations=numbered_lines(observations), target_events=target)
        spans = spans_from_starts(observations, [e.start for e in out.events])
        drafts: dict[int, DraftEvent] = {}
        for start, e in zip(spans.starts, out.events):
            d = drafts.get(start)
            if d is None:
                drafts[start] = DraftEvent(e.summary.strip(), spans.ids[start], list(e.participants), e.time_expression)
            else:  # two events named the same first line: one event, nothing said about it is lost
                d.summary = f"{d.summary} {e.summary.strip()}"
                d.participants = list(dict.fromkeys(d.participants + list(e.participants)))[:3]
                d.time_expression = d.time_expression or e.time_expression
        return [drafts[k] for k in sorted(drafts)]


def numbered_lines(observations: list[Observation]) -> str:
    """A step's observations as the segmenter sees them: numbered from 1 within the step. Small models
    copied ids such as 'D3:30' wrongly (a 0.5B model named turns that did not exist in 3 of 5 events of
    a session); a line number they only have to read back."""
    return "\n".join(f"[{i}] {o.render()}" for i, o in enumerate(observations, 1))


@dataclass
class Spans:
    starts: list[int]  # per event in the model's order: its first line (1-based), as read
    ids: dict[int, list[str]]  # first line -> the observation ids of the event that starts there


def spans_from_starts(observations: list[Observation], starts: list[int]) -> Spans:
    """Events are contiguous stretches of the stream that follow each other (EST), so each event is named
    by its first line only and runs to the next event's start: no span can name a turn that does not
    exist, overlap another or leave a gap. A start past the end is read as the last line; the earliest
    start is read as line 1 (lines before it belong to the first event)."""
    n = len(observations)
    read = [min(max(s, 1), n) for s in starts]
    if read:
        first = min(read)
        read = [1 if s == first else s for s in read]
    bounds = sorted(set(read)) + [n + 1]
    return Spans(read, {a: [o.id for o in observations[a - 1 : b - 1]] for a, b in zip(bounds, bounds[1:])})
