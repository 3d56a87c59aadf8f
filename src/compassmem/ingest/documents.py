"""Documents: NarrativeQA summaries (one namespace per passage, steps of sentences), whole books and scripts
(NarrativeQA full texts, plain text files) cut at their own structure by document.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..models import Observation
from ..text import sentences
from .dataset import Dataset, QAItem, StepInput, read_text

TEXT_SUFFIXES = (".txt", ".md", ".text", ".rst")  # what `text` reads from a folder, and what its name says


def text_files(folder: Path) -> list[Path]:
    """The documents of a folder `text` reads, in name order."""
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)



def load_narrativeqa(path: Path, sentences_per_step: int = 8, limit_docs: int | None = None) -> Dataset:
    docs: dict[str, str] = {}
    questions: list[QAItem] = []
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
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
    from ..document import steps

    files = [path]
    if path.is_dir():
        files = text_files(path)
        if not files:
            raise InputError(f"{path} holds no text file ({', '.join(TEXT_SUFFIXES)})")
    return Dataset([StepInput(f.stem, n, obs, None) for f in files
                    for n, obs in steps(read_text(f), f.stem, f.stem)], [])


def load_narrativeqa_full(path: Path, samples: list[str] | None = None, limit_docs: int | None = None) -> Dataset:
    """NarrativeQA on whole books and scripts: `documents.jsonl` ({document_id, kind, title, text, …}; the
    plot summary is never read) and, beside it, `qa.jsonl` ({document_id, question, answers}). A document
    is the namespace `nqa-<first 10 characters of its id>`; it has no gold evidence."""
    from ..document import steps

    docs_path = path / "documents.jsonl" if path.is_dir() else path
    qa_path = docs_path.with_name("qa.jsonl")
    out: list[StepInput] = []
    names: dict[str, str] = {}
    for lineno, line in enumerate(read_text(docs_path).splitlines(), 1):
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
        for lineno, line in enumerate(read_text(qa_path).splitlines(), 1):
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
