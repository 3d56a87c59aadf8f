"""Every tunable number of the method in one validated place, with the paper's values as defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError


class ConstructionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    merge_threshold: float = Field(0.9, ge=0, le=1, description="sim above which the judge is asked 'same event?'")
    related_threshold: float = Field(0.55, ge=0, le=1, description="sim above which a cross-step edge is considered")
    judge_candidates: int = Field(2, ge=0, le=10, description="nearest existing events judged per new event")
    max_judge_calls_per_step: int = Field(12, ge=0)
    topic_delta: float = Field(0.9, ge=0, le=1, description="δ: online topic assignment threshold")
    recluster_every: int = Field(4, ge=1, description="T: re-cluster all events every T steps")
    max_topics: int = Field(50, ge=2)
    events_per_topic: int = Field(5, ge=1)
    max_event_turns: int = Field(6, ge=1, description="offline segmenter length cap")
    boundary_threshold: float = Field(0.3, ge=-1, le=1, description="offline segmenter: sim below it starts an event")
    max_observation_chars: int = Field(20_000, ge=100, description="longer texts are truncated, with a note in stats")


class SearchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(5, ge=1, le=100, description="k: directly retrieved candidates")
    topics_p: int = Field(5, ge=0, le=50, description="p: distinct topics taken from the ranked list")
    pool_size: int = Field(50, ge=1, description="ranked list length scanned for topics")
    per_topic: int = Field(3, ge=1, le=10, description="start candidates taken per topic")
    max_start_nodes: int = Field(5, ge=1, le=20)
    explorers: int = Field(3, ge=1, le=16)
    max_next: int = Field(3, ge=0, le=10)
    max_steps: int = Field(24, ge=1, description="explorer steps per round (all explorers together)")
    batch_explorers: bool = Field(False, description="decide each round of all explorers in one LLM call")
    refinement: bool = True
    use_planner: bool = True
    use_topics: bool = True
    use_relations: bool = True
    max_subgoals: int = Field(5, ge=1, le=5)
    max_question_chars: int = Field(4000, ge=10)
    lexical_weight: float = Field(0.3, ge=0, le=5, description="weight of BM25 next to embedding similarity")
    max_context_tokens: int = Field(3000, ge=100, description="evidence handed to the responder")


class LLMSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(1536, ge=16, description="completion cap per call; the schemas' worst case fits in 1536")
    retries: int = Field(2, ge=0, le=10)
    timeout_s: float = Field(120.0, gt=0)
    n_ctx: int = Field(8192, ge=512)
    max_calls: int | None = Field(None, ge=1, description="budget per operation (one ask / one step)")
    max_tokens_budget: int | None = Field(None, ge=1)
    cache: bool = True


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    construction: ConstructionSettings = Field(default_factory=ConstructionSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> "Settings":
        data: dict[str, Any] = {}
        if path is not None:
            p = Path(path)
            if not p.is_file():
                raise ConfigError(f"config file not found: {p}")
            try:
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"config file {p} is not valid TOML: {exc}") from None
        for key, value in overrides.items():
            section, _, name = key.partition(".")
            data.setdefault(section, {})[name] = value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ConfigError(f"invalid setting '{where}': {first['msg']}") from None
