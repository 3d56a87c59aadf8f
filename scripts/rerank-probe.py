#!/usr/bin/env python
"""Would a second look at the first passages find what the ranking missed? Three re-orderings of the
rankings a `bench` run stored, scored the way the run scored them (answer@B for NarrativeQA, gold-turn
recall@B for the chat sets), for each method named:

- window N: after each of the first N passages, the passage that follows it in the text (a story's "what
  happens next"; LlamaIndex's sentence window);
- hop: the passages of the events one typed relation away from the first 3 passages' events ("graph"),
  or of the whole memory ("flat"), scored by cosine to the question + α · cosine to those 3 passages,
  the best m moved in after the 5th (a second hop seeded by the first);
- cover: the question's content words the first 5 passages lack; the (at most 2) passages among the next
  100 that carry most of them moved in after the 5th (a gap query over what was found);
- fuse: reciprocal-rank fusion (k = 10) of the method's ranking with `hybrid_speaker`'s for the same
  question, the flat list weighted w (what a flat retriever would add to the graph's ranking).

    python scripts/rerank-probe.py --out bench-out/nqa-full8 --methods compassmem,hybrid_speaker
    python scripts/rerank-probe.py --out bench-out/b-locomo --methods compassmem,hybrid_speaker --probes cover

Reads OUT/memory-events.db and OUT/results.jsonl; prints one line per method and re-ordering.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from compassmem import Memory
from compassmem.bench.methods import rrf
from compassmem.bench.metrics import answer_recall_at_budget, recall_at_budget
from compassmem.embed.base import dots
from compassmem.search.graph import approx_tokens
from compassmem.search.responder import evidence_line
from compassmem.text import content_words


class Namespace:
    """One memory namespace as the probes read it: passages in stream order, their events and relations."""

    def __init__(self, memory: Memory, namespace: str) -> None:
        store = memory.store
        observations = store.observations(namespace)
        self.ids = [o.id for o in observations]
        self.position = {o: i for i, o in enumerate(self.ids)}
        self.text = {o.id: evidence_line(o) for o in observations}
        self.tokens = {k: approx_tokens(v) for k, v in self.text.items()}
        self.words = {o.id: set(content_words(o.text)) for o in observations}
        self.vectors = store.observation_vectors(namespace, self.ids)
        self.owner: dict[str, str] = {}
        self.members: dict[str, list[str]] = {}
        for e in store.events(namespace):
            self.members[e.id] = list(e.observation_ids)
            self.owner.update({o: e.id for o in e.observation_ids})
        self.linked: dict[str, set[str]] = defaultdict(set)
        for r in store.relations(namespace):
            self.linked[r.source].add(r.target)
            self.linked[r.target].add(r.source)


def moved_in(ranking: list[str], picked: list[str], after: int) -> list[str]:
    head = ranking[:after] + [p for p in picked if p not in ranking[:after]]
    seen = set(head)
    return head + [o for o in ranking[after:] if o not in seen]


def window(ns: Namespace, ranking: list[str], n: int) -> list[str]:
    out: list[str] = []
    for i, o in enumerate(ranking):
        out.append(o)
        j = ns.position[o] + 1
        if i < n and j < len(ns.ids):
            out.append(ns.ids[j])
    return list(dict.fromkeys(out))


def hop(ns: Namespace, ranking: list[str], query: np.ndarray, graph: bool, alpha: float = 0.5, m: int = 3) -> list[str]:
    seeds = ranking[:3]
    if graph:
        events = {ns.owner[o] for o in seeds if o in ns.owner}
        reach = set().union(events, *(ns.linked[e] for e in events))
        pool = [o for e in reach for o in ns.members.get(e, [])]
    else:
        pool = ns.ids
    pool = [o for o in pool if o not in set(ranking[:5])]
    if not pool or not seeds:
        return ranking
    rows = ns.vectors[[ns.position[o] for o in pool]]
    seed = ns.vectors[[ns.position[o] for o in seeds]].mean(0)
    score = dots(rows, query) + alpha * dots(rows, seed)
    return moved_in(ranking, [pool[i] for i in np.argsort(-score)[:m]], 5)


def cover(ns: Namespace, ranking: list[str], question: str) -> list[str]:
    missing = set(content_words(question)) - set().union(*(ns.words[o] for o in ranking[:5]))
    if not missing:
        return ranking
    carriers = [(i, o) for i, o in enumerate(ranking[5:105], 5) if ns.words[o] & missing]
    carriers.sort(key=lambda t: (-len(ns.words[t[1]] & missing), t[0]))
    return moved_in(ranking, [o for _, o in carriers[:2]], 5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="a `bench` output folder")
    ap.add_argument("--methods", default="compassmem,hybrid_speaker")
    ap.add_argument("--probes", default="window,hop,cover,fuse", help="which re-orderings, comma-separated")
    ap.add_argument("--budget", type=int, default=1000)
    args = ap.parse_args()
    rows = [json.loads(line) for line in (args.out / "results.jsonl").open()]
    memory = Memory(args.out / "memory-events.db")
    spaces: dict[str, Namespace] = {}
    chats = any(r["gold_evidence"] for r in rows)  # gold turns: recall@B; none (NarrativeQA): answer@B
    probes = args.probes.split(",")
    variants: list[tuple[str, object]] = [("as ranked", lambda ns, r, q: r["ranking"])]
    if "window" in probes:
        variants += [(f"window {n}", lambda ns, r, q, n=n: window(ns, r["ranking"], n)) for n in (1, 3, 10)]
    if "hop" in probes:
        variants += [("hop graph", lambda ns, r, q: hop(ns, r["ranking"], q, True)),
                     ("hop flat", lambda ns, r, q: hop(ns, r["ranking"], q, False))]
    if "cover" in probes:
        variants += [("cover", lambda ns, r, q: cover(ns, r["ranking"], r["question"]))]
    flat = {r["qid"]: r["ranking"] for r in rows if r["method"] == "hybrid_speaker"}
    if "fuse" in probes and flat:
        variants += [(f"fuse {w}", lambda ns, r, q, w=w: rrf([r["ranking"], flat.get(r["qid"], [])], k=10,
                                                                    weights=[1.0, w], key=str))
                     for w in (0.1, 0.2, 0.3)]
    for method in args.methods.split(","):
        mine = [r for r in rows if r["method"] == method]
        queries = memory.embedder.embed([r["question"] for r in mine]) if "hop" in probes else [None] * len(mine)
        for name, reorder in variants:
            scores = []
            for r, q in zip(mine, queries):
                if r["namespace"] not in spaces:
                    spaces[r["namespace"]] = Namespace(memory, r["namespace"])
                ns = spaces[r["namespace"]]
                ranked = reorder(ns, {**r, "ranking": [o for o in r["ranking"] if o in ns.text]}, q)
                if chats:
                    score = recall_at_budget(r["gold_evidence"], [(o, ns.tokens[o]) for o in ranked], args.budget)
                else:
                    score = answer_recall_at_budget(r["gold"], [(ns.text[o], ns.tokens[o]) for o in ranked], args.budget)
                if score is not None:
                    scores.append(score)
            print(f"{method:16s} {name:10s} @{args.budget} {100 * np.mean(scores):6.2f}  n={len(scores)}", flush=True)


if __name__ == "__main__":
    main()
