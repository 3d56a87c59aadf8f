"""Generic JSONL: one observation per line {namespace, step, id, speaker, text, time} (docs/formats.md)."""

from __future__ import annotations

import json
from pathlib import Path

from .. import validate
from ..errors import InputError
from ..models import Observation
from .dataset import Dataset, StepInput, read_text


def load_jsonl(path: Path) -> Dataset:
    """One observation per line: {"namespace", "step", "id", "text", "speaker"?, "time"?, "meta"?}
    (docs/formats.md). Every field is checked here, with the line number in the message."""
    grouped: dict[tuple[str, int], list[Observation]] = {}
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise InputError(f"{path}:{lineno}: not a JSON object (or nested too deeply)") from None
        if not isinstance(row, dict) or not all(k in row for k in ("namespace", "step", "id", "text")):
            raise InputError(f"{path}:{lineno}: expected JSON with namespace, step (int), id, text")
        try:
            ns = validate.namespace_name(row["namespace"])
            step = validate.step_number(row["step"])
            bucket = grouped.setdefault((ns, step), [])
            o = validate.observation(row, ns, step, len(bucket), None)
        except InputError as exc:
            raise InputError(f"{path}:{lineno}: {exc}") from None
        if any(x.id == o.id for x in bucket):
            raise InputError(f"{path}:{lineno}: duplicate id '{o.id}' in {ns}/step {step}")
        bucket.append(o)
    steps = [StepInput(ns, step, obs, obs[0].time) for (ns, step), obs in sorted(grouped.items())]
    return Dataset(steps, [])
