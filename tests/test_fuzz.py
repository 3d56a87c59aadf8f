"""Property-based fuzzing of every input boundary: the Python API (add, ask, forget), the file readers
(JSONL, LoCoMo) and the CLI. Whatever comes in, the outcome is either success or one CompassMemError —
never another exception (a traceback for a user) — the specific nonsense cases are refused rather than
silently stored, and the database passes SQLite's integrity check afterwards.

About 1,750 generated inputs per run (the sum of max_examples below)."""

from __future__ import annotations

import json
import sqlite3
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from compassmem import Memory
from compassmem.errors import CompassMemError, InputError, NamespaceNotFound
from compassmem.ingest import load

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
                derandomize=True, database=None)


def fuzz(n: int) -> settings:
    return settings(FUZZ, max_examples=n)

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=True), st.text(max_size=40),
                    st.text(alphabet=string.printable + "[]/\\\x00\ud800é漢", max_size=30))
nested = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)
turn = st.one_of(
    st.fixed_dictionaries({"text": scalars}, optional={"id": scalars, "speaker": scalars, "time": scalars,
                                                       "meta": nested, "role": scalars}),
    st.fixed_dictionaries({"content": scalars, "role": scalars}),
    scalars, nested)
times = st.one_of(st.none(), st.sampled_from(["8 May 2023", "1 January 0001", "31 December 9999", "5000 years ago",
                                              "yesterday", "not a date", "2023-02-30", ""]), scalars)


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    m = Memory(tmp_path_factory.mktemp("fuzz") / "fuzz.db", embedder="hash")
    m.add(["Ana adopted a puppy named Luna yesterday.", "Ben fixes bicycles."], namespace="base", step=1,
          world_time="8 May 2023")
    yield m
    db = m.store.path
    m.close()
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _only_clean_errors(call):
    try:
        return call()
    except CompassMemError:
        return None


@fuzz(500)
@given(items=st.one_of(st.lists(turn, max_size=4), scalars, nested),
       namespace=st.one_of(st.text(max_size=30), scalars), step=st.one_of(st.integers(-5, 2**40), scalars),
       world_time=times)
def test_add_never_raises_anything_but_a_clean_error(mem, items, namespace, step, world_time):
    record = _only_clean_errors(lambda: mem.add(items, namespace=namespace, step=step, world_time=world_time))
    if record is not None:  # accepted: then it is really stored, as text, never as 'None' or characters
        stored = mem.store.observations("default" if namespace is None else namespace, record.step)
        assert stored and all(isinstance(o.text, str) and o.text.strip() for o in stored)
        assert all(o.text != "None" or (isinstance(items, list) and "None" in json.dumps(items, default=str))
                   for o in stored)


@fuzz(300)
@given(question=st.one_of(st.text(max_size=200), scalars, st.just("[/] [link=http://x]y[/link] [bold]")),
       namespace=st.one_of(st.just("base"), st.text(max_size=20), scalars))
def test_ask_never_raises_anything_but_a_clean_error(mem, question, namespace):
    answer = _only_clean_errors(lambda: mem.ask(question, namespace))
    if answer is not None:
        assert isinstance(answer.answer, str) and answer.answer


@fuzz(250)
@given(lines=st.lists(st.one_of(nested.map(lambda v: json.dumps(v, default=str)),
                                st.fixed_dictionaries({"namespace": scalars, "step": scalars, "id": scalars,
                                                       "text": scalars, "time": scalars}).map(
                                    lambda d: json.dumps(d, default=str)),
                                st.just("[" * 5000), st.text(max_size=30)), min_size=1, max_size=4))
