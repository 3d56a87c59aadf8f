"""Event blocks: one event with its observations in the columnar form a search's GraphView is cut from.

An ask loads ~200 events with ~1,400 observations, and consecutive asks of one memory load mostly the
same ones. Turning those rows into a view — owners, stream order, the per-turn facts the ranking reads
(who speaks, does the turn ask something, how long a passage is, its day) — was half of an ask at 1 K
events when it was done row by row on every ask (docs/benchmarks.md, Scale). A block is worked out once
per event and kept by the store until a write touches that event (Store.derived with by_event: the
SQLite store's change log names the events each write touched), so an ask only joins the blocks it
needs.

A block's Event and Observations are shared by every ask that loads them: read-only (GraphView.load,
for a caller who may change what it gets, hands out copies).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..models import REVISION_TYPES, Event, Observation, Relation, Topic
from ..store import Store
from ..text import is_question
from ..timeutil import from_iso
from .current import said_by_assistant, speaks_for_self

KIND = "event blocks"  # the store's name for what derived() keeps of them
# a block's numeric columns: step and seq (stream order); said by a machine role (current.said_by_assistant);
# a person's own statement (current.speaks_for_self); asks something (text.is_question); passage_tokens (its
# length when no one said it, else 0); its date as days since year 1 (-1 without one). One array per block,
# so an ask concatenates once, not once per column
NUMBERS = ("step", "seq", "assistant", "own_voice", "asks", "passage", "day")


@dataclass(frozen=True)
class Neighbour:
    event_id: str
    type: str
    outgoing: bool  # True: current -[type]-> neighbour

    def hint(self, current: str) -> str:
        return f"{current} -[{self.type}]-> {self.event_id}" if self.outgoing else f"{self.event_id} -[{self.type}]-> {current}"


@dataclass(frozen=True)
class EventBlock:
    """An event and its own observations (those its observation_ids lists), in stream order, with the
    per-observation columns GraphView and the ranking read."""

    event: Event
    vector: np.ndarray  # the event's normalised embedding
    observations: np.ndarray  # object: its own Observations, in stream order
    ids: np.ndarray  # object: their ids
    matrix: np.ndarray  # their normalised embeddings, one row each
    speaker: np.ndarray  # object: str | None
    numbers: np.ndarray  # float, one row per observation, the columns NUMBERS name
    neighbours: tuple[Neighbour, ...]  # one per typed relation touching it (not to itself), in stored order
    revisions: tuple[tuple[int, str, str, str], ...]  # (step, other event, earlier turn, later turn) of the
    # revision relations it is the source of (construct/revise.py)
    first: tuple[float, float]  # (step, seq) of its first observation (inf without one): Joined's sort key


def blocks_of(store: Store, namespace: str, event_ids: list[str]) -> list[EventBlock]:
    """The blocks of these events, in the order asked (unknown ids skipped)."""
    found = store.derived(namespace, KIND, event_ids, lambda missing: _work_out(store, namespace, missing), by_event=True)
    return [b for b in (found[e] for e in event_ids) if b is not None]


def topics_of(store: Store, namespace: str) -> dict[str, Topic]:
    """The namespace's topics by id (every ask's view holds them all), read again after each write to it."""
    return store.derived(namespace, "topics", [""], lambda _: {"": {t.id: t for t in store.topics(namespace)}})[""]


def owners_of(store: Store, namespace: str, observation_ids: list[str]) -> dict[str, str]:
    """observation id → the event it belongs to (those in no event left out), read again after each write."""
    def read(ids: list[str]) -> dict[str, str | None]:
        found = store.owners(namespace, ids)
        return {o: found.get(o) for o in ids}
    return {o: e for o, e in store.derived(namespace, "owners", observation_ids, read).items() if e is not None}


def turn_numbers(obs: list[Observation]) -> np.ndarray:
    """The NUMBERS columns of these observations, one row each (a speaker's flags and a date's day worked
    out once each)."""
    from .graph import passage_tokens  # graph.py builds its views from this module

    flags = {s: (said_by_assistant(s), speaks_for_self(s)) for s in {o.speaker for o in obs}}
    days = {d: (day.toordinal() if (day := from_iso(d)) else -1) for d in {o.date for o in obs}}
    return np.array([(o.step, o.seq, *flags[o.speaker], is_question(o.text), passage_tokens(o), days[o.date])
                     for o in obs], dtype=float).reshape(len(obs), len(NUMBERS))


def turn_columns(numbers: np.ndarray, speaker: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """From rows in stream order (their NUMBERS and speakers): the assistant mask, passage lengths, day
    numbers and the row each replies to (`replies`), as GraphView keeps them."""
    col = {name: numbers[:, i] for i, name in enumerate(NUMBERS)}
    return (col["assistant"] > 0, col["passage"].copy(), col["day"].astype(np.int64),
            replies(col["step"], col["seq"], speaker, col["asks"] > 0, col["own_voice"] > 0))


def _work_out(store: Store, namespace: str, event_ids: list[str]) -> dict[str, EventBlock | None]:
    # read, not kept as rows too: the block is what is kept (Store.derived), and rows held twice made an ask's
    # events count four times against the read cache's limit
    events, mat = store.get_events(namespace, event_ids, keep=False)
    obs, obs_mat = store.observations_of(namespace, [e.id for e in events], keep=False)
    row = {o.id: i for i, o in enumerate(obs)}
    touching: dict[str, list[Relation]] = {e.id: [] for e in events}
    for r in store.relations_of(namespace, list(touching), keep=False):  # in stored order
        for end in {r.source, r.target} & touching.keys():
            touching[end].append(r)
    # the columns of all the observations at once, then each event's rows taken from them: stream order is
    # row order, as observations_of returns it
    table = turn_numbers(obs)
    objects, ids, speakers = _objects(obs), _objects([o.id for o in obs]), _objects([o.speaker for o in obs])
    out: dict[str, EventBlock | None] = dict.fromkeys(event_ids)
    for e, vector in zip(events, mat):
        own = np.array(sorted(row[o] for o in e.observation_ids if o in row), dtype=np.int64)
        out[e.id] = EventBlock(
            event=e, vector=vector, observations=objects[own], ids=ids[own], matrix=obs_mat[own],
            speaker=speakers[own], numbers=table[own],
            first=tuple(table[own[0], :2].tolist()) if len(own) else (np.inf, np.inf),
            neighbours=tuple(Neighbour(r.target, r.type, True) if r.source == e.id else Neighbour(r.source, r.type, False)
                             for r in touching[e.id] if r.source != r.target),
            revisions=tuple((r.step, r.target, r.evidence[0], r.evidence[1]) for r in touching[e.id]
                            if r.source == e.id and r.type in REVISION_TYPES and len(r.evidence) == 2))
    return out


def _objects(values: list) -> np.ndarray:
    """A 1-D object array of these values (numpy would read a model or a str as a sequence of its own)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def replies(step: np.ndarray, seq: np.ndarray, speaker: np.ndarray, asks: np.ndarray,
            own_voice: np.ndarray) -> np.ndarray:
    """Per row (rows in stream order), the row of the turn it replies to, else -1: the row just before it
    when that is the previous turn of its session (same step, previous seq), asks something, was said by
    someone else, and this reply is a person's own (GraphView.question_before says why)."""
    asked = np.full(len(step), -1, dtype=np.int64)
    if len(step) > 1:
        ok = ((step[1:] == step[:-1]) & (seq[1:] == seq[:-1] + 1) & asks[:-1] & own_voice[1:]
              & (speaker[1:] != speaker[:-1]))
        asked[1:][ok] = np.flatnonzero(ok)
    return asked


