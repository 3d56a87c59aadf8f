"""Haystack benchmark: does the memory still find the right things when it is large?

A dev conversation (LoCoMo schema: LoCoMo, REALTALK, BEAM) is put into one namespace that already holds
N distractor turns of real text — sessions of other conversations and paragraphs of the NarrativeQA
books and scripts — written as said by the conversation's own two people (their names replaced in the
text too) on dates spread over the conversation's own span, so neither a speaker nor a date filter
separates them. The result is a LoCoMo-schema file, answered by the same runner and methods as
`bench locomo`: recall at budgets next to the conversation alone, ask latency, peak memory.

Each session of the pool is used at most once (a pool smaller than N is an error, not a silent
replication).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from ..errors import InputError
from ..ingest import load as load_data

_DATE = "%I:%M %p on %d %B, %Y"


@dataclass
class Session:
    turns: list[tuple[int, str]]  # (0 = the first person, 1 = the second, text)
    source: str


def _parse(when: str | None) -> datetime | None:
    try:
        return datetime.strptime(when.strip(), _DATE) if when else None
    except ValueError:
        return None


def _format(when: datetime) -> str:
    """LoCoMo's way: '1:56 pm on 8 May, 2023'."""
    return f"{when.hour % 12 or 12}:{when.minute:02d} {'am' if when.hour < 12 else 'pm'} on {when.day} {when:%B}, {when.year}"


def _names(conv: dict) -> tuple[str, str]:
    return str(conv.get("speaker_a") or "A"), str(conv.get("speaker_b") or "B")


def _sessions(conv: dict) -> list[tuple[str | None, list[dict]]]:
    keys = sorted((int(k[8:]) for k in conv if re.fullmatch(r"session_\d+", k)))
    return [(conv.get(f"session_{n}_date_time"), conv[f"session_{n}"]) for n in keys]


def conversation_pool(path: Path, skip: set[str]) -> list[Session]:
    """Every session of a LoCoMo-schema file's conversations except `skip`, its speakers as 0 / 1 and their
    names (first names too) in the text as the placeholders {0} / {1}."""
    out = []
    for item in json.loads(Path(path).read_text()):
        if str(item.get("sample_id")) in skip:
            continue
        conv = item["conversation"]
        names = _names(conv)
        spelled = sorted({p for n in names for p in (n, n.split()[0])}, key=len, reverse=True)  # "Carl Smith" before "Carl"
        pattern = re.compile(r"\b(" + "|".join(re.escape(p) for p in spelled) + r")\b")
        first = {p: i for i, n in enumerate(names) for p in (n, n.split()[0])}
        for _, turns in _sessions(conv):
            rows = []
            for t in turns:
                text = str(t.get("text", "")).replace("{", "(").replace("}", ")")
                text = pattern.sub(lambda m: "{%d}" % first[m.group(1)], text)
                rows.append((0 if t.get("speaker") == names[0] else 1, text))
            if rows:
                out.append(Session(rows, f"{path.name}:{item.get('sample_id')}"))
    return out


def document_pool(path: Path, per_session: int = 20) -> list[Session]:
    """The NarrativeQA full texts cut as `ingest` cuts them, `per_session` paragraphs a session, said in turn by
    the two people."""
    ds = load_data(path, "narrativeqa-full")
    texts = [o.text.replace("{", "(").replace("}", ")") for s in ds.steps for o in s.observations]
    return [Session([(i % 2, t) for i, t in enumerate(texts[j : j + per_session])], f"{path.name}:{j}")
            for j in range(0, len(texts), per_session)]


def build(target: dict, pool: list[Session], turns: int, seed: int = 0) -> tuple[dict, dict]:
    """A copy of `target` (one LoCoMo-schema sample) with distractor sessions of `pool` worth at least `turns`
    turns woven in by date; returns it and what it holds."""
    conv = target["conversation"]
    names = _names(conv)
    own = _sessions(conv)
    dates = [d for d in (_parse(w) for w, _ in own) if d]
    if not dates:
        raise InputError(f"{target.get('sample_id')}: sessions need dates to spread distractors over")
    start, span = min(dates), max(max(dates) - min(dates), timedelta(days=1))
    rng = random.Random(seed)
    order = list(range(len(pool)))
    rng.shuffle(order)
    chosen, total = [], 0
    for i in order:
        if total >= turns:
            break
        chosen.append(pool[i])
        total += len(pool[i].turns)
    if total < turns:
        raise InputError(f"the distractor pool holds {total} turns, fewer than the {turns} asked")
    sessions = [(_parse(d) or start, "own", k, s) for k, (d, s) in enumerate(own)]
    for j, s in enumerate(chosen):
        when = start + timedelta(seconds=rng.uniform(0, span.total_seconds()))
        turns_ = [{"speaker": names[who], "dia_id": f"H{j + 1}:{i + 1}", "text": text.format(*names)}
                  for i, (who, text) in enumerate(s.turns)]
        sessions.append((when, "haystack", j, turns_))
    sessions.sort(key=lambda x: (x[0], x[1] != "own", x[2]))
    new = {"speaker_a": names[0], "speaker_b": names[1]}
    for n, (when, _, _, turns_) in enumerate(sessions, 1):
        new[f"session_{n}_date_time"] = _format(when)
        new[f"session_{n}"] = turns_
    texts = {t["text"] for _, _, _, ts in sessions for t in ts}
    facts = {"sample_id": target.get("sample_id"), "distractor_turns": total, "distractor_sessions": len(chosen),
             "own_turns": sum(len(s) for _, s in own), "distinct_texts": len(texts),
             "sources": sorted({s.source.split(":")[0] for s in chosen})}
    return {**target, "conversation": new}, facts


