"""The harness end to end on a small slice: every method answers, files appear, re-runs resume."""

import json

from compassmem.bench.report import write_reports
from compassmem.bench.runner import BenchConfig, run_benchmark


def test_bench_slice_runs_and_resumes(tmp_path, locomo_path):
    cfg = BenchConfig(dataset="locomo", data=locomo_path, out=tmp_path, samples=["conv-26"], sessions=(1, 4),
                      limit=4, embedder="hash",
                      methods=["compassmem", "full_context", "rag512", "dense_turns", "bm25_turns:5", "no_topics",
                               "no_relations", "no_refinement", "no_planner", "chunks100", "batched"])
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
    rows = run_scale([40], tmp_path, turns_per_step=20, queries=3, log=logs.append)
    assert rows[0]["events"] >= 40 and rows[0]["query_p50_s"] > 0 and rows[0]["peak_rss_mb"] > 0
    assert (tmp_path / "scale.png").is_file() and not (tmp_path / "scale-40.db").exists()
    again = run_scale([40], tmp_path, turns_per_step=20, queries=3, log=logs.append)
    assert again == rows and "already measured" in logs[-1]