class Joined:
    """The observations of some blocks in stream order (filtered to `allowed`), with their columns: what
    GraphView.build cuts a view from."""

    def __init__(self, blocks: list[EventBlock], allowed: set[str] | None) -> None:
        # blocks by their first turn: events rarely interleave, so the rows are then in stream order as they
        # are joined, and the ~1,400 vectors are copied once instead of joined and then reordered
        by_first = sorted(range(len(blocks)), key=lambda i: blocks[i].first)
        parts = [blocks[i] for i in by_first]

        def joined(part: str) -> np.ndarray:
            return np.concatenate([getattr(b, part) for b in parts]) if parts else np.zeros(0, dtype=object)

        numbers = np.concatenate([b.numbers for b in parts]) if parts else np.zeros((0, len(NUMBERS)))
        step, seq = numbers[:, 0], numbers[:, 1]
        ordered = bool(np.all((step[1:] > step[:-1]) | ((step[1:] == step[:-1]) & (seq[1:] > seq[:-1]))))
        order = None if ordered else np.lexsort((seq, step))  # stable: stream order
        ids = joined("ids")
        if allowed is not None and len(ids):  # filtered: the other observations are neither scored nor shown
            order = np.arange(len(ids)) if order is None else order
            order = order[[o in allowed for o in ids[order].tolist()]]
        owner = np.repeat(np.array(by_first, dtype=np.int64), [len(b.ids) for b in parts])  # row of the view's events
        matrix = np.concatenate([b.matrix for b in parts]) if parts else None
        if order is None:
            self.ids, self.owner, self.matrix, self.numbers = ids, owner, matrix, numbers
            self.observations, self.speaker = joined("observations"), joined("speaker")
        else:
            self.ids, self.owner, self.numbers = ids[order], owner[order], numbers[order]
            self.matrix = matrix[order] if len(order) else None
            self.observations, self.speaker = joined("observations")[order], joined("speaker")[order]

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """assistant mask, passage lengths, day numbers and question_before, as GraphView keeps them."""
        return turn_columns(self.numbers, self.speaker)
