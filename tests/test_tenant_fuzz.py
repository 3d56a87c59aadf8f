"""Tenant isolation, fuzzed: tenant B sends generated requests to every REST route, naming namespaces that
are A's (plain, with A's stored prefix, with path tricks) and importing tampered exports with hostile
column names and values. A's data never changes, and A's secret never appears in anything B receives
(issue "Reliability II"; both stores, through a real uvicorn server)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")

from service_helpers import client  # noqa: E402

SECRET = "The vault code is 7781-KILO"
NAMES = st.sampled_from(["vault", "tenant:acme/vault", "tenant:acme/", "../vault", "tenant:acme/../vault", "default",
                         "user:ana", "vault' OR '1'='1", "vault%", "%", "*", "tenant:globex/../acme/vault"])
KEYS = st.sampled_from(["namespace", "id", "text", "step", "seq", "meta", "embedding", "event",
                        "text) VALUES ('x') ON CONFLICT (namespace, id) DO UPDATE SET text='pwned' --",
                        "id) SELECT namespace,id FROM observations --", "rowid", "\"namespace\""])
VALUES = st.one_of(NAMES, st.integers(-5, 2**40), st.none(), st.text(max_size=20),
                   st.just({"b64": "AAAAAA=="}), st.just("[\"S1:1\"]"))


def _routes(ns: str, oid: str, body: dict) -> list[tuple[str, str, dict]]:
    q = {"namespace": ns}
    return [("POST", "/v1/search", {"json": {"namespace": ns, "query": "vault code"}}),
            ("POST", "/v1/ask", {"json": {"namespace": ns, "question": "What is the vault code?"}}),
            ("GET", "/v1/memories", {"params": q}), ("GET", f"/v1/memories/{oid}", {"params": q}),
            ("GET", f"/v1/memories/{oid}/history", {"params": q}), ("GET", "/v1/stats", {"params": q}),
            ("GET", "/v1/graph", {"params": {**q, "question": "vault?"}}), ("GET", "/v1/export", {"params": q}),
            ("PUT", f"/v1/observations/{oid}", {"json": {"namespace": ns, "text": "pwned"}}),
            ("POST", "/v1/observations/delete", {"json": {"namespace": ns, "observation_ids": [oid]}}),
            ("POST", "/v1/memories", {"json": {"namespace": ns, "messages": ["B was here."], **body}}),
            ("DELETE", "/v1/namespaces", {"params": q}), ("GET", "/v1/namespaces", {})]


@pytest.fixture(scope="module")
def victim(server):
    """A's export of its namespace 'vault', and B's export of a namespace of its own (then forgotten),
    which B tampers with."""
    with client(server, "acme") as a, client(server, "globex") as b:
        if "vault" not in a.get("/v1/namespaces").json():
            assert a.post("/v1/memories", json={"namespace": "vault", "messages": [SECRET + "."]}).status_code == 200
        assert b.post("/v1/memories", json={"namespace": "mine", "messages": ["B's own text."]}).status_code == 200
        own = b.get("/v1/export", params={"namespace": "mine"}).content
        b.delete("/v1/namespaces", params={"namespace": "mine"})
        return a.get("/v1/export", params={"namespace": "vault"}).content, own


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ns=NAMES, oid=st.sampled_from(["S1:1", "e1.0", "e1.0/../x", "%2e%2e"]), route=st.integers(0, 12),
       key=KEYS, value=VALUES, header_ns=NAMES)
def test_tenant_b_never_reaches_tenant_a(server, victim, ns, oid, route, key, value, header_ns):
    with client(server, "globex") as b, client(server, "acme") as a:
        method, path, kwargs = _routes(ns, oid, {})[route]
        r = b.request(method, path, **kwargs)
        assert r.status_code < 500, r.text
        assert "7781-KILO" not in r.text
        before, own = victim
        lines = [json.loads(x) for x in own.decode().splitlines()]
        lines[0]["namespaces"] = [header_ns]
        for item in lines[1:]:
            item["row"]["name" if item["table"] == "namespaces" else "namespace"] = header_ns
        row = next(x["row"] for x in lines if x.get("table") == "observations")
        row[key] = value
        imported = b.post("/v1/import", content="\n".join(json.dumps(x) for x in lines).encode())
        assert imported.status_code in (200, 400), imported.text
        assert "7781-KILO" not in imported.text
        if imported.status_code == 200:
            for name in imported.json()["imported"]:
                assert "7781-KILO" not in b.get("/v1/export", params={"namespace": name}).text
                b.delete("/v1/namespaces", params={"namespace": name})
        assert a.get("/v1/export", params={"namespace": "vault"}).content == before
