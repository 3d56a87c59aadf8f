"""Validation at the boundary: everything a user or a file hands the library is checked here, once, with
a one-line message that names the field and the limit. Past this module, code may trust its inputs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from .config import SearchMode
from .errors import InputError
from .models import Filters, Observation

MAX_NAME = 200
MAX_STEP = 2**31 - 1
MAX_OFFSET = 2**62  # past any table's size, inside SQLite's and PostgreSQL's 64-bit integers
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def namespace_name(value: Any, field: str = "namespace") -> str:
    """A namespace is a non-empty line of at most 200 characters."""
    if not isinstance(value, str):
        raise InputError(f"{field} must be a string, got {type(value).__name__} {_describe(value)}")
    if not value.strip():
        raise InputError(f"{field} is empty")
    if len(value) > MAX_NAME:
        raise InputError(f"{field} is {len(value)} characters long; the limit is {MAX_NAME}")
    if _CONTROL.search(value):
        raise InputError(f"{field} {_describe(value)} contains control characters")
    return _utf8(value, field)


def step_number(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"step must be an integer, got {type(value).__name__} {_describe(value)}")
    if not 0 <= value <= MAX_STEP:
        raise InputError(f"step {value} is out of range (0 to {MAX_STEP})")
    return value


def _utf8(value: str, field: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{field} is not valid Unicode (unpaired surrogate at position {exc.start})") from None
    if "\x00" in value:  # no text column of PostgreSQL can hold it, and no real text needs it
        raise InputError(f"{field} contains a NUL character (\\x00) at position {value.index(chr(0))}")
    return value


def identifier(value: Any, field: str) -> str:
    """An event or observation id as a caller names it: a non-empty string of at most 200 characters
    (the same rule `add` applies to the ids it accepts)."""
    text = optional_text(value, field) if value is not None else None
    if not text or not text.strip():
        raise InputError(f"{field} is empty" if isinstance(value, str) else f"{field} must be a string, got "
                         f"{type(value).__name__}")
    return text


def optional_text(value: Any, field: str, limit: int = MAX_NAME) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{field} must be a string, got {type(value).__name__} {_describe(value)}")
    if len(value) > limit:
        raise InputError(f"{field} is {len(value)} characters long; the limit is {limit}")
    return _utf8(value, field)


def text_of(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{field} must be a string, got {type(value).__name__} {_describe(value)}")
    if not value.strip():
        raise InputError(f"{field} is empty")
    return _utf8(value, field)


def observation(item: Any, namespace: str, step: int, seq: int, world_time: str | None) -> Observation:
    """One input item as an Observation. Accepted: a string (one turn), a dict with 'text' (and optional
    'id', 'speaker', 'time', 'meta' of string values), a mem0-style message {'role', 'content'}, or an
    Observation of this namespace and step. Anything else is refused with the item's position."""
    where = f"observation {seq}"
    if isinstance(item, Observation):  # built by the caller, perhaps with model_construct: checked like a dict
        if (item.namespace, item.step) != (namespace, step):
            raise InputError(f"{where} belongs to {item.namespace}/step {item.step}, not {namespace}/step {step}")
        item = {"id": item.id, "speaker": item.speaker, "text": item.text, "time": item.time, "meta": item.meta}
    if isinstance(item, str):
        return Observation(id=f"S{step}:{seq + 1}", namespace=namespace, step=step, seq=seq,
                           text=text_of(item, f"{where}: text"), time=world_time)
    if not isinstance(item, dict):
        raise InputError(f"{where} is a {type(item).__name__}; expected a string, a dict with 'text' or "
                         "'content', or an Observation")
    if "text" not in item and "content" not in item:
        raise InputError(f"{where} has no 'text' (or 'content')")
    text = text_of(item["text"] if "text" in item else item["content"], f"{where}: text")
    oid = item.get("id", f"S{step}:{seq + 1}")
    if isinstance(oid, bool) or not isinstance(oid, (str, int)):
        raise InputError(f"{where}: id must be a string, got {type(oid).__name__}")
    oid = optional_text(str(oid), f"{where}: id") or ""
    if not oid.strip():
        raise InputError(f"{where}: id is empty")
    meta = item.get("meta", {})
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise InputError(f"{where}: meta must be an object of string values")
    for k, v in meta.items():
        optional_text(k, f"{where}: meta key", MAX_NAME)
        optional_text(v, f"{where}: meta.{k[:40]}", 10_000)
    speaker = optional_text(item.get("speaker", item.get("role")), f"{where}: speaker")
    try:
        return Observation(id=str(oid), namespace=namespace, step=step, seq=seq, speaker=speaker, text=text,
                           time=optional_text(item.get("time", world_time), f"{where}: time"), meta=meta)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "value"
        raise InputError(f"{where}: {field}: {first['msg']}") from None


def metadata(value: Any) -> dict[str, str]:
    """mem0's `metadata=`: an object of names to strings (numbers and booleans are written as text, since
    filters match text), put on every observation of the add."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"metadata must be an object of string values, got {_describe(value)}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or isinstance(v, (dict, list)) or v is None:
            raise InputError(f"metadata must be an object of string values; '{str(k)[:40]}' is {_describe(v)}")
        text = str(v).lower() if isinstance(v, bool) else str(v)
        out[optional_text(k, "metadata key", MAX_NAME) or ""] = optional_text(text, f"metadata.{k[:40]}", 10_000) or ""
    return out


def page(offset: Any, limit: Any) -> tuple[int, int]:
    """A page's offset (from 0) and limit (1 to 1,000), or one line saying which is wrong."""
    for name, value, low, high in (("offset", offset, 0, MAX_OFFSET), ("limit", limit, 1, 1000)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InputError(f"{name} must be an integer from {low} to {high}, got {str(value)[:40]}")
    return offset, limit


def output_file(value: Any) -> Path:
    """A file to write: a path whose folder exists and that is not itself a folder."""
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise InputError(f"the output file must be a path, got {_describe(value)}")
    path = Path(value)
    if path.is_dir():
        raise InputError(f"{path} is a folder; name a file to write")
    if not path.expanduser().resolve().parent.is_dir():
        raise InputError(f"cannot write {path}: folder {path.expanduser().resolve().parent} does not exist")
    return path


def world_time(value: Any) -> str | None:
    return optional_text(value, "world_time")


def question(value: Any, limit: int) -> str:
    q = " ".join(text_of(value, "question").split())
    if len(q) > limit:
        raise InputError(f"the question is {len(q)} characters long; the limit is {limit} (search.max_question_chars)")
    return q


SEARCH_MODES = get_args(SearchMode)


def search_mode(value: Any) -> str:
    if value not in SEARCH_MODES:
        raise InputError(f"mode must be one of {', '.join(SEARCH_MODES)}, got {_describe(value)}")
    return value


def filters(value: Any) -> Filters | None:
    """Search filters from a Filters or a dict ({'since', 'until', 'speaker', 'meta'}); None or empty: none."""
    if value is None:
        return None
    if isinstance(value, Filters):
        flt = value
    elif isinstance(value, dict):
        try:
            flt = Filters.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(x) for x in first["loc"]) or "value"
            raise InputError(f"filters: {field}: {first['msg']}") from None
    else:
        raise InputError(f"filters must be a dict or Filters, got {type(value).__name__}")
    return None if flt.empty else flt
