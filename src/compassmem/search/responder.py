"""The Responder: answers the original question from the distilled evidence only."""

from __future__ import annotations

import re
from typing import Protocol

import numpy as np

from ..embed import CachedEmbedder
from ..llm import LLMClient
from ..models import Event, Observation
from ..prompts import prompt
from ..schemas import RespondOut
from ..timeutil import fmt, from_iso, resolve_in_text
from .graph import approx_tokens
from .planner import content_words

_WHEN = re.compile(r"^\s*(when|what (?:year|month|date|day|time)|how long ago|which (?:year|month))\b", re.I)


def evidence_lines(observations: list[Observation], max_tokens: int) -> list[str]:
    """Dated source lines for the answerer, in stream order, cut at the token budget."""
    lines: list[str] = []
    used = 0
    for o in observations:
        day = from_iso(o.date)
        when = fmt(day) if day else (o.time or "")
        who = f"{o.speaker}: " if o.speaker else ""
        img = f" [shared image: {o.meta['image']}]" if o.meta.get("image") else ""
        line = f"[{when}] {who}{o.text}{img}" if when else f"{who}{o.text}{img}"
        cost = approx_tokens(line)
        if lines and used + cost > max_tokens:
            break
        lines.append(line)
        used += cost
    return lines


class Responder(Protocol):
    def respond(self, question: str, events: list[Event], observations: list[Observation], max_tokens: int) -> str: ...


class OfflineResponder:
    """Extractive: the best supporting observation, trimmed to its best clause; for when-questions the
    time it states, made absolute against the observation's date, else that date."""

    def __init__(self, embedder: CachedEmbedder) -> None:
        self.embedder = embedder

    def _best(self, question: str, observations: list[Observation]) -> Observation:
        texts = [o.text + (f" {o.meta['image']}" if o.meta.get("image") else "") for o in observations]
        vecs = self.embedder.embed(texts)
        qv = self.embedder.embed([question])[0]
        want = set(content_words(question))
        lexical = np.array([len(want & set(content_words(t))) / (len(want) or 1) for t in texts])
        score = vecs @ qv + 0.5 * lexical
        return observations[int(np.argmax(score))]

    def respond(self, question: str, events: list[Event], observations: list[Observation], max_tokens: int) -> str:
        if not observations:
            return "No relevant memory found."
        best = self._best(question, observations)
        if _WHEN.match(question):
            anchor = from_iso(best.date)
            resolved = resolve_in_text(best.text, anchor)
            if resolved:
                return resolved.label
            if anchor:
                return fmt(anchor)
        clauses = [c.strip() for c in re.split(r"(?<=[.!?;])\s+|,\s+(?=but|and|so|because)", best.text) if c.strip()]
        if len(clauses) <= 1:
            return best.text.strip()
        want = set(content_words(question))
        qv = self.embedder.embed([question])[0]
        cv = self.embedder.embed(clauses)
        score = cv @ qv + 0.5 * np.array([len(want & set(content_words(c))) / (len(want) or 1) for c in clauses])
        return clauses[int(np.argmax(score))]


class LLMResponder:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def respond(self, question: str, events: list[Event], observations: list[Observation], max_tokens: int) -> str:
        context = "\n".join(evidence_lines(observations, max_tokens)) or "(no memory)"
        return self.llm.structured(prompt("respond"), RespondOut, context=context, question=question).answer.strip()
