"""The harness end to end on a small slice: every method answers, files appear, re-runs resume."""

import json

import pytest

from compassmem.bench.report import write_reports
from compassmem.bench.runner import BenchConfig, run_benchmark
from compassmem.errors import LLMError


def test_bench_slice_runs_and_resumes(tmp_path, locomo_path):
    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26"], sessions=(1, 4),
                      limit=4, embedder="hash",
                      methods=["compassmem", "full_context", "rag512", "dense_turns", "bm25_turns:5", "no_topics",
                               "no_relations", "no_refinement", "no_planner", "chunks100", "no_newer_first"])
    first = run_benchmark(cfg)
    n = len(first["rows"])
    assert n == 4 * 11  # 4 questions × 11 methods
    summary = write_reports(tmp_path, first["rows"], first["timings"], "t", "cmd")
    assert {"compassmem", "bm25_turns:5", "chunks100"} <= set(summary["methods"])
    assert (tmp_path / "report.md").is_file() and (tmp_path / "per_category.png").is_file()
    assert summary["methods"]["compassmem"]["search"]["start_nodes"] > 0
    row = first["rows"][0]
    assert 0 <= row["f1"] <= 1 and row["context_tokens"] >= 0
    again = run_benchmark(cfg)  # nothing new to do: resumes from results.jsonl
    assert len(again["rows"]) == n
    assert json.loads((tmp_path / "results.json").read_text())["command"] == "cmd"


def test_scale_bench_measures_and_keeps_finished_sizes(tmp_path):
    from compassmem.bench.scale import run_scale

    logs: list[str] = []
    rows = run_scale([40, 60], tmp_path, turns_per_step=20, queries=3, direct_above=50, log=logs.append)
    assert [r["path"] for r in rows] == ["pipeline", "store API"]
    for r in rows:
        assert r["events"] >= r["target_events"] and r["query_p50_s"] > 0 and r["query_peak_rss_mb"] > 0
        assert r["cold_ask_s"] > 0 and r["help_s"] > 0 and r["import_s"] > 0 and r["ann_recall@10"] > 0 and r["query_over_exact_scan"] > 0
    assert not list(tmp_path.glob("scale-*.db*")), "finished sizes leave no database behind"
    again = run_scale([40, 60], tmp_path, turns_per_step=20, queries=3, direct_above=50, log=logs.append)
    assert again == rows and "already measured" in logs[-1]


def test_report_has_budgeted_recall_locomo_f1_and_paired_differences(tmp_path, locomo_path):
    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26"], sessions=(1, 3),
                      limit=6, embedder="hash", methods=["compassmem", "compassmem_graph", "bm25_turns"])
    res = run_benchmark(cfg)
    summary = write_reports(tmp_path, res["rows"], res["timings"], "t", "cmd")
    m = summary["methods"]
    for name in ("compassmem", "bm25_turns"):
        r500, r1000, r2000 = (m[name][f"recall@{b}"] for b in (500, 1000, 2000))
        assert 0 <= r500 <= r1000 <= r2000 <= 1  # a bigger budget never loses evidence
        assert m[name]["locomo_f1"] is not None
    for ref in ("compassmem", "compassmem_graph"):  # each CompassMem mode against the baseline, F1 and recall
        for key in ("f1", "recall@1000"):
            diff = m["bm25_turns"][f"vs_{ref}"][key]["all"]
            assert diff[1] <= diff[0] <= diff[2]
    assert "vs_compassmem_graph" not in m["compassmem"]  # one direction per pair
    report = (tmp_path / "report.md").read_text()
    assert "compassmem_graph minus each method, f1, points" in report
    row = next(r for r in res["rows"] if r["method"] == "bm25_turns")
    assert len(row["ranking"]) > 10  # the whole ranking is kept, not only the 10 handed turns
    # J: a judge grades each answer; here one that calls every other answer correct (plumbing only: the
    # real-model judge is in test_real_llm.py)
    from compassmem.bench.judge import judge_rows
    from compassmem.config import LLMSettings
    from compassmem.llm import Completion, LLMClient

    class Alternating:
        model, calls = "alternating", 0

        def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
            assert name == "grade" and "Gold answer:" in messages[-1]["content"]
            self.calls += 1
            return Completion('{"label": "%s"}' % ("CORRECT" if self.calls % 2 else "WRONG"), 5, 2, 0.0)

    client = LLMClient(Alternating(), LLMSettings(cache=False))
    assert judge_rows(tmp_path, client, "alternating") == len(res["rows"]) == 18
    judged = write_reports(tmp_path, res["rows"], res["timings"], "t", "cmd")
    jm = judged["methods"]
    assert judged["judge"] == "alternating" and sum(jm[n]["judged"] for n in jm) == 18
    assert sum(jm[n]["j"] * jm[n]["judged"] for n in jm) == pytest.approx(9)
    assert "LLM-as-judge accuracy J (%), judge `alternating`" in (tmp_path / "report.md").read_text()



