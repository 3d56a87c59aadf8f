from __future__ import annotations

import json

import pytest

from compassmem.errors import InputError
from compassmem.ingest import load, split_sentences


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


def test_sentence_split():
    assert split_sentences('He left. "Why?" she asked. Then Dr. Who came.')[:2] == ["He left.", '"Why?" she asked.']


def test_docs_formats_examples_ingest(tmp_path):
    """Every example in docs/formats.md is read by the format it documents (the page cannot rot)."""
    import re
    from pathlib import Path

    from compassmem import Memory
    from compassmem.ingest import load

    page = (Path(__file__).parent.parent / "docs" / "formats.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    mem = Memory(tmp_path / "f.db", embedder="hash")
    for block, fmt in zip(blocks, ("jsonl", "locomo", "narrativeqa")):
        path = tmp_path / f"example.{fmt}"
        path.write_text(block)
        ds = load(path, fmt)
        assert ds.steps
        mem.ingest(ds)
    assert set(mem.namespaces()) >= {"ana", "conv-26"}
