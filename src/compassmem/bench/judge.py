"""LLM-as-judge accuracy (J) beside F1.

Vendors report LoCoMo as J, not F1 (Memobase: F1 48.84 against J 70.91 on the same run), because F1
punishes a right answer in other words. The protocol is the one mem0 and Zep publish: the question,
the gold answer and the generated answer go to a judge model, which says CORRECT or WRONG; J is the
share judged correct. Judgments live beside results.jsonl in judgments.jsonl, one line per (judge,
method, question), so judging resumes and several judges can grade one run. A judge that is a small
local model gives an indicative figure, not one to compare with published ones; the report says which
judge graded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from ..errors import LLMError, LLMUnavailable
from ..llm import LLMClient
from ..prompts import prompt
from ..schemas import GradeOut

JUDGMENTS = "judgments.jsonl"


def judge_rows(out: Path, llm: LLMClient, judge: str, progress: Callable[[str, int, int], None] | None = None,
               failed: list[dict] | None = None) -> int:
    """Grade every answered row of out/results.jsonl that `judge` has not graded yet; returns how many.
    With `failed`, a row whose verdict stays invalid after its retries is listed there and left ungraded
    (a re-run retries it) instead of ending the run; an unreachable judge still ends it."""
    rows = read_jsonl(out / "results.jsonl")
    path = out / JUDGMENTS
    done = {(j["judge"], j["method"], j["qid"]) for j in read_jsonl(path)}
    todo = [r for r in rows if not r["skipped"] and (judge, r["method"], r["qid"]) not in done]
    graded = 0
    with path.open("a") as fh:
        for i, r in enumerate(todo):
            try:
                verdict = llm.structured(prompt("grade"), GradeOut, question=r["question"],
                                         gold=" / ".join(str(g) for g in r["gold"]),
                                         answer=str(r["answer"]) or "(empty)")
            except LLMError as e:
                if failed is None or isinstance(e, LLMUnavailable):
                    raise
                failed.append({"method": r["method"], "qid": r["qid"], "error": str(e)})
                continue
            fh.write(json.dumps({"judge": judge, "method": r["method"], "qid": r["qid"],
                                 "j": int(verdict.label == "CORRECT")}) + "\n")
            fh.flush()
            graded += 1
            if progress:
                progress("judging", i + 1, len(todo))
    return graded


def attach(out: Path, rows: list[dict]) -> str | None:
    """Put each row's judgment (if any) in row["j"]; returns the judge's name. With several judges on
    record the last one to grade is used, and only rows it graded carry a J."""
    found = read_jsonl(out / JUDGMENTS)
    if not found:
        return None
    judge = found[-1]["judge"]
    verdicts = {(j["method"], j["qid"]): j["j"] for j in found if j["judge"] == judge}
    for r in rows:
        r["j"] = verdicts.get((r["method"], r["qid"]))
    return judge


def read_jsonl(path: Path) -> list[dict]:
    """Every row of a JSON-lines file (results.jsonl, judgments.jsonl); none for a missing file."""
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []
