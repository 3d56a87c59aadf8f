"""What every reader returns: steps of observations to build a memory from and, for benchmarks, questions."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..models import Observation


@dataclass
class StepInput:
    namespace: str
    step: int
    observations: list[Observation]
    world_time: str | None = None


@dataclass
class QAItem:
    namespace: str
    question: str
    answers: list[str]
    category: int | None = None
    evidence: list[str] = field(default_factory=list)
    group: str | None = None  # the data set's own label: a BEAM ability, a LoCoMo-Plus relation type
    superseded: list[str] = field(default_factory=list)  # evidence turns a later one revises (BEAM updates)


@dataclass
class Dataset:
    steps: list[StepInput]
    questions: list[QAItem]

    def namespaces(self) -> list[str]:
        return list(dict.fromkeys(s.namespace for s in self.steps))


def read_text(path: Path) -> str:
    """A source file's text, or a one-line InputError that says what is wrong with it (missing, empty, not
    UTF-8), so no reader meets a traceback."""
    if not path.is_file():
        raise InputError(f"input file not found: {path}")
    raw = path.read_bytes()
    if not raw.strip():
        raise InputError(f"input file is empty: {path}")
    try:
        return raw.decode("utf-8-sig")  # a byte-order mark is how some editors save UTF-8
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 4]!r}); "
                         "re-encode it as UTF-8") from None

