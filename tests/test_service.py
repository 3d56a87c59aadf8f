"""The REST service against a real uvicorn server on 127.0.0.1, driven by httpx (issue #12)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compassmem", *args], capture_output=True, text=True, timeout=300)


def start(args: list[str], url: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "compassmem", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read()}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("svc") / "svc.db")
    keys = {}
    for tenant in ("acme", "globex"):
        r = cli("keys", "create", "--db", db, "--tenant", tenant, "--name", f"{tenant} test")
        assert r.returncode == 0, r.stderr
        keys[tenant] = r.stdout.strip().splitlines()[-1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(["serve", "--db", db, "--port", str(port), "--embedder", "hash", "--max-body", "200000"],
                 base + "/v1/health")
    yield {"base": base, "db": db, "keys": keys}
    proc.terminate()
    proc.wait(timeout=30)


def client(server, tenant: str | None) -> "httpx.Client":
    headers = {"Authorization": f"Bearer {server['keys'][tenant]}"} if tenant else {}
    return httpx.Client(base_url=server["base"], headers=headers, timeout=120)


TURNS = [{"id": "t1", "speaker": "Ana", "text": "I adopted a beagle puppy named Luna yesterday."},
         {"id": "t2", "speaker": "Ben", "text": "Congratulations! I ran the Oslo marathon last weekend."},
         {"id": "t3", "speaker": "Ana", "text": "My locker code at the gym is 4417-BRAVO, do not tell anyone."}]


def problem(r: "httpx.Response", status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["detail"]
    return body


def test_health_needs_no_key_and_everything_else_does(server):
    with client(server, None) as c:
        assert c.get("/v1/health").json()["status"] == "ok"
        problem(c.get("/v1/namespaces"), 401)
        problem(c.post("/v1/search", json={"query": "x"}), 401)
        problem(c.get("/v1/namespaces", headers={"Authorization": "Bearer cm_000000000000_" + "x" * 40}), 401)
        assert c.get("/openapi.json").json()["info"]["title"] == "CompassMem"


def test_the_whole_api_round_trip(server):
    with client(server, "acme") as c:
        step = c.post("/v1/memories", json={"namespace": "pets", "messages": TURNS, "world_time": "8 May 2023"})
        assert step.status_code == 200, step.text
        assert step.json()["namespace"] == "pets" and step.json()["observations"] == 3
        assert c.get("/v1/namespaces").json() == ["pets"]
        hits = c.post("/v1/search", json={"namespace": "pets", "query": "beagle puppy", "limit": 3}).json()
        assert hits and any(o["id"] == "t1" for h in hits for o in h["observations"])
        by_ben = c.post("/v1/search", json={"namespace": "pets", "query": "puppy", "filters": {"speaker": "Ben"}}).json()
        assert {o["id"] for h in by_ben for o in h["observations"]} == {"t2"}
        answer = c.post("/v1/ask", json={"namespace": "pets", "question": "What is the puppy's name?"}).json()
        assert answer["answer"] and answer["namespace"] == "pets"
        page = c.get("/v1/memories", params={"namespace": "pets"}).json()
        assert page["total"] >= 1 and page["namespace"] == "pets"
        event_id = next(e["id"] for e in page["items"] if "t3" in e["observation_ids"])
        detail = c.get(f"/v1/memories/{event_id}", params={"namespace": "pets"}).json()
        assert "t3" in [o["id"] for o in detail["observations"]]
        upd = c.put("/v1/observations/t2", json={"namespace": "pets", "text": "I swam across Lake Bled."}).json()
        assert upd["action"] == "update" and upd["scanned_files"] and not upd["found"]
        rec = c.post("/v1/observations/delete", json={"namespace": "pets", "observation_ids": ["t3"]}).json()
        assert rec["observation_ids"] == ["t3"] and not rec["found"] and rec["scanned_texts"] == 1
        assert all("/" not in f for f in rec["scanned_files"])  # no server paths in a receipt
        actions = [h["action"] for h in c.get(f"/v1/memories/{event_id}/history", params={"namespace": "pets"}).json()]
        assert actions[-1] in ("observations_deleted", "deleted")
        assert c.get("/v1/stats", params={"namespace": "pets"}).json()["observations"] == 2
        exported = c.get("/v1/export", params={"namespace": "pets"})
        assert exported.status_code == 200 and b"4417-BRAVO" not in exported.content
        forgot = c.delete("/v1/namespaces", params={"namespace": "pets"}).json()
        assert forgot["namespace"] == "pets" and not forgot["found"]
        problem(c.post("/v1/search", json={"namespace": "pets", "query": "x"}), 404)
        assert c.post("/v1/import", content=exported.content).json() == {"imported": ["pets"]}
        assert c.get("/v1/stats", params={"namespace": "pets"}).json()["observations"] == 2
    with open(server["db"], "rb") as fh:
        assert b"4417-BRAVO" not in fh.read()


def test_tenants_never_see_each_other(server):
    with client(server, "acme") as a, client(server, "globex") as b:
        a.post("/v1/memories", json={"user_id": "ana", "messages": ["Ana keeps her passport in the blue drawer."]})
        assert a.get("/v1/namespaces").json().count("user:ana") == 1
        assert "user:ana" not in b.get("/v1/namespaces").json()
        body = problem(b.post("/v1/search", json={"user_id": "ana", "query": "passport"}), 404)
        assert "acme" not in body["detail"] and "tenant" not in body["detail"]
        problem(b.post("/v1/ask", json={"user_id": "ana", "question": "Where is the passport?"}), 404)
        problem(b.get("/v1/memories", params={"namespace": "user:ana"}), 404)
        problem(b.post("/v1/observations/delete", json={"user_id": "ana", "observation_ids": ["S1:1"]}), 404)
        problem(b.delete("/v1/namespaces", params={"namespace": "user:ana"}), 404)
        problem(b.post("/v1/import", content=a.get("/v1/export", params={"namespace": "user:ana"}).content), 400)
        hits = a.post("/v1/search", json={"user_id": "ana", "query": "passport"}).json()
        assert hits and hits[0]["observations"][0]["text"].startswith("Ana keeps her passport")


def test_bad_requests_are_problems_never_server_errors(server):
    with client(server, "acme") as c:
        assert c.post("/v1/memories", json={"namespace": "misc", "messages": ["hello there"]}).status_code == 200
        problem(c.post("/v1/search", content=b"{not json", headers={"content-type": "application/json"}), 422)
        problem(c.post("/v1/search", json={"query": "x", "colour": "red"}), 422)
        problem(c.post("/v1/memories", json={"messages": []}), 422)
        problem(c.post("/v1/memories", json={"messages": [{"nothing": 1}]}), 400)
        problem(c.post("/v1/memories", json={"namespace": "x", "user_id": "y", "messages": ["hi"]}), 400)
        problem(c.post("/v1/memories", json={"messages": ["x" * 300_000]}), 413)
        problem(c.post("/v1/ask", json={"namespace": "misc", "question": "why " * 2000}), 400)
        problem(c.get("/v1/memories/nope", params={"namespace": "misc"}), 400)
        problem(c.get("/v1/nowhere"), 404)
        problem(c.post("/v1/search", json={"namespace": "misc", "query": "x", "filters": {"since": "soon"}}), 400)


def test_a_revoked_key_is_refused_at_once(server):
    r = cli("keys", "create", "--db", server["db"], "--tenant", "initech")
    key = r.stdout.strip().splitlines()[-1]
    key_id = key.split("_")[1]
    with httpx.Client(base_url=server["base"], headers={"Authorization": f"Bearer {key}"}) as c:
        assert c.get("/v1/namespaces").status_code == 200
        listed = cli("keys", "list", "--db", server["db"])
        assert key_id in listed.stdout and key.split("_", 2)[2] not in listed.stdout  # the secret is never shown
        assert cli("keys", "revoke", key_id, "--db", server["db"]).returncode == 0
        problem(c.get("/v1/namespaces"), 401)
    raw = open(server["db"], "rb").read()
    assert key.split("_", 2)[2].encode() not in raw  # stored hashed
