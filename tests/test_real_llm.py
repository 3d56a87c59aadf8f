"""Against a real local model, never a mock. Skipped unless the environment names one:

  COMPASSMEM_TEST_GGUF        a GGUF file for the in-process `gguf:` provider (smoke: every role schema)
  COMPASSMEM_TEST_BASE_URL    an OpenAI-compatible server on loopback serving that model (`openai:` smoke)
  COMPASSMEM_TEST_GGUF_BUILD  a GGUF good enough to build and search memory (LLM-mode end-to-end)

.ci/run fetches the models, starts `python -m llama_cpp.server` on 127.0.0.1 and sets these.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from compassmem.config import LLMSettings
from compassmem.doctor import ROLE_CHECKS, check_roles
from compassmem.llm import make_llm

pytestmark = pytest.mark.llm

GGUF = os.environ.get("COMPASSMEM_TEST_GGUF")
BASE_URL = os.environ.get("COMPASSMEM_TEST_BASE_URL")
BUILD_GGUF = os.environ.get("COMPASSMEM_TEST_GGUF_BUILD")
REPORT_DIR = Path(os.environ.get("COMPASSMEM_TEST_REPORT_DIR", "test-reports"))


def _assert_all_roles(results):
    failed = [f"{r.role}: {r.detail}" for r in results if not r.ok]
    assert not failed, "roles failed against a real model:\n" + "\n".join(failed)
    assert len(results) == len(ROLE_CHECKS)


@pytest.mark.skipif(not GGUF, reason="COMPASSMEM_TEST_GGUF not set")
def test_every_role_schema_through_gguf_provider():
    client = make_llm(f"gguf:{GGUF}", LLMSettings(cache=False, retries=1, n_ctx=4096))
    _assert_all_roles(check_roles(client))
    assert client.total.llm_calls >= len(ROLE_CHECKS) and client.total.completion_tokens > 0
    # llama.cpp keeps the last prompt evaluated; forget_prefix (called by the harness before each method)
    # must make the next call start from nothing
    assert client.provider._llm.n_tokens > 0
    client.forget_prefix()
    assert client.provider._llm.n_tokens == 0


@pytest.mark.skipif(not BASE_URL, reason="COMPASSMEM_TEST_BASE_URL not set")
def test_every_role_schema_through_openai_provider():
    client = make_llm("openai:local", LLMSettings(cache=False, retries=1, timeout_s=600), base_url=BASE_URL,
                      api_key="none")
    _assert_all_roles(check_roles(client))
    assert client.total.prompt_tokens > 0


@pytest.mark.skipif(not BUILD_GGUF, reason="COMPASSMEM_TEST_GGUF_BUILD not set")
def test_llm_mode_build_and_ask_conv26(tmp_path, locomo_path):
    """Construction + search end to end with a real model over conv-26 sessions 1-3."""
    from compassmem import Memory, Settings
    from compassmem.ingest import load

    settings = Settings.load(**{"llm.n_ctx": 8192, "search.max_steps": 6,
                                "construction.max_judge_calls_per_step": 4})
    mem = Memory(tmp_path / "llm.db", llm=f"gguf:{BUILD_GGUF}", settings=settings)
    ds = load(locomo_path, "locomo", samples=["conv-26"], sessions=(1, 3))
    report = {"model": Path(BUILD_GGUF).name, "steps": [], "questions": []}
    for item in ds.steps:
        t0 = time.perf_counter()
        rec = mem.constructor.add_step(item.namespace, item.step, item.observations, item.world_time)
        report["steps"].append({"step": rec.step, "wall_s": round(time.perf_counter() - t0, 1),
                                "llm_calls": rec.llm_calls, "prompt_tokens": rec.prompt_tokens,
                                "completion_tokens": rec.completion_tokens, "events_new": rec.events_new,
                                "events_merged": rec.events_merged, "relations": rec.relations,
                                "skipped": rec.skipped})
    obs = {o.id for o in mem.store.observations("conv-26")}
    events = mem.events("conv-26")
    assert events and all(e.observation_ids and set(e.observation_ids) <= obs for e in events)
    stats = mem.stats("conv-26")
    assert stats["construction"]["llm_calls"] >= 2 * len(ds.steps)
    assert stats["topics"] >= 1 and all(e.topic_id for e in events)
    assert stats["cross_step_relations"] >= 1
    calls = mem.llm.total.llm_calls
    for item in ds.steps:  # re-ingesting the same sessions changes nothing and calls no model
        mem.constructor.add_step(item.namespace, item.step, item.observations, item.world_time)
    assert mem.llm.total.llm_calls == calls
    again = mem.stats("conv-26")
    assert json.dumps(again, sort_keys=True) == json.dumps(stats, sort_keys=True)
    wanted = [q for q in ds.questions if all(e.split(":")[0] in {"D1", "D2", "D3"} for e in q.evidence)][:5]
    assert len(wanted) == 5
    for q in wanted:
        t0 = time.perf_counter()
        a = mem.ask(q.question, "conv-26")
        assert a.answer.strip()
        assert set(a.observation_ids()) <= obs and a.observation_ids()
        assert a.subgoals and 1 <= len(a.subgoals) <= 5
        assert a.usage.llm_calls >= 3  # planner, explorer rounds (a selector with a bigger budget), responder
        assert len({s.event_id for s in a.trace}) == len(a.trace)
        report["questions"].append({"question": q.question, "gold": q.answers[0], "answer": a.answer,
                                    "evidence_hit": bool(set(q.evidence) & set(a.observation_ids())),
                                    "llm_calls": a.usage.llm_calls, "prompt_tokens": a.usage.prompt_tokens,
                                    "completion_tokens": a.usage.completion_tokens,
                                    "latency_s": round(time.perf_counter() - t0, 1), "steps": len(a.trace),
                                    "refined": a.refined_query is not None})
    # a re-ask is replayed from the response cache: the explorers' rounds make the prompts identical
    first = report["questions"][0]
    again = mem.ask(wanted[0].question, "conv-26")
    assert again.usage.llm_calls == 0 and again.usage.cached_calls >= 3
    assert again.answer == first["answer"] and len(again.trace) == first["steps"]
    calls = mem.llm.total.llm_calls
    assert mem.search(wanted[0].question, "conv-26") and mem.llm.total.llm_calls == calls  # search: no model call
    # editing a memory the model built: the model re-derives the event from what is left of it
    from test_edit import invariants

    event = next(e for e in mem.events("conv-26") if len(e.observation_ids) >= 3)
    first_id, second_id = event.observation_ids[:2]
    updated = mem.update(first_id, "Caroline said she painted a lighthouse at sunrise.", "conv-26")
    assert updated.events_rederived == [event.id] and updated.usage.llm_calls >= 1 and updated.verified
    assert "lighthouse" in mem.store.get_observations("conv-26", [first_id])[0].text
    deleted = mem.delete([second_id], "conv-26")
    assert second_id not in mem.get(event.id, "conv-26").event.observation_ids and deleted.verified
    assert [h.action for h in mem.history(event.id, "conv-26")][-2:] == ["updated", "observations_deleted"]
    invariants(mem, "conv-26")
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / "llm_mode_conv26.json").write_text(json.dumps(report, indent=2))
    mem.close()


def _absolute_date(text: str) -> bool:
    """A calendar date, a month and year, or a year: not 'yesterday' or 'last week'."""
    import re

    from compassmem.timeutil import find_expressions, parse_date

    return any(parse_date(e) or re.fullmatch(r"(?:[A-Za-z]+\s+)?\d{4}", e) for e in find_expressions(text))


@pytest.mark.skipif(not BUILD_GGUF, reason="COMPASSMEM_TEST_GGUF_BUILD not set")
def test_both_search_modes_answer_and_a_when_answer_is_an_absolute_date(tmp_path, locomo_path):
    """On an offline-built memory (either kind of memory serves both modes): graph mode spends one model call
    (the answer), agentic mode stays within search.max_llm_calls, and a temporal question is answered with a
    date, though its evidence says "yesterday"."""
    from compassmem import Memory
    from compassmem.ingest import load

    db = tmp_path / "m.db"
    ds = load(locomo_path, "locomo", samples=["conv-26"], sessions=(1, 3))
    with Memory(db, embedder="hash") as offline:
        offline.ingest(ds)
    mem = Memory(db, llm=f"gguf:{BUILD_GGUF}", embedder="hash")
    question = "When did Caroline go to the LGBTQ support group?"  # gold: 7 May 2023; said on 8 May: "yesterday"
    graph = mem.ask(question, "conv-26", mode="graph")
    assert graph.usage.llm_calls + graph.usage.cached_calls == 1 and graph.answer.strip()
    assert _absolute_date(graph.answer), f"not an absolute date: {graph.answer!r}"
    agentic = mem.ask(question, "conv-26", mode="agentic")
    assert 1 < agentic.usage.llm_calls + agentic.usage.cached_calls <= mem.settings.search.max_llm_calls
    assert agentic.answer.strip() and agentic.subgoals and agentic.trace
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    (REPORT_DIR / "llm_modes.json").write_text(json.dumps(
        {mode: {"answer": a.answer, **a.usage.model_dump()} for mode, a in (("graph", graph), ("agentic", agentic))},
        indent=2))
    mem.close()


@pytest.mark.skipif(not BUILD_GGUF, reason="COMPASSMEM_TEST_GGUF_BUILD not set")
def test_the_llm_judge_grades_a_benchmark_folder(tmp_path):
    from compassmem.bench.judge import JUDGMENTS, attach, judge_rows

    rows = [{"method": "m", "qid": 1, "skipped": None, "question": "When did Caroline go to the support group?",
             "gold": ["7 May 2023"], "answer": "7 May 2023"},
            {"method": "m", "qid": 2, "skipped": None, "question": "What did Melanie paint?",
             "gold": ["a sunrise"], "answer": "a sunrise over the lake"}]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    client = make_llm(f"gguf:{BUILD_GGUF}", LLMSettings(cache=False, n_ctx=4096))
    assert judge_rows(tmp_path, client, "local") == 2
    assert judge_rows(tmp_path, client, "local") == 0  # resumes: nothing left to grade
    assert attach(tmp_path, rows) == "local" and rows[0]["j"] == 1  # the gold answer itself is correct
    assert rows[1]["j"] in (0, 1) and len((tmp_path / JUDGMENTS).read_text().splitlines()) == 2
