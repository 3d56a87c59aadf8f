"""LLM spec strings, used by every entry point: 'none', 'openai:MODEL', 'gguf:PATH'."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

LLM_SPECS = "none | openai:MODEL | gguf:PATH"


@dataclass(frozen=True)
class LLMSpec:
    kind: str  # "none" | "openai" | "gguf"
    target: str = ""

    @property
    def offline(self) -> bool:
        return self.kind == "none"

    def __str__(self) -> str:
        return self.kind if self.offline else f"{self.kind}:{self.target}"


def parse_llm_spec(text: str | None) -> LLMSpec:
    if text is not None and not isinstance(text, str):
        raise ConfigError(f"llm must be a spec string ({LLM_SPECS}) or None, got {type(text).__name__}")
    raw = (text or "none").strip()
    if raw in ("none", "offline", ""):
        return LLMSpec("none")
    kind, sep, target = raw.partition(":")
    kind = kind.strip().lower()
    target = target.strip()
    if not sep or not target:
        raise ConfigError(f"bad LLM spec '{raw}'; expected {LLM_SPECS}")
    if kind == "openai":
        return LLMSpec("openai", target)
    if kind == "gguf":
        path = Path(target).expanduser()
        if not path.is_file():
            raise ConfigError(f"GGUF model file not found: {path} (fetch one with `compassmem models fetch`)")
        with path.open("rb") as fh:
            if fh.read(4) != b"GGUF":
                raise ConfigError(f"{path} is not a GGUF file (bad magic)")
        return LLMSpec("gguf", str(path))
    raise ConfigError(f"unknown LLM provider '{kind}' in '{raw}'; expected {LLM_SPECS}")
