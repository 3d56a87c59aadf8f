"""`compassmem` command line: thin wrappers over the library; every error is one clear line, exit ≠ 0."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from ..errors import CompassMemError
from .common import (AgentOpt, BaseUrlOpt, ConfigOpt, DbOpt, EMB_HELP, KeyOpt, LlmOpt, MetaOpt, NsOpt, RunOpt, SinceOpt,
                     SpeakerOpt, UntilOpt, UserOpt, console, err_console, filters_from, key_values, open_memory,
                     parse_range, scope_kwargs, write_namespace)

app = typer.Typer(help="CompassMem: event-centric memory for LLM agents. Build an Event Graph from "
                       "conversations or documents, then ask it questions.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"compassmem {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """CompassMem: event-centric memory for LLM agents."""


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="Input file."),
    db: str = DbOpt,
    format: Optional[str] = typer.Option(
        None, "--format", "-f", help="locomo | narrativeqa | jsonl | beam (a BEAM chat folder) | text (a book, script "
        "or report) | narrativeqa-full (documents.jsonl + qa.jsonl). Default: from the name — .txt/.md text, .json "
        "locomo, .jsonl observations (or NarrativeQA rows / documents, by their fields), a folder of "
        "documents.jsonl, of BEAM chats or of text files."),
    sample: Optional[list[str]] = typer.Option(None, "--sample", help="LoCoMo sample id(s), e.g. conv-26; repeatable."),
    sessions: Optional[str] = typer.Option(None, "--sessions", help="LoCoMo session range, e.g. 1-10."),
    limit_docs: Optional[int] = typer.Option(None, "--limit-docs", help="NarrativeQA: first N documents only."),
    llm: str = LlmOpt, embedder: Optional[str] = typer.Option(None, "--embedder", help=EMB_HELP),
    config: Optional[Path] = ConfigOpt, base_url: Optional[str] = BaseUrlOpt, api_key: Optional[str] = KeyOpt,
) -> None:
    """Build or extend a memory from a file, one construction step at a time (safe to re-run).

    jsonl: one observation per line, {"namespace", "step", "id", "text", "speaker"?, "time"?, "meta"?};
    locomo: the LoCoMo benchmark file; narrativeqa: {"passage", "question", "answer"} lines.
    Fields, limits and examples: docs/formats.md."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from ..ingest import load

    dataset = load(path, format, samples=sample, sessions=parse_range(sessions), limit_docs=limit_docs)
    mem = open_memory(db, llm, embedder, config, base_url, api_key)
    totals = {"new": 0, "merged": 0}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("left"), TimeRemainingColumn(), console=err_console, transient=False) as bar:
        task = bar.add_task("ingesting", total=len(dataset.steps))

        def advance(item, record) -> None:
            totals["new"] += record.events_new
            totals["merged"] += record.events_merged
            bar.update(task, advance=1, description=escape(f"{item.namespace} step {item.step}"))

        try:
            mem.ingest(dataset, on_step=advance)
        except CompassMemError as exc:
            done = int(bar.tasks[0].completed)
            raise CompassMemError(f"step {done + 1} of {len(dataset.steps)} not ingested "
                                  f"(the {done} before it are saved; re-run to resume): {exc}") from None
    names = dataset.namespaces()
    into = ", ".join(names[:3]) + (f" … ({len(names)} namespaces)" if len(names) > 3 else "")
    console.print(f"[green]✓[/] {len(dataset.steps)} step{'s' * (len(dataset.steps) != 1)} into {escape(into)}: "
                  f"{totals['new']} new event{'s' * (totals['new'] != 1)}, {totals['merged']} merged → {escape(db)}")
    if names and names != ["default"]:  # ask reads 'default' unless told: say how to reach what was built
        console.print(f"  ask it: compassmem ask \"…\" -n {escape(names[0])} --db {escape(db)}", soft_wrap=True)
    mem.close()


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question."),
    db: str = DbOpt,
    namespace: Optional[str] = NsOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
    llm: str = LlmOpt, config: Optional[Path] = ConfigOpt, base_url: Optional[str] = BaseUrlOpt,
    api_key: Optional[str] = KeyOpt, as_json: bool = typer.Option(False, "--json", help="Print the Answer as JSON."),
    since: Optional[str] = SinceOpt, until: Optional[str] = UntilOpt, speaker: Optional[list[str]] = SpeakerOpt,
    meta: Optional[list[str]] = MetaOpt,
    mode: Optional[str] = typer.Option(None, "--mode", help="With --llm: 'agentic' (the model plans, picks starts and "
                                       "explores) or 'graph' (offline exploration, the model only answers: 1 call). "
                                       "Default: search.mode, agentic."),
) -> None:
    """Answer a question by actively searching one namespace's Event Graph.

    Without --llm no model writes the answer: it is extracted from the best evidence (a resolved date, a span copied from a turn, or that turn itself) and printed with a note saying which; the JSON's answer_kind says the same."""
    from .render import render_answer

    mem = open_memory(db, llm, None, config, base_url, api_key, must_exist=True)
    answer = mem.ask(question, filters=filters_from(since, until, speaker, meta), mode=mode,
                     **scope_kwargs(namespace, user_id, agent_id, run_id))
    if as_json:
        print(answer.model_dump_json(indent=2))
    else:
        render_answer(console, answer)
    mem.close()


