"""Parsing, retries, caching, budgets and error reporting of the LLM client, with a scripted provider.

These complement (never replace) tests/test_real_llm.py, which runs a real local model."""

from __future__ import annotations

import httpx
import pytest

from compassmem.config import LLMSettings
from compassmem.errors import BudgetExceeded, ConfigError, LLMError, LLMUnavailable
from compassmem.llm import Completion, LLMClient, OpenAICompatibleProvider, TransientError, extract_json, parse_llm_spec
from compassmem.prompts import prompt, prompt_names
from compassmem.schemas import PlanOut
from compassmem.store import SQLiteStore


class Scripted:
    model = "scripted"

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
        self.calls.append(messages)
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return Completion(r, 10, 5, 0.01)


def client(*replies, **settings):
    c = LLMClient(Scripted(*replies), LLMSettings(**settings))
    c.sleep = lambda s: None
    return c


def test_extract_json_tolerates_think_fences_and_chatter():
    assert extract_json('<think>hmm {"no": 1}</think>{"a": 1}') == {"a": 1}
    assert extract_json('Sure!\n```json\n{"a": 2}\n```') == {"a": 2}
    assert extract_json('The answer is {"a": 3} as requested.') == {"a": 3}
    # a raw newline inside a string value, as llama.cpp's JSON grammar lets through (seen from Qwen 1.5B)
    assert extract_json('{"why": "the mural and\n", "action": "EXPAND"}') == {"why": "the mural and\n", "action": "EXPAND"}
    with pytest.raises(ValueError):
        extract_json("no json here")


def test_valid_output_is_parsed_and_counted():
    c = client('{"subgoals": ["find x", "find y"]}')
    with c.operation() as usage:
        out = c.structured(prompt("plan"), PlanOut, question="q?", min_subgoals=2, max_subgoals=5)
    assert out.subgoals == ["find x", "find y"]
    assert usage.llm_calls == 1 and usage.prompt_tokens == 10 and usage.completion_tokens == 5
    assert c.calls_by_role["plan"].llm_calls == 1


def test_invalid_json_is_retried_with_feedback_then_succeeds():
    c = client("not json", '{"subgoals": []}', '{"subgoals": ["ok"]}', retries=2)
    out = c.structured(prompt("plan"), PlanOut, question="q?", min_subgoals=2, max_subgoals=5)
    assert out.subgoals == ["ok"]
    assert len(c.provider.calls) == 3
    assert "not valid" in c.provider.calls[1][-1]["content"]


def test_failure_after_retries_names_role_and_raw_output():
    c = client("garbage one", "garbage two", retries=1)
    with pytest.raises(LLMError) as info:
        c.structured(prompt("plan"), PlanOut, question="q?", min_subgoals=2, max_subgoals=5)
    assert "plan" in str(info.value) and "garbage two" in str(info.value)
    assert info.value.raw == "garbage two"


def test_transient_errors_back_off_and_retry():
    c = client(TransientError("HTTP 503"), TransientError("timeout"), '{"subgoals": ["a"]}', retries=2)
    assert c.structured(prompt("plan"), PlanOut, question="q", min_subgoals=2, max_subgoals=5).subgoals == ["a"]


def test_budget_is_enforced_per_operation():
    c = client('{"subgoals": ["a"]}', '{"subgoals": ["b"]}', max_calls=1)
    with c.operation():
        c.structured(prompt("plan"), PlanOut, question="q1", min_subgoals=2, max_subgoals=5)
        with pytest.raises(BudgetExceeded):
            c.structured(prompt("plan"), PlanOut, question="q2", min_subgoals=2, max_subgoals=5)


def test_cache_makes_reruns_free_and_identical(tmp_path):
    store = SQLiteStore(tmp_path / "c.db")
    c1 = LLMClient(Scripted('{"subgoals": ["a", "b"]}'), LLMSettings(), cache=store.cache)
    first = c1.structured(prompt("plan"), PlanOut, question="same", min_subgoals=2, max_subgoals=5)
    c2 = LLMClient(Scripted(), LLMSettings(), cache=store.cache)  # would fail if it called the provider
    with c2.operation() as usage:
        again = c2.structured(prompt("plan"), PlanOut, question="same", min_subgoals=2, max_subgoals=5)
    assert again == first and usage.llm_calls == 0 and usage.cached_calls == 1


