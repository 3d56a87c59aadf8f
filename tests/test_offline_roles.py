"""Tables for the offline heuristics that decide behaviour without a model (issue "Architecture", item 5):
each row is an input and what a reader expects the heuristic to decide. A change to a rule shows here as
the rows it changes."""

from __future__ import annotations

import pytest

from compassmem.config import ConstructionSettings
from compassmem.construct.fuse import OfflineFusionJudge
from compassmem.construct.relate import OfflineRelationExtractor
from compassmem.models import Event, EventTime, Observation
from compassmem.search.current import about_the_present, states_change
from compassmem.search.planner import OfflinePlanner, asks_for_several
from compassmem.text import clip, said

PLANS = [
    ("What did Caroline and Melanie paint?", ["What did Caroline paint", "What did Melanie paint"]),
    ("What did Caroline, Melanie and Jon paint?", ["What did Caroline paint", "What did Melanie paint",
                                                    "What did Jon paint"]),
    ("Where did Maria and John go hiking and camping?", ["Where did Maria go hiking and camping",
                                                         "Where did John go hiking and camping"]),
    ("Did Caroline and Melanie go to Paris or Rome?", ["Did Caroline go to Paris or Rome",
                                                       "Did Melanie go to Paris or Rome"]),
    ("What do Jon and Gina both have in common?", ["What do Jon have in common", "What do Gina have in common"]),
    ("Which cities did John visit in 2022 and 2023?", ["Which cities did John visit in 2022",
                                                       "Which cities did John visit in 2023"]),
    ("What does Gina like, and why?", ["What does Gina like"]),
    ("Who did Jon meet at the fair as well as the gym?", ["Who did Jon meet at the fair"]),
    ("When did Jon start his dance studio?", []),
    ("How many pets does Ana have?", []),
]


@pytest.mark.parametrize("question, subgoals", PLANS, ids=[q for q, _ in PLANS])
def test_the_offline_planner_splits_coordinations_into_questions_that_stand_alone(question, subgoals):
    assert OfflinePlanner().plan(question, 5) == [question.rstrip("?")] + subgoals


SEVERAL = [
    ("What are Kate's hobbies?", True),
    ("What activities does Elise do with her friends?", True),
    ("Which countries has Kevin been to?", True),
    ("How many times did Ana run a marathon?", True),
    ("What kinds of pastries did Ben bake?", True),
    ("Which of Elise's recipes contain garlic?", True),
    ("What were Ana's plans for the summer?", True),
    ("What martial arts has John done?", True),  # the noun before the verb, not the word after "what"
    ("What European countries has Maria been to?", True),
    ("In what countries has Paola been?", True),
    ("Where has Melanie camped?", True),  # the present perfect: every time it happened
    ("What kind of pot did Mel make with clay?", False),  # a kind of pot is one pot
    ("What book did Melanie read?", False),
    ("What is Kate's favourite sport?", False),
    ("What does Kate do on weekends?", False),
    ("When did Caroline go to the support group?", False),
    ("Which movie's theme is Tim's favourite?", False),  # a possessive, not a plural
    ("What was his first job?", False),
    ("Where does Kevin live?", False),
    ("I finally passed the exam.", False),
]


@pytest.mark.parametrize("question, several", SEVERAL, ids=[q for q, _ in SEVERAL])
def test_a_question_asking_for_a_set_is_told_from_one_asking_for_one_fact(question, several):
    assert asks_for_several(question) is several


def test_the_offline_refinement_asks_for_what_the_evidence_lacks():
    planner = OfflinePlanner()
    assert planner.refine("Where did Ana go?", ["Where did Ana go", "Ana trip"], [True, False],
                          "Ana: I went to Porto.") == "trip"


def _event(i: int, text: str, day: str | None = None) -> Event:
    return Event(id=f"e{i}", namespace="n", step=1, summary=text, participants=["Ana"], time=EventTime(date=day),
                 observation_ids=[f"o{i}"])


def _obs(i: int, text: str) -> Observation:
    return Observation(id=f"o{i}", namespace="n", step=1, seq=i, text=text, speaker="Ana")


