"""End-to-end checks of a configured LLM and embedder: one structured call per role schema."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pydantic import BaseModel

from . import schemas
from .errors import CompassMemError
from .llm import LLMClient
from .prompts import prompt

_OBS = "[D1:1] [8 May 2023] Ana: I adopted a puppy yesterday because my old dog died.\n" \
       "[D1:2] [8 May 2023] Ben: So sorry! What is the puppy called?\n[D1:3] [8 May 2023] Ana: Her name is Luna."

# role -> (schema, template variables): small but realistic inputs for each prompt
ROLE_CHECKS: dict[str, tuple[type[BaseModel], dict[str, object]]] = {
    "segment": (schemas.SegmentOut, {"step": 1, "world_time": "8 May 2023", "target_events": 2,
                                     "observations": "\n".join(f"[{i}] {line.split('] ', 1)[1]}"
                                                               for i, line in enumerate(_OBS.splitlines(), 1))}),
    "relate": (schemas.RelateOut, {"step": 1, "observations": _OBS,
                                   "events": "E1: Ana's old dog died (D1:1)\nE2: Ana adopted a puppy named Luna (D1:1, D1:3)"}),
    "judge": (schemas.JudgeOut, {"old_time": "2023-05-07", "old_people": "Ana", "old_summary": "Ana adopted a puppy.",
                                 "new_time": "2023-05-07", "new_people": "Ana", "new_summary": "Ana got a puppy, Luna."}),
    "topic_label": (schemas.TopicLabelOut, {"events": "- Ana adopted a puppy\n- Ana walks Luna every morning"}),
    "plan": (schemas.PlanOut, {"question": "Why did Ana adopt a puppy and what is it called?", "max_subgoals": 5}),
    "select": (schemas.SelectOut, {"question": "What is Ana's puppy called?", "subgoals": "0. puppy's name",
                                   "candidates": "e1.0 (0.71, 2023-05-07): Ana adopted a puppy named Luna.\n"
                                                 "e2.0 (0.20, 2023-06-01): Ben went hiking.", "max_pick": 2}),
    "explore": (schemas.explore_choice(1, (1,), 3), {
        "question": "Why did Ana adopt a puppy?", "subgoals": "1. [open] why Ana adopted a puppy", "kept": "(none)",
        "current_time": "2023-05-08", "current_people": "Ana", "current_text": "Ana adopted a puppy named Luna.",
        "neighbours": "1. causal ← (2023-05-01; Ana) Ana's old dog died.", "max_next": 3}),
    "explore_batch": (schemas.explore_round((1, 0), (1,), 3), {
        "question": "Why did Ana adopt a puppy?", "subgoals": "1. [open] why Ana adopted a puppy", "kept": "(none)",
        "n": 2, "events": "### event_1 (2023-05-08; people: Ana)\nAna adopted a puppy named Luna.\nIts unvisited "
                          "neighbours:\n1. causal ← (2023-05-01; Ana) Ana's old dog died.\n\n"
                          "### event_2 (2023-06-01; people: Ben)\nBen went hiking.\nIts unvisited neighbours:\n(none)",
        "max_next": 3}),
    "revise": (schemas.revision_choice(2), {"person": "Ana", "date": "2023-09-02",
                                            "statement": "We moved last month, I live in Porto now.",
                                            "earlier": "1. (2023-05-08) I live in Lisbon, near the river.\n"
                                                       "2. (2023-05-08) I adopted a puppy yesterday."}),
    "refine": (schemas.RefineOut, {"question": "Why did Ana adopt a puppy?", "satisfied": "- (none)",
                                   "unsatisfied": "- reason for adopting", "evidence": "(nothing yet)"}),
    "respond": (schemas.RespondOut, {"context": '[8 May 2023] Ana: I adopted a puppy yesterday. (dates: "yesterday" '
                                                '= 7 May 2023)', "question": "When did Ana adopt a puppy?"}),
    "grade": (schemas.GradeOut, {"question": "When did Ana adopt a puppy?", "gold": "7 May 2023",
                                 "answer": "on May 7th, 2023"}),
}


@dataclass
class CheckResult:
    role: str
    ok: bool
    detail: str
    seconds: float


def check_roles(llm: LLMClient, roles: list[str] | None = None) -> list[CheckResult]:
    results = []
    for role in roles or list(ROLE_CHECKS):
        schema, variables = ROLE_CHECKS[role]
        t0 = time.perf_counter()
        try:
            out = llm.structured(prompt(role), schema, **variables)
            results.append(CheckResult(role, True, out.model_dump_json()[:160], time.perf_counter() - t0))
        except CompassMemError as exc:
            results.append(CheckResult(role, False, str(exc)[:300], time.perf_counter() - t0))
    return results
