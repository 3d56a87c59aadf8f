"""The graph viewer opened in headless Chromium: the standalone file and the page the service serves
(issue #12). scripts/test.sh installs Chromium and sets COMPASSMEM_REQUIRE_BROWSER=1, so CI never skips."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from service_helpers import cli, client

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
if BROWSER is None:
    if os.environ.get("COMPASSMEM_REQUIRE_BROWSER") == "1":
        raise RuntimeError("COMPASSMEM_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
    pytest.skip("no headless Chromium here (apt-get install chromium)", allow_module_level=True)


def browse(url: str, *flags: str) -> tuple[str, str]:
    """(the DOM after the page's scripts ran, Chromium's log with the page's console messages)."""
    done = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                           "--virtual-time-budget=15000", *flags, url], capture_output=True, text=True, timeout=120)
    return done.stdout, done.stderr


def events_drawn(dom: str) -> int:
    return len(re.findall(r'<circle[^>]*class="event', dom))


def console_errors(log: str, dom: str) -> list[str]:
    """Uncaught errors from the log, and what the page's own error handler wrote into #errors."""
    errors = [line for line in log.splitlines() if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)]
    box = re.search(r'<div id="errors">(.*?)</div>', dom, re.S)
    return errors + ([box.group(1)] if box and box.group(1).strip() else [])


def test_standalone_file_draws_every_event_without_errors(tmp_path):
    db, page = str(tmp_path / "demo.db"), tmp_path / "graph.html"
    assert cli("demo", "--db", db).returncode == 0
    r = cli("view", "--db", db, "-n", "demo", "-o", str(page), "-q", "Why did Maya move to Porto?")
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert "<script src" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    events = json.loads(cli("stats", "--db", db, "-n", "demo", "--json").stdout)["events"]
    dom, log = browse(page.as_uri(), "--dump-dom")
    assert events_drawn(dom) == events and f'data-events="{events}"' in dom
    assert 'class="trace"' in dom and "evidence" in dom  # the ask's path and its kept evidence
    assert console_errors(log, dom) == []
    shots = Path(os.environ.get("COMPASSMEM_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    browse(page.as_uri(), "--hide-scrollbars", "--window-size=1100,300", f"--screenshot={shots / 'viewer.png'}")
    assert (shots / "viewer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_served_viewer_draws_a_tenants_namespace(server):
    with client(server, "acme") as c:
        turns = [f"Turn {i}: Ana talked about her {w} with Ben." for i, w in
                 enumerate(["garden", "bicycle", "piano", "garden", "marathon", "recipe"])]
        for step in (1, 2):
            assert c.post("/v1/memories", json={"namespace": "view", "messages": turns[3 * (step - 1): 3 * step],
                                                "world_time": f"{step} May 2023"}).status_code == 200
        data = c.get("/v1/graph", params={"namespace": "view"}).json()
        assert data["namespace"] == "view" and data["events"]
        page = c.get("/viewer")
        assert page.status_code == 200 and "<script src" not in page.text
    dom, log = browse(f"{server['base']}/viewer#ns=view&key={server['keys']['acme']}", "--dump-dom")
    assert events_drawn(dom) == len(data["events"])
    assert console_errors(log, dom) == []
    dom, _ = browse(f"{server['base']}/viewer#ns=view&key={server['keys']['globex']}", "--dump-dom")
    assert events_drawn(dom) == 0 and "unknown namespace" in dom  # another tenant's key sees nothing


def _attr(dom: str, name: str) -> str:
    return re.search(rf'<body[^>]*data-{name}="([^"]*)"', dom).group(1)


def test_zoom_filters_and_search_work_in_the_browser(tmp_path):
    """The view's state given in the address is the state the controls set: search dims what does not
    match, a topic or person filter keeps only its events, unticked relation types disappear, zoom scales,
    and only the events the explorers kept are ringed."""
    db, page = str(tmp_path / "demo.db"), tmp_path / "graph.html"
    assert cli("demo", "--db", db).returncode == 0
    assert cli("view", "--db", db, "-n", "demo", "-o", str(page), "-q", "Why did Maya move to Porto?").returncode == 0
    data = json.loads(re.search(r"const EMBEDDED = (.*?);</script>", page.read_text(), re.S).group(1))
    n = len(data["events"])

    dom, log = browse(page.as_uri(), "--dump-dom")
    assert _attr(dom, "visible") == str(n) and console_errors(log, dom) == []
    base_zoom = float(_attr(dom, "zoom"))
    ringed = len(re.findall(r'class="event evidence', dom))
    assert 0 < ringed < n  # the kept evidence, not every event of a small graph

    word = "porto"
    matching = [e for e in data["events"] if word in (e["summary"] + " ".join(o["text"] for o in e["observations"])).lower()]
    dom, _ = browse(page.as_uri() + f"#search={word}", "--dump-dom")
    assert 0 < len(matching) < n and _attr(dom, "visible") == str(len(matching))
    assert len(re.findall(r'<circle[^>]*class="event[^"]*\bmatch\b', dom)) == len(matching)
    assert len(re.findall(r'<circle[^>]*class="event[^"]*\bdim\b', dom)) == n - len(matching)

    topic = data["events"][0]["topic"]
    dom, _ = browse(page.as_uri() + f"#topic={topic}", "--dump-dom")
    assert _attr(dom, "visible") == str(sum(e["topic"] == topic for e in data["events"]))
    person = "Maya"
    dom, _ = browse(page.as_uri() + f"#person={person}", "--dump-dom")
    assert _attr(dom, "visible") == str(sum(person in e["participants"] for e in data["events"]))

    hidden = sorted({r["type"] for r in data["relations"]})[0]
    dom, _ = browse(page.as_uri() + f"#hide={hidden}", "--dump-dom")
    assert len(re.findall(rf'<path[^>]*data-type="{hidden}"[^>]*class="rel[^"]*hidden', dom)) == \
        sum(r["type"] == hidden for r in data["relations"])

    dom, _ = browse(page.as_uri() + "#zoom=2", "--dump-dom")
    assert abs(float(_attr(dom, "zoom")) - 2 * base_zoom) < 0.02

    shots = Path(os.environ.get("COMPASSMEM_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    browse(page.as_uri() + f"#search={word}", "--hide-scrollbars", "--window-size=1400,700",
           f"--screenshot={shots / 'viewer-search.png'}")
    assert (shots / "viewer-search.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
