"""Who a question is about: the names a conversation calls its speakers by.

A chat records a display name or user handle ("Emi", "elise") while the people in it call each other by
their names ("Hey Kate!", "What about you Kate?", "I'm Kate"), and a question asks about "Kate". A
speaker prior that only knows the speaker field misses every such question (on the REALTALK dev chats,
35 of 284 questions name a speaker this way), so the names are learnt from the conversation itself:

- "I'm W" / "my name is W" / "call me W" said by S: S is called W;
- W said as a vocative ("Hey W", "Thanks, W!", "… you W?") by S in a conversation of two speakers: the
  other one is called W.

A word counts as a name only when a turn opens with a greeting to it ("Hey W!") or one says "my name
is W", so "Have you been to Hawaii?" never makes Hawaii a person, nor "I'm Italian" an Italian. A name
is resolved to the speaker it points at in at least two turns and at least twice as often as to anyone
else or about a third person (an assistant's draft letter "Hi Greg," to the user's mentor, whom the user
speaks of, makes no alias). Nothing is stored: the turns are read from the full-text index at ask time,
so deleting them forgets the name too.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

from ..models import Observation
from ..text import content_words

if TYPE_CHECKING:
    from ..store import Store

_WORD = re.compile(r"(?<![\w'])([A-Z][a-z]+)(?![\w])")  # "Kate" in "Kate's"
_GREETING = r"(?:hey|hi|hello|thanks|thank you|dear|bye|good morning|good night|congrats|welcome)"
_MIN_TURNS = 2
_MAX_CANDIDATES = 4  # full-text lookups one ask may spend on words that might be names
TURNS_READ = 60  # turns read per possible name: the best by BM25, short turns that say it first


def turns_saying(store: "Store", namespace: str, word: str) -> list[tuple[str | None, str]]:
    """(speaker, text) of the namespace's turns that contain `word`, the best TURNS_READ by BM25 (short
    turns that say it first: where a name is said to someone), nothing else decoded."""
    def read(words: list[str]) -> dict[str, list[tuple[str | None, str]]]:
        return {w: store.utterances(namespace, [oid for oid, _ in store.lexical_search(namespace, w, TURNS_READ)])
                for w in words}
    return store.derived(namespace, "turns saying", [word], read)[word][:]  # kept between asks, like the rows


# the word a turn greets ("Hey Kate!", "Hi there, Kate") or introduces ("my name is Kate"), whatever it is:
# one pattern for every possible name, so a word that is never greeted (most capitalised words of a
# question: places, titles) costs no pattern of its own
_GREETED = re.compile(rf"\W*(?i:{_GREETING}\b)[,!]?\s+(?:there,?\s+)?(\w+)")
_INTRODUCED = re.compile(r"\b(?:[Mm]y name is|[Cc]all me)\s+(\w+)")


def greets(text: str, name: str) -> bool:
    """Whether `text` opens with a greeting to `name` or says "my name is `name`" / "call me `name`"."""
    opening = _GREETED.match(text)
    return (opening is not None and opening.group(1) == name) or any(m.group(1) == name for m in _INTRODUCED.finditer(text))


@lru_cache(maxsize=1024)
def _patterns(name: str) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """The introduction, the vocative and the bare word for a name that some turn greets."""
    w = re.escape(name)
    introduction = re.compile(rf"\b(?:I'm|I’m|I am|[Mm]y name is|[Cc]all me)\s+{w}\b")
    vocative = re.compile(rf"(?i:\b{_GREETING}\b)[,!]?\s+(?:there,?\s+)?{w}\b|(?:^|,\s*|\byou\s+|\s){w}(?=\s*[!?.,]|\s*$)")
    return introduction, vocative, re.compile(rf"\b{w}\b")


def candidate_names(question: str, speakers: Iterable[str]) -> list[str]:
    """Capitalised words of the question that are not a question word or already a speaker's name."""
    known = {part.lower() for s in speakers for part in (s, *s.split()[:1])}
    words = [w for w in _WORD.findall(question) if w.lower() not in known and content_words(w)]
    return list(dict.fromkeys(words))[:_MAX_CANDIDATES]


def resolve(name: str, turns: list[tuple[str | None, str]], speakers: list[str]) -> str | None:
    """The speaker that `turns` ((speaker, text) of those that say `name`) show is called `name`, or None."""
    if not any(greets(text, name) for _, text in turns):
        return None
    introduction, vocative, word = _patterns(name)
    votes: Counter[str] = Counter()
    mentions = 0  # turns that say the name about someone rather than to them
    for speaker, text in turns:
        if not speaker:
            continue
        if introduction.search(text):
            votes[speaker] += 1
        elif vocative.search(text):
            others = [s for s in speakers if s != speaker]
            if len(others) == 1:
                votes[others[0]] += 1
        elif word.search(text):
            mentions += 1
    if not votes:
        return None
    (best, n), *rest = votes.most_common(2) + [("", 0)]
    return best if n >= _MIN_TURNS and n >= 2 * max(rest[0][1], mentions) else None


def called(question: str, speakers: list[str], read_turns) -> dict[str, str]:
    """The names the question uses for speakers that are not their speaker field: name → speaker.
    `read_turns(name)` gives (speaker, text) of the namespace's turns that contain the word."""
    found: dict[str, str] = {}
    for name in candidate_names(question, speakers):
        speaker = resolve(name, read_turns(name), speakers)
        if speaker is not None:
            found[name] = speaker
    return found


def as_called(o: Observation, names: dict[str, str]) -> Observation:
    """An evidence turn as the answerer reads it: a speaker the question calls by another name is shown
    with it ("emi_22 (Kate)"), so a model asked about Kate knows whose lines are Kate's. The stored turn
    and the Answer's evidence keep the speaker field."""
    for name, speaker in names.items():
        if o.speaker == speaker:
            return o.model_copy(update={"speaker": f"{speaker} ({name})"})
    return o
