"""Management API (issue #11): list, get, AsyncMemory, and their CLI commands."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from compassmem import AsyncMemory, Memory
from compassmem.errors import InputError, NamespaceNotFound

TURNS = ["Ana adopted a puppy named Luna.", "Ben asked what breed she is.", "Ana said Luna is a beagle.",
         "Later Ben ran a marathon in Oslo.", "Ana cheered for him at the finish line."]


@pytest.fixture()
def mem(tmp_path):
    m = Memory(tmp_path / "m.db", embedder="hash")
    m.add(TURNS[:3], namespace="ana", world_time="8 May 2023")
    m.add(TURNS[3:], namespace="ana", world_time="9 May 2023")
    yield m
    m.close()


def test_list_pages_through_every_event_once(mem):
    total = mem.list("ana").total
    seen = []
    for offset in range(0, total, 1):
        page = mem.list("ana", offset=offset, limit=1)
        assert page.total == total and len(page.items) == 1
        seen.append(page.items[0].id)
    assert seen == [e.id for e in mem.events("ana")] and len(set(seen)) == total
    assert mem.list("ana", offset=total).items == []
    with pytest.raises(InputError, match="limit"):
        mem.list("ana", limit=0)
    with pytest.raises(NamespaceNotFound, match="known: ana"):
        mem.list("bob")


def test_get_returns_the_event_with_its_turns_and_relations(mem):
    first = mem.list("ana").items[0]
    detail = mem.get(first.id, "ana")
    assert detail.event == first
    assert [o.id for o in detail.observations] == first.observation_ids
    assert all(first.id in (r.source, r.target) for r in detail.relations)
    with pytest.raises(InputError, match="no event 'nope'"):
        mem.get("nope", "ana")


def test_async_memory_runs_concurrent_calls_and_counts_usage_per_call(tmp_path):
    async def main():
        async with AsyncMemory(tmp_path / "a.db", embedder="hash") as amem:
            await asyncio.gather(*(amem.add([f"{name} planted tomatoes in the garden."], namespace=name)
                                   for name in ("ana", "ben", "cy")))
            answers = await asyncio.gather(*(amem.ask("Who planted tomatoes?", namespace=n) for n in ("ana", "ben", "cy")))
            hits = await amem.search("tomatoes", namespace="ben")
            page = await amem.list("cy")
            return answers, hits, page, await amem.namespaces()

    answers, hits, page, names = asyncio.run(main())
    assert names == ["ana", "ben", "cy"]
    assert [a.namespace for a in answers] == ["ana", "ben", "cy"] and all(a.usage.llm_calls == 0 for a in answers)
    assert hits and "ben" in hits[0].observations[0].text.lower() and page.total == 1


def test_cli_list_and_get(tmp_path, mem):
    db = str(mem.store.path)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "compassmem", *args], capture_output=True, text=True)

    out = cli("list", "--db", db, "-n", "ana", "--json")
    assert out.returncode == 0, out.stderr
    page = json.loads(out.stdout)
    assert page["total"] == len(page["items"]) >= 1
    got = cli("get", page["items"][0]["id"], "--db", db, "-n", "ana", "--json")
    assert got.returncode == 0 and json.loads(got.stdout)["event"]["id"] == page["items"][0]["id"]
    missing = cli("get", "nope", "--db", db, "-n", "ana")
    assert missing.returncode != 0 and "no event 'nope'" in missing.stderr and "Traceback" not in missing.stderr


def test_user_agent_and_run_ids_name_one_namespace_each(tmp_path):
    from compassmem.scope import namespace_for

    assert namespace_for(user_id="ana") == "user:ana"
    assert namespace_for(run_id="r1", user_id="ana", agent_id="planner") == "user:ana/agent:planner/run:r1"
    assert namespace_for(user_id="a/b") != namespace_for(user_id="a", agent_id="b")  # "/" is encoded
    with pytest.raises(InputError, match="not both"):
        namespace_for("x", user_id="ana")
    with Memory(tmp_path / "s.db", embedder="hash") as mem:
        mem.add(["Ana likes green tea."], user_id="ana")
        mem.add(["The planner booked a flight to Oslo."], user_id="ana", agent_id="planner")
        assert mem.namespaces() == ["user:ana", "user:ana/agent:planner"]
        assert "tea" in mem.search("tea", user_id="ana")[0].observations[0].text
        assert "Oslo" in mem.search("flight", user_id="ana", agent_id="planner")[0].observations[0].text
        assert mem.list(user_id="ana").total == 2  # a user's scope covers their agents (tests/test_scopes.py)
        assert mem.list("user:ana").total == 1  # the namespace by name: just itself
        with pytest.raises(NamespaceNotFound, match="user:ben"):
            mem.ask("What does Ben like?", user_id="ben")
        assert mem.forget(user_id="ana", agent_id="planner").verified
        assert mem.namespaces() == ["user:ana"]


def test_search_makes_no_llm_call_even_with_a_model_configured(tmp_path):
    """search answers from the store alone: with a model configured at an address nothing listens on,
    it still works (and ask, which needs the model, fails with a one-line error)."""
    from compassmem.errors import CompassMemError

    with Memory(tmp_path / "s.db", embedder="hash") as offline:
        offline.add(TURNS, namespace="ana", world_time="8 May 2023")
    with Memory(tmp_path / "s.db", llm="openai:any-model", base_url="http://127.0.0.1:9/v1", api_key="x") as mem:
        hits = mem.search("beagle", "ana", filters={"since": "2000-01-01"})
        assert hits and mem.llm.total.llm_calls == 0
        with pytest.raises(CompassMemError):
            mem.ask("What breed is Luna?", "ana")
