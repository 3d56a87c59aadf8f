"""Named variants of the search, as Graphiti names its search recipes: what each mode and each ablation
changes, in one place, for the library and the benchmark (`bench --methods no_topics`, …).

    from compassmem import Memory, Settings
    from compassmem.search.presets import PRESETS

    mem = Memory("m.db", settings=PRESETS["no_topics"].apply(Settings()))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import Settings


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    search: dict[str, Any] = field(default_factory=dict)  # SearchSettings fields it changes

    def apply(self, settings: Settings) -> Settings:
        """`settings` with this preset's changes (validated: a preset cannot set what a config file cannot)."""
        return Settings.model_validate({**settings.model_dump(), "search": {**settings.search.model_dump(), **self.search}})


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("compassmem", "the method as configured: planner, topics, relations, refinement, newer facts first"),
    Preset("compassmem_graph", "with a model: the offline search finds the evidence, the model only answers "
                               "(1 call per question)", {"mode": "graph"}),
    Preset("no_topics", "ablation: no topic candidates when choosing where to start", {"use_topics": False}),
    Preset("no_relations", "ablation: no typed relation is used: explorers see no neighbours, a search loads no "
                           "neighbours of its best events, the ranking has no relation or thread term",
           {"use_relations": False, "neighbour_events": 0}),
    Preset("no_refinement", "ablation: no gap-aware second round", {"refinement": False}),
    Preset("no_planner", "ablation: the question is the only sub-goal", {"use_planner": False}),
    Preset("no_newer_first", "ablation: no later restatement lifted above what it revises", {"newer_window": 0}),
)}
