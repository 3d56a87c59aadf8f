"""The offline answerer: an extractive span from the handed evidence, with no model.

Rules, each from a failure seen on the dev conversations:
- a clause that asks something never answers: a turn that repeats the question is the *question*;
  the reply after it (the next turn of the same session) is where the answer is;
- a question about a named person is answered by what that person said;
- the answer is the shortest clause that carries the matching content, stripped of greetings and
  fillers ("Wow, Caroline!", "Thanks!"); who/where-questions get just the names a strong clause gives
  that the question does not (a person, a place);
- when-questions get the resolved date of the clause that states the event ("last Friday" said on
  15 July 2023 → "14 July 2023"), else the date of the turn that states it;
- who/which/where-questions get a name only when one of the three best clauses states it; otherwise the
  best turn itself, with its speaker and date, rather than a fragment that looks like an answer.
Every reply says which of these it is (Reply.kind → Answer.answer_kind): offline answers are extracted,
never written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..embed import CachedEmbedder
from ..models import Event, Observation
from ..store import Store
from ..timeutil import fmt, from_iso, resolve_in_text
from ..text import content_words, is_question
from .current import about_the_present, speaks_for_self, states_change
from .responder import WHEN, Reply, evidence_line

WHO_WHERE = re.compile(r"^\s*(who|where|which|whom)\b", re.I)
# a place question takes only a name said as a place ("living in Edinburgh"), not any name: "Which city was
# Lena living in…?" was answered "Kirsty", the friend named in the best clause
PLACE_Q = re.compile(r"^\s*(where|which (?:city|town|country|place|state|village|area|island|neighbou?rhood))\b", re.I)
_PLACE = re.compile(r"\b(?:in|at|from|to|near|into|around|visit(?:ed|ing)?)\s+(?:the\s+)?([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")  # capitalised, not sentence-initial
_SPLIT = re.compile(r"(?<=[.!?;])\s+|\s+[-–—]\s+|,\s+(?=but |and |so |because )")
# "How did Tom keep fit after twisting his ankle?": what follows "after" is the premise, already known; the
# answer is the clause about the main part (the demo answered with the premise turn).
_PREMISE = re.compile(r"\s(?:after|before|since|while|once|because|when)\s", re.I)
_FILLER = re.compile(r"^(?:(?:hey|hi|hello|wow|whoa|yeah|yes|yep|sure|oh|aw+|thanks|thank you|haha|lol|ok(?:ay)?|"
                     r"cool|great|nice|awesome|congrats|congratulations|right|totally|definitely|absolutely)"
                     r"(?:\s+\w+)?[,!.]\s*)+", re.I)


@dataclass
class Clause:
    text: str
    source: Observation
    reply_to_question: bool = False


@lru_cache(maxsize=32_768)
def _clauses(text: str) -> tuple[str, ...]:
    """Remembered per text: consecutive asks of a memory hand over mostly the same turns."""
    parts = [p.strip() for p in _SPLIT.split(text) if p and p.strip()]
    return tuple(_FILLER.sub("", p).strip() for p in parts)


@lru_cache(maxsize=32_768)
def _statements(text: str) -> tuple[str, ...]:
    """The clauses of a text an answer may be: two words or more, asking nothing."""
    return tuple(c for c in _clauses(text) if len(c.split()) >= 2 and not is_question(c))


def main_part(question: str) -> str:
    """The question without its premise clause ("… after twisting his ankle"), for the shared-word score:
    a clause that only restates the premise must not win on the premise's words."""
    m = _PREMISE.search(question)
    return question[: m.start()] if m and len(content_words(question[: m.start()])) >= 2 else question


def candidates(observations: list[Observation]) -> list[Clause]:
    """Every statement clause of the evidence; clauses of a turn right after a question are marked, since
    they are the likely answer to it."""
    out: list[Clause] = []
    prev: Observation | None = None
    for o in observations:
        after_question = prev is not None and o.answers(prev)
        out += [Clause(c, o, after_question) for c in _statements(o.text)]
        prev = o
    return out


# "When is the meeting?" asks for a time the evidence states ("on Thursdays at 10"), not a turn's date
SCHEDULE_Q = re.compile(r"^\s*(?:when|what time)\s+(?:is|are|does|do|will)\b", re.I)
SCHEDULE = re.compile(r"\b(?:(?:mon|tues|wednes|thurs|fri|satur|sun)days|every\s+(?:day|week|month|morning|evening|night|\w+day)|"
                      r"at\s+\d{1,2}(?::\d\d)?\s*(?:am|pm)?|\d{1,2}(?::\d\d)?\s*(?:am|pm))\b", re.I)


