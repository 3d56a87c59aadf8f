#!/usr/bin/env python
"""Is a ranking rule the graph's, or would a flat retriever gain as much from it? Dense paragraphs (the
`dense_turns` baseline: cosine of each passage to the question) with CompassMem's passage-length rule
(`search.passage_length_weight`: less λ · log(tokens / 25) for a passage no one said, longer than 25
tokens), scored by answer@B on the questions of a `bench narrativeqa` run over the same memory.

    python scripts/dense-length-prior.py --out bench-out/nqa-full7 --weights 0,0.1,0.2,0.4

Reads the run's memory (OUT/memory-events.db) and questions (OUT/results.jsonl); prints answer@B per λ.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from compassmem import Memory
from compassmem.bench.metrics import answer_recall_at_budget
from compassmem.embed import make_embedder
from compassmem.embed.base import dots
from compassmem.search.graph import approx_tokens, passage_tokens
from compassmem.search.rank import length_penalty
from compassmem.search.responder import evidence_line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="a `bench narrativeqa` output folder")
    ap.add_argument("--weights", default="0,0.1,0.2,0.4", help="the λ values, comma-separated")
    ap.add_argument("--budget", type=int, default=1000)
    args = ap.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    rows = [json.loads(line) for line in (args.out / "results.jsonl").open()]
    questions = [(r["namespace"], r["question"], r["gold"]) for r in rows if r["method"] == "dense_turns"]
    memory, embedder = Memory(args.out / "memory-events.db", embedder="minilm"), make_embedder("minilm")
    passages: dict[str, tuple] = {}
    found: dict[float, list[float]] = {w: [] for w in weights}
    for namespace, question, answers in questions:
        if namespace not in passages:
            ids, matrix = memory.store.observation_matrix(namespace)
            by_id = {o.id: o for o in memory.store.observations(namespace)}
            said = [by_id[i] for i in ids]
            lines = [evidence_line(o) for o in said]
            penalty = length_penalty(np.array([passage_tokens(o) for o in said], float))
            passages[namespace] = (matrix, lines, [approx_tokens(line) for line in lines], penalty)
        matrix, lines, tokens, penalty = passages[namespace]
        cosine = dots(matrix, embedder.embed([question])[0]).astype(float)
        for w in weights:
            order = np.argsort(-(cosine - w * penalty), kind="stable")[:400]
            hit = answer_recall_at_budget(answers, [(lines[i], tokens[i]) for i in order], args.budget)
            if hit is not None:
                found[w].append(hit)
    for w in weights:
        print(f"λ {w:g}: answer@{args.budget} {100 * sum(found[w]) / len(found[w]):.2f} ({len(found[w])} questions)")


if __name__ == "__main__":
    main()
