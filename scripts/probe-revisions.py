"""How well construction links revisions (construct/revise.py), offline and with a model.

    python scripts/probe-revisions.py [GGUF] [--beam BEAM_DIR DB] [--limit N]

Revision set (tests/data/revisions.json, 22 short chats: a fact, small talk, its revision): per case a
fresh offline memory of the three steps, then the finder asked about the revising turn; a hit links it
to the original statement. BEAM (optional; DB = a memory bench built from BEAM_DIR, e.g.
bench-out/q3-beam/memory-events.db): for each knowledge-update / contradiction question whose updated
turn is apart from the original, the finder asked about the updated turn (hit: it names an original
turn), and for as many user turns that state a change but revise nothing the questions know of
(a link there is counted as a false link: an upper bound, since BEAM users revise more than is asked).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from compassmem import Memory
from compassmem.config import Settings
from compassmem.construct.revise import CHANGE, LLMRevisionFinder, OfflineRevisionFinder
from compassmem.embed import make_embedder
from compassmem.ingest import load_beam
from compassmem.llm import make_llm
from compassmem.store import open_store

ROOT = Path(__file__).resolve().parent.parent


def finders(gguf: str | None):
    settings = Settings().construction.model_copy(update={"offline_revisions": True})
    emb = make_embedder("minilm")
    out = {"offline": OfflineRevisionFinder(emb, settings)}
    if gguf:
        out["model"] = LLMRevisionFinder(make_llm(f"gguf:{gguf}", Settings().llm.model_copy(update={"cache": False})),
                                         emb, settings)
    return out


def revision_set(found: dict) -> None:
    cases = json.loads((ROOT / "tests" / "data" / "revisions.json").read_text())
    for name, finder in found.items():
        hits = links = 0
        t0 = time.time()
        for c in cases:
            mem = Memory()
            mem.add([{"speaker": "Alice", "text": c["original"]}, {"speaker": "Bob", "text": "That sounds nice."}], namespace="n")
            mem.add([{"speaker": "Alice", "text": "The weather was lovely today."}], namespace="n")
            mem.add([{"speaker": "Alice", "text": c["update"]}], namespace="n")
            new = mem.store.observations("n", 3)
            got = finder.find(mem.store, "n", new)
            links += len(got)
            hits += any(r.old == "S1:1" for r in got)
        print(f"revision set, {name}: {hits}/{len(cases)} linked to the original, {links} links, {time.time() - t0:.0f} s")


def beam(found: dict, folder: str, db: str, limit: int) -> None:
    ds = load_beam(Path(folder))
    store = open_store(db)
    pairs = [(q.namespace, sorted(set(q.evidence) - set(q.superseded)), set(q.superseded))
             for q in ds.questions if q.superseded and set(q.evidence) - set(q.superseded)][:limit]
    asked = {(ns, o) for ns, new, old in pairs for o in new} | {(q.namespace, o) for q in ds.questions for o in q.evidence}
    rng = random.Random(7)
    others = [(s.namespace, o) for s in ds.steps for o in s.observations
              if (o.speaker or "").lower() == "user" and CHANGE.search(o.text) and (s.namespace, o.id) not in asked]
    others = rng.sample(others, min(limit, len(others)))
    for name, finder in found.items():
        t0 = time.time()
        hits = sum(any(r.old in old for r in finder.find(store, ns, store.get_observations(ns, new)))
                   for ns, new, old in pairs)
        false = sum(bool(finder.find(store, ns, [o])) for ns, o in others)
        print(f"BEAM, {name}: {hits}/{len(pairs)} updates linked to an original turn; {false}/{len(others)} other "
              f"change-stating user turns linked to something; {time.time() - t0:.0f} s")


if __name__ == "__main__":
    args = sys.argv[1:]
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else 35
    gguf = args[0] if args and not args[0].startswith("--") else None
    found = finders(gguf)
    revision_set(found)
    if "--beam" in args:
        i = args.index("--beam")
        beam(found, args[i + 1], args[i + 2], limit)
