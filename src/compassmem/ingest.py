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
from .text import sentences

FORMATS = ("locomo", "narrativeqa", "jsonl", "beam", "text", "narrativeqa-full")
TEXT_SUFFIXES = (".txt", ".md", ".text", ".rst")  # what `text` reads from a folder, and what its name says


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


LOCOMO_PLUS_TYPES = {1: "causal", 2: "state", 3: "goal", 4: "value"}


def _group(qa: dict) -> str | None:
    """A question's group, from the fields its data set adds to LoCoMo's schema (data/README.md)."""
    if isinstance(qa.get("ability"), str):
        return qa["ability"]
    if "time_gap" in qa:  # LoCoMo-Plus: categories 1-4 are relation types
        return LOCOMO_PLUS_TYPES.get(qa.get("category"))
    return None


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
    return _locomo_samples(data, path, samples, sessions)


def _locomo_samples(data: list[dict], path: Path, samples: list[str] | None,
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


_BEAM_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")  # BEAM's "->-> batch,turn" at the end of a user turn
_MONTHS = ("January February March April May June July August September October November December").split()


def _flat(ids: Any) -> list[int]:
    """BEAM's source ids: a list, a dict of lists, lists nested in either."""
    if isinstance(ids, dict):
        return [i for v in ids.values() for i in _flat(v)]
    if isinstance(ids, list):
        return [i for v in ids for i in _flat(v)]
    return [int(ids)] if ids is not None else []


def _beam_chat(folder: Path) -> dict:
    """One BEAM chat folder (chat.json + probing_questions/) as a LoCoMo sample: a batch per session dated
    by its time anchor, a message per turn (dia_id D<batch>:<message id>, speakers User / Assistant), and
    every probing question with source ids, its ability as its group (data/README.md)."""
    try:
        batches = json.loads(_read_text(folder / "chat.json"))
        probes = json.loads(_read_text(folder / "probing_questions" / "probing_questions.json"))
        conv: dict[str, Any] = {"speaker_a": "User", "speaker_b": "Assistant"}
        batch_of: dict[int, int] = {}
        for batch in batches:
            n, turns, when = int(batch["batch_number"]), [], None
            for message in (m for pair in batch["turns"] for m in pair):
                anchor = message.get("time_anchor")
                if when is None and isinstance(anchor, str) and re.fullmatch(r"[A-Za-z]+-\d{1,2}-\d{4}", anchor):
                    month, day, year = anchor.split("-")
                    when = f"12:00 am on {int(day)} {month}, {year}"
                batch_of[int(message["id"])] = n
                turns.append({"speaker": str(message["role"]).capitalize(), "dia_id": f"D{n}:{message['id']}",
                              "text": _BEAM_MARKER.sub("", str(message["content"])).strip()})
            conv[f"session_{n}"] = turns
            if when:
                conv[f"session_{n}_date_time"] = when
        qa = []
        for ability, items in probes.items():
            for item in items:
                evidence = list(dict.fromkeys(f"D{batch_of[i]}:{i}" for i in _flat(item.get("source_chat_ids"))
                                              if i in batch_of))
                if evidence:
                    qa.append({"question": item["question"], "answer": item.get("answer", ""), "category": 1,
                               "evidence": evidence, "ability": ability,
                               "superseded": [f"D{batch_of[i]}:{i}" for i in _older(item.get("source_chat_ids"))
                                              if i in batch_of]})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{folder} is not a BEAM chat folder (chat.json, probing_questions/): "
                         f"{type(exc).__name__}: {str(exc)[:80]}") from None
    return {"sample_id": f"beam-{folder.name}", "conversation": conv, "qa": qa}


OLDER_KEYS = ("original_info", "first_statement")  # BEAM: the statement an update / contradiction revises


def _older(ids: Any) -> list[int]:
    """The source ids of the earlier statement in a knowledge-update or contradiction question."""
    if not isinstance(ids, dict):
        return []
    return [i for key in OLDER_KEYS for i in _flat(ids.get(key))]


def _beam_chats(path: Path) -> list[Path]:
    """The BEAM chat folders at path: a chat's chat.json or its folder (that one), else the folders under
    it that hold a chat.json, in number order; [] for a folder without any."""
    if path.name == "chat.json" and path.is_file():
        path = path.parent
    if (path / "chat.json").is_file():
        return [path]
    return sorted((f for f in path.iterdir() if (f / "chat.json").is_file()),
                  key=lambda f: (not f.name.isdigit(), int(f.name) if f.name.isdigit() else 0, f.name))


def _text_files(folder: Path) -> list[Path]:
    """The documents of a folder `text` reads, in name order."""
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)


def load_beam(path: Path, samples: list[str] | None = None, sessions: tuple[int, int] | None = None) -> Dataset:
    """BEAM user↔assistant chats: a chat folder (or its chat.json), or a folder of them (e.g. BEAM's
    100K/), read as LoCoMo samples named beam-<folder>. Role/content chats are how most agents hold memory."""
    if not path.is_dir() and not (path.name == "chat.json" and path.is_file()):
        raise InputError(f"BEAM input not found: {path} (a chat folder with chat.json, or a folder of them)")
    folders = _beam_chats(path)
    if not folders:
        raise InputError(f"{path} holds no BEAM chat folder (a folder with chat.json)")
    return _locomo_samples([_beam_chat(f) for f in folders], path, samples, sessions)


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
        sents = sentences(passage)
        for start in range(0, len(sents), sentences_per_step):
            step = start // sentences_per_step + 1
            obs = [Observation(id=f"S{start + i + 1}", namespace=ns, step=step, seq=i, text=s)
                   for i, s in enumerate(sents[start : start + sentences_per_step])]
            steps.append(StepInput(ns, step, obs, None))
    return Dataset(steps, questions)


