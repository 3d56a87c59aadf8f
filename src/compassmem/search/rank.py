"""Evidence ranking: every observation of the namespace ordered by how much it should be handed to the
answerer, using what the graph knows beyond one turn's similarity.

Score of an observation o in event e:

    own(o)   = similarity to the question (embedding + BM25, GraphView.observation_scores), a share
               unnamed_weight of it to the question less the people it names (without_people below)
             + subject_weight · cosine(o, the question's subject)  (search/engine.py, subject_of below)
             + participant_weight · [o's speaker is named in the question, or asks it: "my" to an assistant]
             + date_weight · [o was said on the day or in the month the question names, ± date_slack_days]
             + reply_weight · max(own(q), 0) for the question turn q that o replies to, when the question asks
               something (GraphView.question_before)
    event(e) = max own(o) over e's observations
             + relation_weight · mean over e's typed neighbours of max(event, 0)
             + kept_weight · [an explorer kept e]
    score(o) = own(o) + event_weight · event(e)
             − thread_weight · [e is more than thread_hops typed relations from the events of the best
                                thread_seeds turns by this score], for a question
             − passage_length_weight · log(tokens(o) / 25), for a passage no one said longer than 25 tokens

Why each term (measured in docs/benchmarks.md, chosen by leave-one-conversation-out):
- an event is a unit of meaning: a turn inside a relevant event is likely evidence even when it shares
  no words with the question (the answer is often the reply, not the turn that repeats the question);
- a question's embedding is dominated by its frame and its people ("What types of sports did Kevin
  do?"); the turns that answer it speak of instances of its subject ("I hit the golf course"), which
  meet the subject alone ("sports") better than the whole question;
- a question that names a date ("What did Melanie paint on October 13, 2023?") asks about what was said
  then; every turn carries the date it was said (its session's), which a flat ranking ignores;
- a question about a person is answered by what that person said or did (the event's participants),
  which rarely says the person's name; the turns that do say it are mostly greetings and questions to
  them ("What about you Kate?"), so the name counts through who speaks, not through the words;
- a question turn that meets the question ("What did you paint?") is answered by the turn after it ("A
  sunset over the lake"), which may share no word with it: the reply gets a share of the question turn's
  score, before the event term, so it also outranks the other turns of its event;
- typed relations carry relevance one hop along the graph (the second hop of a multi-hop question) —
  the idea; measured, the offline relations do not earn it, and the default weight is 0 (docs/benchmarks.md);
- events the explorers kept are the active search's own judgement;
- in a memory of many conversations, similar turns of other conversations crowd the budget; the typed
  relations join an event to its own conversation (follow-up, before/after, cause), so a turn far over
  them from the best turns is likely off the thread. A statement recalled by (a trigger for its cue) looks
  for a link the graph does not hold, and keeps every turn;
- evidence is handed within a token budget: a document's 300-token paragraph takes the room of a dozen
  short ones, so a long passage must be that much better to go first (speakers' turns are left alone: on
  chats the answer is often the long turn, and a length rule for every turn cost REALTALK 4.5 points);
- for a question about the present, a later restatement of the same thing by the same person outranks
  the earlier one (search/current.py: newer facts first, the older one stays as history).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Iterable

import numpy as np

from ..config import SearchSettings
from ..text import content_words, is_question
from ..timeutil import named_period
from .current import MACHINE_ROLES, newer_first, speaks_for_self
from .graph import GraphView
from .planner import asks_for_several


@dataclass(frozen=True)
class RankWeights:
    """The ranking's weights, named as the SearchSettings they come from (`from_settings`), where the tuned
    defaults live; here every term defaults to off (0, or a share of 1), so a test sets only the terms it
    measures."""

    participant_weight: float = 0.0
    date_weight: float = 0.0
    date_slack_days: int = 0
    event_weight: float = 0.0
    relation_weight: float = 0.0
    kept_weight: float = 0.0
    newer_window: int = 0  # newer facts first (search/current.py): rows considered, 0 = off
    newer_margin: float = 0.0
    newer_max_words: int = 0  # longer turns are not taken for restatements; 0 = no limit
    reply_weight: float = 0.0
    set_event_weight: float = 1.0  # share of the event term for a question that asks for a set (asks_for_several)
    assistant_event_share: float = 1.0  # share of the event term for an assistant's turn
    thread_weight: float = 0.0
    thread_seeds: int = 10
    thread_hops: int = 2
    passage_length_weight: float = 0.0

    @classmethod
    def from_settings(cls, s: SearchSettings) -> "RankWeights":
        """The settings' values; an ablation's switch turns its term off (relations; the planner reads a
        set question)."""
        w = cls(**{f.name: getattr(s, f.name) for f in fields(cls)})
        return replace(w, relation_weight=w.relation_weight if s.use_relations else 0.0,
                       thread_weight=w.thread_weight if s.use_relations else 0.0,
                       set_event_weight=w.set_event_weight if s.use_planner else 1.0)


PASSAGE_TOKENS = 25.0  # a passage up to this long pays no length penalty (a line of a script, a short paragraph)
ROLES = MACHINE_ROLES | {"user"}  # speakers' role names, not people's names
_WORD = re.compile(r"[A-Za-z][\w'’-]*")
# words that frame a question without saying what it is about ("what types of sports")
_FRAME = {"type", "types", "kind", "kinds", "sort", "sorts", "thing", "things"}


def subject_of(question: str) -> str | None:
    """What a question asks about: its words less question and function words, the frame words above, and
    capitalised words (people, places: the question's own embedding and BM25 carry those). None when
    nothing is left."""
    words = []
    for w in _WORD.findall(question):
        w = re.sub(r"['’]s$", "", w)
        if w[:1].isupper() or w.lower() in _FRAME or not content_words(w):
            continue
        words.append(w)
    return " ".join(words) or None


_FIRST_PERSON = re.compile(r"\b(?:I|me|my|mine|myself|I'm|I've|I'd|I'll)\b")


def asker(question: str, speakers: list[str]) -> set[str]:
    """A question in the first person ("How many commits have I merged?") is about the one asking: in a
    memory of one person's chats with an assistant, that person (BEAM's dev gold evidence: 421 of 546
    turns of first-person questions are the user's, whose turns are a fraction of the assistant's length)."""
    people = [s for s in speakers if speaks_for_self(s)]
    if len(people) == 1 and len(people) < len(speakers) and _FIRST_PERSON.search(question):
        return set(people)
    return set()


_ASKING = re.compile(r"^\W*(?:what|when|where|who|whom|whose|which|why|how|did|do|does|is|are|was|were|can|could|"
                     r"has|have|had|will|would|should)\b", re.I)


def asks(text: str) -> bool:
    """Whether a text is a question (a reply answers questions; a statement recalled from memory, such as
    a trigger for its cue, is not one)."""
    return is_question(text) or bool(_ASKING.match(text))


def names_used(graph: GraphView, question: str) -> dict[str, str]:
    """The words the question uses for speakers of the namespace → the speaker: a speaker's name or first
    name as a word, or a name the conversation calls them by (search/people.py: "Kate" for the speaker
    recorded as "Emi")."""
    found: dict[str, str] = {}
    for name in graph.speakers():
        for part in (name, *name.split()[:1]):
            if len(part) > 1 and re.search(rf"(?<![\w]){re.escape(part)}(?![\w])", question, re.I):
                if part == name or part not in found:  # "Banky" is the speaker Banky, not "Banky V.O."
                    found[part] = name
    return found | graph.called(question)


def named_participants(graph: GraphView, question: str) -> set[str]:
    """Speakers the question names (names_used), or the one asking it ("my" to an assistant)."""
    return set(names_used(graph, question).values()) | asker(question, graph.speakers())


def without_people(question: str, words: Iterable[str]) -> str | None:
    """What a question asks about the people it names: the question less those names (and their
    possessive 's). "What are Kate's hobbies?" meets "Hey Kate!" and "What about you Kate?" on the name
    alone, in words and in meaning, while the turns that answer it ("I love skiing") are Kate's own and
    never say her name; who said a turn is the participant term's to judge. A role a chat records as a
    speaker ("user", "assistant") stays: in "How many user roles…?" it is a word, not a name. None when
    no name is removed or only function words remain."""
    rest = question
    for w in sorted({w for w in words if w.lower() not in ROLES}, key=len, reverse=True):
        rest = re.sub(rf"(?<![\w]){re.escape(w)}(?:['’]s)?(?![\w])", " ", rest, flags=re.I)
    rest = " ".join(rest.split())
    return rest if rest != question and content_words(rest) else None


def rank_observations(graph: GraphView, own: np.ndarray, question: str, kept: list[str],
                      weights: RankWeights, limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """(observation ids best first, their scores), the best `limit` of them (all by default). `own` is
    observation_scores' column for the question (rows in graph.obs_order)."""
    if graph.obs_event is None or not len(own):
        return [], np.zeros(0)
    own = own.astype(float).copy()
    names = named_participants(graph, question) if weights.participant_weight else set()
    if names:
        own += weights.participant_weight * graph.speaker_mask(names)
    period = named_period(question, weights.date_slack_days) if weights.date_weight else None
    if period:
        own += weights.date_weight * graph.date_mask(*period)
    if weights.reply_weight and asks(question):
        asked = graph.question_before()
        replies = asked >= 0
        own[replies] += weights.reply_weight * np.maximum(own[asked[replies]], 0.0)
    event = graph.event_max(own)
    if weights.relation_weight:
        event = event + weights.relation_weight * graph.neighbour_mean(np.maximum(event, 0.0))
    if weights.kept_weight and kept:
        event[[graph.index(e) for e in kept]] += weights.kept_weight
    share = weights.set_event_weight if weights.set_event_weight != 1.0 and asks_for_several(question) else 1.0
    inherited = weights.event_weight * share * event[graph.obs_event]
    if weights.assistant_event_share != 1.0:  # an assistant's reply comes with the user's turn it answers only on its own merit
        inherited = np.where(graph.assistant_mask(), weights.assistant_event_share * inherited, inherited)
    score = own + inherited
    if weights.thread_weight and asks(question) and graph.linked:
        seeds = np.unique(graph.obs_event[best_first(score, weights.thread_seeds)])
        far = graph.hops_from(seeds, weights.thread_hops) > weights.thread_hops
        score = score - weights.thread_weight * far[graph.obs_event]
    if weights.passage_length_weight:
        score = score - weights.passage_length_weight * length_penalty(graph.passage_lengths())
    if weights.newer_window:
        best = best_first(score, weights.newer_window)
        score = newer_first(graph, question, best, score, weights.newer_window, weights.newer_margin,
                            weights.newer_max_words)
    order = best_first(score, limit)
    return graph.ids_at(order), score[order]


def length_penalty(tokens: np.ndarray) -> np.ndarray:
    """log(tokens / PASSAGE_TOKENS) for the passages longer than PASSAGE_TOKENS, else 0 (a speaker's turn has
    length 0 in GraphView.passage_lengths, so it never pays)."""
    return np.log(np.maximum(tokens, PASSAGE_TOKENS) / PASSAGE_TOKENS)


def best_first(score: np.ndarray, limit: int | None = None) -> np.ndarray:
    """Rows of `score` best first, the best `limit` of them (all by default): a partition, then a sort of
    only those; ties in stream order, as a stable sort of everything would give."""
    if limit is not None and limit < len(score):
        top = np.argpartition(-score, limit - 1)[:limit]
        return top[np.lexsort((top, -score[top]))]
    return np.argsort(-score, kind="stable")
