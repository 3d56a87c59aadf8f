#!/usr/bin/env python
"""Compare embedders on LoCoMo turn retrieval: speed, and evidence recall@k of dense top-k turns.

Usage: python scripts/compare-embedders.py DATA/locomo_dev.json [EMBEDDER ...]   (default: minilm hash)
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from compassmem.embed import make_embedder
from compassmem.ingest import load


def main() -> None:
    path = sys.argv[1]
    specs = sys.argv[2:] or ["minilm", "hash"]
    ds = load(path, "locomo")
    by_ns: dict[str, list] = {}
    for s in ds.steps:
        by_ns.setdefault(s.namespace, []).extend(s.observations)
    rows = []
    for spec in specs:
        t0 = time.perf_counter()
        emb = make_embedder(spec)
        load_s = time.perf_counter() - t0
        texts = [o.text for obs in by_ns.values() for o in obs]
        t1 = time.perf_counter()
        vecs = emb.embed(texts)
        embed_s = time.perf_counter() - t1
        offset, mats = 0, {}
        for ns, obs in by_ns.items():
            mats[ns] = (obs, vecs[offset : offset + len(obs)])
            offset += len(obs)
        recall = {5: [], 10: [], 25: []}
        for q in ds.questions:
            if not q.evidence:
                continue
            obs, mat = mats[q.namespace]
            order = np.argsort(-(mat @ emb.embed([q.question])[0]))
            for k in recall:
                got = {obs[i].id for i in order[:k]}
                recall[k].append(len(got & set(q.evidence)) / len(set(q.evidence)))
        rows.append({"embedder": spec, "dim": int(vecs.shape[1]), "load_s": round(load_s, 2),
                     "turns": len(texts), "turns_per_s": round(len(texts) / embed_s, 1),
                     **{f"recall@{k}": round(100 * float(np.mean(v)), 1) for k, v in recall.items()},
                     "questions": len(recall[5])})
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
