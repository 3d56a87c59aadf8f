"""Scoping as mem0 users know it: `user_id`, `agent_id`, `run_id`, in any combination, name one
namespace, deterministically and readably:

    user_id="ana"                       -> "user:ana"
    user_id="ana", agent_id="planner"   -> "user:ana/agent:planner"
    agent_id="planner", run_id="r7"     -> "agent:planner/run:r7"

The parts always come in this order whatever the call's keyword order, and a "/" or "%" inside an id
is percent-encoded, so two different scopes can never share a namespace.

Writes are exact: an add with user_id="ana", agent_id="planner" lands in "user:ana/agent:planner" only.
Reads by scope nest, as mem0 users expect: user_id="ana" reads "user:ana" and every namespace under it
("user:ana/agent:planner", "user:ana/run:r7"); agent_id="planner" reads "agent:planner/run:…". A
namespace given by name reads just that namespace (Memory's `nested=True` widens it).
"""

from __future__ import annotations

from typing import Callable, TypeVar

from .errors import InputError
from .validate import namespace_name

T = TypeVar("T")

PARTS = ("user_id", "agent_id", "run_id")


def namespace_for(namespace: str | None = None, user_id: str | None = None, agent_id: str | None = None,
                  run_id: str | None = None) -> str:
    ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
    given = {k: v for k, v in ids.items() if v is not None}
    if not given:
        return namespace_name("default" if namespace is None else namespace)
    if namespace is not None:
        raise InputError("give either namespace or user_id / agent_id / run_id, not both")
    parts = []
    for key in PARTS:
        if key in given:
            value = namespace_name(given[key], key)
            parts.append(f"{key[:-3]}:{value.replace('%', '%25').replace('/', '%2F')}")
    return namespace_name("/".join(parts))


def covered(names: list[str], base: str) -> list[str]:
    """`base` and the namespaces under it (base + "/..."), base first: what a read of a scope covers."""
    return [n for n in names if n == base] + sorted(n for n in names if n.startswith(base + "/"))


def by_ids(user_id: str | None, agent_id: str | None, run_id: str | None) -> bool:
    """Whether a memory is named by scope ids, whose reads nest (a namespace named outright does not)."""
    return any(x is not None for x in (user_id, agent_id, run_id))


def read_names(names: list[str], base: str, nested: bool) -> list[str]:
    """Of the existing `names`, those a read of `base` covers: base and what is under it when `nested`,
    else base alone; empty when none exists. The library, the REST service and the client share it."""
    return covered(names, base) if nested else [n for n in names if n == base]


def page_through(names: list[str], counts: list[int], fetch: Callable[[str, int, int], list[T]], offset: int,
                 limit: int) -> list[T]:
    """One page of a scope's items, running through its namespaces one after another: `fetch(name, skip,
    n)` reads a namespace's, `counts` says how many each holds."""
    items: list[T] = []
    skip = offset
    for name, count in zip(names, counts):
        if skip >= count:
            skip -= count
            continue
        items += fetch(name, skip, limit - len(items))
        skip = 0
        if len(items) >= limit:
            break
    return items
