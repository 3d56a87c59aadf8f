"""bench haystack: a conversation buried in other real text, and the embedding cache it relies on."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compassmem.bench.haystack import build, conversation_pool, summary, write_haystack
from compassmem.embed.disk import DiskEmbeddings
from compassmem.embed.hashing import HashEmbedder
from compassmem.errors import InputError


def _conv(sample, a, b, dates, turns_per=3):
    conv = {"speaker_a": a, "speaker_b": b}
    for n, d in enumerate(dates, 1):
        conv[f"session_{n}_date_time"] = d
        conv[f"session_{n}"] = [{"speaker": a if i % 2 == 0 else b, "dia_id": f"D{n}:{i + 1}",
                                 "text": f"{b if i % 2 == 0 else a}, session {n} line {i} of {sample}"}
                                for i in range(turns_per)]
    return {"sample_id": sample, "conversation": conv, "qa": [{"question": "q?", "answer": "a", "evidence": ["D1:1"],
                                                                "category": 1}]}


@pytest.fixture
def files(tmp_path):
    target = _conv("t", "Ana", "Bo", ["1:56 pm on 8 May, 2023", "10:00 am on 20 June, 2023"])
    other = _conv("o", "Carl Smith", "Dee", [f"9:00 am on {d} January, 2024" for d in range(1, 11)])
    path = tmp_path / "data.json"
    path.write_text(json.dumps([target, other]))
    return path, target


def test_distractors_are_said_by_the_buried_pair_on_their_dates_and_named_as_them(files):
    path, target = files
    pool = conversation_pool(path, {"t"})
    assert len(pool) == 10 and all(s.source.endswith(":o") for s in pool)
    new, facts = build(target, pool, 7)
    conv = new["conversation"]
    sessions = [conv[k] for k in sorted((k for k in conv if k.startswith("session_") and k[8:].isdigit()),
                                        key=lambda k: int(k[8:]))]
    hay = [t for s in sessions for t in s if t["dia_id"].startswith("H")]
    assert facts["distractor_turns"] == len(hay) >= 7 and facts["own_turns"] == 6
    assert {t["speaker"] for t in hay} <= {"Ana", "Bo"}
    assert not any(n in t["text"] for t in hay for n in ("Carl", "Smith", "Dee"))  # names said in the text follow
    assert any("Ana" in t["text"] or "Bo" in t["text"] for t in hay)
    own = [t["dia_id"] for s in sessions for t in s if t["dia_id"].startswith("D")]
    assert own == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]  # the buried conversation keeps its ids and order
    dates = [conv[k] for k in conv if k.endswith("_date_time")]
    assert all("2023" in d for d in dates)  # distractors dated inside the conversation's span
    assert new["qa"] == target["qa"]
    with pytest.raises(InputError, match="fewer than"):
        build(target, pool, 1000)


def test_a_haystack_file_is_kept_for_a_rerun_and_the_summary_reads_each_size(files, tmp_path):
    path, _ = files
    pool = conversation_pool(path, {"t"})
    file, facts = write_haystack(path, {"t"}, pool, 5, tmp_path / "out" / "n5")
    again, facts_again = write_haystack(path, {"t"}, pool[::-1], 5, tmp_path / "out" / "n5")
    assert again == file and facts_again == facts
    rows = [{"method": "m", "recall@500": 1.0, "recall@1000": 1.0, "recall@2000": 1.0, "latency_s": 0.01},
            {"method": "m", "recall@500": 0.0, "recall@1000": 1.0, "recall@2000": 1.0, "latency_s": 0.03}]
    (tmp_path / "out" / "n5" / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    [row] = summary(tmp_path / "out")
    assert row["recall@500"] == 50.0 and row["recall@1000"] == 100.0 and row["latency_p50_ms"] == 20.0
    assert row["distractor_turns"] == facts[0]["distractor_turns"]
    with pytest.raises(InputError, match="not in"):
        write_haystack(path, {"nope"}, pool, 5, tmp_path / "other")


class _Counting(HashEmbedder):
    def __init__(self):
        super().__init__(16)
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen += texts
        return super().embed(texts)


def test_the_disk_cache_embeds_each_text_once_across_instances_and_takes_seeded_vectors(tmp_path):
    inner = _Counting()
    first = DiskEmbeddings(inner, tmp_path / "e.db")
    a = first.embed(["x y", "z", "x y"])
    assert inner.seen == ["x y", "z"] and np.allclose(a[0], a[2])
    second = DiskEmbeddings(inner, tmp_path / "e.db")  # another process, in real use
    assert np.allclose(second.embed(["z", "x y"]), a[[1, 0]]) and inner.seen == ["x y", "z"]
    assert second.seed([("w", np.ones(16, np.float32).tobytes()), ("bad size", b"1234")]) == 1
    assert np.allclose(second.embed(["w"])[0], 1.0) and "w" not in inner.seen
    assert len(second) == 3 and second.embed([]).shape == (0, 16)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_haystack_command_builds_answers_and_resumes_on_either_store(files, tmp_path, backend, request):
    from typer.testing import CliRunner

    from compassmem.cli.app import app

    path, _ = files
    out = tmp_path / "out"
    args = ["bench", "haystack", "--data", str(path), "--samples", "t", "--pool", f"locomo:{path}", "--turns", "0,5",
            "--methods", "compassmem,bm25_turns", "--embedder", "hash", "--out", str(out)]
    if backend == "postgres":
        args += ["--pg", request.getfixturevalue("pg_url")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    rows = json.loads((out / "haystack.json").read_text())
    alone, buried = ([r for r in rows if (r["distractor_turns"] > 0) == big] for big in (False, True))
    assert [r["method"] for r in alone] == [r["method"] for r in buried] == ["compassmem", "bm25_turns"]
    assert buried[0]["distractor_turns"] >= 5  # whole sessions of the pool, at least as many turns as asked
    assert {r["backend"] for r in rows} == {backend} and all(r["recall@1000"] is not None for r in rows)
    alone, buried = alone[0]["events"], buried[0]["events"]
    assert 0 < alone < buried  # the distractors' sessions are events of the same memory
    assert (out / "n5" / "memory-events.db").is_file() == (backend == "sqlite")
    again = CliRunner().invoke(app, args)  # a rerun answers nothing again and builds nothing again
    assert again.exit_code == 0, again.output
    assert json.loads((out / "haystack.json").read_text()) == rows  # the build's peak memory too, not the rerun's



@pytest.mark.parametrize("make", ["existing_database", "fresh_database"])
def test_a_postgresql_server_that_cannot_be_reached_is_one_line(tmp_path, make):
    """--pg of bench haystack / scale / load: the CLI prints a CompassMemError as one line (cli/app.py)."""
    from compassmem.bench import pgdb
    from compassmem.errors import StoreError

    pytest.importorskip("psycopg")
    url = f"postgresql://me:secret@/postgres?host={tmp_path}/no-server"
    with pytest.raises(StoreError, match="cannot use the PostgreSQL server: ") as caught:
        getattr(pgdb, make)(url, "haystack_5")
    assert "\n" not in str(caught.value) and "secret" not in str(caught.value)
