"""Probe what a model's explorers decide (issue "LLM mode II" item 1), question by question, with the trace.

    python scripts/probe-explorers.py MEMORY_DB GGUF_PATH [N]

MEMORY_DB: a built LoCoMo dev memory (e.g. a copy of bench-out/q3-locomo/memory-events.db; the probe asks,
it never writes steps); asks the first N (5) multi-hop questions of conv-26 in agentic mode and prints each
decision: round, event, action, neighbours offered, the ones it moved to, sub-goals met, and the model's
reason; last, how many decisions that had neighbours on offer named one or met a sub-goal, and how many
questions were refined and kept something new after refining.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from compassmem import Memory


def main(db: str, gguf: str, n: int = 5) -> None:
    mem = Memory(db, llm=f"gguf:{gguf}")
    data = json.loads((Path(__file__).parents[1] / "../shared/data/locomo/locomo_dev.json").read_text())
    questions = [q for q in data[0]["qa"] if q.get("category") == 1][:n]
    offered = moved = refined = new_kept = 0
    for q in questions:
        t0 = time.perf_counter()
        a = mem.ask(q["question"], namespace=data[0]["sample_id"], mode="agentic")
        print(f"{time.perf_counter() - t0:.0f} s | {q['question']} -> {a.answer} | gold {q['answer']} | "
              f"calls {a.usage.llm_calls}, tokens {a.usage.prompt_tokens + a.usage.completion_tokens}")
        print("  sub-goals:", [g.text for g in a.subgoals], "| refined query:", a.refined_query)
        for s in a.trace:
            print(f"    round {s.round} {s.event_id} {s.action} offered {s.offered} next {s.next} met {s.satisfied} | {s.why}")
        offered += sum(1 for s in a.trace if s.offered)
        moved += sum(1 for s in a.trace if s.offered and (s.next or s.satisfied))
        refined += a.refined_query is not None
        new_kept += any(s.round >= 1 and s.action != "SKIP" for s in a.trace)
    print(f"decisions with neighbours on offer: {offered}; named one or met a sub-goal: {moved}")
    print(f"refined: {refined} of {len(questions)} questions; kept something new after refining: {new_kept}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