def test_an_invalid_verdict_is_left_ungraded_and_retried_on_rerun(tmp_path):
    from compassmem.bench.judge import JUDGMENTS, judge_rows
    from compassmem.config import LLMSettings
    from compassmem.llm import Completion, LLMClient

    rows = [{"method": "m", "qid": q, "question": f"q{q}?", "gold": ["a"], "answer": "a", "skipped": None}
            for q in range(3)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    class Stubborn:  # never valid for q1, whatever the retries say
        model = "stubborn"

        def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
            text = "no idea" if any("q1?" in m["content"] for m in messages) else '{"label": "CORRECT"}'
            return Completion(text, 5, 2, 0.0)

    failed: list[dict] = []
    assert judge_rows(tmp_path, LLMClient(Stubborn(), LLMSettings(cache=False)), "j", failed=failed) == 2
    assert [(f["qid"], "grade" in f["error"]) for f in failed] == [(1, True)]
    assert sorted(j["qid"] for j in map(json.loads, (tmp_path / JUDGMENTS).read_text().splitlines())) == [0, 2]
    with pytest.raises(LLMError):  # without a list to collect into, a failure is loud
        judge_rows(tmp_path, LLMClient(Stubborn(), LLMSettings(cache=False)), "j")

    class Fine(Stubborn):
        def complete(self, messages, schema, **kw):
            return Completion('{"label": "WRONG"}', 5, 2, 0.0)

    assert judge_rows(tmp_path, LLMClient(Fine(), LLMSettings(cache=False)), "j", failed=[]) == 1  # only q1 again


def test_cross_validation_chooses_on_the_other_conversations(tmp_path, locomo_path):
    from compassmem.bench.cv import parse_grid, run_cv

    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26", "conv-30"],
                      sessions=(1, 2), limit=4, embedder="hash", methods=["compassmem"])
    result = run_cv(cfg, parse_grid(["search.event_weight=0,1"]))
    assert set(result["chosen_per_heldout"]) == {"conv-26", "conv-30"}
    assert result["cross_validated"]["n"] == 8  # every question scored exactly once, held out
    per_point = [[json.loads(x) for x in (tmp_path / f"point-{i:03d}.jsonl").read_text().splitlines()] for i in range(2)]
    for ns, choice in result["chosen_per_heldout"].items():
        train = [sum(r["recall@1000"] for r in rows if r["namespace"] != ns) for rows in per_point]
        best = 0 if train[0] >= train[1] else 1  # ties go to the first point
        assert choice["point"] == {"search.event_weight": [0, 1][best]}
    assert (tmp_path / "cv.md").is_file()


def test_cross_validation_leaves_one_document_out_on_narrativeqa_full_texts(tmp_path):
    """`bench cv --data <NarrativeQA folder>` holds out each document in turn and chooses by answer recall."""
    import subprocess
    import sys

    from test_document import BOOK

    folder = tmp_path / "full"
    folder.mkdir()
    docs = [{"document_id": f"{i}000000000a", "kind": "gutenberg", "title": f"Tale {i}", "text": BOOK} for i in "ab"]
    (folder / "documents.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    qa = [{"document_id": d["document_id"], "question": q, "answers": a} for d in docs
          for q, a in (("Where did Tom find work?", ["at the docks"]), ("What did Anna do with the letter?", ["burned it"]))]
    (folder / "qa.jsonl").write_text("\n".join(json.dumps(x) for x in qa) + "\n")

    def cv(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "compassmem", "bench", "cv", "--data", str(folder), "--embedder", "hash",
                               "--grid", "search.event_weight=0,1", "--out", str(tmp_path / "cv"), *extra],
                              capture_output=True, text=True, timeout=300)

    bad = cv("--metric", "locomo_f1")  # a conversation metric means nothing for a book
    assert bad.returncode != 0 and "unknown --metric" in bad.stdout + bad.stderr
    done = cv()
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "cv" / "cv.json").read_text())
    assert result["metric"] == "answer@1000" and len(result["chosen_per_heldout"]) == 2
    assert result["cross_validated"]["n"] == 4  # every question scored once, with its document held out
    assert "Leave-one-document-out" in (tmp_path / "cv" / "cv.md").read_text()


