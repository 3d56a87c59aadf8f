"""The same behaviour from `Memory` in-process and from `Client` / `AsyncClient` against a real
`compassmem serve` (issue "What memory users expect", item 4): one conformance test, run on both."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from compassmem import (AsyncClient, Client, EditReceipt, Event, EventDetail, EventNotFound, EventPage, ForgetReceipt,
                        InputError, Memory, NamespaceNotFound, NotFound, ObservationNotFound, SearchHit, ServiceError,
                        StepRecord)
from compassmem.models import Answer, HistoryEntry


@pytest.fixture(params=["memory", "client"])
def api(request, tmp_path, server):
    """An in-process Memory, or a Client of the real server (on each of its stores)."""
    if request.param == "memory":
        mem = Memory(tmp_path / "m.db", embedder="hash")
        yield mem
        mem.close()
    else:
        with Client(server["base"], server["keys"]["acme"]) as client:
            yield client


def test_memory_and_client_behave_alike(api):
    user = f"ana-{uuid.uuid4().hex[:8]}"
    rec = api.add([{"speaker": "Ana", "text": "I adopted a puppy called Luna on Monday."},
                   {"speaker": "Bo", "text": "Lovely, what breed is Luna?"}], user_id=user, metadata={"app": "chat"},
                  world_time="8 May 2023")
    assert isinstance(rec, StepRecord) and rec.namespace == f"user:{user}" and rec.observations == 2
    api.add("I started a pottery class.", user_id=user)  # one string, appended as the next step

    hits = api.search("puppy Luna", user_id=user, filters={"meta": {"app": "chat"}})
    assert hits and isinstance(hits[0], SearchHit) and "Luna" in hits[0].observations[0].text
    answer = api.ask("What did Ana adopt?", user_id=user)
    assert isinstance(answer, Answer) and answer.observation_ids()

    page = api.list(user_id=user)
    assert isinstance(page, EventPage) and page.total == len(page.items) >= 2
    everything = api.get_all(user_id=user)
    assert [e.id for e in everything] == [e.id for e in page.items] and isinstance(everything[0], Event)
    first = page.items[0]
    detail = api.get(first.id, user_id=user)
    assert isinstance(detail, EventDetail) and detail.event.id == first.id
    assert all(o.meta == {"app": "chat"} for o in detail.observations)
    assert all(isinstance(h, HistoryEntry) for h in api.history(first.id, user_id=user))

    pottery = next(e for e in page.items if e.id != first.id)
    receipt = api.update(pottery.id, "I started a painting class.", user_id=user)  # an event id with one turn
    assert isinstance(receipt, EditReceipt) and receipt.action == "update"
    receipt = api.delete(pottery.id, user_id=user)  # an event id stands for its observations
    assert receipt.action == "delete" and receipt.observation_ids == pottery.observation_ids

    with pytest.raises(EventNotFound):
        api.get("e999.0", user_id=user)
    with pytest.raises(ObservationNotFound):
        api.delete(["nope"], user_id=user)
    with pytest.raises(NamespaceNotFound):
        api.list(user_id="nobody-" + user)
    with pytest.raises(InputError):
        api.search("", user_id=user)
    assert f"user:{user}" in api.namespaces()
    assert api.stats(user_id=user)["observations"] == 2

    api.add("Planner note: book the vet for Luna.", user_id=user, agent_id="planner")
    covered = api.search("vet Luna", user_id=user)  # a user's scope covers their agents when read
    assert covered and covered[0].namespace == f"user:{user}/agent:planner"
    assert {e.namespace for e in api.get_all(user_id=user)} == {f"user:{user}", f"user:{user}/agent:planner"}
    with pytest.raises(NamespaceNotFound):  # writes and exact reads stay exact
        api.list(f"user:{user}/agent:nobody")
    gone = api.delete_all(user_id=user)
    assert len(gone) == 2 and all(isinstance(g, ForgetReceipt) and g.verified for g in gone)
    with pytest.raises(NotFound):
        api.list(user_id=user)


def test_export_and_import_through_the_client(server, tmp_path):
    ns = f"exp-{uuid.uuid4().hex[:8]}"
    with Client(server["base"], server["keys"]["acme"]) as client:
        client.add(["I keep bees on the roof.", "The honey was ready in June."], ns)
        rows = client.export(ns, tmp_path / "e.jsonl")
        assert rows > 0 and (tmp_path / "e.jsonl").read_text().count("\n") == rows + 1
        client.forget(ns)
        assert client.import_file(tmp_path / "e.jsonl") == [ns]
        assert client.search("bees", ns)[0].observations[0].text == "I keep bees on the roof."


def test_the_async_client(server):
    async def run() -> None:
        user = f"kim-{uuid.uuid4().hex[:8]}"
        async with AsyncClient(server["base"], server["keys"]["acme"]) as client:
            results = await asyncio.gather(*(client.add(f"Note {i}: I planted tulip bulb {i}.", user_id=user)
                                             for i in range(5)))
            assert sorted(r.step for r in results) == [1, 2, 3, 4, 5]
            assert (await client.search("tulip", user_id=user, limit=3))
            assert len(await client.reset()) >= 1
            assert await client.namespaces() == []
    asyncio.run(run())


def test_a_bad_key_and_an_unreachable_server_are_one_clear_error(server):
    with Client(server["base"], "cm_bad_key") as client, pytest.raises(Exception, match="refused the API key"):
        client.namespaces()
    with Client("http://127.0.0.1:9", timeout=2) as client, pytest.raises(ServiceError, match="cannot reach"):
        client.namespaces()
