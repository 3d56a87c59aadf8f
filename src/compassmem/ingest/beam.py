"""BEAM's own folders (chat.json + probing_questions/): user↔assistant chats read as LoCoMo samples."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from .dataset import Dataset, read_text
from .locomo import locomo_samples

_BEAM_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")  # BEAM's "->-> batch,turn" at the end of a user turn


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
        batches = json.loads(read_text(folder / "chat.json"))
        probes = json.loads(read_text(folder / "probing_questions" / "probing_questions.json"))
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



def beam_chats(path: Path) -> list[Path]:
    """The BEAM chat folders at path: a chat's chat.json or its folder (that one), else the folders under
    it that hold a chat.json, in number order; [] for a folder without any."""
    if path.name == "chat.json" and path.is_file():
        path = path.parent
    if (path / "chat.json").is_file():
        return [path]
    return sorted((f for f in path.iterdir() if (f / "chat.json").is_file()),
                  key=lambda f: (not f.name.isdigit(), int(f.name) if f.name.isdigit() else 0, f.name))



def load_beam(path: Path, samples: list[str] | None = None, sessions: tuple[int, int] | None = None) -> Dataset:
    """BEAM user↔assistant chats: a chat folder (or its chat.json), or a folder of them (e.g. BEAM's
    100K/), read as LoCoMo samples named beam-<folder>. Role/content chats are how most agents hold memory."""
    if not path.is_dir() and not (path.name == "chat.json" and path.is_file()):
        raise InputError(f"BEAM input not found: {path} (a chat folder with chat.json, or a folder of them)")
    folders = beam_chats(path)
    if not folders:
        raise InputError(f"{path} holds no BEAM chat folder (a folder with chat.json)")
    return locomo_samples([_beam_chat(f) for f in folders], path, samples, sessions)

