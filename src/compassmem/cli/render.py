"""Rich renderings shared by `ask`, `stats` and `demo`.

Every user or model text goes through `escape`: a stored "[/]" or "[link=…]" must print as itself,
never restyle the terminal or crash Rich's markup parser."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from ..models import Answer, SearchHit
from ..text import clip


KIND_NOTES = {  # what a reader must know about an answer no model wrote
    "resolved_date": "extracted, no model: the date the best evidence states",
    "span": "extracted, no model: copied from an evidence turn",
    "evidence_turn": "extracted, no model: the best evidence turn itself",
    "none": "nothing in memory to answer from",
}


def render_answer(console: Console, a: Answer, show_trace: bool = True, kept_only: bool = False) -> None:
    """`kept_only`: list only the events the explorers kept (the demo: in a small memory every event fits
    the evidence budget, so listing all of them hid what the search chose), and count the rest."""
    console.print(f"[bold cyan]Q:[/] {escape(a.question)}")
    console.print(f"[bold green]A:[/] {escape(a.answer)}")
    if a.answer_kind in KIND_NOTES:
        console.print(f"[dim]   ({KIND_NOTES[a.answer_kind]})[/]", highlight=False)
    if a.subgoals:
        goals = "  ".join(f"{'✓' if g.satisfied else '✗'} {escape(g.text)}" for g in a.subgoals)
        console.print(f"[dim]subgoals:[/] {goals}", highlight=False)
    kept = {s.event_id for s in a.trace if s.action != "SKIP"}
    shown = [ev for ev in a.evidence if ev.event_id in kept] if kept_only and kept else a.evidence
    if shown:
        label = ("fallback evidence (nothing kept)" if a.used_fallback else
                 "events the explorers kept" if shown is not a.evidence else "evidence")
        t = Tree(f"[dim]{label}[/]")
        for ev in shown:
            t.add(f"[bold]{escape(ev.event_id)}[/] {escape(f'[{ev.time}]')} {escape(clip(ev.summary, 110))}  "
                  f"[dim]turns {escape(', '.join(ev.observation_ids[:8]))}[/]")
        console.print(t)
        if len(shown) < len(a.evidence):
            console.print(f"[dim]  + {len(a.evidence) - len(shown)} more events in the evidence handed to the "
                          "answerer (compassmem ask lists all)[/]", highlight=False)
    if show_trace and a.trace:
        path = escape(" → ".join(f"{s.event_id}:{s.action[0]}" for s in a.trace))
        console.print(f"[dim]path (E=expand S=skip A=answer): {path}[/]", highlight=False)
    if a.refined_query:
        console.print(f"[dim]refined query: {escape(a.refined_query)}[/]", highlight=False)
    u = a.usage
    console.print(f"[dim]llm calls {u.llm_calls} (cached {u.cached_calls}), tokens {u.prompt_tokens}+{u.completion_tokens}, "
                  f"context {a.context_tokens} tokens[/]", highlight=False)


def render_stats(console: Console, s: dict[str, Any]) -> None:
    t = Table(title=escape(f"namespace {s['namespace']}"), show_header=False)
    for key in ("observations", "steps", "events", "relations", "cross_step_relations", "topics", "merges"):
        t.add_row(key, str(s[key]))
    t.add_row("relation types", escape(", ".join(f"{k} {v}" for k, v in s["relations_by_type"].items())) or "-")
    c = s["construction"]
    t.add_row("construction LLM", f"{c['llm_calls']} calls, {c['prompt_tokens']}+{c['completion_tokens']} tokens, {c['latency_s']} s")
    if s["skipped"]:
        t.add_row("skipped", escape("\n".join(s["skipped"][:10])))
    console.print(t)


def render_hits(console: Console, hits: list[SearchHit]) -> None:
    if not hits:
        console.print("[yellow]no events found[/]")
        return
    for h in hits:
        console.print(f"[bold]{escape(h.event_id)}[/] {escape(f'[{h.time}]')} score {h.score:.3f}  "
                      f"{escape(clip(h.summary, 110))}", highlight=False)
        for o in h.observations[:6]:
            console.print(f"  [dim]{escape(o.id)}[/] {escape(clip(o.said(), 160))}", highlight=False)
