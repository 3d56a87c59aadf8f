"""Typed relations between the events of one step (open vocabulary, normalised to lower_snake)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from ..llm import LLMClient
from ..models import Event, Observation
from ..prompts import prompt
from ..schemas import RelateOut
from .segment import render_observations


@dataclass
class DraftRelation:
    source: int  # index into the step's event list
    target: int
    type: str
    evidence: list[str] = field(default_factory=list)


class RelationExtractor(Protocol):
    def relate(self, step: int, observations: list[Observation], events: list[Event]) -> list[DraftRelation]: ...


_CAUSAL = re.compile(r"\b(because|so that|that's why|that is why|led to|as a result|therefore|thanks to|"
                     r"caused|which is why|inspired me|motivated|made me)\b", re.I)
_MOTIVE = re.compile(r"\b(in order to|so i can|so we can|want(?:ed)? to|plan(?:ning)? to|hop(?:e|ing) to|goal)\b", re.I)
_AFTER = re.compile(r"\b(after that|afterwards|then|since then|later)\b", re.I)


def temporal_edge(a: Event, b: Event) -> tuple[int, int] | None:
    """(earlier, later) as 0/1 when both world dates are known and differ; mention order is ignored."""
    if a.time.date and b.time.date and a.time.date != b.time.date:
        return (0, 1) if a.time.date < b.time.date else (1, 0)
    return None


class OfflineRelationExtractor:
    """Cue phrases, world-time order and shared participants between events of one step."""

    def relate(self, step: int, observations: list[Observation], events: list[Event]) -> list[DraftRelation]:
        by_id = {o.id: o for o in observations}
        out: list[DraftRelation] = []
        for j in range(1, len(events)):
            i = j - 1
            cur = [by_id[x] for x in events[j].observation_ids if x in by_id]
            cue_obs = next((o for o in cur if _CAUSAL.search(o.text)), None)
            motive_obs = next((o for o in cur if _MOTIVE.search(o.text)), None)
            after_obs = next((o for o in cur if _AFTER.search(o.text)), None)
            if cue_obs is not None:
                out.append(DraftRelation(i, j, "causal", [cue_obs.id]))
            elif motive_obs is not None:
                out.append(DraftRelation(j, i, "motivation", [motive_obs.id]))
            elif after_obs is not None:
                out.append(DraftRelation(i, j, "temporal_before", [after_obs.id]))
            elif set(events[i].participants[1:]) & set(events[j].participants[1:]):
                out.append(DraftRelation(i, j, "follow_up", events[j].observation_ids[:1]))
        for i in range(len(events)):
            for j in range(i + 1, len(events)):
                order = temporal_edge(events[i], events[j])
                if order and abs(i - j) <= 3:
                    a, b = (i, j) if order == (0, 1) else (j, i)
                    out.append(DraftRelation(a, b, "temporal_before", []))
        return out


class LLMRelationExtractor:
    """One schema-constrained call per step; labels that name no event of the step are dropped."""

    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def relate(self, step: int, observations: list[Observation], events: list[Event]) -> list[DraftRelation]:
        if len(events) < 2:
            return []
        listing = "\n".join(f"E{i + 1}: {e.summary} (observations: {', '.join(e.observation_ids)}; "
                            f"time: {e.time.label()})" for i, e in enumerate(events))
        out = self.llm.structured(prompt("relate"), RelateOut, step=step,
                                  observations=render_observations(observations), events=listing)
        drafts: list[DraftRelation] = []
        for r in out.relations:
            s, t = _label_index(r.source, len(events)), _label_index(r.target, len(events))
            if s is None or t is None or s == t:
                continue
            drafts.append(DraftRelation(s, t, r.type, list(r.evidence)))
        return drafts


def _label_index(label: str, n: int) -> int | None:
    m = re.fullmatch(r"\s*E?(\d+)\s*", label, re.I)
    if not m:
        return None
    i = int(m.group(1)) - 1
    return i if 0 <= i < n else None
