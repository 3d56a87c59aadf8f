"""Scopes as mem0 users expect (issue "What memory users expect", item 2): writes are exact, a read by
user_id / agent_id / run_id covers the namespaces under it, and a namespace named outright reads just
itself."""

from __future__ import annotations

import pytest

from compassmem import Memory, NamespaceNotFound
from compassmem.scope import covered
from compassmem.store.base import cache_namespace


@pytest.fixture
def mem(tmp_path):
    m = Memory(tmp_path / "m.db", embedder="hash")
    m.add(["I am allergic to peanuts."], user_id="ana", agent_id="planner", world_time="2024-03-01")
    m.add(["My flight to Oslo leaves on Friday."], user_id="ana", run_id="r7", world_time="2024-03-02")
    m.add(["I booked the Oslo hotel near the harbour."], user_id="ana", world_time="2024-03-03")
    m.add(["Bob is allergic to cats."], user_id="bob")
    yield m
    m.close()


def test_writes_are_exact(mem):
    assert mem.namespaces() == ["user:ana", "user:ana/agent:planner", "user:ana/run:r7", "user:bob"]


def test_a_user_scope_reads_its_agents_and_runs(mem):
    hits = mem.search("allergic peanuts", user_id="ana")
    assert hits[0].namespace == "user:ana/agent:planner"
    assert all(h.namespace.startswith("user:ana") for h in hits)  # never another user's
    answer = mem.ask("Where is the Oslo hotel and when does the flight leave?", user_id="ana")
    assert {e.namespace for e in answer.evidence} >= {"user:ana", "user:ana/run:r7"}  # one answer from both
    assert answer.namespace == "user:ana"
    assert mem.list(user_id="ana").total == 3 and len(mem.get_all(user_id="ana")) == 3


def test_pages_run_through_the_covered_namespaces(mem):
    ids = [(e.namespace, e.id) for e in mem.list(user_id="ana").items]
    paged = [(e.namespace, e.id) for k in range(3) for e in mem.list(user_id="ana", offset=k, limit=1).items]
    assert paged == ids


def test_a_named_namespace_reads_just_itself(mem):
    assert mem.list("user:ana").total == 1
    assert mem.list("user:ana", nested=True).total == 3
    assert {h.namespace for h in mem.search("Oslo", "user:ana")} == {"user:ana"}


def test_a_scope_with_nothing_under_it_is_not_found(mem):
    with pytest.raises(NamespaceNotFound):
        mem.search("x", user_id="carol")
    with pytest.raises(NamespaceNotFound):
        mem.search("x", user_id="ana", agent_id="nobody")


def test_delete_all_takes_the_scope_and_what_is_under_it(mem):
    receipts = mem.delete_all(user_id="ana")
    assert sorted(r.namespace for r in receipts) == ["user:ana", "user:ana/agent:planner", "user:ana/run:r7"]
    assert all(r.verified for r in receipts) and mem.namespaces() == ["user:bob"]


def test_a_cached_model_call_made_for_several_namespaces_is_forgotten_with_any_of_them(mem):
    """An ask over a scope works for every namespace it reads (Memory.ask: _working_for(*names)): a cached
    prompt that held their text is tagged with each, so forgetting any one removes it."""
    from compassmem.memory import _working_for

    with _working_for("user:ana", "user:ana/run:r7"):
        assert cache_namespace.get() == ("user:ana", "user:ana/run:r7")
        mem.store.cache.put("prompt-with-oslo", "the Oslo flight leaves on Friday")
    assert mem.store.cache.get("prompt-with-oslo") is not None
    mem.forget(user_id="ana", run_id="r7")
    assert mem.store.cache.get("prompt-with-oslo") is None


def test_covered():
    names = ["a", "a/b", "a/b/c", "ab", "b"]
    assert covered(names, "a") == ["a", "a/b", "a/b/c"]
    assert covered(names, "a/b") == ["a/b", "a/b/c"]
    assert covered(names, "z") == []
