"""One client for every LLM role: schema-constrained calls, validation, bounded retries, a response
cache, per-call accounting and per-operation budgets. Roles never talk to a provider directly."""

from __future__ import annotations

import contextvars
import hashlib
import json
import re
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, TypeVar

from pydantic import BaseModel, ValidationError

from ..config import LLMSettings
from ..errors import BudgetExceeded, DeadlineExceeded, LLMError
from ..models import Usage
from ..prompts import PromptTemplate
from .providers import ChatProvider, TransientError

if TYPE_CHECKING:
    from ..store.meta import Cache

T = TypeVar("T", bound=BaseModel)

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def strip_think(text: str) -> str:
    return _THINK.sub("", text).strip()


def extract_json(text: str) -> Any:
    """Parse the model's JSON, tolerating <think> blocks, code fences and chatter around one object, and raw
    control characters inside strings (llama.cpp's JSON grammar lets a newline into a string value)."""
    body = strip_think(text)
    candidates = [body]
    candidates += [m.group(1) for m in _FENCE.finditer(body)]
    start, end = body.find("{"), body.rfind("}")
    if 0 <= start < end:
        candidates.append(body[start : end + 1])
    for c in candidates:
        try:
            return json.loads(c, strict=False)
        except (json.JSONDecodeError, ValueError):
            continue
    raise ValueError("no JSON object in the output")


class _Operation:
    def __init__(self, max_calls: int | None, max_tokens: int | None, deadline_s: float | None, label: str) -> None:
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s if deadline_s else None
        self.label = label
        self.usage = Usage()

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


# The operation a call belongs to. A context variable, not a client attribute: concurrent asks on one
# client (threads, async tasks) each count their own calls. Explorer threads run in a copy of the
# asking thread's context, so their calls count for its ask.
_CURRENT: contextvars.ContextVar[_Operation | None] = contextvars.ContextVar("compassmem_operation", default=None)
# A name mixed into cache keys (LLMClient.cache_scope): calls under different scopes never share entries.
_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar("compassmem_cache_scope", default=None)


class LLMClient:
    def __init__(self, provider: ChatProvider, settings: LLMSettings | None = None, cache: "Cache | None" = None) -> None:
        self.provider = provider
        self.settings = settings or LLMSettings()
        self.cache = cache if self.settings.cache else None  # the store's response cache (store/meta.py)
        self.total = Usage()
        self.calls_by_role: dict[str, Usage] = {}
        self._lock = threading.Lock()
        self.sleep = time.sleep  # replaced in tests

    @property
    def model(self) -> str:
        return self.provider.model

    # ------------------------------------------------------------------ accounting
    @contextmanager
    def operation(self, max_calls: int | None = None, max_tokens: int | None = None, deadline_s: float | None = None,
                  label: str = "operation") -> Iterator[Usage]:
        """Scope one ask or one construction step: its usage is yielded, its budget and deadline enforced."""
        op = _Operation(max_calls or self.settings.max_calls, max_tokens or self.settings.max_tokens_budget,
                        deadline_s, label)
        token = _CURRENT.set(op)
        try:
            yield op.usage
        finally:
            _CURRENT.reset(token)

    @staticmethod
    @contextmanager
    def cache_scope(name: str) -> Iterator[None]:
        """Calls made inside share cache entries only with calls of the same scope. The benchmark harness
        scopes each method: two methods that send the same prompt (graph and agentic mode hand the same
        evidence to the same responder) must each pay for their call, or one method's cost and latency
        would be the other's; a resumed run still replays its own method's calls."""
        token = _SCOPE.set(name)
        try:
            yield
        finally:
            _SCOPE.reset(token)

    def forget_prefix(self) -> None:
        """Make the next call start cold on a provider that reuses the previous prompt's prefix (llama.cpp's
        evaluated tokens). The benchmark harness calls it before each method's answer: graph mode's
        answer prompt repeats the agentic answer's just before it, and took 1 s instead of 30 s."""
        forget = getattr(self.provider, "forget_prefix", None)
        if forget is not None:
            forget()

    def _check_budget(self, role: str) -> None:
        op = _CURRENT.get()
        if op is None:
            return
        left = op.remaining()
        if left is not None and left <= 0:
            raise DeadlineExceeded(f"{op.label} ran past its deadline of {op.deadline_s:g} s at role '{role}' "
                                   "(llm.ask_deadline_s / llm.step_deadline_s); nothing partial was kept")
        if op.max_calls is not None and op.usage.llm_calls >= op.max_calls:
            raise BudgetExceeded(f"LLM call budget of {op.max_calls} per operation reached at role '{role}'")
        tokens = op.usage.prompt_tokens + op.usage.completion_tokens
        if op.max_tokens is not None and tokens >= op.max_tokens:
            raise BudgetExceeded(f"LLM token budget of {op.max_tokens} per operation reached at role '{role}'")

    def _record(self, role: str, u: Usage) -> None:
        with self._lock:
            self.total.add(u)
            self.calls_by_role.setdefault(role, Usage()).add(u)
            op = _CURRENT.get()
            if op is not None:
                op.usage.add(u)

    # ------------------------------------------------------------------ calls
    def _cache_key(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
        key = {"model": self.model, "messages": messages, "schema": schema,
               "temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}
        scope = _SCOPE.get()
        if scope is not None:  # unscoped keys stay as they were: existing caches keep replaying
            key["scope"] = scope
        blob = json.dumps(key, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def structured(self, prompt: PromptTemplate, output: type[T], **variables: Any) -> T:
        """Render, call, validate; retry a bounded number of times; fail loudly with the raw output."""
        role = prompt.name
        messages = prompt.render(**variables)
        schema = output.model_json_schema()
        key = self._cache_key(messages, schema)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self._record(role, Usage(cached_calls=1))
                return output.model_validate_json(hit)
        last_raw: str | None = None
        problem = "no attempt made"
        attempts = self.settings.retries + 1
        convo = list(messages)
        for attempt in range(attempts):
            self._check_budget(role)
            op = _CURRENT.get()
            left = op.remaining() if op is not None else None
            timeout = self.settings.timeout_s if left is None else max(0.1, min(self.settings.timeout_s, left))
            try:
                comp = self.provider.complete(convo, schema, temperature=self.settings.temperature,
                                              max_tokens=self.settings.max_tokens, name=role, timeout_s=timeout)
            except TransientError as exc:
                problem = str(exc)
                self._record(role, Usage(llm_calls=1))
                left = op.remaining() if op is not None else None
                if left is not None and left <= 0:
                    self._check_budget(role)  # raises DeadlineExceeded
                self.sleep(min(8.0, 0.5 * 2**attempt, left if left is not None else 8.0))
                continue
            self._record(role, Usage(llm_calls=1, prompt_tokens=comp.prompt_tokens,
                                     completion_tokens=comp.completion_tokens, latency_s=comp.latency_s))
            if op is not None and (op.remaining() or 0.0) < 0:  # a late reply is neither used nor cached
                self._check_budget(role)
            last_raw = comp.text
            try:
                value = output.model_validate(extract_json(comp.text))
            except (ValueError, ValidationError) as exc:
                problem = f"invalid output ({str(exc).splitlines()[0][:200]})"
                convo = messages + [{"role": "assistant", "content": comp.text[:2000]},
                                    {"role": "user", "content": f"That was not valid: {problem}. "
                                     "Reply again with one JSON object that follows the schema exactly."}]
                continue
            if self.cache is not None:
                self.cache.put(key, value.model_dump_json())
            return value
        raise LLMError(role, f"failed after {attempts} attempt(s): {problem}", last_raw)
