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
from ..timeutil import find_expressions, fmt, from_iso, parse_date, resolve_in_text
from ..construct.segment import observation_text
from .graph import approx_tokens
from .planner import content_words

_WHEN = re.compile(r"^\s*(when|what (?:year|month|date|day|time)|how long ago|which (?:year|month))\b", re.I)


def evidence_line(o: Observation) -> str:
    """How one observation is shown to the answerer: its date, speaker, text and image caption."""
    day = from_iso(o.date)
    when = fmt(day) if day else (o.time or "")
    who = f"{o.speaker}: " if o.speaker else ""
    img = f" [shared image: {o.meta['image']}]" if o.meta.get("image") else ""
    return f"[{when}] {who}{o.text}{img}" if when else f"{who}{o.text}{img}"


def evidence_lines(observations: list[Observation], max_tokens: int) -> list[str]:
    """Evidence lines in the given order, cut at the token budget (the first line always fits)."""
    lines: list[str] = []
    used = 0
    for o in observations:
        line = evidence_line(o)
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
        texts = [observation_text(o) for o in observations]
        score = self._score(question, texts)
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
        clauses = [c.strip() for c in re.split(r"(?<=[.!?;])\s+|,\s+(?=but|and|so|because)", best.text)
                   if len(c.split()) >= 4]
        if len(clauses) <= 1:
            return best.text.strip()
        return clauses[int(np.argmax(self._score(question, clauses)))]

    def _score(self, question: str, texts: list[str]) -> np.ndarray:
        """Meaning + keyword overlap + a small preference for substantive (longer) texts."""
        vecs = self.embedder.embed(texts)
        qv = self.embedder.embed([question])[0]
        want = set(content_words(question))
        lexical = np.array([len(want & set(content_words(t))) / (len(want) or 1) for t in texts])
        length = np.array([min(len(t.split()), 20) / 20 for t in texts])
        return vecs @ qv + 0.5 * lexical + 0.15 * length


class LLMResponder:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def respond(self, question: str, events: list[Event], observations: list[Observation], max_tokens: int) -> str:
        context = "\n".join(evidence_lines(observations, max_tokens)) or "(no memory)"
        answer = self.llm.structured(prompt("respond"), RespondOut, context=context, question=question).answer.strip()
        return absolutise(answer, question, observations)


def absolutise(answer: str, question: str, observations: list[Observation]) -> str:
    """Safety net for small models: a when-answer that is still relative ('last Saturday') is resolved
    against the date of the evidence line it came from, as the prompt asked the model to do."""
    if not _WHEN.match(question):
        return answer
    for expr in find_expressions(answer):
        if parse_date(expr):
            continue
        source = next((o for o in observations if expr.lower() in o.text.lower() and o.date), None)
        resolved = resolve_in_text(expr, from_iso(source.date)) if source else None
        if resolved:
            return answer.replace(expr, resolved.label)
    return answer
