"""Deadlines and per-operation accounting, against a real (deliberately slow) HTTP server on loopback."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from compassmem import Memory, Settings
from compassmem.errors import DeadlineExceeded

PLAN = {"subgoals": ["who", "when"]}


def _server(delay_s: float):
    """An OpenAI-compatible /chat/completions that answers every request after delay_s seconds."""
    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(time.monotonic())
            time.sleep(delay_s)
            body = json.dumps({"choices": [{"message": {"content": json.dumps(PLAN)}}],
                               "usage": {"prompt_tokens": 5, "completion_tokens": 5}}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def test_ask_against_a_slow_server_ends_at_its_deadline(tmp_path):
    srv, seen = _server(delay_s=30)
    try:
        base = Memory(tmp_path / "d.db", embedder="hash")
        base.add(["Ana adopted a puppy named Luna.", "Ben fixes bicycles."], namespace="n", step=1)
        base.close()
        settings = Settings.load(**{"llm.ask_deadline_s": 1.5, "llm.timeout_s": 120, "llm.cache": False})
        mem = Memory(tmp_path / "d.db", llm="openai:slow", base_url=f"http://127.0.0.1:{srv.server_port}/v1",
                     settings=settings)
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="ask ran past its deadline of 1.5 s"):
            mem.ask("When did Ana adopt Luna?", "n")
        assert time.monotonic() - t0 < 20  # not 120 s per request × 3 attempts
        assert len(seen) <= 2
    finally:
        srv.shutdown()


def test_step_against_a_slow_server_ends_at_its_deadline_and_commits_nothing(tmp_path):
    srv, _ = _server(delay_s=30)
    try:
        settings = Settings.load(**{"llm.step_deadline_s": 1.0, "llm.cache": False})
        mem = Memory(tmp_path / "s.db", llm="openai:slow", embedder="hash",
                     base_url=f"http://127.0.0.1:{srv.server_port}/v1", settings=settings)
        with pytest.raises(DeadlineExceeded, match="step 1 of 'n' ran past its deadline"):
            mem.add(["Ana adopted a puppy.", "Ben fixes bicycles."], namespace="n", step=1)
        assert mem.store.steps.count("n") == 0 and mem.store.observations("n") == []
    finally:
        srv.shutdown()


def test_concurrent_operations_count_only_their_own_calls():
    """Eight threads share one client; each operation's usage holds exactly its own calls, however they
    interleave (the bug: one shared 'current operation' attribute)."""
    from compassmem.config import LLMSettings
    from compassmem.llm import Completion, LLMClient
    from compassmem.prompts import prompt
    from compassmem.schemas import PlanOut

    class Echo:
        model = "echo"

        def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
            time.sleep(0.002)
            return Completion(json.dumps(PLAN), 1, 1, 0.0)

    client = LLMClient(Echo(), LLMSettings(cache=False))
    counts: dict[int, int] = {}
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        with client.operation() as usage:
            barrier.wait()
            for _ in range(i + 1):
                client.structured(prompt("plan"), PlanOut, question=f"q{i}", min_subgoals=2, max_subgoals=5)
            counts[i] = usage.llm_calls

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts == {i: i + 1 for i in range(8)}
    assert client.total.llm_calls == sum(range(1, 9))


def _trickler(body: bytes, every_s: float):
    """A /chat/completions that sends its (valid) reply one byte every `every_s` seconds."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(every_s)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_a_server_trickling_its_reply_is_cut_at_the_deadline_and_nothing_is_cached(tmp_path):
    """httpx's timeouts are per read: one byte every 0.5 s kept requests alive for ever. The whole request
    now ends at the operation's deadline, and the late reply is neither used nor cached."""
    body = json.dumps({"choices": [{"message": {"content": json.dumps(PLAN)}}]}).encode()
    srv = _trickler(body, every_s=0.5)
    try:
        base = Memory(tmp_path / "t.db", embedder="hash")
        base.add(["Ana adopted a puppy named Luna.", "Ben fixes bicycles."], namespace="n", step=1)
        base.close()
        settings = Settings.load(**{"llm.ask_deadline_s": 3, "llm.timeout_s": 120})
        mem = Memory(tmp_path / "t.db", llm="openai:trickle", base_url=f"http://127.0.0.1:{srv.server_port}/v1",
                     settings=settings)
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            mem.ask("When did Ana adopt Luna?", "n")
        assert time.monotonic() - t0 < 3 + 2
        with mem.store.snapshot():
            assert mem.store._rows("SELECT COUNT(*) FROM llm_cache")[0][0] == 0
    finally:
        srv.shutdown()