@app.command()
def search(
    query: str = typer.Argument(..., help="What to look for."),
    db: str = DbOpt,
    namespace: Optional[str] = NsOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
    limit: int = typer.Option(10, "--limit", "-k", help="How many events (1-1000)."),
    as_json: bool = typer.Option(False, "--json", help="Print the hits as JSON."),
    since: Optional[str] = SinceOpt, until: Optional[str] = UntilOpt, speaker: Optional[list[str]] = SpeakerOpt,
    meta: Optional[list[str]] = MetaOpt,
) -> None:
    """Ranked events with their source turns and scores, without an answer (no LLM call)."""
    from .render import render_hits

    mem = open_memory(db, must_exist=True)
    hits = mem.search(query, limit=limit, filters=filters_from(since, until, speaker, meta),
                      **scope_kwargs(namespace, user_id, agent_id, run_id))
    if as_json:
        print(json.dumps([h.model_dump() for h in hits], indent=2))
    else:
        render_hits(console, hits)
    mem.close()


@app.command()
def stats(
    db: str = DbOpt,
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="One namespace (default: all)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
) -> None:
    """Counts of observations, events, relations, topics, merges and construction cost."""
    from .render import render_stats

    mem = open_memory(db, must_exist=True)
    one = namespace is not None or user_id is not None or agent_id is not None or run_id is not None
    names = [write_namespace(namespace, user_id, agent_id, run_id)] if one else mem.namespaces()
    result = [mem.stats(n) for n in names]
    if as_json:
        print(json.dumps(result[0] if one else result, indent=2))
    else:
        for s in result:
            render_stats(console, s)
        if not result:  # an empty database: say so, never print nothing
            console.print(f"{escape(db)} holds no memory yet (add some with `compassmem add` or `compassmem ingest`)")
    mem.close()


@app.command()
def add(
    texts: list[str] = typer.Argument(..., help="The observations of one step, one argument each ('-': read lines "
                                     "from standard input)."),
    db: str = DbOpt, namespace: Optional[str] = NsOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
    speaker: Optional[str] = typer.Option(None, "--speaker", help="Who said them."),
    world_time: Optional[str] = typer.Option(None, "--world-time", help="When it happened, e.g. '8 May 2023'."),
    step: Optional[int] = typer.Option(None, "--step", help="The step number (default: the next one)."),
    metadata: Optional[list[str]] = typer.Option(None, "--metadata", help="KEY=VALUE put on every observation; "
                                                 "repeatable."),
    embedder: Optional[str] = typer.Option(None, "--embedder", help=EMB_HELP),
    llm: str = LlmOpt, config: Optional[Path] = ConfigOpt, base_url: Optional[str] = BaseUrlOpt,
    api_key: Optional[str] = KeyOpt, as_json: bool = typer.Option(False, "--json", help="Print the step record."),
) -> None:
    """Add one step of observations (a session, a chunk) to a memory: Memory.add."""
    if texts == ["-"]:
        texts = [line.rstrip("\n") for line in sys.stdin if line.strip()]
    pairs = key_values(metadata, "--metadata") or None
    items = [{"text": t, "speaker": speaker} if speaker else t for t in texts]
    mem = open_memory(db, llm, embedder, config, base_url, api_key)
    record = mem.add(items, step=step, world_time=world_time, metadata=pairs,
                     **scope_kwargs(namespace, user_id, agent_id, run_id))
    mem.close()
    if as_json:
        print(record.model_dump_json(indent=2))
    else:
        console.print(f"[green]✓[/] {escape(record.namespace)} step {record.step}: {record.observations} observations, "
                      f"{record.events_new} new events, {record.events_merged} merged")


@app.command()
def namespaces(db: str = DbOpt, as_json: bool = typer.Option(False, "--json", help="Print a JSON list.")) -> None:
    """The namespaces of a database: Memory.namespaces."""
    mem = open_memory(db, must_exist=True)
    names = mem.namespaces()
    mem.close()
    print(json.dumps(names) if as_json else "\n".join(names))


@app.command()
def demo(db: str = typer.Option(":memory:", "--db", help="Keep the demo memory in this file.")) -> None:
    """Build a memory from a small bundled conversation and answer questions offline."""
    from .demo import run_demo

    run_demo(console, db)


@app.command()
def doctor(
    llm: str = LlmOpt, embedder: str = typer.Option("minilm", "--embedder", help=EMB_HELP),
    base_url: Optional[str] = BaseUrlOpt, api_key: Optional[str] = KeyOpt, config: Optional[Path] = ConfigOpt,
) -> None:
    """Check the configured LLM and embedder end to end (one structured call per role schema)."""
    from .doctor import run_doctor

    if not run_doctor(console, llm, embedder, base_url, api_key, config):
        raise typer.Exit(1)


from .bench_cmd import bench_app  # noqa: E402
from .manage import COMMANDS  # noqa: E402
from .models_cmd import models_app  # noqa: E402
from .serve_cmd import keys_app, mcp, serve, view  # noqa: E402

for _name, _command in COMMANDS.items():
    app.command(_name)(_command)
app.command()(serve)
app.command()(mcp)
app.command()(view)
app.add_typer(keys_app, name="keys")

app.add_typer(models_app, name="models")
app.add_typer(bench_app, name="bench")


def main() -> None:
    try:
        app()
    except (CompassMemError, OSError) as exc:  # one line, never wrapped: scripts grep it
        err_console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/] (completed steps are saved)")
        sys.exit(130)
