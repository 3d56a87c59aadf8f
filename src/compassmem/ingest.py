"""Readers that turn source files into construction steps (and, for benchmarks, questions).

LoCoMo: one step per session, observation id = dia_id, world time = the session's date_time.
NarrativeQA summaries: one namespace per passage, steps = chunks of sentences, observations = sentences.
Generic JSONL: one observation per line {namespace, step, id, speaker, text, time}.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import validate
from .errors import InputError
from .models import Observation
from .timeutil import iso, parse_date

FORMATS = ("locomo", "narrativeqa", "jsonl")


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


@dataclass
class Dataset:
    steps: list[StepInput]
    questions: list[QAItem]

    def namespaces(self) -> list[str]:
        return list(dict.fromkeys(s.namespace for s in self.steps))


def _read_text(path: Path) -> str:
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


def load_locomo(path: Path, samples: list[str] | None = None, sessions: tuple[int, int] | None = None) -> Dataset:
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to be LoCoMo JSON") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(x, dict) and "conversation" in x for x in data):
        raise InputError(f"{path} is not in LoCoMo format (a list of objects with 'conversation')")
    steps: list[StepInput] = []
    questions: list[QAItem] = []
    known = [str(x.get("sample_id", f"sample-{i}")) for i, x in enumerate(data)]
    if samples:
        missing = [s for s in samples if s not in known]
        if missing:
            raise InputError(f"sample(s) not in {path.name}: {', '.join(missing)} (available: {', '.join(known)})")
    for item, ns in zip(data, known):
        if samples and ns not in samples:
            continue
        conv = item["conversation"]
        if not isinstance(conv, dict):
            raise InputError(f"{ns}: 'conversation' must be an object of sessions")
        keys = [k for k in conv if re.fullmatch(r"session_\d+", k)]
        too_big = [k for k in keys if len(k) > 20 or int(k[8:]) > validate.MAX_STEP]
        if too_big:
            raise InputError(f"{ns}: '{too_big[0][:40]}': session numbers are steps, 0 to {validate.MAX_STEP}")
        numbers = sorted(int(k[8:]) for k in keys)
        for n in numbers:
            if sessions and not (sessions[0] <= n <= sessions[1]):
                continue
            when = validate.optional_text(conv.get(f"session_{n}_date_time"), f"{ns} session {n} date_time")
            if not isinstance(conv[f"session_{n}"], list):
                raise InputError(f"{ns} session {n} must be a list of turns")
            day = iso(parse_date(when))
            obs = []
            for seq, turn in enumerate(conv[f"session_{n}"]):
                if not isinstance(turn, dict) or "dia_id" not in turn or "text" not in turn:
                    raise InputError(f"{ns} session {n} turn {seq} lacks 'dia_id' or 'text'")
                if isinstance(turn["dia_id"], bool) or not isinstance(turn["dia_id"], (str, int)):
                    raise InputError(f"{ns} session {n} turn {seq}: dia_id must be a string, got "
                                     f"{type(turn['dia_id']).__name__}")
                validate.identifier(str(turn["dia_id"]), f"{ns} session {n} turn {seq}: dia_id")
                validate.text_of(turn["text"], f"{ns} session {n} turn {seq}: text")
                validate.optional_text(turn.get("speaker"), f"{ns} session {n} turn {seq}: speaker")
                meta = {"image": str(turn["blip_caption"])} if turn.get("blip_caption") else {}
                obs.append(Observation(id=str(turn["dia_id"]), namespace=ns, step=n, seq=seq,
                                       speaker=turn.get("speaker"), text=str(turn["text"]), time=when, date=day,
                                       meta=meta))
            steps.append(StepInput(ns, n, obs, when))
        qas = item.get("qa", [])
        if not isinstance(qas, list) or not all(isinstance(qa, dict) and "question" in qa for qa in qas):
            raise InputError(f"{ns}: 'qa' must be a list of objects with 'question' (and 'answer')")
        for qa in qas:
            if "answer" not in qa or qa.get("category") == 5:  # adversarial: excluded, as in the paper
                continue
            questions.append(QAItem(ns, str(qa["question"]), [str(qa["answer"])], qa.get("category"),
                                    [str(e) for e in qa.get("evidence", [])]))
    if not steps:
        raise InputError(f"no sessions selected from {path}")
    return Dataset(steps, questions)


_SENT = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z\"'(])")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def load_narrativeqa(path: Path, sentences_per_step: int = 8, limit_docs: int | None = None) -> Dataset:
    docs: dict[str, str] = {}
    questions: list[QAItem] = []
    for lineno, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row: dict[str, Any] = json.loads(line)
            passage, question, answers = row["passage"], row["question"], row["answer"]
            if not isinstance(passage, str) or not isinstance(question, str):
                raise TypeError
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
            raise InputError(f"{path}:{lineno} is not a NarrativeQA row {{question, answer, passage}}") from None
        ns = "nqa-" + hashlib.sha1(passage.encode()).hexdigest()[:10]
        if ns not in docs:
            if limit_docs is not None and len(docs) >= limit_docs:
                continue
            docs[ns] = passage
        answers = answers if isinstance(answers, list) else [answers]
        questions.append(QAItem(ns, question, [str(a) for a in answers]))
    steps: list[StepInput] = []
    for ns, passage in docs.items():
        sents = split_sentences(passage)
        for start in range(0, len(sents), sentences_per_step):
            step = start // sentences_per_step + 1
            obs = [Observation(id=f"S{start + i + 1}", namespace=ns, step=step, seq=i, text=s)
                   for i, s in enumerate(sents[start : start + sentences_per_step])]
            steps.append(StepInput(ns, step, obs, None))
    return Dataset(steps, questions)


def load_jsonl(path: Path) -> Dataset:
    """One observation per line: {"namespace", "step", "id", "text", "speaker"?, "time"?, "meta"?}
    (docs/formats.md). Every field is checked here, with the line number in the message."""
    grouped: dict[tuple[str, int], list[Observation]] = {}
    for lineno, line in enumerate(_read_text(path).splitlines(), 1):
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


def load(path: str | Path, fmt: str, samples: list[str] | None = None,
         sessions: tuple[int, int] | None = None, limit_docs: int | None = None) -> Dataset:
    p = Path(path)
    if fmt == "locomo":
        return load_locomo(p, samples, sessions)
    if fmt == "narrativeqa":
        return load_narrativeqa(p, limit_docs=limit_docs)
    if fmt == "jsonl":
        return load_jsonl(p)
    raise InputError(f"unknown format '{fmt}'; expected one of: {', '.join(FORMATS)}")
