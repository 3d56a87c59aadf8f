"""`compassmem bench locomo|narrativeqa|judge|scale|ann|haystack|load|cv`."""

from __future__ import annotations

import json
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .common import EMB_HELP, parse_range

bench_app = typer.Typer(help="Benchmarks with the paper's metrics: LoCoMo, NarrativeQA, scale; service load.",
                        no_args_is_help=True)
console = Console()
err = Console(stderr=True)

METHODS_HELP = ("Comma-separated methods (default all): compassmem, full_context, rag512, dense_turns, bm25_turns, "
                "hybrid_turns (RRF of BM25 and dense turns), hybrid_speaker (+ the turns of a person the question names), "
                "hybrid_people (+ the names a chat uses, and 'my' said to an assistant), "
                "no_topics, no_relations, no_refinement, no_planner, no_newer_first, chunks100, compassmem_graph (with --llm: the "
                "offline search, the model only answers)")


@contextmanager
def _progress() -> Iterator[Callable[[str, int, int], None]]:
    """A bar per phase ('building', 'answering', 'judging', a cross-validation fold, ...) on stderr, with
    the time left: a local-model run takes hours."""
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("left"), TimeRemainingColumn(), console=err) as bar:
        tasks: dict[str, int] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(escape(phase), total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield progress


def _split(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _run(dataset: str, data: Path, out: Path, samples: str | None, sessions: str | None, methods: str | None,
         llm: str, embedder: str, limit: int | None, limit_docs: int | None, config: Path | None,
         base_url: str | None, api_key: str | None, turns_k: int, top_k: int | None, db: str | None = None,
         questions: str | None = None) -> None:
    from ..bench.methods import ALL_METHODS
    from ..bench.report import write_reports
    from ..bench.runner import BenchConfig, run_benchmark
    from ..config import Settings

    overrides = {"search.top_k": top_k} if top_k else {}
    cfg = BenchConfig(dataset=dataset, data=data, out=out, methods=_split(methods) or list(ALL_METHODS),
                      samples=_split(samples), sessions=parse_range(sessions), limit=limit, limit_docs=limit_docs,
                      questions=parse_range(questions),
                      llm=llm, embedder=embedder, base_url=base_url, api_key=api_key,
                      settings=Settings.load(config, **overrides), turns_k=turns_k, db=db)
    with _progress() as progress:
        result = run_benchmark(cfg, progress)
    command = "compassmem " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    summary = write_reports(out, result["rows"], result["timings"], f"{dataset} benchmark", command)
    for name, m in summary["methods"].items():
        f1 = "–" if m["f1"] is None else f"{100 * m['f1']:.2f}"
        rec = "–" if m["evidence_recall"] is None else f"{100 * m['evidence_recall']:.1f}"
        console.print(f"{name:15s} n={m['n']:4d}  F1 {f1:>6}  evidence recall {rec:>5}  context {m['context_tokens']}")
    console.print(f"[green]✓[/] {escape(str(out))}/results.json, report.md, per_category.png")
    _exit_if_failed(result["failed"], "answer(s)")


def _exit_if_failed(failed: list[dict], what: str) -> None:
    """A long run keeps going past one failed model call; it ends by naming them, non-zero."""
    if failed:
        for f in failed[:5]:
            err.print(f"[red]failed:[/] {escape(f['method'])} question {f['qid']}: {escape(f['error'])}")
        err.print(f"[red]{len(failed)} {what} failed and were not recorded[/]; re-run the same command to retry them")
        raise typer.Exit(1)


QUESTIONS_HELP = ("Which questions of each conversation or document, 1-based, e.g. 21-45 (with --limit, both "
                  "apply): a long model run goes on past the questions it has answered.")
DataOpt = typer.Option(..., "--data", help="Dataset file.")
OutOpt = typer.Option(..., "--out", help="Output folder (re-running resumes).")


@bench_app.command()
def locomo(data: Path = DataOpt, out: Path = OutOpt,
           samples: Optional[str] = typer.Option(None, "--samples", help="e.g. conv-26,conv-30 (default all)."),
           sessions: Optional[str] = typer.Option(None, "--sessions", help="Session range, e.g. 1-5."),
           methods: Optional[str] = typer.Option(None, "--methods", help=METHODS_HELP),
           llm: str = typer.Option("none", "--llm", help="none | openai:MODEL | gguf:PATH"),
           embedder: str = typer.Option("minilm", "--embedder"),
           limit: Optional[int] = typer.Option(None, "--limit", help="Questions per conversation."),
           questions: Optional[str] = typer.Option(None, "--questions", help=QUESTIONS_HELP),
           config: Optional[Path] = typer.Option(None, "--config"),
           base_url: Optional[str] = typer.Option(None, "--base-url"), api_key: Optional[str] = typer.Option(None, "--api-key"),
           turns_k: int = typer.Option(10, "--turns-k", help="k of the dense/BM25 turn baselines."),
           top_k: Optional[int] = typer.Option(None, "--top-k", help="CompassMem k (default 5)."),
           db: Optional[str] = typer.Option(None, "--db", help="The memory's database instead of a file in --out, "
                                            "e.g. a postgresql:// URL (not with chunks100).")) -> None:
    """LoCoMo-schema conversations (LoCoMo, REALTALK, LoCoMo-Plus, BEAM's converted file) or, with a folder
    as --data, BEAM chats (`bench beam`): F1, BLEU-1, evidence recall at budgets per category or ability,
    cost. LoCoMo's category 5 is excluded."""
    _run("beam" if data.is_dir() else "locomo", data, out, samples, sessions, methods, llm, embedder, limit, None, config, base_url, api_key,
         turns_k, top_k, db, questions)


bench_app.command("beam", help="BEAM user↔assistant chats: --data a chat folder or a folder of them (BEAM's "
                  "100K/); evidence recall at budgets per ability. The options of `bench locomo`.")(locomo)


@bench_app.command()
def judge(out: Path = OutOpt,
          llm: str = typer.Option(..., "--llm", help="The judge: openai:MODEL | gguf:PATH."),
          base_url: Optional[str] = typer.Option(None, "--base-url"),
          api_key: Optional[str] = typer.Option(None, "--api-key"),
          config: Optional[Path] = typer.Option(None, "--config")) -> None:
    """LLM-as-judge accuracy J for a finished `bench locomo|narrativeqa` folder: each answer, with its
    question and gold answer, graded CORRECT or WRONG (the mem0 / Zep protocol); report.md gains a J table.
    Resumable; a small local judge gives an indicative figure."""
    import json

    from ..bench.judge import judge_rows, read_jsonl
    from ..bench.report import write_reports
    from ..config import Settings
    from ..errors import InputError
    from ..llm import make_llm

    if not (out / "results.jsonl").is_file():
        raise InputError(f"{out} holds no results.jsonl: run `compassmem bench locomo --out {out}` first")
    client = make_llm(llm, Settings.load(config).llm, base_url=base_url, api_key=api_key)
    if client is None:
        raise InputError("the judge must be a model (--llm openai:MODEL or gguf:PATH), not none")
    failed: list[dict] = []
    with _progress() as progress:
        graded = judge_rows(out, client, llm, progress, failed)
    rows = read_jsonl(out / "results.jsonl")
    timings = json.loads((out / "construction.json").read_text()) if (out / "construction.json").is_file() else []
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    summary = write_reports(out, rows, timings, previous.get("title", "benchmark"), previous.get("command", "?"))
    for name, m in summary["methods"].items():
        j = "–" if m["j"] is None else f"{100 * m['j']:.2f}"
        console.print(f"{escape(name):18s} judged {m['judged']:4d}  J {j:>6}")
    console.print(f"[green]✓[/] {graded} answers graded; {escape(str(out))}/report.md")
    _exit_if_failed(failed, "grade(s)")


@bench_app.command()
def narrativeqa(data: Path = DataOpt, out: Path = OutOpt,
                samples: Optional[str] = typer.Option(None, "--samples", help="Namespaces (nqa-…)."),
                limit_docs: Optional[int] = typer.Option(None, "--limit-docs", help="First N documents."),
                methods: Optional[str] = typer.Option(None, "--methods", help=METHODS_HELP),
                llm: str = typer.Option("none", "--llm"), embedder: str = typer.Option("minilm", "--embedder"),
                limit: Optional[int] = typer.Option(None, "--limit", help="Questions per document."),
                questions: Optional[str] = typer.Option(None, "--questions", help=QUESTIONS_HELP),
                config: Optional[Path] = typer.Option(None, "--config"),
                base_url: Optional[str] = typer.Option(None, "--base-url"),
                api_key: Optional[str] = typer.Option(None, "--api-key"),
                turns_k: int = typer.Option(10, "--turns-k"),
                top_k: int = typer.Option(10, "--top-k", help="CompassMem k (paper: 10 on NarrativeQA).")) -> None:
    """NarrativeQA: summaries (a .jsonl of passages) or, with a folder or documents.jsonl, whole books and
    scripts. F1, BLEU-1, BLEU-4 and ROUGE-L as the max over the reference answers, and answer recall at
    500 / 1,000 / 2,000 tokens (every content word of a reference answer inside what is handed over)."""
    _run("narrativeqa-full" if _full_texts(data) else "narrativeqa", data, out, samples, None, methods, llm, embedder, limit, limit_docs, config, base_url,
         api_key, turns_k, top_k, questions=questions)


def _full_texts(data: Path) -> bool:
    """Whether --data names NarrativeQA's whole books and scripts (a folder, or its documents.jsonl)."""
    return data.is_dir() or data.name == "documents.jsonl"


def _ints(text: str, flag: str) -> list[int]:
    from ..errors import ConfigError

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values:
        raise ConfigError(f"bad {flag} '{text}': expected comma-separated integers")
    return values


@bench_app.command()
def scale(out: Path = OutOpt, sizes: str = typer.Option("1000,10000", "--sizes", help="Event counts, e.g. 1000,10000,100000."),
          embedder: str = typer.Option("hash", "--embedder"), queries: int = typer.Option(20, "--queries"),
          turns_per_step: int = typer.Option(100, "--turns-per-step"),
          direct_above: int = typer.Option(100_000, "--direct-above", help="Larger sizes are written through the "
                                           "store API instead of the construction pipeline."),
          keep_db: bool = typer.Option(False, "--keep-db", help="Keep each size's database (to re-measure a phase)."),
          pg: Optional[str] = typer.Option(None, "--pg", help="A PostgreSQL server URL: measure the PostgreSQL store "
                                           "(one database scale_<n> per size) instead of SQLite.")) -> None:
    """Synthetic memories of growing size: ingest throughput, query latency p50/p95, peak memory, a cold
    `ask` process, and the exact-scan / ANN / BM25 primitives measured in the same run (resumable)."""
    from ..bench.scale import run_scale

    run_scale(_ints(sizes, "--sizes"), out, embedder, turns_per_step, queries, direct_above,
              log=lambda s: err.print(f"[dim]{escape(s)}[/]"), keep_db=keep_db, pg=pg)
    console.print(f"[green]✓[/] {escape(str(out))}/scale.json")


@bench_app.command()
def ann(out: Path = OutOpt,
        db: list[Path] = typer.Option(..., "--db", help="A memory (SQLite file) whose observation and event "
                                      "vectors are the corpus; repeat for more. All of one embedder."),
        questions: list[str] = typer.Option(..., "--questions", help="FORMAT:PATH of a data set whose questions "
                                            "are the queries (e.g. locomo:../shared/data/locomo/locomo_dev.json); repeat."),
        embedder: str = typer.Option("minilm", "--embedder", help="The memories' embedder, to embed the questions."),
        connectivity: str = typer.Option("8,16,32", "--connectivity", help="HNSW M values."),
        expansion_add: str = typer.Option("64,128", "--expansion-add", help="HNSW ef at build."),
        expansion_search: str = typer.Option("64,128,256,512", "--expansion-search", help="HNSW ef at search."),
        k: int = typer.Option(100, "--k", help="Results per query compared with exact search."),
        dtype: str = typer.Option("f16", "--dtype", help="Index storage types, e.g. i8,f16,f32 (the store keeps f16).")) -> None:
    """The vector index's parameters on real embeddings: recall@10 / @k against exact search and query
    latency for each setting (resumable; out/ann.json)."""
    from ..bench.ann import run_ann
    from ..errors import InputError
    from ..ingest import load as load_data

    texts: list[str] = []
    for spec in questions:
        fmt, _, path = spec.partition(":")
        if not path:
            raise InputError(f"bad --questions '{spec}': expected FORMAT:PATH")
        texts += [q.question for q in load_data(path, fmt).questions]
    for d in db:
        if not d.is_file():
            raise InputError(f"memory not found: {d}")
    with _progress() as progress:
        rows = run_ann(db, texts, out, embedder, _ints(connectivity, "--connectivity"),
                       _ints(expansion_add, "--expansion-add"), _ints(expansion_search, "--expansion-search"), k,
                       tuple(_split(dtype) or ["f16"]), progress=progress)
    for r in rows:
        console.print(f"{r['dtype']}  M {r['connectivity']:>2}  ef_add {r['expansion_add']:>3}  ef {r['expansion_search']:>3}  "
                      f"recall@10 {r['recall@10']:.3f}  recall@{k} {r[f'recall@{k}']:.3f}  {r['query_p50_ms']:.2f} ms")
    console.print(f"[green]✓[/] {escape(str(out))}/ann.json")


@bench_app.command()
def haystack(data: Path = DataOpt, out: Path = OutOpt,
             samples: str = typer.Option(..., "--samples", help="The conversation(s) of --data to bury, e.g. conv-26."),
             pool: list[str] = typer.Option(..., "--pool", help="FORMAT:PATH of distractor text: locomo:FILE (its "
                                            "conversations but the buried ones) or narrativeqa-full:FOLDER; repeat."),
             turns: str = typer.Option("0,2000,10000", "--turns", help="Distractor turns per haystack (0: the "
                                       "conversation alone)."),
             methods: str = typer.Option("compassmem,hybrid_people,dense_turns,bm25_turns", "--methods", help=METHODS_HELP),
             embedder: str = typer.Option("minilm", "--embedder"),
             seed_from: list[Path] = typer.Option([], "--seed-from", help="Memories built with the same embedder whose "
                                                  "stored turn vectors fill the embedding cache (no re-embedding)."),
             pg: Optional[str] = typer.Option(None, "--pg", help="A PostgreSQL server URL: each size's memory in its "
                                              "database haystack_<n> there (kept for a rerun) instead of SQLite; "
                                              "not with chunks100.")) -> None:
    """A conversation buried among N turns of other real text said by the same two people on the same
    dates: recall at budgets next to the conversation alone, ask latency, peak memory (resumable; each
    text is embedded once into out/embeddings.db)."""
    import os

    from ..bench.haystack import conversation_pool, document_pool, memory_facts, seed_cache, summary, write_haystack
    from ..bench.pgdb import existing_database
    from ..bench.scale import peak_rss_mb
    from ..errors import InputError

    os.environ.setdefault("COMPASSMEM_EMBED_CACHE", str(out / "embeddings.db"))
    out.mkdir(parents=True, exist_ok=True)
    if seed_from:
        console.print(f"embedding cache: {seed_cache(embedder, seed_from)} vectors taken from {len(seed_from)} memories")
    wanted = set(_split(samples) or [])
    sources = []
    for spec in pool:
        fmt, _, path = spec.partition(":")
        if fmt == "locomo":
            sources += conversation_pool(Path(path), wanted)
        elif fmt == "narrativeqa-full":
            sources += document_pool(Path(path))
        else:
            raise InputError(f"bad --pool '{spec}': expected locomo:FILE or narrativeqa-full:FOLDER")
    for n in _ints(turns, "--turns"):
        file, facts = write_haystack(data, wanted, sources, n, out / f"n{n}")
        console.print(f"[bold]{n} distractor turns[/]: {escape(str(facts))}")
        db = existing_database(pg, f"haystack_{n}") if pg else None
        _run("locomo", file, out / f"n{n}", samples, None, methods, "none", embedder, None, None, None, None, None,
             10, None, db)
        rss = out / f"n{n}" / "rss.json"
        if not rss.is_file():  # the process's peak so far; a rerun that finds the size finished builds nothing
            rss.write_text(json.dumps({"peak_rss_mb": peak_rss_mb()}))
        memory = {"backend": "postgres" if pg else "sqlite", **memory_facts(db or out / f"n{n}" / "memory-events.db")}
        (out / f"n{n}" / "memory.json").write_text(json.dumps(memory))
    (out / "haystack.json").write_text(json.dumps(summary(out), indent=2))
    console.print(f"[green]✓[/] {escape(str(out))}/haystack.json")


@bench_app.command()
def load(out: Path = OutOpt, clients: int = typer.Option(8, "--clients", help="Concurrent client threads."),
         seconds: float = typer.Option(60.0, "--seconds", help="How long the clients run."),
         add_share: float = typer.Option(0.2, "--add-share", help="Share of requests that add a step."),
         embedder: str = typer.Option("hash", "--embedder", help=EMB_HELP),
         pg: Optional[str] = typer.Option(None, "--pg", help="A PostgreSQL server URL: serve from a fresh database "
                                          "load_bench there instead of SQLite.")) -> None:
    """A bounded load test of `compassmem serve` on loopback: N clients mixing add and search for S
    seconds; errors and p50/p95 per endpoint (needs the server extra)."""
    from rich.table import Table

    from ..bench.load import run_load

    report = run_load(clients, seconds, add_share, embedder, out=out, pg=pg)
    table = Table(title=f"{clients} clients, {report['seconds']} s, offline engine ({embedder} embedder, "
                        f"{report['backend']})")
    for col in ("endpoint", "requests", "errors", "p50 ms", "p95 ms", "max ms", "req/s"):
        table.add_column(col)
    for kind, r in report["endpoints"].items():
        table.add_row(kind, str(r["requests"]), str(r["errors"]), str(r["p50_ms"]), str(r["p95_ms"]),
                      str(r["max_ms"]), str(r["per_s"]))
    console.print(table)
    for kind, r in report["endpoints"].items():
        for e in r["first_errors"]:
            err.print(f"[red]{kind}:[/] {escape(e)}")
    if any(r["errors"] for r in report["endpoints"].values()):
        raise typer.Exit(1)


@bench_app.command("cv-pool")
def cv_pool(runs: list[str] = typer.Argument(..., help="NAME=FOLDER of each `bench cv` run (same grid), e.g. "
                                             "locomo=bench-out/cv-locomo realtalk=bench-out/cv-realtalk"),
            out: Path = OutOpt,
            metric: str = typer.Option("recall@1000", "--metric", help="What is maximised."),
            criterion: str = typer.Option("macro", "--criterion",
                                          help="How the data sets are combined: macro (mean of the metric) or rank "
                                               "(mean rank among the grid's points: scale-free).")) -> None:
    """One setting for every kind of data: leave-one-conversation-out over several `bench cv` runs, each
    held-out conversation scored with the point best on all the other conversations (macro-average of the
    metric, or mean rank). Writes cv-pool.json and cv-pool.md."""
    from ..bench.cv import pooled, pooled_markdown
    from ..errors import ConfigError

    pairs = [r.partition("=") for r in runs]
    if any(not sep or not name or not folder for name, sep, folder in pairs):
        raise ConfigError("each run is NAME=FOLDER, e.g. locomo=bench-out/cv-locomo")
    result = pooled({name: Path(folder) for name, _, folder in pairs}, metric, criterion)
    out.mkdir(parents=True, exist_ok=True)
    command = "compassmem " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    (out / "cv-pool.json").write_text(json.dumps(result, indent=2))
    text = f"Command: `{command}`\n\n" + pooled_markdown(result)
    (out / "cv-pool.md").write_text(text)
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@bench_app.command()
def cv(data: Path = DataOpt, out: Path = OutOpt,
       grid: list[str] = typer.Option(..., "--grid", help="A setting and its values, e.g. "
                                      "search.event_weight=0.25,0.5,1 (repeatable; the grid is their product)."),
       metric: Optional[str] = typer.Option(None, "--metric", help="What is maximised on the training conversations "
                                            "or documents: recall@500|recall@1000|recall@2000|evidence_recall|locomo_f1|f1"
                                            "|answer@500|answer@1000|answer@2000|rouge_l (default recall@1000; "
                                            "answer@1000 for NarrativeQA)."),
       samples: Optional[str] = typer.Option(None, "--samples", help="Conversations or documents (default all)."),
       embedder: str = typer.Option("minilm", "--embedder"),
       config: Optional[Path] = typer.Option(None, "--config")) -> None:
    """Leave-one-conversation-out cross-validation of tuned settings on a LoCoMo-schema file, or
    leave-one-document-out on NarrativeQA full texts (--data a folder or its documents.jsonl; offline engine).

    Each conversation or document is scored with the grid point that did best on the others; the result
    is what to expect on material nobody tuned on. Writes cv.json and cv.md (resumable)."""
    from ..bench.cv import parse_grid, run_cv
    from ..bench.runner import BenchConfig
    from ..config import Settings
    from ..errors import ConfigError

    documents = _full_texts(data)
    metric = metric or ("answer@1000" if documents else "recall@1000")
    allowed = (("answer@500", "answer@1000", "answer@2000", "rouge_l", "f1") if documents else
               ("recall@500", "recall@1000", "recall@2000", "evidence_recall", "locomo_f1", "f1"))
    if metric not in allowed:
        raise ConfigError(f"unknown --metric '{metric}' for this data; one of {', '.join(allowed)}")
    cfg = BenchConfig(dataset="narrativeqa-full" if documents else "locomo", data=data, out=out,
                      methods=["compassmem"], samples=_split(samples), embedder=embedder, settings=Settings.load(config))
    with _progress() as progress:
        result = run_cv(cfg, parse_grid(grid), metric, progress)
    command = "compassmem " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    (out / "cv.md").write_text(f"Command: `{command}`\n\n" + (out / "cv.md").read_text())
    console.print((out / "cv.md").read_text(), markup=False, highlight=False)
    cvr = result["cross_validated"]
    console.print(f"[green]✓[/] cross-validated {metric}: {100 * (cvr.get(metric) or 0):.2f}  → {escape(str(out))}/cv.json, cv.md")
