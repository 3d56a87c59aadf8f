"""The export file: what `Memory.export` writes, and the only rows `Memory.import_file` lets into a store.

An import is a write path from outside (over REST, from another tenant's hands), so a row is read as
data and never as SQL: each table has a fixed list of columns (`COLUMNS`; an unknown or missing key
refuses the file), every value is typed and checked as `add` checks its input, every row's namespace is
mapped to a namespace the importer may write, and the rows must fit together — events ↔ observations ↔
topics ↔ steps, one vector size — before the store sees any of them. A refused file changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from . import validate
from .errors import ConfigError, InputError
from .models import EventTime, HistoryAction, StepRecord

if TYPE_CHECKING:
    from .store import Store

FORMAT = "compassmem-export"
VERSION = 2  # 2: several namespaces per file, event history rows
MAX_ROWS = 5_000_000
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _text(value: str) -> str:
    """No NUL, no unpaired surrogate: what no store can hold and no real text needs."""
    try:
        return validate.optional_text(value, "text", limit=10_000_000)  # type: ignore[return-value]
    except InputError as exc:
        raise ValueError(str(exc)) from None


def _day(value: str) -> str:
    if not _ISO_DAY.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not an ISO date (YYYY-MM-DD)")
    return value


Text = Annotated[str, AfterValidator(_text)]
Name = Annotated[str, Field(min_length=1, max_length=validate.MAX_NAME), AfterValidator(_text)]
Step = Annotated[int, Field(ge=0, le=validate.MAX_STEP)]


def _json_of(kind: Any) -> Callable[[str], str]:
    """A column that stores JSON text: it must parse as `kind`; the text is kept byte for byte."""
    from pydantic import TypeAdapter

    adapter = TypeAdapter(kind)

    def check(value: str) -> str:
        try:
            adapter.validate_json(value, strict=False)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"not JSON of the expected shape ({first['msg']})") from None
        return value
    return check


NameList = Annotated[str, AfterValidator(_json_of(list[Name]))]
StringMap = Annotated[str, AfterValidator(_json_of(dict[Name, Text]))]
TimeJSON = Annotated[str, AfterValidator(_json_of(EventTime))]


class Vector(BaseModel):
    """A float32 vector as the export writes it: {"b64": base64 of its little-endian bytes}."""

    model_config = ConfigDict(extra="forbid", strict=True)
    b64: str

    def array(self) -> np.ndarray:
        try:
            raw = base64.b64decode(self.b64, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a vector is not valid base64") from None
        if not raw or len(raw) % 4:
            raise ValueError(f"a vector of {len(raw)} bytes is not float32 values")
        vec = np.frombuffer(raw, dtype="<f4")
        if not np.isfinite(vec).all():
            raise ValueError("a vector holds NaN or infinite values")
        return vec


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NamespaceRow(_Row):
    name: Name
    created_at: Name


class ObservationRow(_Row):
    namespace: Name
    id: Name
    step: Step
    seq: Step
    speaker: Name | None
    text: Annotated[Text, Field(min_length=1)]
    time: Name | None
    date: Annotated[str, AfterValidator(_day)] | None
    meta: StringMap
    ingested_at: Name
    embedding: Vector | None
    event: Name | None


class StepRow(_Row):
    namespace: Name
    step: Step
    record: str


class EventRow(_Row):
    namespace: Name
    id: Name
    step: Step
    summary: Annotated[Text, Field(min_length=1)]
    participants: NameList
    time: TimeJSON
    observation_ids: NameList
    topic_id: Name | None
    history: Annotated[str, AfterValidator(_json_of(list[Text]))]
    embedding: Vector


class RelationRow(_Row):
    namespace: Name
    id: Name
    source: Name
    target: Name
    type: Name
    evidence: NameList
    origin: Literal["within_step", "cross_step", "judge"]
    confidence: Annotated[float, Field(ge=0.0, le=1.0)]  # NaN and infinities fail the bounds
    step: Step


class TopicRow(_Row):
    namespace: Name
    id: Name
    label: Text
    size: Step
    centroid: Vector


class HistoryRow(_Row):
    namespace: Name
    event_id: Name
    at: Name
    action: HistoryAction
    step: Step | None
    observation_ids: NameList
    summary: Text | None


ROWS: dict[str, type[_Row]] = {  # dependency order: a row's references come before it
    "namespaces": NamespaceRow, "observations": ObservationRow, "steps": StepRow, "events": EventRow,
    "relations": RelationRow, "topics": TopicRow, "event_history": HistoryRow}
COLUMNS: dict[str, tuple[str, ...]] = {table: tuple(model.model_fields) for table, model in ROWS.items()}
VECTORS = {"observations": "embedding", "events": "embedding", "topics": "centroid"}


@dataclass
class _Namespace:
    """What one namespace's rows declare, for the checks that need all of them."""

    rows: int = 0
    last_table: int = 0  # index in ROWS of the table of its last row
    observations: dict[str, str | None] = field(default_factory=dict)  # id -> event
    observation_steps: dict[str, int] = field(default_factory=dict)
    events: dict[str, tuple[int, list[str], str | None]] = field(default_factory=dict)  # id -> step, obs, topic
    relations: list[tuple[str, str, str]] = field(default_factory=list)
    relation_ids: set[str] = field(default_factory=set)
    topics: set[str] = field(default_factory=set)
    steps: set[int] = field(default_factory=set)