def test_cache_scopes_keep_methods_from_sharing_calls(tmp_path):
    """The harness scopes each method: the same prompt under two scopes reaches the model twice, under one
    scope once, and unscoped calls keep their old keys (existing caches still replay)."""
    store = SQLiteStore(tmp_path / "c.db")
    provider = Scripted('{"subgoals": ["a", "b"]}', '{"subgoals": ["c", "d"]}', '{"subgoals": ["e", "f"]}')
    c = LLMClient(provider, LLMSettings(), cache=store.cache)

    def plan():
        return c.structured(prompt("plan"), PlanOut, question="same", min_subgoals=2, max_subgoals=5)

    unscoped = plan()
    with LLMClient.cache_scope("graph"):
        graph = plan()
    with LLMClient.cache_scope("agentic"):
        agentic = plan()
    with LLMClient.cache_scope("graph"):
        assert plan() == graph
    assert plan() == unscoped and len(provider.calls) == 3
    assert [unscoped.subgoals, graph.subgoals, agentic.subgoals] == [["a", "b"], ["c", "d"], ["e", "f"]]


def test_forget_prefix_reaches_a_provider_that_has_one_and_is_a_no_op_otherwise():
    class Prefixed(Scripted):
        forgotten = 0

        def forget_prefix(self):
            self.forgotten += 1

    provider = Prefixed()
    LLMClient(provider, LLMSettings()).forget_prefix()
    assert provider.forgotten == 1
    client().forget_prefix()  # Scripted has none: nothing to do, no error


def test_every_prompt_renders_and_has_a_schema():
    from compassmem import schemas

    expected = {"segment", "relate", "judge", "topic_label", "plan", "select", "explore", "explore_batch", "refine",
                "revise", "respond", "grade"}
    assert set(prompt_names()) == expected
    with pytest.raises(KeyError):
        prompt("plan").render()  # a missing variable is an error, never a silent blank
    assert schemas.ExploreOut.model_json_schema()["properties"]["action"]["enum"] == ["EXPAND", "SKIP", "ANSWER"]


@pytest.mark.parametrize("spec, message", [
    ("gpt4", "bad LLM spec"),
    ("openai:", "bad LLM spec"),
    ("claude:x", "unknown LLM provider"),
    ("gguf:/no/such/model.gguf", "not found"),
])
def test_bad_specs_fail_clearly(spec, message):
    with pytest.raises(ConfigError, match=message):
        parse_llm_spec(spec)


def test_non_gguf_file_is_rejected(tmp_path):
    f = tmp_path / "fake.gguf"
    f.write_bytes(b"NOPE" + b"0" * 10)
    with pytest.raises(ConfigError, match="bad magic"):
        parse_llm_spec(f"gguf:{f}")


def test_unreachable_base_url_is_one_clear_error():
    p = OpenAICompatibleProvider("m", base_url="http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(LLMUnavailable, match="cannot reach"):
        p.complete([{"role": "user", "content": "x"}], None, temperature=0, max_tokens=5, name="plan")
    with pytest.raises(ConfigError, match="http"):
        OpenAICompatibleProvider("m", base_url="localhost:8000")


def test_openai_provider_falls_back_to_json_object_schema(monkeypatch):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        body = json.loads(request.content)
        seen.append(body["response_format"]["type"])
        if body["response_format"]["type"] == "json_schema":
            # what llama-cpp-python's server really answers (HTTP 500 with a validation message)
            return httpx.Response(500, text="{'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be "
                                            "'text' or 'json_object'\"}")
        return httpx.Response(200, json={"choices": [{"message": {"content": '{"subgoals": ["a"]}'}}],
                                         "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

    p = OpenAICompatibleProvider("m", base_url="http://test.local/v1")
    p._client = httpx.Client(transport=httpx.MockTransport(handler))
    out = p.complete([{"role": "user", "content": "x"}], PlanOut.model_json_schema(), temperature=0, max_tokens=5,
                     name="plan")
    assert out.text == '{"subgoals": ["a"]}' and seen == ["json_schema", "json_object"]
    p.complete([{"role": "user", "content": "x"}], PlanOut.model_json_schema(), temperature=0, max_tokens=5, name="plan")
    assert seen[-1] == "json_object"  # remembered


def test_http_errors_are_classified():
    codes = iter([429, 401])

    def handler(request):
        return httpx.Response(next(codes), text="nope")

    p = OpenAICompatibleProvider("m", base_url="http://test.local/v1")
    p._client = httpx.Client(transport=httpx.MockTransport(handler))
    with pytest.raises(TransientError):
        p.complete([], None, temperature=0, max_tokens=5, name="x")
    with pytest.raises(LLMUnavailable, match="API key"):
        p.complete([], None, temperature=0, max_tokens=5, name="x")