def test_jsonl_reader_refuses_cleanly(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("j") / "in.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    _only_clean_errors(lambda: load(path, "jsonl"))


@fuzz(150)
@given(doc=nested)
def test_locomo_reader_refuses_cleanly(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("l") / "in.json"
    path.write_text(json.dumps({"sample_id": "s", "conversation": doc}, default=str), encoding="utf-8",
                    errors="surrogatepass")
    _only_clean_errors(lambda: load(path, "locomo"))


@fuzz(100)
@given(question=st.text(alphabet=string.printable + "[]/é", min_size=1, max_size=60))
def test_cli_ask_prints_any_question_without_crashing(mem, question):
    from compassmem.cli.app import app

    result = CliRunner().invoke(app, ["ask", question, "--db", mem.store.path, "-n", "base"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert isinstance(result.exception, CompassMemError), repr(result.exception)


@fuzz(100)
@given(flt=st.one_of(nested, st.fixed_dictionaries({}, optional={"since": scalars, "until": scalars,
                                                                  "speaker": st.one_of(scalars, nested),
                                                                  "meta": nested})),
       offset=scalars, limit=scalars)
def test_filters_and_paging_refuse_cleanly(mem, flt, offset, limit):
    _only_clean_errors(lambda: mem.search("puppy", namespace="base", filters=flt))
    _only_clean_errors(lambda: mem.list("base", offset, limit))


@pytest.fixture(scope="module")
def export_lines(mem, tmp_path_factory):
    mem.add([{"speaker": "Ana", "text": "After the vet Luna slept all day because she was tired."},
             {"speaker": "Ben", "text": "Then we went hiking at the lake on Sunday."}], namespace="base", step=2,
            world_time="12 May 2023")
    path = tmp_path_factory.mktemp("export") / "base.jsonl"
    mem.export("base", path)
    return path.read_text().splitlines()


@fuzz(200)
@given(data=st.data(), value=st.one_of(scalars, nested), new_key=st.one_of(st.none(), st.text(max_size=40)))
def test_import_of_a_tampered_export_is_refused_cleanly_or_works(mem, export_lines, tmp_path_factory, data, value,
                                                                 new_key):
    """One value of a real export replaced (or one column added): the import is refused with one clean
    error and writes nothing, or the imported namespace works for every call afterwards."""
    lines = [json.loads(x) for x in export_lines]
    lines[0]["namespaces"] = ["tampered"]
    for item in lines[1:]:
        item["row"]["name" if item["table"] == "namespaces" else "namespace"] = "tampered"
    target = data.draw(st.integers(1, len(lines) - 1))
    row = lines[target]["row"]
    row[new_key if new_key is not None else data.draw(st.sampled_from(sorted(row)))] = value
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    path.write_text("\n".join(json.dumps(x, default=str) for x in lines), encoding="utf-8", errors="surrogatepass")
    before = mem.store.namespaces()
    if _only_clean_errors(lambda: mem.import_file(path)) is None:
        assert mem.store.namespaces() == before
        return
    try:
        mem.stats("tampered")
        mem.search("Luna hiking", namespace="tampered")
        assert mem.ask("Where did they hike?", "tampered").answer
        mem.list("tampered")
        mem.add(["One more turn."], namespace="tampered")
        mem.export("tampered", path)
    finally:
        mem.forget("tampered")


# ------------------------------------------------------------------ the named silent accepts, refused
@pytest.mark.parametrize("items, namespace, message", [
    ([{"text": None}], "n", "text must be a string"),
    ([{"text": 42}], "n", "text must be a string"),
    (["   "], "n", "text is empty"),
    ([{"text": "hi", "time": 20230508}], "n", "time must be a string"),
    (["hi"], "", "namespace is empty"),
    (["hi"], "a\nb", "control characters"),
    ([{"text": "x\ud800"}], "n", "not valid Unicode"),
    ([object()], "n", "observation 0 is a object"),
])
def test_nonsense_is_refused_with_the_field_named(mem, items, namespace, message):
    with pytest.raises(InputError, match=message):
        mem.add(items, namespace=namespace, step=1)


def test_a_string_is_one_observation_not_characters(mem):
    mem.add("I moved to Lisbon last spring.", namespace="one-string", step=1)
    assert [o.text for o in mem.store.observations("one-string")] == ["I moved to Lisbon last spring."]


def test_bad_steps_and_far_dates(mem):
    for step in (-1, 2**40, True, "3"):
        with pytest.raises(InputError, match="step"):
            mem.add(["x y"], namespace="steps", step=step)
    rec = mem.add(["It happened 5000 years ago, yesterday."], namespace="far", step=1, world_time="1 January 0001")
    assert rec.events_new >= 1


def test_invalid_world_time_is_noted_not_ignored(mem):
    rec = mem.add(["We met at the cafe."], namespace="wt", step=1, world_time="not a date")
    assert any("world_time 'not a date' is not a date" in note for note in rec.skipped)


def test_forget_of_an_unknown_namespace_says_so(mem):
    with pytest.raises(NamespaceNotFound, match="nothing to forget"):
        mem.forget("never-existed")
