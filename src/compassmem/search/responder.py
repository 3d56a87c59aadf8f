"""The Responder: answers the original question from the distilled evidence only."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from ..llm import LLMClient
from ..models import AnswerKind, Event, Observation
from ..prompts import prompt
from ..schemas import RespondOut
from ..timeutil import find_expressions, fmt, from_iso, parse_date, resolve, resolve_in_text
from .graph import approx_tokens


WHEN = re.compile(r"^\s*(when|what (?:year|month|date|day|time)|how long ago|which (?:year|month))\b", re.I)


def evidence_line(o: Observation) -> str:
    """How one observation is shown to the answerer: its date, speaker, text and image caption."""
    day = from_iso(o.date)
    when = fmt(day) if day else (o.time or "")
    img = f" [shared image: {o.meta['image']}]" if o.meta.get("image") else ""
    return f"[{when}] {o.said()}{img}" if when else f"{o.said()}{img}"


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


def dated_line(o: Observation) -> str:
    """An evidence line for a model, each relative time in it followed by the date it means, worked out
    from the line's own date: small models copied the prompt's example year instead of doing the
    arithmetic, and a model that is handed the date has none to do."""
    line = evidence_line(o)
    day = from_iso(o.date)
    if day is None:
        return line
    notes = []
    for expr in find_expressions(o.text):
        if parse_date(expr):
            continue
        resolved = resolve(expr, day)
        if resolved is not None:
            notes.append(f'"{expr}" = {resolved.label}')
    return f"{line} (dates: {'; '.join(notes)})" if notes else line


@dataclass(frozen=True)
class Reply:
    """An answer's text and how it was made (Answer.answer_kind): a reader must be able to tell a written
    answer from a sentence picked out of the memory."""

    text: str
    kind: AnswerKind = "generated"


class Responder(Protocol):
    def respond(self, question: str, events: list[Event], observations: list[Observation], max_tokens: int) -> Reply: ...


class LLMResponder:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def respond(self, question: str, events: list[Event], observations: list[Observation], max_tokens: int) -> Reply:
        shown = len(evidence_lines(observations, max_tokens))  # the budget counts the lines as every method shows them
        context = "\n".join(dated_line(o) for o in observations[:shown]) or "(no memory)"
        answer = self.llm.structured(prompt("respond"), RespondOut, context=context, question=question).answer.strip()
        return Reply(absolutise(answer, question, observations), "generated")


def absolutise(answer: str, question: str, observations: list[Observation]) -> str:
    """Safety net for small models: a when-answer that is still relative ('last Saturday') is resolved
    against the date of the evidence line it came from, as the prompt asked the model to do."""
    if not WHEN.match(question):
        return answer
    for expr in find_expressions(answer):
        if parse_date(expr):
            continue
        source = next((o for o in observations if expr.lower() in o.text.lower() and o.date), None)
        resolved = resolve_in_text(expr, from_iso(source.date)) if source else None
        if resolved:
            return answer.replace(expr, resolved.label)
    return answer
