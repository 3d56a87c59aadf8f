"""LoCoMo-schema conversations (LoCoMo, REALTALK, LoCoMo-Plus, BEAM's converted file): one step per session,
observation id = dia_id, world time = the session's date_time."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .. import validate
from ..errors import InputError
from ..models import Observation
from ..timeutil import iso, parse_date
from .dataset import Dataset, QAItem, StepInput, read_text

LOCOMO_PLUS_TYPES = {1: "causal", 2: "state", 3: "goal", 4: "value"}


def _group(qa: dict) -> str | None:
    """A question's group, from the fields its data set adds to LoCoMo's schema (data/README.md)."""
    if isinstance(qa.get("ability"), str):
        return qa["ability"]
    if "time_gap" in qa:  # LoCoMo-Plus: categories 1-4 are relation types
        return LOCOMO_PLUS_TYPES.get(qa.get("category"))
    return None



def load_locomo(path: Path, samples: list[str] | None = None, sessions: tuple[int, int] | None = None) -> Dataset:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to be LoCoMo JSON") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(x, dict) and "conversation" in x for x in data):
        raise InputError(f"{path} is not in LoCoMo format (a list of objects with 'conversation')")
    return locomo_samples(data, path, samples, sessions)


def locomo_samples(data: list[dict], path: Path, samples: list[str] | None,
                    sessions: tuple[int, int] | None) -> Dataset:
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
                                    [str(e) for e in qa.get("evidence", [])], _group(qa),
                                    [str(e) for e in qa.get("superseded", []) if isinstance(e, (str, int))]))
    if not steps:
        raise InputError(f"no sessions selected from {path}")
    return Dataset(steps, questions)

