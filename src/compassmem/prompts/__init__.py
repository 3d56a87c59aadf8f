"""Prompt templates are data (roles.toml); this module only loads and renders them."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from string import Template
from typing import Any


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: str
    user: str

    def render(self, **variables: Any) -> list[dict[str, str]]:
        """Missing variables raise KeyError: a template and its caller must agree."""
        return [{"role": "system", "content": Template(self.system).substitute(variables)},
                {"role": "user", "content": Template(self.user).substitute(variables)}]


@lru_cache(maxsize=1)
def _all() -> dict[str, PromptTemplate]:
    data = tomllib.loads(files(__package__).joinpath("roles.toml").read_text(encoding="utf-8"))
    return {name: PromptTemplate(name, body["system"].strip(), body["user"].strip()) for name, body in data.items()}


def prompt(name: str) -> PromptTemplate:
    return _all()[name]


def prompt_names() -> list[str]:
    return sorted(_all())