@dataclass
class ImportPlan:
    """A checked export file: its rows (table, {column: value}, vectors as float32 arrays) under the
    namespaces they will be stored as, in dependency order."""

    names: list[str]
    rows: list[tuple[str, dict[str, Any]]]


def _where(source: str, lineno: int) -> str:
    return f"{source}:{lineno}"


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "row"
    msg = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        return f"unknown column '{str(first['loc'][-1])[:60]}'"
    if first["type"] == "missing":
        return f"missing column '{loc}'"
    return f"{loc}: {msg}"


def read(lines: Iterable[str], source: str, rename: Callable[[str], str] = lambda n: n,
         dimension: int | None = None, embedder: str | None = None) -> ImportPlan:
    """Check a whole export (its lines, header first) and return what to store. `rename` maps each of the
    file's namespaces to the one it is stored as (a REST tenant's prefix), and may refuse one with an
    InputError; `dimension`, `embedder`: the store's vector size and embedder, when it has them. Raises
    InputError naming the line (ConfigError for a file of another embedder)."""
    it = iter(lines)
    try:
        header = json.loads(next(it, "") or "{}")
    except (json.JSONDecodeError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InputError(f"{source} is not a CompassMem export (no '{FORMAT}' header line)")
    if header.get("version") not in (1, VERSION):
        raise InputError(f"{source} is export version {header.get('version')!r}; this CompassMem reads 1 to {VERSION}")
    names = header.get("namespaces", [header.get("namespace")])  # v1 held one namespace
    if not isinstance(names, list) or not names:
        raise InputError(f"{source}: the header's 'namespaces' is not a non-empty list")
    names = [validate.namespace_name(n, "a namespace in the header") for n in names]
    if len(set(names)) != len(names):
        raise InputError(f"{source}: the header names a namespace twice")
    stored = {n: rename(n) for n in names}
    made_with = header.get("embedder")
    if made_with is not None and not isinstance(made_with, str):
        raise InputError(f"{source}: the header's 'embedder' is not a string")
    if made_with and embedder and made_with != embedder:
        raise ConfigError(f"{source} was built with embedder '{made_with}', this database with '{embedder}'")
    seen = {n: _Namespace() for n in names}
    rows: list[tuple[str, dict[str, Any]]] = []
    order = list(ROWS)
    for lineno, line in enumerate(it, 2):
        where = _where(source, lineno)
        if not line.strip():
            continue
        if len(rows) >= MAX_ROWS:
            raise InputError(f"{where}: more than {MAX_ROWS:,} rows")
        try:
            item = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise InputError(f"{where}: not an export row (not a JSON line)") from None
        if not isinstance(item, dict) or set(item) != {"table", "row"} or not isinstance(item["row"], dict):
            raise InputError(f"{where}: not an export row ({{\"table\": ..., \"row\": {{...}}}})")
        table = item["table"]
        if table not in ROWS:
            raise InputError(f"{where}: unknown table {str(table)[:60]!r}")
        try:
            row = ROWS[table].model_validate(item["row"])
        except ValidationError as exc:
            raise InputError(f"{where}: {table}: {_first_error(exc)}") from None
        values = row.model_dump()
        owner = values["name"] if table == "namespaces" else values["namespace"]
        if owner not in seen:
            raise InputError(f"{where}: a row of namespace {owner[:60]!r}, which the header does not name")
        ns = seen[owner]
        if order.index(table) < ns.last_table:
            raise InputError(f"{where}: a '{table}' row after the '{order[ns.last_table]}' rows (rows come in the "
                             "order export writes them)")
        ns.last_table = order.index(table)
        try:
            _check(table, values, ns, owner, stored[owner])
            if table in VECTORS and values[VECTORS[table]] is not None:
                vec = getattr(row, VECTORS[table]).array()
                if dimension is None:
                    dimension = len(vec)
                elif len(vec) != dimension:
                    raise ValueError(f"a vector of {len(vec)} values, where this memory's have {dimension}")
                values[VECTORS[table]] = vec
        except ValueError as exc:
            raise InputError(f"{where}: {table}: {exc}") from None
        ns.rows += 1
        rows.append((table, values))
    for name, ns in seen.items():
        if not ns.rows:
            raise InputError(f"{source}: the header names namespace {name[:60]!r}, but no row is of it")
        try:
            _check_references(ns)
        except ValueError as exc:
            raise InputError(f"{source}: namespace {name[:60]!r}: {exc}") from None
    return ImportPlan([stored[n] for n in names], rows)


def _check(table: str, values: dict[str, Any], ns: _Namespace, owner: str, target: str) -> None:
    """One row against the rows before it; its namespace becomes `target`."""
    if table == "namespaces":
        if ns.rows:
            raise ValueError("the namespace row must come first, once")
        values["name"] = target
        return
    if not ns.rows:
        raise ValueError("a row before its namespace's row")
    values["namespace"] = target
    if table == "observations":
        if values["id"] in ns.observations:
            raise ValueError(f"observation id {values['id'][:60]!r} twice")
        ns.observations[values["id"]] = values["event"]
        ns.observation_steps[values["id"]] = values["step"]
    elif table == "steps":
        if values["step"] in ns.steps:
            raise ValueError(f"step {values['step']} twice")
        try:
            record = StepRecord.model_validate_json(values["record"])
        except ValidationError as exc:
            raise ValueError(f"record: {_first_error(exc)}") from None
        if record.step != values["step"] or record.namespace != owner:
            raise ValueError(f"the record of step {values['step']} is another step's")
        if target != owner:
            values["record"] = record.model_copy(update={"namespace": target}).model_dump_json()
        ns.steps.add(values["step"])
    elif table == "events":
        if values["id"] in ns.events:
            raise ValueError(f"event id {values['id'][:60]!r} twice")
        obs = json.loads(values["observation_ids"])
        if not obs:
            raise ValueError(f"event {values['id'][:60]!r} has no observations")
        ns.events[values["id"]] = (values["step"], obs, values["topic_id"])
    elif table == "relations":
        if values["id"] in ns.relation_ids:
            raise ValueError(f"relation id {values['id'][:60]!r} twice")
        ns.relation_ids.add(values["id"])
        ns.relations.append((values["id"], values["source"], values["target"]))
    elif table == "topics":
        if values["id"] in ns.topics:
            raise ValueError(f"topic id {values['id'][:60]!r} twice")
        ns.topics.add(values["id"])


def _check_references(ns: _Namespace) -> None:
    """What a namespace's rows must agree on, so search, stats and add work on it afterwards."""
    for oid, step in ns.observation_steps.items():
        if step not in ns.steps:
            raise ValueError(f"observation {oid[:60]!r} is of step {step}, which has no step record")
        event = ns.observations[oid]
        if event is not None and event not in ns.events:
            raise ValueError(f"observation {oid[:60]!r} belongs to event {event[:60]!r}, which is not in the file")
    for eid, (step, obs, topic) in ns.events.items():
        if step not in ns.steps:
            raise ValueError(f"event {eid[:60]!r} is of step {step}, which has no step record")
        missing = [o for o in obs if o not in ns.observations]
        if missing:
            raise ValueError(f"event {eid[:60]!r} cites observation {missing[0][:60]!r}, which is not in the file")
        if topic is not None and topic not in ns.topics:
            raise ValueError(f"event {eid[:60]!r} is in topic {topic[:60]!r}, which is not in the file")
    for rid, source, target in ns.relations:
        for end in (source, target):
            if end not in ns.events:
                raise ValueError(f"relation {rid[:60]!r} links event {end[:60]!r}, which is not in the file")


def header(names: list[str], embedder: str | None) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "namespaces": names, "embedder": embedder}


def write(store: "Store", names: list[str], path: Path) -> int:
    """A header line, then every stored row of these namespaces; the number of rows written."""
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(header(names, store.meta.get("embedder"))) + "\n")
        for name in names:
            for table, row in store.export_rows(name):
                fh.write(json.dumps({"table": table, "row": row}, ensure_ascii=False) + "\n")
                n += 1
    return n


def load(store: "Store", path: Path, rename: Callable[[str], str], dim: int | None) -> list[str]:
    """Check every row of an export file (read), then write them in one transaction; refused when a
    namespace exists. Returns the stored namespaces."""
    if not path.is_file():
        raise InputError(f"export file not found: {path}")
    try:
        with path.open(encoding="utf-8-sig") as fh:  # a BOM is how some editors save UTF-8
            plan = read(fh, str(path), rename, dim, store.meta.get("embedder"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 (byte {exc.start})") from None
    clash = [n for n in plan.names if store.has_namespace(n)]
    if clash:
        raise InputError(f"namespace '{clash[0]}' already exists; forget it first or import elsewhere")
    store.import_rows(plan.rows)
    return plan.names
