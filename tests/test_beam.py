"""BEAM user↔assistant chats read directly (`--format beam`, `bench beam`), and the question groups of the
data sets beside LoCoMo (issue "Search quality III")."""

from __future__ import annotations

import json

import pytest

from conftest import DATA
from compassmem.errors import InputError
from compassmem.ingest import load


def _chat(folder, probes: dict) -> None:
    folder.mkdir(parents=True)
    batches = [{"batch_number": 1, "time_anchor": None, "turns": [
        [{"role": "user", "id": 0, "time_anchor": "March-15-2024", "content": "I use Flask for my app ->-> 1,1"},
         {"role": "assistant", "id": 1, "content": "Great, Flask is a fine choice.  "}]]},
        {"batch_number": 2, "time_anchor": None, "turns": [
            [{"role": "user", "id": 2, "time_anchor": "April-5-2024", "content": "I moved to FastAPI ->-> 2,1"},
             {"role": "assistant", "id": 3, "content": "Noted."}]]}]
    (folder / "chat.json").write_text(json.dumps(batches))
    (folder / "probing_questions").mkdir()
    (folder / "probing_questions" / "probing_questions.json").write_text(json.dumps(probes))


def test_a_beam_chat_is_read_as_sessions_with_its_questions_grouped_by_ability(tmp_path):
    _chat(tmp_path / "chats" / "7", {
        "knowledge_update": [{"question": "Which framework do I use?", "answer": "FastAPI",
                              "source_chat_ids": {"original_info": [0], "updated_info": [2]}}],
        "event_ordering": [{"question": "In what order?", "answer": "x", "source_chat_ids": [0, [2, 2]]}],
        "abstention": [{"question": "What is my cat's name?", "ideal_response": "Not said."}]})
    ds = load(tmp_path / "chats", "beam")
    assert [(s.namespace, s.step, s.world_time) for s in ds.steps] == [
        ("beam-7", 1, "12:00 am on 15 March, 2024"), ("beam-7", 2, "12:00 am on 5 April, 2024")]
    assert [(o.id, o.speaker, o.text) for o in ds.steps[0].observations] == [
        ("D1:0", "User", "I use Flask for my app"), ("D1:1", "Assistant", "Great, Flask is a fine choice.")]
    assert [(q.question, q.evidence, q.group) for q in ds.questions] == [
        ("Which framework do I use?", ["D1:0", "D2:2"], "knowledge_update"),
        ("In what order?", ["D1:0", "D2:2"], "event_ordering")]  # no source ids: abstention is left out
    assert [q.superseded for q in ds.questions] == [["D1:0"], []]  # the statement the update revises
    one = load(tmp_path / "chats" / "7" / "chat.json")  # the chat's own file, no --format: its folder
    assert [(s.namespace, s.step) for s in one.steps] == [("beam-7", 1), ("beam-7", 2)]


def test_a_folder_that_is_not_beam_is_one_clear_error(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(InputError, match="no BEAM chat folder"):
        load(tmp_path / "x", "beam")
    _chat(tmp_path / "bad", {"knowledge_update": "nope"})
    with pytest.raises(InputError, match="not a BEAM chat folder"):
        load(tmp_path / "bad", "beam")


def test_the_loader_reads_beam_exactly_as_the_converted_dev_file():
    chats, converted = DATA / "beam" / "100K", DATA / "beam" / "beam_dev_locomo.json"
    if not converted.is_file():
        pytest.skip("BEAM dev data not available")
    a, b = load(chats, "beam"), load(converted, "locomo")

    def key(ds):
        return ([(s.namespace, s.step, s.world_time, [(o.id, o.speaker, o.text) for o in s.observations])
                 for s in ds.steps], [(q.namespace, q.question, q.evidence, q.group) for q in ds.questions])
    assert key(a) == key(b)


def test_locomo_plus_questions_are_grouped_by_relation_type(tmp_path):
    path = tmp_path / "plus.json"
    path.write_text(json.dumps([{"sample_id": "c", "conversation": {
        "speaker_a": "A", "speaker_b": "B", "session_1": [{"speaker": "A", "dia_id": "P0x0:1", "text": "hi"}]},
        "qa": [{"question": f"A: trigger {c}", "answer": "", "category": c, "evidence": ["P0x0:1"],
                "time_gap": "two weeks later"} for c in (1, 2, 3, 4)]}]))
    assert [q.group for q in load(path, "locomo").questions] == ["causal", "state", "goal", "value"]
