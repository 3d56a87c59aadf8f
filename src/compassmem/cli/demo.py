"""`compassmem demo`: a bundled conversation, built and searched offline in seconds."""

from __future__ import annotations

import json
import time
from importlib.resources import files

from rich.console import Console
from rich.rule import Rule

from ..models import Observation
from .common import open_memory
from .render import render_answer


def load_demo() -> dict:
    return json.loads(files("compassmem").joinpath("data/demo.json").read_text(encoding="utf-8"))


def run_demo(console: Console, db: str = ":memory:") -> None:
    data = load_demo()
    ns = data["namespace"]
    mem = open_memory(db)
    t0 = time.perf_counter()
    for s in data["sessions"]:
        obs = [Observation(id=t["id"], namespace=ns, step=s["step"], seq=i, speaker=t["speaker"], text=t["text"],
                           time=s["time"]) for i, t in enumerate(s["turns"])]
        rec = mem.constructor.add_step(ns, s["step"], obs, s["time"])
        console.print(f"[dim]step {s['step']} ({s['time']}): {rec.observations} turns → {rec.events_new} events, "
                      f"{rec.relations} relations ({rec.cross_relations} cross-step)[/]")
    st = mem.stats(ns)
    console.print(f"[bold]Event Graph[/]: {st['events']} events, {st['relations']} relations, {st['topics']} topics "
                  f"(built offline in {time.perf_counter() - t0:.1f} s)\n")
    for q in data["questions"]:
        console.print(Rule(style="dim"))
        render_answer(console, mem.ask(q, ns), kept_only=True)
    mem.close()