RELATIONS = [  # (earlier event, later event) -> (source, target, type) over indexes 0, 1
    ("I lost my job.", "Because of that I started a bakery.", [(0, 1, "causal")]),
    ("I adopted a dog.", "That's why I moved to a house with a garden.", [(0, 1, "causal")]),
    ("I lost my job.", "I want to open a bakery.", [(1, 0, "motivation")]),
    ("We met at the fair.", "After that we went for dinner.", [(0, 1, "temporal_before")]),
    ("I like tea.", "I run on Sundays.", []),
]


@pytest.mark.parametrize("first, second, expected", RELATIONS, ids=[r[1] for r in RELATIONS])
def test_relation_cues(first, second, expected):
    found = OfflineRelationExtractor().relate(1, [_obs(0, first), _obs(1, second)],
                                              [_event(0, first), _event(1, second)])
    assert [(r.source, r.target, r.type) for r in found] == expected


def test_dates_order_events_whatever_order_they_are_mentioned_in():
    found = OfflineRelationExtractor().relate(1, [_obs(0, "x"), _obs(1, "y")],
                                              [_event(0, "x", "2023-05-10"), _event(1, "y", "2023-05-01")])
    assert [(r.source, r.target, r.type) for r in found] == [(1, 0, "temporal_before")]


FUSION = [  # similarity, people (existing, new), dates (existing, new) -> same event?, related?, type
    (0.95, ["Ana"], ["Ana"], "2023-05-01", "2023-05-02", True, False, None),
    (0.95, ["Ana"], ["Bo"], "2023-05-01", "2023-05-02", False, True, "related_to"),  # other people: not the same
    (0.95, ["Ana"], ["Ana"], "2023-05-01", "2023-06-01", False, True, "follow_up"),  # a month apart: not the same
    (0.70, ["Ana"], ["Ana"], None, None, False, True, "follow_up"),
    (0.70, ["Ana"], ["Bo"], None, None, False, True, "related_to"),
    (0.40, ["Ana"], ["Ana"], None, None, False, False, None),
]


@pytest.mark.parametrize("sim, old_people, new_people, old_day, new_day, same, related, kind", FUSION)
def test_fusion_decisions(sim, old_people, new_people, old_day, new_day, same, related, kind):
    old = Event(id="a", namespace="n", step=1, summary="x", participants=old_people, time=EventTime(date=old_day),
                observation_ids=["o"])
    new = Event(id="b", namespace="n", step=2, summary="y", participants=new_people, time=EventTime(date=new_day),
                observation_ids=["p"])
    verdict = OfflineFusionJudge(ConstructionSettings()).judge(old, new, sim)
    assert (verdict.same_event, verdict.related, verdict.relation_type) == (same, related, kind)


PRESENT = [("What car does Ana drive?", True), ("How old is Rex?", True), ("Is Alice vegetarian?", True),
           ("What car did Ana drive before?", False), ("What was her first job?", False),
           ("When did Ana move?", False), ("What did she originally plan?", False)]


@pytest.mark.parametrize("question, present", PRESENT)
def test_which_questions_are_about_the_present(question, present):
    assert about_the_present(question) is present


CHANGES = [  # a later statement, the question, the earlier statement -> does it state a change of the same thing?
    ("I sold the Toyota, I drive a blue Tesla now.", "What car does Ana drive?", "I drive a red Toyota.", True),
    ("My rent is 1100 euros a month now.", "How much is Ana's rent?", "My rent is 900 euros a month.", True),
    ("I drive to work every day.", "What car does Ana drive?", "I drive a red Toyota.", False),  # no change said
    ("I bought new shoes now.", "What car does Ana drive?", "I drive a red Toyota.", False),  # not the same thing
]


@pytest.mark.parametrize("later, question, earlier, expected", CHANGES)
def test_which_statements_state_a_change(later, question, earlier, expected):
    assert states_change(later, question, earlier) is expected


