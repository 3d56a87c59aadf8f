#!/usr/bin/env python
"""Batched vs per-explorer LLM decisions, same questions, same graph (built offline), same model.

Usage: python scripts/measure-batching.py MODEL.gguf [N_QUESTIONS]   → JSON lines, one per (mode, question)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

from compassmem import Memory, Settings
from compassmem.cli.demo import load_demo
from compassmem.models import Observation


def main() -> None:
    model, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    d = load_demo()
    db = tempfile.mktemp(suffix=".db")
    offline = Memory(db)
    for s in d["sessions"]:
        offline.add([Observation(id=t["id"], namespace="demo", step=s["step"], seq=i, speaker=t["speaker"],
                                 text=t["text"], time=s["time"]) for i, t in enumerate(s["turns"])],
                    namespace="demo", step=s["step"], world_time=s["time"])
    for batched in (False, True):
        settings = Settings.load(**{"search.batch_explorers": batched, "search.max_steps": 6, "llm.cache": False})
        mem = Memory(db, llm=f"gguf:{model}", settings=settings, store=offline.store)
        for q in d["questions"][:n]:
            t0 = time.perf_counter()
            a = mem.ask(q, "demo")
            print(json.dumps({"batched": batched, "question": q, "answer": a.answer, "llm_calls": a.usage.llm_calls,
                              "prompt_tokens": a.usage.prompt_tokens, "completion_tokens": a.usage.completion_tokens,
                              "latency_s": round(time.perf_counter() - t0, 1), "steps": len(a.trace),
                              "kept": len(a.evidence)}), flush=True)


if __name__ == "__main__":
    main()
