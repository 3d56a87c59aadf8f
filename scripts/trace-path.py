#!/usr/bin/env python
"""Which compassmem files run on `Memory.add` and `Memory.ask` (offline engine, SQLite store): the reading
path docs/architecture.md lists. A file counts when one of its Python functions is called; each call is
traced on a warm memory, so one-off imports and schema creation do not count.

    python scripts/trace-path.py            # both paths, files and the functions called in each
    python scripts/trace-path.py --count    # only the counts
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import defaultdict
from typing import Callable

import compassmem
from compassmem import Memory

ROOT = os.path.dirname(compassmem.__file__)
TURNS = [{"speaker": "Kate", "text": "I adopted a dog named Rex last week."},
         {"speaker": "Sam", "text": "Oh nice! What breed is he?"},
         {"speaker": "Kate", "text": "A beagle. We go hiking every Sunday because he loves the woods."}]
QUESTION = "What dog did Kate adopt?"


def trace(call: Callable[[], object]) -> dict[str, set[str]]:
    """Package-relative file → names of its functions that ran during `call`."""
    seen: dict[str, set[str]] = defaultdict(set)

    def profile(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event == "call" and frame.f_code.co_filename.startswith(ROOT):
            seen[os.path.relpath(frame.f_code.co_filename, ROOT)].add(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(os.path.join(tmp, "trace.db"))
        mem.add(TURNS, namespace="warm", world_time="2023-05-08")  # first use: schema, models, caches
        mem.ask(QUESTION, namespace="warm")
        paths = {"Memory.add": trace(lambda: mem.add(TURNS, namespace="t", world_time="2023-05-09")),
                 "Memory.ask": trace(lambda: mem.ask(QUESTION, namespace="t"))}
    for name, files in paths.items():
        print(f"{name}: {len(files)} files")
        if "--count" not in sys.argv:
            for f in sorted(files):
                names = sorted(n for n in files[f] if not n.startswith("<"))
                print(f"  {f:28s} {', '.join(names)}")


if __name__ == "__main__":
    main()
