"""The CLI as a user meets it: one clear error line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compassmem.config import Settings
from compassmem.errors import ConfigError


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "compassmem", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_help_lists_commands():
    out = cli("--help").stdout
    for cmd in ("ingest", "ask", "stats", "demo", "doctor", "models", "bench"):
        assert cmd in out


@pytest.mark.parametrize("args, message", [
    (["ask", "hi?", "--db", "/no/such.db"], "database not found"),
    (["ingest", "/no/file.json", "--db", "x.db", "--format", "locomo"], "input file not found"),
    (["doctor", "--llm", "bogus"], "bad LLM spec"),
    (["bench", "scale", "--out", "o", "--sizes", "ten"], "bad --sizes"),
    (["bench", "scale", "--out", "o", "--sizes", ","], "bad --sizes"),
    (["ask", "hi?", "--db", "/no/such/folder/with/a/name/long/enough/to/wrap/an/eighty/column/line/" + "x" * 60 + ".db"],
     "database not found"),
])
def test_errors_are_one_clear_line(tmp_path, args, message):
    r = cli(*args, cwd=tmp_path)
    assert r.returncode != 0
    text = r.stdout + r.stderr
    assert message in text and "Traceback" not in text
    if r.stderr.startswith("error:"):  # ours: exit 2, one line however long (stderr is a pipe here)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_export_to_a_bad_place_and_a_locomo_file_with_a_huge_session_number(tmp_path):
    db = tmp_path / "m.db"
    (tmp_path / "one.jsonl").write_bytes("\ufeff".encode() + json.dumps(  # a BOM, as some editors save UTF-8
        {"namespace": "ana", "step": 1, "id": "t1", "text": "Ana adopted a puppy."}).encode() + b"\n")
    assert cli("ingest", str(tmp_path / "one.jsonl"), "--db", str(db), "--format", "jsonl",
               "--embedder", "hash").returncode == 0
    for target in ("/no/such/folder/x.jsonl", str(tmp_path)):
        r = cli("export", "--db", str(db), "-o", target)
        assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr, r.stderr
    data = [{"sample_id": "c", "conversation": {"speaker_a": "A", "speaker_b": "B",
                                                "session_99999999999999999999": [{"speaker": "A", "dia_id": "D1:1",
                                                                                  "text": "hi"}]}, "qa": []}]
    (tmp_path / "big.json").write_text(json.dumps(data))
    r = cli("ingest", str(tmp_path / "big.json"), "--db", str(db), "--format", "locomo")
    assert r.returncode == 2 and "session numbers are steps" in r.stderr and "Traceback" not in r.stderr


def test_ingest_ask_stats_roundtrip(tmp_path):
    data = tmp_path / "obs.jsonl"
    rows = [{"namespace": "me", "step": 1, "id": "a1", "speaker": "me", "text": "I planted tomatoes yesterday.",
             "time": "8 May 2023"},
            {"namespace": "me", "step": 2, "id": "b1", "speaker": "me", "text": "The tomatoes died because of frost.",
             "time": "20 May 2023"}]
    data.write_text("\n".join(json.dumps(r) for r in rows))
    db = str(tmp_path / "m.db")
    r = cli("ingest", str(data), "--db", db, "--embedder", "hash")  # the format told by the name (.jsonl)
    assert r.returncode == 0 and "2 steps into me: " in r.stdout
    assert f'ask it: compassmem ask "…" -n me --db {db}\n' in r.stdout  # ask reads 'default' unless told; one line to copy
    r = cli("ask", "When did I plant tomatoes?", "--db", db, "-n", "me", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["answer"] == "7 May 2023" and "a1" in answer["evidence"][0]["observation_ids"]
    assert {"subgoals", "trace", "usage", "refined_query"} <= set(answer)
    stats = json.loads(cli("stats", "--db", db, "-n", "me", "--json").stdout)
    assert stats["observations"] == 2 and stats["events"] >= 2
    r = cli("ask", "x?", "--db", db, "-n", "nobody")
    assert r.returncode == 2 and "unknown namespace" in r.stderr
    r = cli("ask", "x?", "--db", db, "-n", "me", "--llm", "openai:m", "--base-url", "http://127.0.0.1:9")
    assert r.returncode == 2 and "cannot reach" in r.stderr


def test_config_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[search\ntop_k = 3")
    with pytest.raises(ConfigError, match="not valid TOML"):
        Settings.load(bad)
    bad.write_text("[search]\ntop_k = -1")
    with pytest.raises(ConfigError, match="search.top_k"):
        Settings.load(bad)
    bad.write_text("[search]\nbogus = 1")
    with pytest.raises(ConfigError, match="bogus"):
        Settings.load(bad)
    with pytest.raises(ConfigError, match="not found"):
        Settings.load(tmp_path / "missing.toml")
    good = tmp_path / "good.toml"
    good.write_text("[search]\ntop_k = 10\n[construction]\nmerge_threshold = 0.95")
    s = Settings.load(good)
    assert s.search.top_k == 10 and s.construction.merge_threshold == 0.95


def test_demo_runs_offline():
    r = cli("demo")
    assert r.returncode == 0, r.stderr
    assert "the week before 20 May 2024" in r.stdout and "Event Graph" in r.stdout


def test_embedder_mismatch_is_refused(tmp_path):
    from compassmem import Memory

    Memory(tmp_path / "e.db", embedder="hash").close()
    with pytest.raises(ConfigError, match="built with embedder 'hash'"):
        Memory(tmp_path / "e.db", embedder="minilm")


def test_config_page_matches_the_settings():
    from compassmem.config import settings_markdown

    page = (Path(__file__).parent.parent / "docs" / "config.md").read_text()
    assert settings_markdown() in page, "docs/config.md is stale: paste compassmem.config.settings_markdown()"


def test_export_import_forget_commands(tmp_path):
    data = tmp_path / "obs.jsonl"
    data.write_text(json.dumps({"namespace": "me", "step": 1, "id": "a1", "text": "I planted tomatoes."}))
    db, db2, out = str(tmp_path / "a.db"), str(tmp_path / "b.db"), str(tmp_path / "me.jsonl")
    assert cli("ingest", str(data), "--db", db, "--format", "jsonl", "--embedder", "hash").returncode == 0
    assert cli("export", "--db", db, "-n", "me", "-o", out).returncode == 0
    assert cli("import", out, "--db", db2).returncode == 0  # embedder taken from the export's header
    again = cli("import", out, "--db", db2)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert cli("forget", "--db", db2, "-n", "me", "--yes").returncode == 0
    assert cli("import", out, "--db", db2).returncode == 0
    r = cli("search", "tomatoes", "--db", db2, "-n", "me")
    assert r.returncode == 0 and "a1" in r.stdout


def test_a_read_by_user_id_covers_their_agents_as_in_the_library(tmp_path):
    db = str(tmp_path / "s.db")
    assert cli("add", "Ana likes green tea.", "--db", db, "--user-id", "ana", "--embedder", "hash").returncode == 0
    assert cli("add", "The planner booked a flight to Oslo.", "--db", db, "--user-id", "ana", "--agent-id", "planner",
               "--embedder", "hash").returncode == 0
    listed = json.loads(cli("list", "--db", db, "--user-id", "ana", "--json").stdout)
    assert listed["total"] == 2  # user:ana and user:ana/agent:planner
    assert json.loads(cli("list", "--db", db, "-n", "user:ana", "--json").stdout)["total"] == 1  # by name: exact
    hits = json.loads(cli("search", "flight Oslo", "--db", db, "--user-id", "ana", "--json").stdout)
    assert hits[0]["namespace"] == "user:ana/agent:planner"


def test_a_bad_metadata_option_is_one_line_naming_it(tmp_path):
    r = cli("add", "x", "--db", str(tmp_path / "m.db"), "--metadata", "foo", "--embedder", "hash")
    assert r.returncode == 2 and r.stderr.strip() == "error: bad --metadata 'foo'; expected KEY=VALUE"