def test_a_failed_answer_is_retried_on_rerun_instead_of_ending_the_run(tmp_path, locomo_path, monkeypatch):
    from compassmem.bench.methods import BM25Turns
    from compassmem.errors import DeadlineExceeded, LLMUnavailable

    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26"], sessions=(1, 3),
                      limit=3, embedder="hash", methods=["bm25_turns"])
    real = BM25Turns.answer
    calls = []

    def first_fails(self, namespace, question):
        calls.append(question)
        if len(calls) == 1:
            raise DeadlineExceeded("ask ran past its deadline of 600 s")
        return real(self, namespace, question)

    monkeypatch.setattr(BM25Turns, "answer", first_fails)
    res = run_benchmark(cfg)
    assert len(res["rows"]) == 2 and [(f["qid"], "deadline" in f["error"]) for f in res["failed"]] == [(0, True)]
    again = run_benchmark(cfg)  # the failed question, and only it, is answered again
    assert len(calls) == 4 and calls[-1] == calls[0]
    assert len(again["rows"]) == 3 and again["failed"] == []

    def unreachable(self, namespace, question):
        raise LLMUnavailable("answer", "cannot reach http://127.0.0.1:9")

    monkeypatch.setattr(BM25Turns, "answer", unreachable)
    cfg.limit = 4
    with pytest.raises(LLMUnavailable):  # every later answer would fail the same way: the run stops
        run_benchmark(cfg)


def test_bench_cli_names_failed_answers_and_exits_non_zero(tmp_path, locomo_path, monkeypatch):
    from typer.testing import CliRunner

    from compassmem.bench.methods import BM25Turns
    from compassmem.cli.app import app
    from compassmem.errors import DeadlineExceeded

    def too_slow(self, namespace, question):
        raise DeadlineExceeded("ask ran past its deadline of 600 s")

    monkeypatch.setattr(BM25Turns, "answer", too_slow)
    r = CliRunner().invoke(app, ["bench", "locomo", "--data", str(locomo_path), "--out", str(tmp_path),
                                 "--samples", "conv-26", "--sessions", "1-2", "--limit", "2", "--embedder", "hash",
                                 "--methods", "bm25_turns"])
    assert r.exit_code == 1, r.output
    assert "2 answer(s) failed and were not recorded" in r.output and "re-run the same command" in r.output


def test_an_interrupted_build_keeps_the_cost_of_every_step_it_finished(tmp_path, locomo_path, monkeypatch):
    from compassmem.construct.pipeline import Constructor

    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26"], sessions=(1, 3),
                      limit=2, embedder="hash", methods=["bm25_turns"])
    real, built = Constructor.add_step, []

    def dies_at_step_3(self, namespace, step, *args):
        if step == 3:
            raise KeyboardInterrupt  # the run is killed mid-build
        built.append(step)
        return real(self, namespace, step, *args)

    monkeypatch.setattr(Constructor, "add_step", dies_at_step_3)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(cfg)
    saved = json.loads((tmp_path / "construction.json").read_text())
    assert [t["step"] for t in saved] == built == [1, 2] and all(t["wall_s"] > 0 for t in saved)
    monkeypatch.undo()
    res = run_benchmark(cfg)  # resumes: only step 3 is built, and the table has all three
    assert sorted(t["step"] for t in res["timings"]) == [1, 2, 3]


