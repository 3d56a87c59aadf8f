"""Readers that turn source files into construction steps (and, for benchmarks, questions): one module per
kind of source — locomo.py, beam.py, documents.py, jsonl.py — over the types of dataset.py; `load` picks the
reader `guess_format` names when no format is given."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from .beam import beam_chats, load_beam
from .dataset import Dataset, QAItem, StepInput
from .documents import (
    TEXT_SUFFIXES,
    load_narrativeqa,
    load_narrativeqa_full,
    load_text,
    text_files,
)
from .jsonl import load_jsonl
from .locomo import load_locomo

__all__ = ["FORMATS", "TEXT_SUFFIXES", "Dataset", "QAItem", "StepInput", "guess_format", "load", "load_beam",
           "load_jsonl", "load_locomo", "load_narrativeqa", "load_narrativeqa_full", "load_text"]

FORMATS = ("locomo", "narrativeqa", "jsonl", "beam", "text", "narrativeqa-full")


def guess_format(path: Path) -> str:
    """The format a file's name and first line say, so `ingest book.txt` needs no --format. A folder: of
    documents.jsonl, NarrativeQA on documents; of BEAM chats, BEAM; of .txt/.md files, documents. A file:
    .txt/.md a document; a BEAM chat's chat.json that chat, another .json LoCoMo; .jsonl observations, or
    NarrativeQA rows / documents when its first line has their fields."""
    if path.is_dir():
        if (path / "documents.jsonl").is_file():
            return "narrativeqa-full"
        if beam_chats(path):
            return "beam"
        if text_files(path):
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
