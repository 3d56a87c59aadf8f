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


class OfflinePlanner:
    """Facets a question without a model: the question itself, each conjunct, each named entity's part."""

    def plan(self, question: str, max_subgoals: int) -> list[str]:
        q = question.strip().rstrip("?").strip()
        goals = [q]
        head = re.match(r"^(\w+(?:\s+\w+)?\s+(?:did|does|do|is|are|was|were|has|have|had|will|would|can))\s+(.*)$", q, re.I)
        body = head.group(2) if head else q
        parts = [p.strip(" ,") for p in re.split(r",\s*|\s+and\s+|\s+as well as\s+|\s+both\s+", body) if p.strip(" ,")]
        if len(parts) > 1:
            prefix = head.group(1) + " " if head else ""
            names = [p for p in parts if len(p.split()) <= 2 and p[:1].isupper()]
            rest = " ".join(w for w in body.split() if all(w not in n.split() for n in names)) if names else ""
            for p in parts:
                if p in names and rest:
                    goals.append(f"{prefix}{p} {rest}".strip())
                elif len(content_words(p)) >= 2:
                    goals.append(f"{prefix}{p}".strip())
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
        out = self.llm.structured(prompt("plan"), PlanOut, question=question, min_subgoals=2,
                                  max_subgoals=max_subgoals)
        goals = [g.strip() for g in out.subgoals if g.strip()]
        return list(dict.fromkeys(goals))[:max_subgoals] or [question]

    def refine(self, question: str, subgoals: list[str], satisfied: list[bool], evidence: str) -> str:
        sat = "\n".join(f"- {g}" for g, s in zip(subgoals, satisfied) if s) or "- (none)"
        unsat = "\n".join(f"- {g}" for g, s in zip(subgoals, satisfied) if not s) or "- (none)"
        out = self.llm.structured(prompt("refine"), RefineOut, question=question, satisfied=sat,
                                  unsatisfied=unsat, evidence=evidence or "(nothing yet)")
        return out.query.strip()