def test_a_method_starts_cold_after_another_but_keeps_its_own_prompt_prefix(tmp_path, locomo_path):
    """Question-major runs reset the model's evaluated prefix before every method, so no method is timed
    on another's prompt; a method left to answer alone (full context resumed with a larger window)
    keeps its prefix from question to question."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from compassmem.bench.methods import MethodResult
    from compassmem.bench.runner import answer_rows
    from compassmem.ingest import load
    from compassmem.memory import Memory
    from compassmem.models import Usage

    events: list[str] = []

    class Spy:
        def forget_prefix(self):
            events.append("cold")

        def cache_scope(self, name):
            return nullcontext()

    class Fixed:
        def __init__(self, name):
            self.name = name

        def answer(self, namespace, question):
            events.append(self.name)
            return MethodResult("an answer", [], 0, Usage(), 0.0)

    ds = load(locomo_path, "locomo", samples=["conv-26"])
    main = SimpleNamespace(llm=Spy(), store=Memory(embedder="hash").store)
    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, limit=2)
    rows = answer_rows(cfg, ds, main, [Fixed("a"), Fixed("b")], tmp_path / "both.jsonl")
    assert len(rows) == 4 and events == ["cold", "a", "cold", "b", "cold", "a", "cold", "b"]
    events.clear()
    answer_rows(cfg, ds, main, [Fixed("c")], tmp_path / "alone.jsonl")
    assert events == ["cold", "c", "c"]


def test_rows_skipped_for_the_window_are_answered_when_a_rerun_has_room(tmp_path, locomo_path):
    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26"], sessions=(1, 3),
                      limit=3, embedder="hash", methods=["full_context", "bm25_turns"], full_context_tokens=50)
    first = run_benchmark(cfg)["rows"]
    assert [bool(r["skipped"]) for r in first if r["method"] == "full_context"] == [True] * 3
    cfg.full_context_tokens = 32_000
    again = run_benchmark(cfg)["rows"]
    assert len(again) == 6 and not any(r["skipped"] for r in again)
    assert [r["qid"] for r in again if r["method"] == "bm25_turns"] == [r["qid"] for r in first
                                                                        if r["method"] == "bm25_turns"]


def test_pooled_cross_validation_chooses_one_point_for_every_data_set(tmp_path):
    """Two data sets that disagree: each held-out conversation gets the point best on the macro-average of
    the others, and the shipped default is the point best on all of them."""
    import json

    from compassmem.bench.cv import pooled

    def run(name: str, scores: dict[str, list[float]]) -> None:  # conversation -> recall per point
        out = tmp_path / name
        out.mkdir()
        (out / "cv.json").write_text(json.dumps({"grid": {"search.lexical_weight": [0.2, 0.6]}}))
        for i in range(2):
            rows = [{"namespace": ns, "recall@1000": v[i]} for ns, v in scores.items()]
            (out / f"point-{i:03d}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))

    run("a", {"a1": [0.5, 0.6], "a2": [0.5, 0.6]})  # prefers 0.6 by 0.1
    run("b", {"b1": [0.9, 0.1], "b2": [0.9, 0.1]})  # prefers 0.2 by 0.8
    result = pooled({"a": tmp_path / "a", "b": tmp_path / "b"})
    assert result["default"]["point"] == {"search.lexical_weight": 0.2}
    assert result["data_sets"]["a"]["chosen_per_heldout"] == {"a1": {"search.lexical_weight": 0.2},
                                                             "a2": {"search.lexical_weight": 0.2}}
    assert result["data_sets"]["a"]["cross_validated"] == 0.5 and result["data_sets"]["b"]["cross_validated"] == 0.9


def test_pooled_by_rank_is_not_outvoted_by_the_data_set_that_moves_most(tmp_path):
    """Three data sets prefer the first point by a little, one prefers the last by a lot: the macro-average
    follows the one, the mean rank the three."""
    import json

    from compassmem.bench.cv import pooled
    from compassmem.errors import ConfigError

    prefs = {"a": [0.52, 0.51, 0.50], "b": [0.62, 0.61, 0.60], "c": [0.72, 0.71, 0.70], "d": [0.10, 0.20, 0.90]}
    for name, per_point in prefs.items():
        out = tmp_path / name
        out.mkdir()
        (out / "cv.json").write_text(json.dumps({"grid": {"search.subject_weight": [0, 0.4, 2]}}))
        for i, v in enumerate(per_point):
            (out / f"point-{i:03d}.jsonl").write_text("\n".join(json.dumps({"namespace": f"{name}{k}", "recall@1000": v})
                                                                for k in range(2)))
    runs = {name: tmp_path / name for name in prefs}
    assert pooled(runs)["default"]["point"] == {"search.subject_weight": 2}
    by_rank = pooled(runs, criterion="rank")
    assert by_rank["default"]["point"] == {"search.subject_weight": 0}
    assert by_rank["data_sets"]["a"]["cross_validated"] == 0.52
    with pytest.raises(ConfigError):
        pooled(runs, criterion="median")


def test_narrativeqa_on_whole_documents_reports_answer_recall_and_rouge(tmp_path):
    """bench narrativeqa on a folder of whole documents: every method is scored with ROUGE-L, BLEU-4 and
    answer recall at each budget (there are no gold spans), with paired differences."""
    from test_document import BOOK

    folder = tmp_path / "full"
    folder.mkdir()
    (folder / "documents.jsonl").write_text(json.dumps({"document_id": "d0000000001", "kind": "gutenberg",
                                                        "title": "A Small Tale", "text": BOOK}) + "\n")
    qa = [("Why did Tom leave?", ["Because the mill could not feed them both", "the mill could not feed them"]),
          ("Where did Tom find work?", ["at the docks", "the docks"]),
          ("What did Anna do with the letter?", ["burned it", "She burned it"])]
    (folder / "qa.jsonl").write_text("\n".join(json.dumps({"document_id": "d0000000001", "question": q,
                                                           "answers": a}) for q, a in qa) + "\n")
    cfg = BenchConfig(dataset="narrativeqa-full", data=folder, out=tmp_path / "out", embedder="hash",
                      methods=["compassmem", "bm25_turns", "hybrid_turns"])
    result = run_benchmark(cfg)
    assert len(result["rows"]) == 9
    row = next(r for r in result["rows"] if r["method"] == "compassmem" and r["question"].startswith("Where"))
    assert row["answer@2000"] == 1.0 and 0 <= row["rouge_l"] <= 1 and 0 <= row["bleu4"] <= 1
    summary = write_reports(tmp_path / "out", result["rows"], result["timings"], "t", "cmd")
    assert summary["methods"]["bm25_turns"]["vs_compassmem"]["answer@1000"]["all"] is not None
    assert "ROUGE-L" in (tmp_path / "out" / "report.md").read_text()


def test_every_search_preset_changes_only_what_it_names():
    from compassmem.config import Settings
    from compassmem.search.presets import PRESETS

    base = Settings.load(None, **{"search.top_k": 7})  # a user's own settings survive a preset
    for name, preset in PRESETS.items():
        changed = preset.apply(base)
        diff = {k for k, v in changed.search.model_dump().items() if base.search.model_dump()[k] != v}
        assert diff == set(preset.search), name
        assert changed.search.top_k == 7 and changed.construction == base.construction


def test_ann_bench_measures_recall_against_exact_search_and_resumes(tmp_path):
    from compassmem import Memory
    from compassmem.bench.ann import run_ann

    db = tmp_path / "m.db"
    mem = Memory(db, embedder="hash")
    words = ["garden", "violin", "marathon", "pottery", "camping", "lasagne", "chess", "kayak", "poetry", "robots"]
    for step in range(1, 6):
        mem.add([{"speaker": "A" if i % 2 else "B", "text": f"I spent the day on {words[(step * i) % 10]} and "
                  f"{words[(step + i) % 10]} number {step * 100 + i}"} for i in range(30)], namespace="n", step=step)
    mem.close()
    questions = [f"What about {w}?" for w in words]
    rows = run_ann([db], questions, tmp_path / "out", "hash", [8, 16], [64], [16, 128], k=10, dtypes=("i8", "f32"))
    assert len(rows) == 8 and {r["dtype"] for r in rows} == {"i8", "f32"}
    assert all(0 <= r["recall@10"] <= 1 and r["vectors"] > 150 and r["queries"] == 10 for r in rows)
    f32_wide = [r for r in rows if r["dtype"] == "f32" and r["expansion_search"] == 128]
    assert all(r["recall@10"] > 0.95 for r in f32_wide)  # a small graph searched wide is close to exact
    again = run_ann([db], questions, tmp_path / "out", "hash", [8, 16], [64], [16, 128], k=10, dtypes=("i8", "f32"))
    assert again == rows  # every row was done: nothing is measured twice


def test_questions_picks_a_span_of_each_conversation_and_a_later_span_adds_to_the_run(tmp_path, locomo_path):
    from compassmem.bench.runner import _questions
    from compassmem.ingest import load

    ds = load(locomo_path, "locomo")
    first, later = _questions(ds, None, (1, 2)), _questions(ds, 4, (3, 9))
    per_namespace = {}
    for qid, q in first + later:
        per_namespace.setdefault(q.namespace, []).append(qid)
    assert {len(v) for v in per_namespace.values()} == {4}  # 2 + (3rd, 4th): --limit caps the later span
    assert not {qid for qid, _ in first} & {qid for qid, _ in later}
    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26"], sessions=(1, 3),
                      questions=(1, 2), embedder="hash", methods=["bm25_turns"])
    assert [r["qid"] for r in run_benchmark(cfg)["rows"]] == [0, 1]
    cfg.questions = (3, 3)  # the rows already answered stay in the run's results
    assert sorted(r["qid"] for r in run_benchmark(cfg)["rows"]) == [0, 1, 2]
