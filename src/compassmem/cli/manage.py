"""Management commands: list, get, history, update, delete, forget, export, import. Each is the Memory
method of the same name (sqlite-utils style), so library and CLI never drift. app.py registers them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from ..errors import InputError
from ..text import clip
from .common import (AgentOpt, DbOpt, EMB_HELP, NsOpt, RunOpt, UserOpt, console, err_console, open_memory, scope_kwargs,
                     write_namespace)

JsonOpt = typer.Option(False, "--json", help="Print the result as JSON.")


def list_events(
    db: str = DbOpt, namespace: Optional[str] = NsOpt,
    offset: int = typer.Option(0, "--offset", help="Skip this many events."),
    limit: int = typer.Option(100, "--limit", help="Events per page (1-1000)."),
    as_json: bool = JsonOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
) -> None:
    """A page of a namespace's events (id, time, participants, summary) in the order they were stored."""
    mem = open_memory(db, must_exist=True)
    page = mem.list(offset=offset, limit=limit, **scope_kwargs(namespace, user_id, agent_id, run_id))
    mem.close()
    if as_json:
        print(page.model_dump_json(indent=2))
        return
    for e in page.items:
        console.print(f"[bold]{escape(e.id)}[/] [dim]{escape(e.time.label())} · {escape(', '.join(e.participants))}[/]  "
                      f"{escape(clip(e.summary, 100))}", highlight=False)
    shown = f"{page.offset + 1}-{page.offset + len(page.items)}" if page.items else "none"
    err_console.print(f"[dim]{shown} of {page.total} events[/]")


def get(
    event_id: str = typer.Argument(..., help="An event id (see `compassmem list`)."),
    db: str = DbOpt, namespace: Optional[str] = NsOpt, as_json: bool = JsonOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
) -> None:
    """One event: its summary, time, participants, source turns (with their observation ids) and relations."""
    mem = open_memory(db, must_exist=True)
    detail = mem.get(event_id, **scope_kwargs(namespace, user_id, agent_id, run_id))
    mem.close()
    if as_json:
        print(detail.model_dump_json(indent=2))
        return
    e = detail.event
    console.print(f"[bold]{escape(e.id)}[/] [dim]{escape(e.time.label())} · {escape(', '.join(e.participants))}[/]")
    console.print(escape(e.summary), highlight=False)
    for o in detail.observations:
        console.print(f"  [dim]{escape(o.id)}[/] {escape(o.render())}", highlight=False)
    for r in detail.relations:
        console.print(f"  [dim]{escape(f'{r.source} -[{r.type}]-> {r.target}')}[/]", highlight=False)


def history(
    event_id: str = typer.Argument(..., help="An event id (see `compassmem list`)."),
    db: str = DbOpt, namespace: Optional[str] = NsOpt, as_json: bool = JsonOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
) -> None:
    """What happened to an event, oldest first.

    Created, merged, updated, observations deleted, deleted, superseded (a later statement revises it)."""
    mem = open_memory(db, must_exist=True)
    entries = mem.history(event_id, **scope_kwargs(namespace, user_id, agent_id, run_id))
    mem.close()
    if as_json:
        print(json.dumps([h.model_dump() for h in entries], indent=2))
        return
    for h in entries:
        step = f" step {h.step}" if h.step is not None else ""
        text = clip(h.summary, 100) if h.summary is not None else "(summary redacted)"
        console.print(f"[dim]{escape(h.at)}[/] [bold]{h.action}[/]{step} [dim]{escape(', '.join(h.observation_ids[:6]))}"
                      f"[/]  {escape(text)}", highlight=False)


def _print_receipt(verb: str, r) -> None:
    rows = ", ".join(f"{n} {t}" for t, n in r.removed.items() if n)
    events = ""
    if r.events_deleted or r.events_rederived:
        events = f"; events deleted: {', '.join(r.events_deleted) or 'none'}, re-derived: {', '.join(r.events_rederived) or 'none'}"
    console.print(f"[green]✓[/] {verb} {escape(', '.join(r.observation_ids))}: {escape(rows or 'no rows')}{escape(events)}")
    _print_scan(r, f"the old text ({r.scanned_texts} text(s); {r.skipped_texts} too short or still held elsewhere) is")


def _print_scan(receipt, what: str) -> None:
    """The byte scan's verdict; exit 1 when deleted text is still readable in the files."""
    if receipt.verified:
        console.print(f"  verified: {what} in none of {escape(', '.join(Path(f).name for f in receipt.scanned_files))}")
    elif receipt.found:
        err_console.print(f"[red]still readable:[/] {escape('; '.join(receipt.found[:3]))}")
        raise typer.Exit(1)


