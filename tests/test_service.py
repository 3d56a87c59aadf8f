"""The REST service against a real uvicorn server on 127.0.0.1, driven by httpx (issue #12)."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from compassmem.store import open_store  # noqa: E402
from service_helpers import cli, client, free_port, start  # noqa: E402


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
    store = open_store(server["db"])  # the deleted turn is nowhere in the database (files or tables)
    assert store.leak_scan(["4417-BRAVO, do not tell anyone"])[1] == []
    store.close()


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
        hits = a.post("/v1/search", json={"user_id": "ana", "query": "passport"}).json()
        assert hits and hits[0]["observations"][0]["text"].startswith("Ana keeps her passport")


def _rows(body: bytes) -> list[dict]:
    return [json.loads(line) for line in body.decode().splitlines()]


def _body(lines: list[dict]) -> bytes:
    return "\n".join(json.dumps(x) for x in lines).encode() + b"\n"


def test_import_cannot_reach_another_tenant(server):
    """Tenant B, with its own key, tries every trick of the issue's probes against tenant A's data through
    POST /v1/import: A's rows never change and never show up in B's exports."""
    with client(server, "acme") as a, client(server, "globex") as b:
        a.post("/v1/memories", json={"namespace": "vault", "messages": ["The vault code is 7781-KILO."]})
        before = a.get("/v1/export", params={"namespace": "vault"}).content
        b.post("/v1/memories", json={"namespace": "mine", "messages": ["An ordinary day at the office."]})
        own = _rows(b.get("/v1/export", params={"namespace": "mine"}).content)
        b.delete("/v1/namespaces", params={"namespace": "mine"})
        obs = next(i for i, x in enumerate(own) if x.get("table") == "observations")
        steal = ("namespace,id,step,seq,speaker,text,time,date,meta,ingested_at) SELECT 'tenant:globex/mine',"
                 "id||'x',step,seq,speaker,text,time,date,meta,ingested_at FROM observations WHERE "
                 "namespace='tenant:acme/vault' --")
        overwrite = "text) VALUES ('x') ON CONFLICT (namespace, id) DO UPDATE SET text='pwned' --"
        tricks = []
        for key in (steal, overwrite):
            lines = json.loads(json.dumps(own))
            lines[obs]["row"][key] = "x"
            tricks.append(lines)
        for value in ("tenant:acme/vault", "tenant:acme/vault' OR '1'='1"):  # a row or header naming A's namespace
            lines = json.loads(json.dumps(own))
            lines[obs]["row"]["namespace"] = value
            tricks.append(lines)
        lines = json.loads(json.dumps(own))
        lines[0]["namespaces"] = ["tenant:acme/vault"]
        tricks.append(lines)
        for lines in tricks:
            problem(b.post("/v1/import", content=_body(lines)), 400)
        # A's own export, replayed by B, lands in B's space only, under B's prefix
        stolen = b.post("/v1/import", content=before)
        assert stolen.status_code == 200 and stolen.json()["imported"] == ["tenant:acme/vault"]
        assert a.get("/v1/export", params={"namespace": "vault"}).content == before
        assert "pwned" not in a.get("/v1/export", params={"namespace": "vault"}).text
        assert "7781-KILO" not in b.post("/v1/import", content=_body(own)).text
        assert "7781-KILO" not in b.get("/v1/export", params={"namespace": "mine"}).text
    store = open_store(server["db"])
    try:
        assert store.namespaces().count("tenant:acme/vault") == 1
        assert [o.text for o in store.observations("tenant:acme/vault")] == ["The vault code is 7781-KILO."]
        assert not [n for n in store.namespaces() if n.startswith("tenant:acme/") and n != "tenant:acme/vault"
                    and "vault" in n]
    finally:
        store.close()


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
        problem(c.get("/v1/memories/nope", params={"namespace": "misc"}), 404)  # a missing event: not found
        problem(c.post("/v1/observations/delete", json={"namespace": "misc", "observation_ids": ["nope"]}), 404)
        problem(c.get("/v1/memories", params={"namespace": "misc", "user_id": "ana"}), 400)  # both: ambiguous
        problem(c.get("/v1/memories", params={"user_id": "nobody"}), 404)  # user_id is read, not ignored
        problem(c.delete("/v1/namespaces"), 400)  # forget names what it forgets
        problem(c.get("/v1/nowhere"), 404)
        problem(c.post("/v1/search", json={"namespace": "misc", "query": "x", "filters": {"since": "soon"}}), 400)
        # NUL characters: PostgreSQL cannot store them; the fuzz once found a 500 there
        problem(c.get("/v1/memories/a%00b", params={"namespace": "misc"}), 400)
        problem(c.post("/v1/memories", json={"namespace": "misc", "messages": ["nul \u0000 inside"]}), 400)
        problem(c.post("/v1/search", json={"namespace": "misc", "query": "x", "filters": {"speaker": "a\u0000"}}), 400)
        problem(c.post("/v1/observations/delete", json={"namespace": "misc", "observation_ids": ["\u0000"]}), 400)


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
    store = open_store(server["db"])
    stored = store.meta.items("api_key/")
    store.close()
    assert stored and all(key.split("_", 2)[2] not in value for _, value in stored)  # only its hash is stored


def test_openapi_fuzz_of_a_thousand_requests_finds_no_server_error(server, tmp_path):
    """schemathesis generates requests from /openapi.json (coverage, fuzzing and stateful phases) and checks
    that none gets a 5xx."""
    import shutil

    exe = shutil.which("schemathesis") or pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    with client(server, "acme") as c:  # something to find, so reads do not all stop at 404
        c.post("/v1/memories", json={"namespace": "default", "messages": TURNS})
    done = subprocess.run([exe, "run", f"{server['base']}/openapi.json", "-H",
                           f"Authorization: Bearer {server['keys']['acme']}", "-c", "not_a_server_error",
                           "-n", "80", "--no-color"], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    counts = re.search(r"(\d+) generated, (\d+) passed", done.stdout)
    assert done.returncode == 0 and counts, done.stdout[-3000:]
    assert int(counts.group(1)) >= 1000 and counts.group(1) == counts.group(2), counts.group(0)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_load_bench_runs_clients_against_a_real_server(tmp_path, backend, request):
    """`compassmem bench load` end to end, briefly, on each store (docs/benchmarks.md has the 8-client,
    60 s runs)."""
    pg = ["--pg", request.getfixturevalue("pg_server")] if backend == "postgres" else []
    r = cli("bench", "load", "--out", str(tmp_path), "--clients", "2", "--seconds", "3", *pg)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "load.json").read_text())
    assert report["backend"] == ("postgresql" if pg else "sqlite")
    assert all(e["requests"] > 0 and e["errors"] == 0 for e in report["endpoints"].values())


def test_a_slow_model_answer_does_not_block_other_requests(tmp_path):
    """An ask waiting on a slow LLM server holds one worker thread; searches and health checks still answer."""
    import threading

    from compassmem import Memory
    from test_deadlines import _server

    llm, seen = _server(delay_s=4)
    db = str(tmp_path / "slow.db")
    try:
        with Memory(db, embedder="hash") as mem:
            mem.add(["Ana adopted a beagle named Luna.", "Ben fixes bicycles."], namespace="tenant:acme/n")
        key = cli("keys", "create", "--db", db, "--tenant", "acme").stdout.strip().splitlines()[-1]
        port = free_port()
        proc = start(["serve", "--db", db, "--port", str(port), "--llm", "openai:slow", "--base-url",
                      f"http://127.0.0.1:{llm.server_port}/v1", "--api-key", "x"], f"http://127.0.0.1:{port}/v1/health")
        try:
            headers = {"Authorization": f"Bearer {key}"}
            asking = threading.Thread(target=lambda: httpx.post(
                f"http://127.0.0.1:{port}/v1/ask", json={"namespace": "n", "question": "Who has a dog?"},
                headers=headers, timeout=120))
            asking.start()
            for _ in range(100):  # until the model has the ask's first call
                if seen:
                    break
                time.sleep(0.05)
            assert seen, "the ask never reached the model"
            t0 = time.monotonic()
            hits = httpx.post(f"http://127.0.0.1:{port}/v1/search", json={"namespace": "n", "query": "beagle"},
                              headers=headers, timeout=30)
            assert hits.status_code == 200 and hits.json()
            assert httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=30).status_code == 200
            assert time.monotonic() - t0 < 2 and asking.is_alive()  # answered while the ask still waits
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        llm.shutdown()


def test_concurrent_adds_without_a_step_are_all_stored(server):
    """200 POST /v1/memories without a step, 8 in flight (the default use, as mem0's add): 200 steps stored,
    none refused, each client's order kept."""
    from concurrent.futures import ThreadPoolExecutor

    def sender(c: int) -> list[int]:
        with client(server, "acme") as http:
            codes = []
            for i in range(25):
                r = http.post("/v1/memories", json={"namespace": "rush", "messages": [f"client {c} says {i}."]})
                codes.append(r.status_code)
            return codes

    with ThreadPoolExecutor(8) as pool:
        codes = [code for part in pool.map(sender, range(8)) for code in part]
    assert codes.count(200) == 200, sorted(set(codes))
    with client(server, "acme") as http:
        assert http.get("/v1/stats", params={"namespace": "rush"}).json()["steps"] == 200
        exported = [json.loads(line)["row"] for line in http.get("/v1/export", params={"namespace": "rush"}).text.splitlines()[1:]]
    said = [r["text"] for r in sorted((r for r in exported if "text" in r and "seq" in r), key=lambda r: r["step"])]
    for c in range(8):
        assert [int(t.split()[-1].rstrip(".")) for t in said if t.startswith(f"client {c} ")] == list(range(25))
