"""Newer facts at construction: a person's later statement that revises what they said before ("I am not
vegetarian anymore, I eat fish now." after "I'm vegetarian.") is linked to it when it is stored: an
`updates` (or `contradicts`) relation from the new event to the old one, with both turns as evidence, and
a `superseded` entry in the old event's history. Search lifts the revising turn above the revised one for
questions about the present (search/current.py); `history` shows the chain.

Only statements that say a change ("now", "no longer", "switched", "new", …) are checked, against the
same person's earlier sentences nearest in meaning. Offline, a pair is linked when the sentences are
close (cosine ≥ `revision_similarity`) and something changed between them: a number, a negation, or a
word of the new sentence said with an explicit change. With a model, the model picks which earlier
statement, if any, the new one revises. Measured in docs/benchmarks.md ("Newer facts first").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Protocol

from ..config import ConstructionSettings
from ..embed import CachedEmbedder
from ..llm import LLMClient
from ..models import Observation
from ..prompts import prompt
from ..schemas import revision_choice
from ..search.current import REVISION, speaks_for_self
from ..store import Store
from ..text import index_terms, is_question, sentences

CHANGE = REVISION  # what a person says when a fact of theirs changes (search/current.py)
_EXPLICIT = re.compile(r"\b(instead|switched|changed|moved|now|no longer|anymore|any more)\b", re.I)
_NUMBER = re.compile(r"\b\d+(?:[.,:]\d+)?\s*(?:%|am|pm)?", re.I)
_NEGATION = re.compile(r"\b(?:not|no longer|anymore|any more|never|stopped|quit)\b|n't\b", re.I)
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|I'll|my|mine|we|we're|our|me)\b")
CANDIDATES = 8  # earlier turns of the same person looked at per changed statement (by vector and by words)


@dataclass
class Revision:
    new: str  # the observation (this step) that states the change
    old: str  # the earlier observation whose statement it revises
    kind: Literal["updates", "contradicts"]
    confidence: float


class RevisionFinder(Protocol):
    def find(self, store: Store, namespace: str, observations: list[Observation]) -> list[Revision]: ...


@dataclass
class _Claim:
    """A sentence of the new turn that states a change, and the same person's earlier sentences near it."""
    observation: Observation
    sentence: str
    earlier: list[tuple[Observation, str, float]]  # (turn, sentence, cosine), nearest first


def _claims(store: Store, embedder: CachedEmbedder, namespace: str, observations: list[Observation],
            floor: float) -> list[_Claim]:
    """Each sentence of these turns that states a change, with the same person's earlier sentences (in
    stored turns, found by meaning and by words, and in this step's own earlier turns) near it."""
    stored = store.has_namespace(namespace)
    out: list[_Claim] = []
    for o in observations:
        said = [s for s in sentences(o.text) if CHANGE.search(s) and _about_self(s)] if speaks_for_self(o.speaker) else []
        if not said:
            continue
        vecs = embedder.embed(said)
        ids: set[str] = set()
        if stored:  # other people's turns crowd the nearest: look wider, keep this person's
            ids = {i for v in vecs for i, _ in store.search_observations(namespace, v, 6 * CANDIDATES)}
            ids |= {i for s in said for i, _ in store.lexical_search(namespace, s, 2 * CANDIDATES)}
        pool = {p.id: p for p in store.get_observations(namespace, sorted(ids))} if ids else {}
        pool.update({p.id: p for p in observations})
        earlier = [p for p in pool.values() if p.speaker == o.speaker and (p.step, p.seq) < (o.step, o.seq)]
        parts = [(p, t) for p in earlier for t in sentences(p.text) if not is_question(t)]
        if not parts:
            continue
        sims = vecs @ embedder.embed([t for _, t in parts]).T
        for k, s in enumerate(said):
            near = [(p, t, float(sims[k, j])) for j, (p, t) in enumerate(parts) if sims[k, j] >= floor]
            if near:
                out.append(_Claim(o, s, sorted(near, key=lambda x: -x[2])))
    return out


def _about_self(sentence: str) -> bool:
    """A statement of the speaker's own facts: a question revises nothing, nor does talk about others."""
    return not is_question(sentence) and bool(_FIRST_PERSON.search(sentence))


def negation_flips(new: str, old: str) -> bool:
    """One of the two sentences is negated and the other not: the later contradicts the earlier."""
    return bool(_NEGATION.search(new)) != bool(_NEGATION.search(old))


def changed(new: str, old: str) -> bool:
    """Whether `new` says something different from `old`: another number, a negation one has and the other
    not, or a word of its own said with an explicit change ("I drive a Tesla now")."""
    numbers_new, numbers_old = set(_NUMBER.findall(new)), set(_NUMBER.findall(old))
    if numbers_new and numbers_old and numbers_new != numbers_old:
        return True
    if negation_flips(new, old):
        return True
    return bool(_EXPLICIT.search(new)) and bool(set(index_terms(new)) - set(index_terms(old)))


def _best(revisions: list[Revision]) -> list[Revision]:
    """One revision per new turn: its most confident."""
    best: dict[str, Revision] = {}
    for r in revisions:
        if r.new not in best or r.confidence > best[r.new].confidence:
            best[r.new] = r
    return list(best.values())


class OfflineRevisionFinder:
    def __init__(self, embedder: CachedEmbedder, settings: ConstructionSettings) -> None:
        self.embedder, self.settings = embedder, settings

    def find(self, store: Store, namespace: str, observations: list[Observation]) -> list[Revision]:
        if not self.settings.offline_revisions:
            return []
        found = []
        for c in _claims(store, self.embedder, namespace, observations, self.settings.revision_similarity):
            for p, t, sim in c.earlier:
                if changed(c.sentence, t):
                    kind = "contradicts" if negation_flips(c.sentence, t) else "updates"
                    found.append(Revision(c.observation.id, p.id, kind, round(sim, 3)))
                    break
        return _best(found)


class LLMRevisionFinder:
    """The same candidates (a change said, the nearest earlier sentences of the same person, looser:
    similarity ≥ the offline threshold − 0.15, at most 3); the model decides. At most
    `max_revision_calls_per_step` calls a step."""

    def __init__(self, llm: LLMClient, embedder: CachedEmbedder, settings: ConstructionSettings) -> None:
        self.llm, self.embedder, self.settings = llm, embedder, settings

    def find(self, store: Store, namespace: str, observations: list[Observation]) -> list[Revision]:
        found = []
        claims = _claims(store, self.embedder, namespace, observations, max(0.0, self.settings.revision_similarity - 0.15))
        for c in claims[: self.settings.max_revision_calls_per_step]:
            options = c.earlier[:3]
            listing = "\n".join(f"{k + 1}. ({p.date or 'undated'}) {t}" for k, (p, t, _) in enumerate(options))
            out = self.llm.structured(prompt("revise"), revision_choice(len(options)), person=c.observation.speaker,
                                      date=c.observation.date or "undated", statement=c.sentence, earlier=listing)
            if out.revises:
                p, _, sim = options[out.revises - 1]
                found.append(Revision(c.observation.id, p.id, out.kind, round(sim, 3)))
        return _best(found)

