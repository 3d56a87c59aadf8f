"""The probes of issue "Reliability II" item 6: each input that raised a raw exception or was silently
accepted is now refused at the boundary with one line that names what is wrong."""

from __future__ import annotations

import json

import pytest

from compassmem import Memory, Observation
from compassmem.errors import CompassMemError, InputError
from compassmem.ingest import load


@pytest.fixture
def mem(tmp_path):
    m = Memory(tmp_path / "m.db", embedder="hash")
    m.add(["Ana adopted a puppy named Luna."], namespace="ns")
    yield m
    m.close()


LIBRARY = {  # name: (call, expected message)
    "a surrogate in a date filter": (lambda m, p: m.search("x", namespace="ns", filters={"since": "\ud800"}),
                                     "not valid Unicode"),
    "a surrogate in a speaker filter": (lambda m, p: m.search("x", namespace="ns", filters={"speaker": "\udfff"}),
                                        "not valid Unicode"),
    "an offset past any integer column": (lambda m, p: m.list("ns", 10**30, 10), "offset must be an integer"),
    "a limit of 10**30": (lambda m, p: m.list("ns", 0, 10**30), "limit must be an integer"),
    "export to a missing folder": (lambda m, p: m.export("ns", p / "no" / "x.jsonl"), "does not exist"),
    "export to a folder": (lambda m, p: m.export("ns", p), "is a folder"),
    "export to ''": (lambda m, p: m.export("ns", ""), "must be a path"),
    "llm=5": (lambda m, p: Memory(p / "other.db", llm=5), "llm must be a spec string"),
    "an Observation with NUL in its text": (
        lambda m, p: m.add([Observation(id="a", namespace="ns", step=9, text="a\x00b")], namespace="ns", step=9),
        "NUL"),
    "an Observation built without validation, empty text": (
        lambda m, p: m.add([Observation.model_construct(id="b", namespace="ns", step=9, text="", meta={},
                                                        speaker=None, time=None)], namespace="ns", step=9),
        "text is empty"),
    "an Observation of another step": (
        lambda m, p: m.add([Observation(id="c", namespace="ns", step=3, text="hi")], namespace="ns", step=9),
        "not ns/step 9"),
}


@pytest.mark.parametrize("case", sorted(LIBRARY))
def test_library_inputs_are_refused_in_one_line(mem, tmp_path, case):
    call, message = LIBRARY[case]
    with pytest.raises(CompassMemError, match=message) as info:
        call(mem, tmp_path)
    assert "\n" not in str(info.value)
    assert mem.store.steps.count("ns") == 1  # nothing was written


def _locomo(tmp_path, conversation: dict, qa=()) -> object:
    path = tmp_path / "conv.json"
    path.write_text(json.dumps([{"sample_id": "c", "conversation": {"speaker_a": "A", "speaker_b": "B",
                                                                      **conversation}, "qa": qa}]))
    return path


TURN = [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]
READERS = {
    "a session number past the step range": ({"session_99999999999999999999": TURN}, [], "session numbers are steps"),
    "a dia_id that is null": ({"session_1": [{"speaker": "A", "dia_id": None, "text": "hi"}]}, [], "dia_id"),
    "qa that is not a list": ({"session_1": TURN}, "nope", "'qa' must be a list"),
    "a qa item without a question": ({"session_1": TURN}, [{"answer": "x"}], "'qa' must be a list"),
}


@pytest.mark.parametrize("case", sorted(READERS))
def test_locomo_files_that_would_be_stored_wrongly_are_refused(tmp_path, case):
    conversation, qa, message = READERS[case]
    with pytest.raises(InputError, match=message):
        load(_locomo(tmp_path, conversation, qa), "locomo")


def test_files_with_a_byte_order_mark_are_read(tmp_path):
    bom = "\ufeff".encode()
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(bom + json.dumps({"namespace": "x", "step": 1, "id": "a", "text": "hi"}).encode() + b"\n")
    assert [o.id for o in load(jsonl, "jsonl").steps[0].observations] == ["a"]
    locomo = _locomo(tmp_path, {"session_1": TURN, "session_1_date_time": "1 May 2023"})
    locomo.write_bytes(bom + locomo.read_bytes())
    assert load(locomo, "locomo").steps[0].observations[0].id == "D1:1"

