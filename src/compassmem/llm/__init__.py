"""LLM access: spec strings, providers and the one client every role goes through."""

from __future__ import annotations

import atexit
from typing import TYPE_CHECKING

from ..config import LLMSettings
from .client import LLMClient, extract_json, strip_think
from .providers import ChatProvider, Completion, GGUFProvider, OpenAICompatibleProvider, TransientError
from .spec import LLM_SPECS, LLMSpec, parse_llm_spec

if TYPE_CHECKING:
    from ..store.meta import Cache

__all__ = ["LLMClient", "LLMSpec", "parse_llm_spec", "make_llm", "LLM_SPECS", "ChatProvider", "Completion",
           "TransientError", "extract_json", "strip_think", "OpenAICompatibleProvider", "GGUFProvider"]

_GGUF: dict[tuple[str, int], GGUFProvider] = {}


@atexit.register
def _close_models() -> None:
    """Loaded models are freed before the interpreter tears down the modules their finalisers need."""
    while _GGUF:
        _GGUF.popitem()[1].close()


def make_llm(spec: str | LLMSpec | None, settings: LLMSettings | None = None, cache: "Cache | None" = None,
             base_url: str | None = None, api_key: str | None = None) -> LLMClient | None:
    """None for the offline engine; otherwise a client over the provider the spec names."""
    parsed = spec if isinstance(spec, LLMSpec) else parse_llm_spec(spec)
    settings = settings or LLMSettings()
    if parsed.offline:
        return None
    if parsed.kind == "openai":
        provider: ChatProvider = OpenAICompatibleProvider(parsed.target, base_url, api_key, settings.timeout_s)
    else:
        key = (parsed.target, settings.n_ctx)
        if key not in _GGUF:  # loading weights is slow; share one model per process
            _GGUF[key] = GGUFProvider(parsed.target, n_ctx=settings.n_ctx)
        provider = _GGUF[key]
    return LLMClient(provider, settings, cache)
