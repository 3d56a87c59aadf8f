#!/usr/bin/env python
"""Record what the search answers on fixed memories, to check that a change meant to be faster changes
nothing it computes: run it before and after the change, then compare the two files.

    python scripts/same-answers.py before.json --memory bench-out/b-locomo --memory bench-out/nqa-full8
    ... change the code ...
    python scripts/same-answers.py after.json --memory bench-out/b-locomo --memory bench-out/nqa-full8
    python scripts/same-answers.py --compare before.json after.json

A memory is a `compassmem bench` output folder (its memory-events.db and results.jsonl): the first
`--per` CompassMem questions of each namespace are asked (answer, ranking, evidence events, start
events) and searched (events, scores, observations). Each database is copied to a temporary folder
first, so the bench folder's indexes are never rewritten by the run. `--scale DB` adds `bench scale`'s
synthetic questions on a database kept with `--keep-db` (hash embedder).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from compassmem import Memory


def record(memories: list[Path], per: int, scale: Path | None) -> dict[str, list]:
    out: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if scale is not None:
            from compassmem.bench.scale import NAMESPACE, questions

            mem = Memory(shutil.copy(scale, Path(tmp) / "scale.db"), embedder="hash")
            for q in questions(60):
                a = mem.ask(q, NAMESPACE)
                out[f"scale|{q}"] = [a.answer, a.ranking, [e.event_id for e in a.evidence], a.start_nodes]
        for folder in memories:
            mem = Memory(shutil.copy(folder / "memory-events.db", Path(tmp) / f"{folder.name}.db"))
            asked: dict[str, int] = {}
            for line in open(folder / "results.jsonl"):
                r = json.loads(line)
                ns = r["namespace"]
                if r["method"] != "compassmem" or asked.get(ns, 0) >= per:
                    continue
                asked[ns] = asked.get(ns, 0) + 1
                a = mem.ask(r["question"], ns)
                out[f"ask|{folder.name}|{ns}|{r['question']}"] = [a.answer, a.ranking, [e.event_id for e in a.evidence],
                                                                   a.start_nodes]
                out[f"search|{folder.name}|{ns}|{r['question']}"] = [
                    [h.event_id, h.score, [o.id for o in h.observations]] for h in mem.search(r["question"], ns, limit=5)]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, help="where to write the record")
    p.add_argument("--memory", type=Path, action="append", default=[], help="a bench output folder (repeatable)")
    p.add_argument("--per", type=int, default=40, help="questions per namespace")
    p.add_argument("--scale", type=Path, help="a `bench scale --keep-db` database")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = p.parse_args()
    if args.compare:
        before, after = (json.loads(f.read_text()) for f in args.compare)
        differ = [k for k in before if before[k] != after.get(k)]
        print(f"{len(before)} outputs, {len(differ)} differ" + "".join(f"\n  {k}" for k in differ[:20]))
        return 1 if differ or before.keys() != after.keys() else 0
    if args.out is None:
        p.error("give OUT, or --compare BEFORE AFTER")
    record_ = record(args.memory, args.per, args.scale)
    args.out.write_text(json.dumps(record_))
    print(f"{len(record_)} outputs -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
