from __future__ import annotations

import json

import pytest

from compassmem.errors import InputError
from compassmem.ingest import guess_format, load
from compassmem.text import sentences


def test_locomo_steps_ids_and_times(locomo_path):
    ds = load(locomo_path, "locomo", samples=["conv-26"], sessions=(1, 2))
    assert [s.step for s in ds.steps] == [1, 2]
    first = ds.steps[0]
    assert first.observations[0].id == "D1:1" and first.world_time == "1:56 pm on 8 May, 2023"
    assert first.observations[0].date == "2023-05-08"
    assert any(o.meta.get("image") for s in ds.steps for o in s.observations)
    assert ds.questions and all(q.category in (1, 2, 3, 4) for q in ds.questions)


def test_narrativeqa_documents_become_namespaces(nqa_path):
    ds = load(nqa_path, "narrativeqa")
    assert ds.namespaces() and all(ns.startswith("nqa-") for ns in ds.namespaces())
    assert all(len(s.observations) <= 8 for s in ds.steps)
    assert all(q.answers for q in ds.questions)


def test_jsonl_generic(tmp_path):
    p = tmp_path / "x.jsonl"
    rows = [{"namespace": "a", "step": 1, "id": "o1", "speaker": "me", "text": "hi", "time": "8 May 2023"},
            {"namespace": "a", "step": 2, "id": "o2", "text": "later"}]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    ds = load(p, "jsonl")
    assert [(s.namespace, s.step, len(s.observations)) for s in ds.steps] == [("a", 1, 1), ("a", 2, 1)]


@pytest.mark.parametrize("content, fmt, message", [
    (b"", "jsonl", "empty"),
    (b"\xff\xfe\x00bad", "jsonl", "not UTF-8"),
    (b'{"not": "locomo"}', "locomo", "not in LoCoMo format"),
    (b"[1, 2", "locomo", "not valid JSON"),
    (b'{"namespace": "a"}', "jsonl", "expected JSON with"),
    (b'{"passage": "x"}', "narrativeqa", "not a NarrativeQA row"),
])
def test_bad_files(tmp_path, content, fmt, message):
    p = tmp_path / "bad"
    p.write_bytes(content)
    with pytest.raises(InputError, match=message):
        load(p, fmt)


def test_duplicate_ids_in_jsonl(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"namespace":"a","step":1,"id":"x","text":"1"}\n{"namespace":"a","step":1,"id":"x","text":"2"}')
    with pytest.raises(InputError, match="duplicate id"):
        load(p, "jsonl")


def test_unknown_sample_and_format(locomo_path, tmp_path):
    with pytest.raises(InputError, match="not in"):
        load(locomo_path, "locomo", samples=["conv-999"])
    with pytest.raises(InputError, match="unknown format"):
        load(locomo_path, "csv")
    with pytest.raises(InputError, match="not found"):
        load(tmp_path / "missing.json", "locomo")


@pytest.mark.parametrize("name, content, expected", [
    ("book.txt", "CHAPTER I\n\nAnna lived by the river.", "text"),
    ("Notes.MD", "# Notes\n\nThe meeting moved to Friday.", "text"),
    ("conv.json", '[{"sample_id": "c", "conversation": {}}]', "locomo"),
    ("chat.json", "[]", "beam"),  # a BEAM chat's own file
    ("obs.jsonl", '{"namespace": "a", "step": 1, "id": "o1", "text": "hi"}', "jsonl"),
    ("rows.jsonl", '\n{"passage": "P", "question": "Q?", "answer": ["A"]}', "narrativeqa"),
    ("documents.jsonl", '{"document_id": "d1", "title": "T", "text": "Once."}', "narrativeqa-full"),
])
def test_the_format_is_told_by_the_name_and_first_line(tmp_path, name, content, expected):
    p = tmp_path / name
    p.write_text(content)
    assert guess_format(p) == expected