def load_text(path: Path) -> Dataset:
    """A plain-text document (a book, a script, a report) as one namespace named after the file, cut at
    its own structure (document.py); a folder of them, one namespace each, in name order."""
    from .document import steps

    files = [path]
    if path.is_dir():
        files = _text_files(path)
        if not files:
            raise InputError(f"{path} holds no text file ({', '.join(TEXT_SUFFIXES)})")
    return Dataset([StepInput(f.stem, n, obs, None) for f in files
                    for n, obs in steps(_read_text(f), f.stem, f.stem)], [])


def load_narrativeqa_full(path: Path, samples: list[str] | None = None, limit_docs: int | None = None) -> Dataset:
    """NarrativeQA on whole books and scripts: `documents.jsonl` ({document_id, kind, title, text, …}; the
    plot summary is never read) and, beside it, `qa.jsonl` ({document_id, question, answers}). A document
    is the namespace `nqa-<first 10 characters of its id>`; it has no gold evidence."""
    from .document import steps

    docs_path = path / "documents.jsonl" if path.is_dir() else path
    qa_path = docs_path.with_name("qa.jsonl")
    out: list[StepInput] = []
    names: dict[str, str] = {}
    for lineno, line in enumerate(_read_text(docs_path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            doc_id, title, text = str(doc["document_id"]), str(doc.get("title") or doc["document_id"]), doc["text"]
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
            raise InputError(f"{docs_path}:{lineno} is not a document {{document_id, title, text}}") from None
        ns = f"nqa-{doc_id[:10]}"
        if samples and ns not in samples:
            continue
        if limit_docs is not None and len(names) >= limit_docs:
            break
        names[doc_id] = ns
        out += [StepInput(ns, n, obs, None) for n, obs in steps(text, ns, title)]
    questions: list[QAItem] = []
    if qa_path.is_file():
        for lineno, line in enumerate(_read_text(qa_path).splitlines(), 1):
            try:
                qa = json.loads(line)
                doc_id, question, answers = str(qa["document_id"]), str(qa["question"]), qa["answers"]
            except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
                raise InputError(f"{qa_path}:{lineno} is not a question {{document_id, question, answers}}") from None
            if doc_id in names:
                answers = answers if isinstance(answers, list) else [answers]
                questions.append(QAItem(names[doc_id], question, [str(a) for a in answers]))
    if not out:
        raise InputError(f"no document selected from {docs_path}")
    return Dataset(out, questions)


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


def guess_format(path: Path) -> str:
    """The format a file's name and first line say, so `ingest book.txt` needs no --format. A folder: of
    documents.jsonl, NarrativeQA on documents; of BEAM chats, BEAM; of .txt/.md files, documents. A file:
    .txt/.md a document; a BEAM chat's chat.json that chat, another .json LoCoMo; .jsonl observations, or
    NarrativeQA rows / documents when its first line has their fields."""
    if path.is_dir():
        if (path / "documents.jsonl").is_file():
            return "narrativeqa-full"
        if _beam_chats(path):
            return "beam"
        if _text_files(path):
            return "text"
        raise InputError(f"{path} is a folder of neither documents.jsonl, BEAM chats nor text files; pass "
                         f"--format (one of: {', '.join(FORMATS)})")
    if not path.is_file():
        raise InputError(f"input file not found: {path}")
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix == ".json":
        return "beam" if path.name == "chat.json" else "locomo"  # a BEAM chat's own file names its folder
    if suffix == ".jsonl":
        with path.open("rb") as fh:
            first = next((line for line in fh if line.strip()), b"")
        try:
            fields = json.loads(first.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            fields = None
        if isinstance(fields, dict) and {"passage", "question"} <= fields.keys():
            return "narrativeqa"
        if isinstance(fields, dict) and {"document_id", "text"} <= fields.keys():
            return "narrativeqa-full"
        return "jsonl"
    raise InputError(f"cannot tell the format of {path.name} from its name; pass --format "
                     f"(one of: {', '.join(FORMATS)})")


def load(path: str | Path, fmt: str | None = None, samples: list[str] | None = None,
         sessions: tuple[int, int] | None = None, limit_docs: int | None = None) -> Dataset:
    """A file or folder in one of FORMATS (None: guess_format)."""
    p = Path(path)
    fmt = fmt or guess_format(p)
    if fmt == "locomo":
        return load_locomo(p, samples, sessions)
    if fmt == "narrativeqa":
        return load_narrativeqa(p, limit_docs=limit_docs)
    if fmt == "jsonl":
        return load_jsonl(p)
    if fmt == "beam":
        return load_beam(p, samples, sessions)
    if fmt == "text":
        return load_text(p)
    if fmt == "narrativeqa-full":
        return load_narrativeqa_full(p, samples, limit_docs)
    raise InputError(f"unknown format '{fmt}'; expected one of: {', '.join(FORMATS)}")
