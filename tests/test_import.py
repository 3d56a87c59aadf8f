"""Import reads an export as data, never as SQL (issue "Reliability II", item 1): fixed columns, typed values,
references checked, namespaces mapped, all or nothing — on both stores."""

from __future__ import annotations

import json

import pytest

from compassmem import Memory
from compassmem.errors import InputError

TURNS = [{"id": "t1", "speaker": "Ana", "text": "I adopted a beagle puppy named Luna yesterday."},
         {"id": "t2", "speaker": "Ben", "text": "Luna chewed my shoes because she was bored, so I bought toys."}]


def exported(mem: Memory, tmp_path, namespace: str = "ana") -> list[dict]:
    path = tmp_path / "export.jsonl"
    mem.export(namespace, path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(tmp_path, lines: list[dict], name: str = "edited.jsonl", prefix: bytes = b""):
    path = tmp_path / name
    path.write_bytes(prefix + "\n".join(json.dumps(x) for x in lines).encode() + b"\n")
    return path


@pytest.fixture
def source(db_factory, tmp_path):
    """A memory with one namespace ('ana'), its export lines, and a second, empty memory to import into."""
    mem = Memory(db_factory(), embedder="hash")
    mem.add(TURNS, namespace="ana", world_time="8 May 2023")
    mem.add(["We took Luna to the vet on Friday.", "She needed two shots."], namespace="ana", world_time="9 May 2023")
    mem.add([{"speaker": "Ana", "text": "After the vet visit Luna was tired, so she slept all day."},
             {"speaker": "Ben", "text": "Poor Luna! Did the shots hurt her?"},
             {"speaker": "Ana", "text": "A bit. Then we went hiking at the lake on Sunday because the weather was great."},
             {"speaker": "Ben", "text": "Hiking sounds fun, I want to go too."}], namespace="ana", world_time="12 May 2023")
    mem.add(["The bank PIN is 9931."], namespace="victim", world_time="9 May 2023")
    lines = exported(mem, tmp_path)
    yield mem, lines
    mem.close()


def edit(lines: list[dict], table: str, change) -> list[dict]:
    """A copy of the export with `change(row)` applied to the first row of `table`."""
    out = json.loads(json.dumps(lines))
    row = next(x["row"] for x in out if x.get("table") == table)
    change(row)
    return out


def refused(mem: Memory, path, match: str) -> None:
    before = mem.store.namespaces()
    with pytest.raises(InputError, match=match) as info:
        mem.import_file(path)
    assert "\n" not in str(info.value)
    assert mem.store.namespaces() == before  # a refused file changes nothing


def test_a_plain_round_trip_still_reproduces_the_namespace(source, tmp_path, db_factory):
    mem, lines = source
    other = Memory(db_factory(), embedder="hash")
    assert other.import_file(write(tmp_path, lines)) == ["ana"]
    assert exported(other, tmp_path) == lines
    assert other.search("beagle", namespace="ana")[0].observations[0].id == "t1"
    other.close()


HOSTILE_KEYS = [
    "namespace,id,step,seq,speaker,text,time,date,meta,ingested_at) SELECT namespace,id||'x',step,seq,speaker,text,"
    "time,date,meta,ingested_at FROM observations WHERE namespace='victim' --",
    "text) VALUES ('x') ON CONFLICT (namespace, id) DO UPDATE SET text='pwned' --",
    "id\"", "text; DROP TABLE observations", "TEXT", "rowid", "doc_len"]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_a_column_name_from_the_file_never_reaches_sql(source, tmp_path, key):
    mem, lines = source
    mem.forget("ana")
    path = write(tmp_path, edit(lines, "observations", lambda row: row.__setitem__(key, "x")))
    refused(mem, path, "unknown column")
    assert [o.text for o in mem.store.observations("victim")] == ["The bank PIN is 9931."]


def test_a_missing_column_is_named(source, tmp_path):
    mem, lines = source
    mem.forget("ana")
    refused(mem, write(tmp_path, edit(lines, "events", lambda row: row.pop("summary"))), "missing column 'summary'")


def _first(lines, table):
    return next(x["row"] for x in lines if x.get("table") == table)


BROKEN = {  # what the probes imported, and the message that now refuses each
    "an event citing a missing observation": ("events", lambda r: r.__setitem__("observation_ids", '["nope"]'),
                                              "cites observation 'nope'"),
    "an event with no observations": ("events", lambda r: r.__setitem__("observation_ids", "[]"), "no observations"),
    "a missing topic": ("events", lambda r: r.__setitem__("topic_id", "t999"), "topic 't999'"),
    "a step that is not a number": ("observations", lambda r: r.__setitem__("step", "abc"), "step"),
    "an 8-byte vector": ("events", lambda r: r.__setitem__("embedding", {"b64": "AAAAAAAAAAA="}), "2 values"),
    "a vector that is not base64": ("topics", lambda r: r.__setitem__("centroid", {"b64": "!!"}), "base64"),
    "a NaN in a vector": ("topics", lambda r: r.__setitem__("centroid", {"b64": "AADAfw=="}), "NaN|values"),
    "a garbage step record": ("steps", lambda r: r.__setitem__("record", "garbage"), "record"),
    "another step's record": ("steps", lambda r: r.__setitem__("step", 7), "another step|no step record"),
    "NUL in text": ("observations", lambda r: r.__setitem__("text", "a\x00b"), "NUL"),
    "an unpaired surrogate": ("observations", lambda r: r.__setitem__("speaker", "\ud800"), "(?i)unicode"),
    "empty text": ("observations", lambda r: r.__setitem__("text", ""), "text"),
    "meta that is not an object of strings": ("observations", lambda r: r.__setitem__("meta", '{"a": 1}'), "meta"),
    "a date that is not a date": ("observations", lambda r: r.__setitem__("date", "soon"), "ISO date"),
    "a relation to nowhere": ("relations", lambda r: r.__setitem__("target", "e99.9"), "links event 'e99.9'"),
    "a confidence above 1": ("relations", lambda r: r.__setitem__("confidence", 7.5), "confidence"),
    "an unknown history action": ("event_history", lambda r: r.__setitem__("action", "hacked"), "action"),
    "an id of 300 characters": ("observations", lambda r: r.__setitem__("id", "x" * 300), "id"),
    "a row of another namespace": ("observations", lambda r: r.__setitem__("namespace", "victim"), "header does not"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_rows_that_would_break_the_namespace_are_refused_before_anything_is_written(source, tmp_path, case):
    mem, lines = source
    assert any(x["table"] == BROKEN[case][0] for x in lines[1:])
    mem.forget("ana")
    table, change, message = BROKEN[case]
    refused(mem, write(tmp_path, edit(lines, table, change)), message)


def test_lines_that_are_not_rows(source, tmp_path):
    mem, lines = source
    mem.forget("ana")
    refused(mem, write(tmp_path, lines[:1] + [{"table": "meta", "row": {"key": "embedder", "value": "x"}}]),
            "unknown table 'meta'")
    refused(mem, write(tmp_path, lines[:1] + [{"table": "observations", "row": _first(lines, "observations")}]),
            "before its namespace")
    refused(mem, write(tmp_path, lines[:1] + [["not", "a", "row"]]), "not an export row")
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(lines[0]) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(mem, deep, "not a JSON line")


def test_a_byte_order_mark_is_accepted(source, tmp_path, db_factory):
    _, lines = source
    other = Memory(db_factory(), embedder="hash")
    assert other.import_file(write(tmp_path, lines, prefix="\ufeff".encode())) == ["ana"]
    other.close()


def test_rename_puts_every_row_where_the_importer_says(source, tmp_path, db_factory):
    mem, lines = source
    other = Memory(db_factory(), embedder="hash")
    assert other.import_file(write(tmp_path, lines), rename=lambda n: "tenant:b/" + n) == ["tenant:b/ana"]
    assert other.store.namespaces() == ["tenant:b/ana"]
    assert {r.namespace for r in other.store.steps.all("tenant:b/ana")} == {"tenant:b/ana"}
    assert other.search("beagle", namespace="tenant:b/ana")[0].observations[0].id == "t1"
    other.add(["One more turn."], namespace="tenant:b/ana")  # the imported namespace takes new steps
    other.close()