class ExtractiveResponder:
    """The offline Responder: scores clauses by their turn's meaning, shared words and who said them.

    Meaning is the stored embedding of the clause's whole turn (read from the store, computed at ingest),
    so answering embeds nothing but the question: embedding every clause cost more than the whole search
    (and, measured on the dev set, scored no better: paper F1 21.27 with clause embeddings, 21.33 without)."""

    def __init__(self, embedder: CachedEmbedder, store: Store) -> None:
        self.embedder = embedder
        self.store = store

    def _turn_vectors(self, observations: list[Observation]) -> np.ndarray:
        out = np.zeros((len(observations), self.embedder.dim), np.float32)
        by_ns: dict[str, list[int]] = {}
        for i, o in enumerate(observations):
            by_ns.setdefault(o.namespace, []).append(i)
        for ns, rows in by_ns.items():
            if self.store.has_namespace(ns):  # kept between asks like the rows (Store.derived)
                kept = self.store.derived(ns, "turn vectors", [observations[i].id for i in rows],
                                          lambda ids, ns=ns: dict(zip(ids, self.store.observation_vectors(ns, ids))))
                vecs = np.stack([kept[observations[i].id] for i in rows])
                if vecs.shape[1] == out.shape[1]:
                    out[rows] = vecs
        missing = [i for i in range(len(observations)) if not out[i].any()]
        if missing:  # not stored (handed in from outside the store): embed it now
            out[missing] = self.embedder.embed([observations[i].text for i in missing])
        return out

    def respond(self, question: str, events: list[Event], observations: list[Observation], max_tokens: int) -> Reply:
        if not observations:
            return Reply("No relevant memory found.", "none")
        pool = candidates(observations)
        if not pool:  # only questions in the evidence: say so rather than answer with a question
            day = from_iso(observations[0].date)
            return Reply("Not stated in memory; it was only asked about" + (f" on {fmt(day)}." if day else "."), "none")
        score = self._score(question, pool)
        if WHEN.match(question):
            if SCHEDULE_Q.match(question):  # "When is the meeting?": the stated time, the newest one
                best = self._current(question, pool, score)
                if SCHEDULE.search(pool[best].text):
                    return Reply(pool[best].text, "span")
            return self._when(pool, score)
        best = self._current(question, pool, score)
        if WHO_WHERE.match(question):
            named = self._named(question, pool, score, {o.speaker for o in observations if o.speaker}, best)
            return Reply(named, "span") if named else Reply(evidence_line(pool[best].source), "evidence_turn")
        return Reply(pool[best].text, "span")

    @staticmethod
    def _current(question: str, pool: list[Clause], score: np.ndarray, near: float = 0.15) -> int:
        """The best clause, or for a question about the present the latest clause of the same speaker that
        states a change ("I drive a Tesla now" over "I drive a red Toyota"): newer facts win, as in the
        ranking (search/current.py). A later clause counts when it scores within `near` of the best, or
        whatever it scores when it restates the best one (two of its content words): "Rex turned four now"
        shares fewer words with "How old is Rex?" than "Rex is three years old" does."""
        best = int(np.argmax(score))
        top = pool[best].source
        if not about_the_present(question) or not speaks_for_self(top.speaker):
            return best
        said = set(content_words(pool[best].text))
        later = [i for i in range(len(pool)) if pool[i].source.speaker == top.speaker
                 and (score[i] >= score[best] - near or len(said & set(content_words(pool[i].text))) >= 2)
                 and (pool[i].source.step, pool[i].source.seq) > (top.step, top.seq)
                 and states_change(pool[i].text, question, pool[best].text)]
        return max(later, key=lambda i: (pool[i].source.step, pool[i].source.seq, score[i])) if later else best

    @staticmethod
    def _named(question: str, pool: list[Clause], score: np.ndarray, speakers: set[str], first: int) -> str | None:
        """Who/which/where: the names one of the three best clauses gives that the question does not ("Sam
        will feed Priya's cat" → "Sam"), the current clause (`first`) looked at first; None when they name
        nothing new."""
        asked = question.lower()
        top = list(dict.fromkeys([first, *np.argsort(-score, kind="stable")[:3].tolist()]))
        patterns = [_PLACE, _NAME] if PLACE_Q.match(question) else [_NAME]  # a place said as one first
        for pattern in patterns:
            for i in top:
                names = [m.group(1) for m in pattern.finditer(pool[int(i)].text)
                         if m.group(1).lower() not in asked and m.group(1) not in speakers and m.group(1) != "I"]
                if names:
                    return ", ".join(dict.fromkeys(names))
        return None

    def _when(self, pool: list[Clause], score: np.ndarray) -> Reply:
        """The best clause that carries a time expression among the strong ones; else the best one's date."""
        order = np.argsort(-score, kind="stable")
        top = score[order[0]]
        for i in order[:8]:
            if score[i] < top - 0.25:
                break
            c = pool[int(i)]
            resolved = resolve_in_text(c.text, from_iso(c.source.date))
            if resolved:
                return Reply(resolved.label, "resolved_date")
        best = pool[int(order[0])].source
        day = from_iso(best.date)
        if day:
            return Reply(fmt(day), "resolved_date")
        return Reply(best.time, "resolved_date") if best.time else Reply(evidence_line(best), "evidence_turn")

    def _score(self, question: str, pool: list[Clause]) -> np.ndarray:
        texts = [c.text for c in pool]
        sources = list({id(c.source): c.source for c in pool}.values())
        turn_vec = dict(zip((id(o) for o in sources), self._turn_vectors(sources)))
        vecs = np.stack([turn_vec[id(c.source)] for c in pool])
        qv = self.embedder.embed([question])[0]
        want = set(content_words(main_part(question)))
        lexical = np.array([len(want & set(content_words(t))) / (len(want) or 1) for t in texts])
        speaker = np.array([1.0 if c.source.speaker and re.search(rf"\b{re.escape(c.source.speaker)}\b", question, re.I)
                            else 0.0 for c in pool])
        reply = np.array([1.0 if c.reply_to_question else 0.0 for c in pool])
        length = np.array([min(len(t.split()), 12) / 12 for t in texts])
        return vecs @ qv + 0.5 * lexical + 0.15 * speaker + 0.05 * reply + 0.1 * length