def test_a_reply_that_ends_after_the_deadline_is_not_used_or_cached():
    from compassmem.config import LLMSettings
    from compassmem.llm import Completion, LLMClient
    from compassmem.prompts import prompt
    from compassmem.schemas import PlanOut

    class Late:
        model = "late"

        def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
            time.sleep(0.3)  # a provider that cannot be interrupted (in-process llama.cpp) returns late
            return Completion(json.dumps(PLAN), 1, 1, 0.3)

    cache: dict[str, str] = {}

    class Cache:  # the store's response cache (store/meta.py), as a dict
        get = staticmethod(cache.get)

        @staticmethod
        def put(key: str, value: str) -> None:
            cache[key] = value

    client = LLMClient(Late(), LLMSettings(), cache=Cache())
    with pytest.raises(DeadlineExceeded):
        with client.operation(deadline_s=0.1, label="ask"):
            client.structured(prompt("plan"), PlanOut, question="q", min_subgoals=2, max_subgoals=5)
    assert cache == {}
    client.structured(prompt("plan"), PlanOut, question="q", min_subgoals=2, max_subgoals=5)
    assert len(cache) == 1  # without a deadline the same reply is cached


MALFORMED = {"choices a string": {"choices": "nope"}, "message null": {"choices": [{"message": None}]},
             "content a number": {"choices": [{"message": {"content": 42}}]},
             "prompt_tokens a string": {"choices": [{"message": {"content": json.dumps(PLAN)}}],
                                        "usage": {"prompt_tokens": "many"}},
             "no choices": {"choices": []}}


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_a_well_formed_json_reply_of_the_wrong_shape_is_a_clean_llm_error(shape):
    from compassmem.config import LLMSettings
    from compassmem.errors import LLMError
    from compassmem.llm import LLMClient
    from compassmem.llm.providers import OpenAICompatibleProvider
    from compassmem.prompts import prompt
    from compassmem.schemas import PlanOut

    srv = _trickler(json.dumps(MALFORMED[shape]).encode(), every_s=0)
    try:
        client = LLMClient(OpenAICompatibleProvider("m", f"http://127.0.0.1:{srv.server_port}/v1"),
                           LLMSettings(cache=False, retries=1))
        client.sleep = lambda s: None
        with pytest.raises(LLMError, match="malformed response body") as info:
            client.structured(prompt("plan"), PlanOut, question="q", min_subgoals=2, max_subgoals=5)
        assert "\n" not in str(info.value)
    finally:
        srv.shutdown()


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_the_cli_turns_a_reply_of_the_wrong_shape_into_one_line_and_exit_2(tmp_path, shape):
    import subprocess
    import sys

    base = Memory(tmp_path / "c.db", embedder="hash")
    base.add(["Ana adopted a puppy named Luna."], namespace="n", step=1)
    base.close()
    srv = _trickler(json.dumps(MALFORMED[shape]).encode(), every_s=0)
    try:
        r = subprocess.run([sys.executable, "-m", "compassmem", "ask", "Who adopted Luna?", "--db",
                            str(tmp_path / "c.db"), "-n", "n", "--llm", "openai:m", "--base-url",
                            f"http://127.0.0.1:{srv.server_port}/v1"], capture_output=True, text=True, timeout=120)
    finally:
        srv.shutdown()
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error:") and "malformed response body" in r.stderr


def test_a_reply_without_token_counts_counts_zero():
    from compassmem.llm.providers import _completion

    reply = json.dumps({"choices": [{"message": {"content": "{}"}}]})
    assert (_completion(reply, 0.1).text, _completion(reply, 0.1).prompt_tokens) == ("{}", 0)