def write_haystack(data: Path, samples: set[str], pool: list[Session], turns: int, folder: Path) -> tuple[Path, dict]:
    """folder/haystack.json: the chosen conversations of `data`, each with `turns` distractor turns (kept
    as written by a first run: a re-run resumes on the same file)."""
    folder.mkdir(parents=True, exist_ok=True)
    file, facts_file = folder / "haystack.json", folder / "facts.json"
    if file.is_file() and facts_file.is_file():
        return file, json.loads(facts_file.read_text())
    items = [x for x in json.loads(Path(data).read_text()) if str(x.get("sample_id")) in samples]
    if len(items) != len(samples):
        raise InputError(f"sample(s) not in {data}: {', '.join(sorted(samples - {str(x.get('sample_id')) for x in items}))}")
    built, facts = [], []
    for k, item in enumerate(items):
        new, f = build(item, pool, turns, seed=k) if turns else (item, {"sample_id": item.get("sample_id"),
                                                                         "distractor_turns": 0})
        built.append(new)
        facts.append(f)
    file.write_text(json.dumps(built))
    facts_file.write_text(json.dumps(facts))
    return file, facts


def seed_cache(embedder: str, memories: list[Path]) -> int:
    """Fill the embedding cache (embed/disk.py) with the turn vectors these memories stored: the texts a
    haystack re-uses unchanged are then never embedded again."""
    import sqlite3

    from ..construct.segment import observation_text
    from ..embed import make_embedder
    from ..store.rows import OBS_COLS, observation

    disk = make_embedder(embedder).inner
    if not hasattr(disk, "seed"):
        raise InputError("--seed-from needs the embedding cache (COMPASSMEM_EMBED_CACHE)")
    added = 0
    for db in memories:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            if conn.execute("SELECT value FROM meta WHERE key='embedder'").fetchone() != (embedder,):
                raise InputError(f"{db} was not built with embedder '{embedder}'")
            rows = conn.execute(f"SELECT {OBS_COLS}, embedding FROM observations WHERE embedding IS NOT NULL").fetchall()
        finally:
            conn.close()
        added += disk.seed([(observation_text(observation(r)), r[10]) for r in rows])
    return added


def memory_facts(db: str | Path) -> dict:
    """What a size's memory holds, for the summary: its events over every namespace (a SQLite file or a
    PostgreSQL URL alike)."""
    from ..store import open_store

    store = open_store(db)
    try:
        return {"events": sum(store.event_count(ns) for ns in store.namespaces())}
    finally:
        store.close()


def summary(out: Path) -> list[dict]:
    """Per haystack size and method: recall at budgets and ask latency, from each size's results."""
    import statistics

    rows = []
    for folder in sorted(out.glob("n*"), key=lambda p: int(p.name[1:]) if p.name[1:].isdigit() else -1):
        results = folder / "results.jsonl"
        if not results.is_file():
            continue
        by: dict[str, list[dict]] = {}
        for line in results.read_text().splitlines():
            r = json.loads(line)
            by.setdefault(r["method"], []).append(r)
        facts = json.loads((folder / "facts.json").read_text())
        memory = json.loads((folder / "memory.json").read_text()) if (folder / "memory.json").is_file() else {}
        events = memory.get("events")
        if events is None and (folder / "memory-events.db").is_file():  # a folder from before memory.json
            events = memory_facts(folder / "memory-events.db")["events"]
        rss = json.loads((folder / "rss.json").read_text()) if (folder / "rss.json").is_file() else {}
        for method, rs in by.items():
            row = {"distractor_turns": sum(f.get("distractor_turns", 0) for f in facts),
                   "distinct_texts": sum(f.get("distinct_texts", 0) for f in facts) or None, "events": events,
                   "method": method, "n": len(rs), "peak_rss_mb": rss.get("peak_rss_mb"),
                   "backend": memory.get("backend", "sqlite")}
            for b in (500, 1000, 2000):
                vals = [r[f"recall@{b}"] for r in rs if r.get(f"recall@{b}") is not None]
                row[f"recall@{b}"] = round(100 * statistics.mean(vals), 2) if vals else None
            lat = [r["latency_s"] for r in rs if r.get("latency_s") is not None]
            row["latency_p50_ms"] = round(1000 * statistics.median(lat), 1) if lat else None
            rows.append(row)
    return rows
