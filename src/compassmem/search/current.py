"""Newer facts first: for a question about the present ("What is my daily quota?", "How many cards are in
my gallery?"), a later statement of the same person about the same thing outranks the earlier one it
revises, and the earlier one stays in the ranking as history, just below.

The question says what "the same thing" is: among the best-ranked observations, a later one by the same
speaker that shares a content word of the question with an earlier one, and scores within `margin`
below it, is taken to restate it later. A revision linked when it was stored (construct/revise.py)
needs no such evidence: its later turn is lifted above the earlier one, wherever it ranked, when it
says a word of the question. Present-tense state questions are about the latest statement;
a question about the past ("did", "was", "first", "originally", …) keeps the plain ranking.

Measured on BEAM's knowledge-update and contradiction questions (the updated turn ranked above the
original one), with window and margin chosen by leave-one-chat-out (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ..text import index_terms, sentences

if TYPE_CHECKING:  # the graph reads speaks_for_self below
    from .graph import GraphView

PAST = re.compile(r"\b(did|was|were|had|used to|originally|initially|at first|first|before|previous(?:ly)?|"
                  r"earlier|ago|history)\b", re.I)
# words with which people state a change: "has now reached 165", "increased to 7", "the new deadline"
REVISION = re.compile(r"\b(now|no longer|anymore|any more|recently|updated?|changed?|switched|increased|decreased|"
                      r"grown|reached|extended|instead|new|moved|actually|latest|currently|revised|adjusted|"
                      r"raised|lowered|dropped|upgraded|never|rescheduled|postponed|cancel+ed|quit|stopped|"
                      r"gave up)\b", re.I)
# an assistant's reply repeats the user's words ("now that your API answers in 250 ms…"): it restates no
# fact of its own, and lifting it pushed the user's statement out of a small budget on BEAM. A text with
# no speaker (a book, a report) is not a person restating their facts either: it is never lifted
MACHINE_ROLES = {"assistant", "system", "tool"}
_EPS = 1e-4
SHARED_TERMS = 3  # content words of the question both statements contain (leave-one-chat-out on BEAM),
# at most a third of the question's own


def said_by_assistant(speaker: str | None) -> bool:
    """Whether a speaker is a machine role (an assistant, the system, a tool), not a person."""
    return speaker is not None and speaker.lower() in MACHINE_ROLES


def speaks_for_self(speaker: str | None) -> bool:
    """Whether an observation is a person's own statement: not an assistant's, and not a book's (no speaker)."""
    return speaker is not None and not said_by_assistant(speaker)


def _need(asked: set[str]) -> int:
    """Question words two statements of the same thing share: a short question has few words to share."""
    return min(SHARED_TERMS, max(1, len(asked) // 3))


def _says_change(text: str, words: set[str], need: int) -> bool:
    return any(REVISION.search(x) and len(set(index_terms(x)) & words) >= need for x in sentences(text))


def _restates(later: str, earlier: str) -> bool:
    """The later turn says again a third of what the earlier one said (its content words): the same
    statement with a new value, however much lower it scores ("Rex turned four now and still loves the
    park" after "My dog Rex is three years old and loves the park"). A long turn rarely shares a third."""
    said = set(index_terms(earlier))
    return bool(said) and 3 * len(said & set(index_terms(later))) >= len(said)


def about_the_present(question: str) -> bool:
    """False for questions about the past or about how something started, whose answer is not the latest."""
    return not PAST.search(question)


def newer_first(graph: GraphView, question: str, order: np.ndarray, score: np.ndarray, window: int,
                margin: float, max_words: int = 0) -> np.ndarray:
    """`score` with each later restatement among the best `window` rows of `order` (rows best first)
    lifted just above the best earlier statement it revises; later ones above earlier ones among several.
    A turn of more than `max_words` words (0: no limit) is not taken for a restatement: a pasted document
    or a long request says "new" or "updated" somewhere and shares a question's words without stating a
    change to the thing asked about (on BEAM a 1,385-word request was lifted above both answers)."""
    if window <= 0 or not len(order) or not about_the_present(question):
        return score
    top = [int(r) for r in order[:window]]
    obs = [graph.observations[graph.obs_order[r]] for r in top]
    asked = set(index_terms(question))
    need = _need(asked)
    shared = [set(index_terms(o.text)) & asked for o in obs]
    when = [(o.step, o.seq) for o in obs]
    chrono = {r: k for k, r in enumerate(sorted(range(len(top)), key=lambda k: when[k]))}
    lifts: dict[int, int] = {}  # earlier row -> the latest restatement lifted above it
    for i, o in enumerate(obs):
        if (not speaks_for_self(o.speaker) or (max_words and len(o.text.split()) > max_words)
                or not _says_change(o.text, asked, need)):
            continue
        best = None
        for j, p in enumerate(obs):
            if (j != i and when[j] < when[i] and score[top[i]] <= score[top[j]]
                    and (score[top[j]] <= score[top[i]] + margin or _restates(o.text, p.text))
                    and p.speaker == o.speaker and len(shared[i] & shared[j]) >= need
                    and (best is None or score[top[j]] > score[top[best]])):
                best = j
        if best is not None and (best not in lifts or when[i] > when[lifts[best]]):
            lifts[best] = i
    out = score.copy()
    for j, i in lifts.items():  # the restatement just above the statement it revises, which stays just below
        out[top[i]] = max(out[top[i]], score[top[j]] + _EPS * (1 + chrono[i]))
    for j, o in enumerate(obs):  # revisions linked at construction, followed to the latest, when about the question
        later, k = graph.revised_by.get(o.id), 1
        while later is not None and k <= window:
            row = graph.row_of(later)
            if row is None or not set(index_terms(graph.observations[later].text)) & asked:
                break
            out[row] = max(out[row], score[top[j]] + _EPS * (len(top) + k))
            later, k = graph.revised_by.get(later), k + 1
    return out


def states_change(text: str, question: str, earlier: str | None = None) -> bool:
    """Whether a sentence of `text` states a change with words of the question ("I drive a Tesla now"),
    words it shares with the `earlier` statement when one is given (the same thing, restated)."""
    asked = set(index_terms(question))
    need = _need(asked)
    if earlier is not None:
        asked &= set(index_terms(earlier))
    return _says_change(text, asked, need)
