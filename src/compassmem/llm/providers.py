"""Chat providers: one raw call each, no retries or parsing (the client owns those)."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ..errors import ConfigError, LLMUnavailable


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float


class TransientError(Exception):
    """Worth retrying: timeout, connection reset, 429, 5xx."""


class ChatProvider(Protocol):
    model: str

    def complete(self, messages: list[dict[str, str]], schema: dict[str, Any] | None, *,
                 temperature: float, max_tokens: int, name: str, timeout_s: float | None = None) -> Completion:
        """timeout_s: this request's limit (what is left of the operation's deadline), when the provider
        can enforce one."""
        ...


class OpenAICompatibleProvider:
    """Any /chat/completions server: OpenAI, vLLM, Ollama, llama.cpp and llama-cpp-python servers.

    Structured output is sent as OpenAI's `json_schema` response format; servers that only know
    llama.cpp's `json_object` + `schema` form reject it (400/422, or 500 from llama-cpp-python's
    server) naming response_format, and we switch once and remember.
    """

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 120.0) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base URL must start with http:// or https://, got '{self.base_url}'")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "none"
        self.timeout_s = timeout_s
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0))
        self._schema_mode = "json_schema"

    def _response_format(self, schema: dict[str, Any], name: str) -> dict[str, Any]:
        if self._schema_mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}
        return {"type": "json_object", "schema": schema}

    def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature,
                                "max_tokens": max_tokens}
        for attempt in range(2):
            if schema is not None:
                body["response_format"] = self._response_format(schema, name)
            t0 = time.perf_counter()
            status, raw = self._post(body, name, timeout_s)
            latency = time.perf_counter() - t0
            # llama-cpp-python's server reports its request-validation error as HTTP 500
            if status in (400, 422, 500) and schema is not None and attempt == 0 \
                    and self._schema_mode == "json_schema" and b"response_format" in raw:
                self._schema_mode = "json_object"
                continue
            break
        text = raw.decode("utf-8", "replace")
        if status == 429 or status >= 500:
            raise TransientError(f"HTTP {status}: {text[:200]}")
        if status in (401, 403):
            raise LLMUnavailable(name, f"{self.base_url} refused the API key (HTTP {status})")
        if status == 404:
            raise LLMUnavailable(name, f"{self.base_url} has no model '{self.model}' or no /chat/completions (HTTP 404)")
        if status != 200:
            raise LLMUnavailable(name, f"HTTP {status} from {self.base_url}: {text[:300]}")
        return _completion(text, latency)

    def _post(self, body: dict[str, Any], name: str, timeout_s: float | None) -> tuple[int, bytes]:
        """(status, body) of one request that ends by `timeout_s` whatever the server does: httpx's timeouts
        apply to each read, so a server trickling a byte a second would hold a read-timed request for
        ever. The request runs on its own thread and is given up at the deadline; that thread stops at
        its next read, since it checks the same deadline between the chunks it streams."""
        timeout_s = timeout_s or self.timeout_s
        deadline = time.monotonic() + timeout_s
        result: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                with self._client.stream("POST", f"{self.base_url}/chat/completions", json=body,
                                         headers={"Authorization": f"Bearer {self.api_key}"},
                                         timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))) as resp:
                    chunks = []
                    for chunk in resp.iter_bytes():
                        chunks.append(chunk)
                        if time.monotonic() > deadline:
                            raise httpx.ReadTimeout("the reply did not end by the deadline")
                    result["reply"] = (resp.status_code, b"".join(chunks))
            except BaseException as exc:  # handed to the waiting thread
                result["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="compassmem-llm-request", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic()) + 0.05):
            raise TransientError(f"no complete reply within {timeout_s:g} s")
        exc = result.get("error")
        if isinstance(exc, httpx.ConnectError):
            raise LLMUnavailable(name, f"cannot reach {self.base_url} ({exc})") from None
        if isinstance(exc, (httpx.TimeoutException, httpx.TransportError)):
            raise TransientError(f"{type(exc).__name__}: {exc}") from None
        if exc is not None:
            raise exc
        return result["reply"]


def _tokens(usage: dict, key: str) -> int:
    value = usage.get(key)
    if value is None:  # servers that do not count tokens leave it out
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"usage.{key} is {type(value).__name__} {str(value)[:20]}")
    return value


def _completion(text: str, latency: float) -> Completion:
    """The reply's text and token counts. A body of another shape (a choices string, a null message, a
    number for content, a token count that is not a count) is as untrustworthy as garbage and handled the
    same way: retried, then an LLMError."""
    try:
        data = json.loads(text)
        message = data["choices"][0]["message"]
        if not isinstance(message, dict):
            raise TypeError(f"message is {type(message).__name__}")
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise TypeError(f"content is a {type(content).__name__}")
        usage = data.get("usage") or {}
        if not isinstance(usage, dict):
            raise TypeError(f"usage is a {type(usage).__name__}")
        return Completion(content, _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens"), latency)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
        raise TransientError(f"malformed response body ({type(exc).__name__}: {exc}): {text[:200]}") from None


class GGUFProvider:
    """In-process llama.cpp via llama-cpp-python; the schema becomes a grammar, so output is valid JSON."""

    def __init__(self, path: str, n_ctx: int = 8192, threads: int | None = None) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ConfigError("the gguf: provider needs llama-cpp-python (pip install 'compassmem[local]')") from None
        self.model = os.path.basename(path)
        try:
            self._llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads or os.cpu_count() or 2,
                              verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise LLMUnavailable("load", f"llama.cpp could not load {path}: {exc}") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Free the model now. Left to the interpreter's exit, llama-cpp-python's finaliser ran after the
        modules it needs were torn down and printed a TypeError traceback from `free_model`."""
        with self._lock:
            close = getattr(self._llm, "close", None)
            if close is not None:
                close()

    def forget_prefix(self) -> None:
        """Drop the prompt prefix llama.cpp keeps evaluated between calls, so the next call starts cold."""
        with self._lock:
            self._llm.reset()

    def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
        # an in-process decode cannot be interrupted: the deadline is checked before each call
        kwargs: dict[str, Any] = {"messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        t0 = time.perf_counter()
        with self._lock:
            try:
                out = self._llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. prompt longer than the context window
                raise LLMUnavailable(name, f"llama.cpp rejected the request: {exc}") from None
        usage = out.get("usage") or {}
        return Completion(out["choices"][0]["message"].get("content") or "", int(usage.get("prompt_tokens", 0)),
                          int(usage.get("completion_tokens", 0)), time.perf_counter() - t0)
