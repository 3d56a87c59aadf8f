"""The benchmark run: build memories once, answer every question with every method, append each result
to results.jsonl as it is produced (so an interrupted run resumes where it stopped), then aggregate."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..config import Settings
from ..errors import ConfigError, DeadlineExceeded, LLMError, LLMUnavailable
from ..ingest import Dataset, load
from ..memory import Memory
from .methods import (ABLATIONS, ALL_METHODS, TURN_BASELINES, BM25Turns, CompassMemMethod, DenseTurns,
                      FixedChunkSegmenter, FullContext, HybridTurns, Method, RAGChunks, variant_settings)
from ..search.graph import approx_tokens
from ..search.responder import evidence_line
from .judge import read_jsonl
from .metrics import (BUDGETS, answer_recall_at_budget, best_over_references, bleu1, bleu4, evidence_recall,
                      locomo_f1, newer_first, recall_at_budget, rouge_l, token_f1)

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class BenchConfig:
    dataset: str  # "locomo" | "beam" | "narrativeqa" (summaries) | "narrativeqa-full" (whole documents)
    data: Path
    out: Path
    methods: list[str] = field(default_factory=lambda: list(ALL_METHODS))
    samples: list[str] | None = None
    sessions: tuple[int, int] | None = None
    limit: int | None = None  # questions per namespace
    questions: tuple[int, int] | None = None  # which questions of each namespace, 1-based, inclusive
    limit_docs: int | None = None
    llm: str = "none"
    embedder: str = "minilm"
    base_url: str | None = None
    api_key: str | None = None
    settings: Settings = field(default_factory=Settings)
    turns_k: int = 10
    full_context_tokens: int = 32_000
    db: str | None = None  # the main memory's database (e.g. a postgresql:// URL); default: a file in `out`

    def validate(self) -> None:
        unknown = [m for m in self.methods if m.partition(":")[0] not in ALL_METHODS
                   or (":" in m and (m.partition(":")[0] not in TURN_BASELINES
                                     or not m.partition(":")[2].isdigit()))]
        if unknown:
            raise ConfigError(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(ALL_METHODS)}")
        if self.db and "chunks100" in self.methods:
            raise ConfigError("chunks100 builds a second memory and cannot share --db; leave it out of --methods")
        if self.dataset not in ("locomo", "beam", "narrativeqa", "narrativeqa-full"):
            raise ConfigError(f"unknown benchmark dataset '{self.dataset}'")


def _build(mem: Memory, ds: Dataset, label: str, progress: Progress | None, timings_path: Path) -> None:
    """Build (or resume) a memory; each new step's cost is saved to timings_path as soon as the step is
    committed, so a build interrupted after hours keeps the cost of every step it finished."""
    for i, item in enumerate(ds.steps):
        t0 = time.perf_counter()
        existed = mem.store.steps.get(item.namespace, item.step) is not None
        rec = mem.constructor.add_step(item.namespace, item.step, item.observations, item.world_time)
        if not existed:
            timing = {"memory": label, "namespace": item.namespace, "step": item.step,
                      "observations": rec.observations, "wall_s": round(time.perf_counter() - t0, 4),
                      "llm_calls": rec.llm_calls, "prompt_tokens": rec.prompt_tokens,
                      "completion_tokens": rec.completion_tokens}
            _save_timings(timings_path, [timing])
        if progress:
            progress(f"building {label}", i + 1, len(ds.steps))


def _questions(ds: Dataset, limit: int | None, span: tuple[int, int] | None = None) -> list[tuple[int, object]]:
    """(qid, question) of the first `limit` questions of each namespace that fall in `span` (positions within
    the namespace, 1-based): a long model run answers questions 21-45 of every conversation after 1-20."""
    counts: dict[str, int] = {}
    out = []
    for qid, q in enumerate(ds.questions):
        place = counts[q.namespace] = counts.get(q.namespace, 0) + 1
        if (limit is None or place <= limit) and (span is None or span[0] <= place <= span[1]):
            out.append((qid, q))
    return out


def prepare(cfg: BenchConfig, progress: Progress | None = None) -> tuple[Dataset, Memory]:
    """Load the dataset slice and build (or resume) the main event memory; its step costs go to
    construction.json in cfg.out."""
    cfg.validate()
    cfg.out.mkdir(parents=True, exist_ok=True)
    if cfg.dataset in ("locomo", "beam"):
        ds = load(cfg.data, cfg.dataset, samples=cfg.samples, sessions=cfg.sessions)
    elif cfg.dataset == "narrativeqa-full":
        ds = load(cfg.data, cfg.dataset, samples=cfg.samples, limit_docs=cfg.limit_docs)
    else:
        ds = load(cfg.data, "narrativeqa", limit_docs=cfg.limit_docs)
        if cfg.samples:
            ds = Dataset([s for s in ds.steps if s.namespace in cfg.samples],
                         [q for q in ds.questions if q.namespace in cfg.samples])
    loaded = set(ds.namespaces())
    ds.questions = [q for q in ds.questions if q.namespace in loaded]
    if cfg.sessions:  # a slice of sessions: only questions whose gold evidence lies inside it
        present = {(s.namespace, o.id) for s in ds.steps for o in s.observations}
        ds.questions = [q for q in ds.questions if q.evidence and all((q.namespace, e) in present for e in q.evidence)]
    main = _memory(cfg, "memory-events.db", cfg.settings)
    _build(main, ds, "events", progress, cfg.out / "construction.json")
    return ds, main


def _memory(cfg: BenchConfig, db: str, settings: Settings) -> Memory:
    target = cfg.db if cfg.db and db == "memory-events.db" else cfg.out / db
    return Memory(target, llm=cfg.llm, embedder=cfg.embedder, settings=settings, base_url=cfg.base_url,
                  api_key=cfg.api_key)


def run_benchmark(cfg: BenchConfig, progress: Progress | None = None) -> dict:
    ds, main = prepare(cfg, progress)
    responder = main.engine.roles.responder
    methods: list[Method] = []
    for name in cfg.methods:
        base, _, k_text = name.partition(":")
        k = int(k_text) if k_text else cfg.turns_k
        if name == "compassmem":
            methods.append(CompassMemMethod(name, main))
        elif name == "chunks100":
            chunk_mem = _memory(cfg, "memory-chunks100.db", cfg.settings)
            chunk_mem.constructor.roles.segmenter = FixedChunkSegmenter(100)
            _build(chunk_mem, ds, "chunks100", progress, cfg.out / "construction.json")
            methods.append(CompassMemMethod(name, chunk_mem))
        elif name in ABLATIONS:
            methods.append(CompassMemMethod(name, Memory(llm=cfg.llm, embedder=cfg.embedder, store=main.store,
                                                         settings=variant_settings(cfg.settings, name),
                                                         base_url=cfg.base_url, api_key=cfg.api_key)))
        elif name == "full_context":  # an in-process model's window bounds it too (prompt and answer need room)
            window = cfg.settings.llm.n_ctx - 1024 if cfg.llm.startswith("gguf:") else cfg.full_context_tokens
            methods.append(FullContext(main, responder, min(cfg.full_context_tokens, window)))
        elif name == "rag512":
            methods.append(RAGChunks(main, responder, main.embedder))
        elif base == "dense_turns":
            methods.append(DenseTurns(main, responder, main.embedder, k, cfg.settings.search.max_context_tokens, name))
        elif base == "bm25_turns":
            methods.append(BM25Turns(main, responder, k, cfg.settings.search.max_context_tokens, name))
        elif base in ("hybrid_turns", "hybrid_speaker", "hybrid_people"):
            methods.append(HybridTurns(main, responder, main.embedder, k, cfg.settings.search.max_context_tokens, name,
                                       speaker=base != "hybrid_turns", people=base == "hybrid_people"))
    failed: list[dict] = []
    rows = answer_rows(cfg, ds, main, methods, cfg.out / "results.jsonl", progress, failed)
    timings_path = cfg.out / "construction.json"
    timings = json.loads(timings_path.read_text()) if timings_path.is_file() else []
    return {"rows": rows, "timings": timings, "failed": failed}


def answer_rows(cfg: BenchConfig, ds: Dataset, main: Memory, methods: list[Method], results_path: Path,
                progress: Progress | None = None, failed: list[dict] | None = None) -> list[dict]:
    """Answer every question with every method, appending each row to results_path as it is produced,
    so an interrupted run resumes where it stopped; a skipped row (full context over the window) is tried
    again, so re-running with a larger window fills it in. Returns all rows of the file.

    With `failed`, one answer whose model calls fail (a deadline, output that stays invalid after its
    retries) is listed there instead of ending a run of hours; it gets no row, so re-running retries it.
    An unreachable model still ends the run: every answer after it would fail the same way."""
    rows = read_jsonl(results_path)
    kept = [r for r in rows if not r["skipped"]]
    if len(kept) < len(rows):  # a skipped row is retried: a larger window may fit it now
        _write_whole(results_path, "".join(json.dumps(r) + "\n" for r in kept))
    done = {(r["method"], r["qid"]) for r in kept}
    costs: dict[str, dict[str, int]] = {}

    texts: dict[str, dict[str, str]] = {}

    def ranked_with_costs(namespace: str, ids: list[str]) -> list[tuple[str, int]]:
        if namespace not in costs:
            obs = main.store.observations(namespace)
            costs[namespace] = {o.id: approx_tokens(evidence_line(o)) for o in obs}
            texts[namespace] = {o.id: evidence_line(o) for o in obs}
        out, used = [], 0
        for oid in ids:
            if used > max(BUDGETS):
                break
            tokens = costs[namespace].get(oid, 0)
            out.append((oid, tokens))
            used += tokens
        return out

    def answer_metrics(q, r, ranked: list[tuple[str, int]]) -> dict:
        """NarrativeQA's answer metrics, and answer recall at each budget (no gold spans there)."""
        if cfg.dataset not in ("narrativeqa", "narrativeqa-full") or r.skipped:
            return {}
        lines = [(texts[q.namespace].get(oid, ""), tokens) for oid, tokens in ranked]
        return {"rouge_l": best_over_references(rouge_l, r.answer, q.answers),
                "bleu4": best_over_references(bleu4, r.answer, q.answers),
                **{f"answer@{b}": answer_recall_at_budget(q.answers, lines, b) for b in BUDGETS}}

    todo = [(qid, q, m) for qid, q in _questions(ds, cfg.limit, cfg.questions) for m in methods if (m.name, qid) not in done]
    previous = None
    with results_path.open("a") as fh:
        for i, (qid, q, m) in enumerate(todo):
            isolated = nullcontext()
            if main.llm is not None:  # each method pays for its own calls and starts cold after another's
                if m.name != previous:  # a method answering on its own keeps its own prompt prefix, as
                    main.llm.forget_prefix()  # a deployment would (full context re-reads only the question)
                previous = m.name
                isolated = main.llm.cache_scope(m.name)
            try:
                with isolated:
                    r = m.answer(q.namespace, q.question)
            except (DeadlineExceeded, LLMError) as e:
                if failed is None or isinstance(e, LLMUnavailable):
                    raise
                failed.append({"method": m.name, "qid": qid, "error": str(e)})
                continue
            ranked = ranked_with_costs(q.namespace, r.ranking or r.observation_ids)
            row = {"method": m.name, "qid": qid, "namespace": q.namespace, "category": q.category, "group": q.group,
                   "question": q.question, "gold": q.answers, "answer": r.answer, "skipped": r.skipped,
                   "f1": None if r.skipped else best_over_references(token_f1, r.answer, q.answers),
                   "bleu1": None if r.skipped else best_over_references(bleu1, r.answer, q.answers),
                   "evidence_recall": None if r.skipped else evidence_recall(q.evidence, r.observation_ids),
                   **{f"recall@{b}": None if r.skipped else recall_at_budget(q.evidence, ranked, b) for b in BUDGETS},
                   "locomo_f1": None if r.skipped or cfg.dataset != "locomo" or q.category is None
                   else max(locomo_f1(r.answer, g, q.category) for g in q.answers),
                   "newer_first": None if r.skipped else newer_first(q.evidence, q.superseded, r.ranking or r.observation_ids),
                   "gold_evidence": q.evidence, "ranking": [oid for oid, _ in ranked],
                   "context_tokens": r.context_tokens, "llm_calls": r.usage.llm_calls,
                   "prompt_tokens": r.usage.prompt_tokens, "completion_tokens": r.usage.completion_tokens,
                   "cached_calls": r.usage.cached_calls, "latency_s": round(r.latency_s, 4), "search": r.search,
                   **answer_metrics(q, r, ranked)}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            if progress:
                progress("answering", i + 1, len(todo))
    return read_jsonl(results_path)


def _save_timings(path: Path, new: list[dict]) -> None:
    """Merge step timings into path (a rebuilt step replaces its old timing); written whole, then renamed."""
    old = json.loads(path.read_text()) if path.is_file() else []
    seen = {(t["memory"], t["namespace"], t["step"]) for t in new}
    merged = [t for t in old if (t["memory"], t["namespace"], t["step"]) not in seen] + new
    _write_whole(path, json.dumps(merged, indent=1))


def _write_whole(path: Path, text: str) -> None:
    """Written beside, then renamed: a crash leaves the old file or the new one, never half of either."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