def test_folders_and_names_that_say_no_format(tmp_path):
    (tmp_path / "nqa").mkdir()
    (tmp_path / "nqa" / "documents.jsonl").write_text('{"document_id": "d1", "text": "Once."}')
    (tmp_path / "beam" / "1").mkdir(parents=True)
    (tmp_path / "beam" / "1" / "chat.json").write_text("[]")
    assert guess_format(tmp_path / "nqa") == "narrativeqa-full" and guess_format(tmp_path / "beam") == "beam"
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "b.txt").write_text("Bea sailed at dawn.")
    (tmp_path / "books" / "a.md").write_text("Al stayed home.")
    (tmp_path / "books" / "notes.csv").write_text("x")
    ds = load(tmp_path / "books")  # a folder of texts: one namespace each, in name order
    assert [(s.namespace, s.observations[0].text) for s in ds.steps] == [("a", "Al stayed home."), ("b", "Bea sailed at dawn.")]
    with pytest.raises(InputError, match="holds no text file"):
        load(tmp_path / "nqa", "text")
    (tmp_path / "data.csv").write_text("a,b")
    for path, message in ((tmp_path / "data.csv", "cannot tell the format of data.csv"),
                          (tmp_path / "beam" / "1" / "none.txt", "not found"), (tmp_path, "neither")):
        with pytest.raises(InputError, match=message):
            load(path)


def test_sentence_split():
    assert sentences('He left. "Why?" she asked. Then Dr. Who came.')[:2] == ["He left.", '"Why?" she asked.']


def test_docs_formats_examples_ingest(tmp_path):
    """Every example in docs/formats.md is read by the format it documents (the page cannot rot)."""
    import re
    from pathlib import Path

    from compassmem import Memory
    from compassmem.ingest import load

    page = (Path(__file__).parent.parent / "docs" / "formats.md").read_text()
    blocks = re.findall(r"```jsonl?\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    mem = Memory(tmp_path / "f.db", embedder="hash")
    for block, fmt in zip(blocks, ("jsonl", "locomo", "narrativeqa")):
        path = tmp_path / f"example.{fmt}"
        path.write_text(block)
        ds = load(path, fmt)
        assert ds.steps
        mem.ingest(ds)
    assert set(mem.namespaces()) >= {"ana", "conv-26"}


def test_export_import_round_trip_of_a_full_conversation(built, tmp_path):
    """import(export(x)) reproduces x exactly: the re-export is byte-identical and asks agree."""
    from compassmem import Memory

    mem, _, _ = built
    first = tmp_path / "conv-26.jsonl"
    rows = mem.export("conv-26", first)
    assert rows > 600  # every turn, event, relation, topic and step of the conversation
    copy = Memory(tmp_path / "copy.db")
    assert copy.import_file(first) == ["conv-26"]
    second = tmp_path / "again.jsonl"
    copy.export("conv-26", second)
    assert first.read_bytes() == second.read_bytes()
    q = "When did Caroline go to the LGBTQ support group?"
    a, b = mem.ask(q, "conv-26"), copy.ask(q, "conv-26")
    assert (a.answer, a.ranking) == (b.answer, b.ranking)


def test_import_refusals(tmp_path):
    import pytest

    from compassmem import Memory
    from compassmem.errors import ConfigError, InputError

    src = Memory(tmp_path / "src.db", embedder="hash")
    src.add(["Ana adopted a puppy."], namespace="n", step=1)
    f = tmp_path / "n.jsonl"
    src.export("n", f)
    with pytest.raises(InputError, match="already exists"):
        src.import_file(f)
    with pytest.raises(ConfigError, match="built with embedder 'hash'"):
        Memory(tmp_path / "other.db", embedder="minilm").import_file(f)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not": "an export"}\n')
    with pytest.raises(InputError, match="not a CompassMem export"):
        src.import_file(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(f.read_text().splitlines()[0] + "\n{oops\n")
    fresh = Memory(tmp_path / "fresh.db", embedder="hash")
    with pytest.raises(InputError, match="not an export row"):
        fresh.import_file(broken)
    assert fresh.namespaces() == []  # all or nothing
