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
        text = o.text if len(o.text) <= per_turn else o.text[:per_turn].rsplit(" ", 1)[0] + "…"
        if o.meta.get("image"):
            text += f" [image: {o.meta['image']}]"
        piece = f"{o.speaker}: {text}" if o.speaker else text
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
            asked = observations[i - 1].text.rstrip().endswith("?")
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
                                  observations=render_observations(observations), target_events=target)
        return [DraftEvent(e.summary.strip(), span_ids(observations, e.first_id.strip(), e.last_id.strip()),
                           list(e.participants), e.time_expression) for e in out.events]


def span_ids(observations: list[Observation], first: str, last: str) -> list[str]:
    """Events are contiguous stretches of the stream (EST), so the model names only the two ends.
    Unknown ends are returned as-is for the pipeline to reject and report."""
    pos = {o.id: i for i, o in enumerate(observations)}
    if first not in pos or last not in pos:
        # small models often write "3" for "D1:3": accept a bare number when exactly one id ends with it
        by_suffix: dict[str, list[int]] = {}
        for i, o in enumerate(observations):
            by_suffix.setdefault(re.split(r"[:\-_.]", o.id)[-1], []).append(i)
        for end in (first, last):
            if end not in pos and len(by_suffix.get(end, [])) == 1:
                pos[end] = by_suffix[end][0]
    if first not in pos or last not in pos:
        return [x for x in (first, last) if x]
    a, b = sorted((pos[first], pos[last]))
    return [o.id for o in observations[a : b + 1]]