@pytest.mark.parametrize("text, limit, shown", [
    ("A sunset over the lake", 40, "A sunset over the lake"),           # fits: whole
    ("A sunset over the lake", 13, "A sunset over…"),                   # cut at the last word boundary
    ("A sunset over the lake", 12, "A sunset…"),                        # never half a word
    ("Supercalifragilistic", 5, "Super…"),                              # one long word: cut where the limit falls
])
def test_one_way_to_shorten_a_text_for_a_prompt_or_a_screen(text, limit, shown):
    assert clip(text, limit) == shown


def test_who_said_what_is_spelled_once():
    assert said("Kate", "I love skiing") == "Kate: I love skiing" and said(None, "It was dark.") == "It was dark."
    assert Observation(id="D1:1", namespace="n", step=0, speaker="Kate", text="I love skiing").said() == "Kate: I love skiing"


def _explorer_step(rel: dict[str, list[float]], summaries: dict[str, str], subgoals: list[str],
                   satisfied: list[bool], max_next: int = 2):
    """The offline explorer's decision on event "e" whose neighbours are the other events; `rel`: each
    event's similarity to [question, *subgoals], which the policy reads relative to the best event of
    each column (so a column whose events all score alike makes every event "the best" for it)."""
    import numpy as np

    from compassmem.search.explorer import OfflinePolicy, StepContext
    from compassmem.search.graph import GraphView, Neighbour

    ids = list(rel)
    events = {e: Event(id=e, namespace="n", step=1, summary=summaries.get(e, "nothing to say"), observation_ids=["o"])
              for e in ids}
    graph = GraphView("n", events, ids, np.eye(len(ids), dtype=np.float32), {}, {}, {})
    policy = OfflinePolicy(graph, np.array([rel[e] for e in ids], dtype=float))
    ctx = StepContext("What did Ana paint?", subgoals, satisfied, events["e"], [],
                      [Neighbour(e, "follow_up", True) for e in ids if e != "e"], max_next)
    return policy.decide(ctx)


@pytest.mark.parametrize("rel, summary, subgoals, satisfied, action, nxt, met", [
    # relevant (≥ 0.8 of the best event's similarity): kept; neighbours at ≥ 0.7 followed, best first
    ({"e": [0.85, 0.2], "a": [1.0, 0.3], "b": [0.75, 0.1], "c": [0.5, 0.2]}, "", ["x"], [False],
     "EXPAND", ["a", "b"], []),
    # below 0.8 and sharing few words with the question: skipped, though its neighbours are still chosen
    ({"e": [0.6, 0.2], "a": [1.0, 0.3], "c": [0.5, 0.2]}, "a sunny day", ["x"], [False], "SKIP", ["a"], []),
    # the same similarity, but the event says most of the question's words: kept on its words
    ({"e": [0.6, 0.2], "a": [1.0, 0.3]}, "Ana likes to paint", ["x"], [False], "EXPAND", ["a"], []),
    # a sub-goal met: similarity ≥ 0.9 to it and half its words said
    ({"e": [0.95, 0.95], "a": [1.0, 1.0]}, "Ana painted a lake at sunset", ["Ana painted what"], [False],
     "EXPAND", ["a"], [0]),
    # every sub-goal met and nothing worth following: the explorer answers
    ({"e": [1.0, 1.0], "c": [0.1, 0.1]}, "Ana painted a lake at sunset", ["Ana painted what"], [False],
     "ANSWER", [], [0]),
    # a met sub-goal no longer draws the explorer: only the question's and the open goals' columns count
    ({"e": [0.9, 0.2, 0.3], "a": [0.3, 1.0, 0.1], "b": [1.0, 0.2, 0.2]}, "", ["x", "y"], [True, False],
     "EXPAND", ["b"], []),
    # at most max_next neighbours (2)
    ({"e": [0.9, 0.2], "a": [1.0, 0.1], "b": [0.95, 0.1], "c": [0.9, 0.1]}, "", ["x"], [False],
     "EXPAND", ["a", "b"], []),
])
def test_offline_explorer_decisions(rel, summary, subgoals, satisfied, action, nxt, met):
    out = _explorer_step(rel, {"e": summary}, subgoals, satisfied)
    assert (out.action, out.next, out.satisfied) == (action, nxt, met)
