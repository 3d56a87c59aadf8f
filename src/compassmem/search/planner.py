"""The Planner: a question → 2–5 subgoals, and the gap-aware query for one refinement round."""

from __future__ import annotations

import re
from typing import Protocol

from ..llm import LLMClient
from ..prompts import prompt
from ..schemas import PlanOut, RefineOut
from ..text import content_words


class Planner(Protocol):
    def plan(self, question: str, max_subgoals: int) -> list[str]: ...
    def refine(self, question: str, subgoals: list[str], satisfied: list[bool], evidence: str) -> str: ...


_HEAD = re.compile(r"^(\w+(?:\s+\w+)?\s+(?:did|does|do|is|are|was|were|has|have|had|will|would|can))\s+(.*)$", re.I)
_NAME = r"[A-Z][a-z][\w'-]*(?:\s+[A-Z][a-z][\w'-]*)?"
# people (or places) joined by and / or, not at the start of the question: "Caroline and Melanie"
_NAMES = re.compile(rf"(?<=\s)({_NAME}(?:,\s*{_NAME})*),?\s+(?:and|or)\s+({_NAME})\b(\s+both\b)?")
# a phrase whose last word has alternatives: "... visit in 2022 and 2023", "... go to Paris or Rome"
_TAIL = re.compile(rf"^(.*\s)(\d{{4}}|{_NAME})((?:,\s*(?:\d{{4}}|{_NAME}))*),?\s+(?:and|or)\s+(\d{{4}}|{_NAME})$")


# "how many …", "what kinds of …" (a kind of X is one X), "what are / were …", "which of …", "what has X painted?", "where has X
# camped?" (the present perfect asks for every time it happened): the answer is a set of things, each
# possibly said in a different session
_SEVERAL = re.compile(r"\bhow many\b|\b(?:what|which) (?:kinds|types|sorts) of\b|^\s*(?:what|which)\s+(?:are|were)\b"
                      r"|^\s*which\s+of\b|^\s*(?:what|where|who)\s+(?:has|have)\b", re.I)
# the noun a wh-phrase asks about, before its verb: "What European countries has…", "In which countries did…"
_WH_NOUN = re.compile(r"^\s*(?:(?:in|from|at|to|with|on|for)\s+)?(?:what|which)\s+(?:[\w+/'’-]+\s+){0,3}?([a-z]+)"
                      r"(?:\s+and\s+[\w-]+)?\s+(?:did|does|do|has|have|had|is|are|was|were|can|could|will|would)\b", re.I)
_NOT_PLURAL = {"is", "was", "has", "does", "this", "his", "its", "us", "as", "yes", "always", "perhaps", "plus", "status",
               "news", "series", "species", "class", "business"}


def asks_for_several(question: str) -> bool:
    """Whether a question asks for a set ("What are Kate's hobbies?", "How many times…", "Which countries
    has Kevin been to?", "What martial arts has John done?") rather than one fact. Such answers are single
    turns spread over many sessions, so the ranking gives the turns around the best one less of their
    event's score (`search.set_event_weight`) and the budget reaches more events; a one-fact answer is
    best read with its event around it."""
    if _SEVERAL.search(question):
        return True
    head = _WH_NOUN.match(question)
    word = head.group(1).lower() if head else ""
    return word.endswith("s") and not word.endswith("ss") and word not in _NOT_PLURAL


class OfflinePlanner:
    """Facets a question without a model: the question itself, then one subgoal per coordinated part, each a
    question that stands alone (tests/test_offline_roles.py has the table):
    "What did Caroline and Melanie paint" -> "What did Caroline paint", "What did Melanie paint";
    "Which cities did John visit in 2022 and 2023" -> "... in 2022", "... in 2023";
    otherwise the conjuncts of the body that carry two content words ("What did Ana cook, bake and ...")."""

    def plan(self, question: str, max_subgoals: int) -> list[str]:
        q = question.strip().rstrip("?").strip()
        goals = [q]
        names = _NAMES.search(q)
        tail = None if names else _TAIL.match(q)
        if names:
            people = [n.strip() for n in re.split(r",\s*", names.group(1))] + [names.group(2)]
            goals += [f"{q[:names.start()]}{n}{q[names.end():]}" for n in people]
        elif tail:
            alternatives = [tail.group(2), *[a.strip() for a in tail.group(3).split(",") if a.strip()], tail.group(4)]
            goals += [f"{tail.group(1)}{a}" for a in alternatives]
        else:
            head = _HEAD.match(q)
            prefix, body = (head.group(1) + " ", head.group(2)) if head else ("", q)
            parts = [p.strip(" ,") for p in re.split(r",\s*|\s+and\s+|\s+as well as\s+", body) if p.strip(" ,")]
            if len(parts) > 1:
                goals += [f"{prefix}{p}" for p in parts if len(content_words(p)) >= 2]
        return list(dict.fromkeys(goals))[:max_subgoals]

    def refine(self, question: str, subgoals: list[str], satisfied: list[bool], evidence: str) -> str:
        open_goals = [g for g, s in zip(subgoals, satisfied) if not s] or subgoals
        seen = set(content_words(evidence))
        words: list[str] = []
        for g in open_goals:
            for w in content_words(g):
                if w not in words:
                    words.append(w)
        missing = [w for w in words if w not in seen]
        return " ".join(missing or words)


class LLMPlanner:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def plan(self, question: str, max_subgoals: int) -> list[str]:
        out = self.llm.structured(prompt("plan"), PlanOut, question=question, max_subgoals=max_subgoals)
        goals = [g.strip() for g in out.subgoals if g.strip()]
        return list(dict.fromkeys(goals))[:max_subgoals] or [question]

    def refine(self, question: str, subgoals: list[str], satisfied: list[bool], evidence: str) -> str:
        sat = "\n".join(f"- {g}" for g, s in zip(subgoals, satisfied) if s) or "- (none)"
        unsat = "\n".join(f"- {g}" for g, s in zip(subgoals, satisfied) if not s) or "- (none)"
        out = self.llm.structured(prompt("refine"), RefineOut, question=question, satisfied=sat,
                                  unsatisfied=unsat, evidence=evidence or "(nothing yet)")
        return out.query.strip()