def update(
    observation_id: str = typer.Argument(..., help="An observation id (see `compassmem get EVENT_ID`), or the id "
                                        "of an event with one observation."),
    text: str = typer.Argument(..., help="Its new text."),
    db: str = DbOpt, namespace: Optional[str] = NsOpt, as_json: bool = JsonOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
) -> None:
    """Replace an observation's text; its event is re-derived and the old text removed everywhere."""
    mem = open_memory(db, must_exist=True)
    receipt = mem.update(observation_id, text, write_namespace(namespace, user_id, agent_id, run_id))
    mem.close()
    if as_json:
        print(receipt.model_dump_json(indent=2))
    else:
        _print_receipt("updated", receipt)


def delete(
    observation_ids: list[str] = typer.Argument(..., help="One or more observation ids, or event ids (all of an "
                                                "event's observations)."),
    db: str = DbOpt, namespace: Optional[str] = NsOpt,
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."), as_json: bool = JsonOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
) -> None:
    """Delete observations (or events) and everything derived from them, then print the receipt.

    The receipt: what went, and a scan of the database files for the deleted text."""
    namespace = write_namespace(namespace, user_id, agent_id, run_id)
    mem = open_memory(db, must_exist=True)
    if not yes and not typer.confirm(f"Delete {len(observation_ids)} observation(s) from '{namespace}' in {db}?"):
        raise typer.Exit(1)
    receipt = mem.delete(observation_ids, namespace)
    mem.close()
    if as_json:
        print(receipt.model_dump_json(indent=2))
    else:
        _print_receipt("deleted", receipt)


def forget(
    db: str = DbOpt,
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="The namespace to delete (or a scope)."),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
) -> None:
    """Delete a namespace and everything derived from it, then print the receipt.

    Events, relations, topics, vectors, full-text index and cached LLM calls go; the files are scanned for its text."""
    if namespace is None and user_id is None and agent_id is None and run_id is None:
        raise InputError("name the namespace to forget (--namespace, or --user-id / --agent-id / --run-id)")
    namespace = write_namespace(namespace, user_id, agent_id, run_id)
    mem = open_memory(db, must_exist=True)
    if not yes and not typer.confirm(f"Delete namespace '{namespace}' from {db}?"):
        raise typer.Exit(1)
    receipt = mem.forget(namespace)
    mem.close()
    rows = ", ".join(f"{n} {t}" for t, n in receipt.removed.items() if n)
    console.print(f"[green]✓[/] forgot {escape(namespace)}: {escape(rows)}; {receipt.index_files_removed} index files")
    _print_scan(receipt, f"each of its {receipt.scanned_texts} longest texts is")


def export(
    db: str = DbOpt,
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="The namespace to write (default: all)."),
    out: Path = typer.Option(..., "--out", "-o", help="The JSONL file to write."),
) -> None:
    """Write one namespace or the whole database, vectors and history included, to a JSONL file that
    `compassmem import` restores exactly (format: docs/formats.md)."""
    mem = open_memory(db, must_exist=True)
    n = mem.export(namespace, out)
    mem.close()
    what = namespace if namespace is not None else "every namespace"
    console.print(f"[green]✓[/] {n} rows of {escape(what)} → {escape(str(out))}")


def import_(
    path: Path = typer.Argument(..., help="A file written by `compassmem export`."),
    db: str = DbOpt,
    embedder: Optional[str] = typer.Option(None, "--embedder", help=EMB_HELP + " (must be the export's)"),
) -> None:
    """Restore the namespaces of an export file (refused if one exists; all or nothing)."""
    mem = open_memory(db, embedder=embedder or _export_embedder(path))
    names = mem.import_file(path)
    mem.close()
    console.print(f"[green]✓[/] imported {escape(', '.join(names))} → {escape(db)}")


def _export_embedder(path: Path) -> str | None:
    """The embedder named in an export's header, so importing into a new database needs no flag."""
    try:
        with path.open(encoding="utf-8") as fh:
            return json.loads(fh.readline()).get("embedder")
    except (OSError, ValueError, AttributeError):
        return None  # import_file reports what is wrong with the file


COMMANDS = {"list": list_events, "get": get, "history": history, "update": update, "delete": delete,
            "forget": forget, "export": export, "import": import_}
