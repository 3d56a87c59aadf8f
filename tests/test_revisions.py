"""Newer facts win, older ones stay visible (issue "What memory users expect", item 1): after "I drive a
red Toyota" and, weeks later, "I sold the Toyota, I drive a blue Tesla now", a question about the present
ranks the later statement first and is answered with the new value; a question about the past is not
touched. The cases (tests/data/revisions.json) are written for this test, each in its own namespace with
the same small talk around the two statements."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compassmem import Memory
from compassmem.bench.metrics import newer_first
from compassmem.config import Settings
from compassmem.construct.revise import changed
from compassmem.search.current import about_the_present, states_change
from compassmem.search.current import newer_first as newer_first_rule

CASES = json.loads((Path(__file__).parent / "data" / "revisions.json").read_text())
SMALL_TALK = [("Bob", "How was your weekend?"), ("Alice", "Quiet, I read a book and cooked pasta."),
              ("Bob", "Nice, I watched a film with my sister."), ("Alice", "Work has been busy but fine."),
              ("Bob", "Same here, lots of emails.")]


def _turns(*pairs: tuple[str, str]) -> list[dict]:
    return [{"speaker": s, "text": t} for s, t in pairs]


def _build(mem: Memory) -> None:
    for k, case in enumerate(CASES):
        ns = f"case{k}"
        mem.add(_turns(("Bob", "Tell me about yourself."), ("Alice", case["original"]), *SMALL_TALK[:3]), ns,
                step=1, world_time="2024-03-01")
        mem.add(_turns(*SMALL_TALK), ns, step=2, world_time="2024-04-01")
        mem.add(_turns(("Bob", "Anything new?"), ("Alice", case["update"]), *SMALL_TALK[3:]), ns,
                step=3, world_time="2024-05-01")


def _position(mem: Memory, ns: str, ranking: list[str], text: str) -> int:
    texts = [mem.graph(ns).observations[o].text for o in ranking]
    return texts.index(text) if text in texts else len(texts)


@pytest.fixture(scope="module", params=["hash", "minilm"])
def revised(request, tmp_path_factory):
    mem = Memory(tmp_path_factory.mktemp("rev") / "m.db", embedder=request.param)
    _build(mem)
    yield mem
    mem.close()


def test_the_set_is_big_enough_to_mean_something():
    assert len(CASES) >= 20
    assert all(about_the_present(c["question"]) for c in CASES)


def test_a_present_question_ranks_the_later_statement_first_and_keeps_the_older_one(revised):
    late, kept = 0, 0
    for k, case in enumerate(CASES):
        a = revised.ask(case["question"], f"case{k}")
        new, old = (_position(revised, f"case{k}", a.ranking, case[x]) for x in ("update", "original"))
        late += new < old
        kept += old < len(a.ranking)  # history: the older statement is still in the ranking
    assert late == len(CASES)
    assert kept == len(CASES)


def test_a_present_question_is_answered_with_the_new_value(revised):
    answers = {case["question"]: revised.ask(case["question"], f"case{k}").answer for k, case in enumerate(CASES)}
    right = [q for q, case in zip(answers, CASES) if case["new"].lower() in answers[q].lower()]
    assert right == list(answers), {q: a for q, a in answers.items() if q not in right}


def test_without_the_rule_the_older_statement_often_wins(tmp_path):
    """The rule does the work: switched off (search.newer_window = 0), most present questions rank the
    older statement first, because it shares more words with the question."""
    settings = Settings()
    settings.search.newer_window = 0
    mem = Memory(tmp_path / "m.db", embedder="hash", settings=settings)
    _build(mem)
    late = sum(_position(mem, f"case{k}", r, c["update"]) < _position(mem, f"case{k}", r, c["original"])
               for k, c in enumerate(CASES) for r in [mem.ask(c["question"], f"case{k}").ranking])
    mem.close()
    assert late <= len(CASES) // 2


def test_a_turn_too_long_to_be_a_restatement_is_not_lifted(tmp_path):
    """A pasted document says "new" or "updated" somewhere and shares the question's words; above
    search.newer_max_words it is not taken for a statement of a change (with no limit it is lifted)."""
    case = next(c for c in CASES if len(c["update"].split()) < 30)
    long_update = case["update"] + " " + " ".join(f"line {i} of the pasted log says nothing." for i in range(40))
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add(_turns(("Bob", "Tell me about yourself."), ("Alice", case["original"])), "n", step=1, world_time="2024-03-01")
    mem.add(_turns(("Bob", "Anything new?"), ("Alice", long_update)), "n", step=2, world_time="2024-05-01")
    g = mem.graph("n")
    qv = mem.embedder.embed([case["question"]])[0]
    own = g.observation_scores(qv[None], [case["question"]])[:, 0]
    order = np.argsort(-own, kind="stable")
    first = {}
    for limit in (0, 100):
        lifted = newer_first_rule(g, case["question"], order, own.copy(), 10, 1.5, limit)
        first[limit] = g.observations[g.obs_order[int(np.argmax(lifted))]].text
    mem.close()
    assert first == {0: long_update, 100: case["original"]}


def test_a_question_about_the_past_keeps_the_plain_ranking():
    assert not about_the_present("What car did Alice drive before?")
    assert not about_the_present("What was Alice's first job?")
    assert about_the_present("How old is Alice's dog?")


def test_the_newer_first_metric():
    assert newer_first(["a", "b"], ["a"], ["b", "x", "a"]) == 1.0
    assert newer_first(["a", "b"], ["a"], ["a", "b"]) == 0.0
    assert newer_first(["a", "b"], ["a"], ["x"]) == 0.0  # neither ranked: not newer first
    assert newer_first(["a", "b"], [], ["a"]) is None  # nothing revised


# ---------------------------------------------------------------- links made when the revision is stored

def _linked(offline: bool) -> Memory:
    settings = Settings()
    settings.construction.offline_revisions = offline
    mem = Memory(settings=settings, embedder="minilm")
    mem.add(_turns(("Alice", "I work as a nurse at the city hospital."), ("Bob", "Good for you.")), "n", step=1)
    mem.add(_turns(("Alice", "The weather was lovely today.")), "n", step=2)
    mem.add(_turns(("Alice", "I changed jobs, I now work as a teacher at the primary school.")), "n", step=3)
    return mem


def test_a_stored_revision_is_linked_and_the_old_event_keeps_it_in_its_history():
    mem = _linked(offline=True)
    links = [r for r in mem.store.relations("n") if r.type in ("updates", "contradicts")]
    assert [(r.source, r.target, r.evidence) for r in links] == [("e3.0", "e1.0", ["S1:1", "S3:1"])]
    chain = mem.history("e1.0", "n")
    assert [h.action for h in chain] == ["created", "superseded"]
    assert chain[-1].observation_ids == ["S3:1"] and chain[-1].summary == "by e3.0"
    assert mem.graph("n").revised_by == {"S1:1": "S3:1"}


def test_offline_links_are_off_by_default():
    # measured on LoCoMo: most offline links were restatements, not revisions (docs/benchmarks.md)
    mem = _linked(offline=False)
    assert not [r for r in mem.store.relations("n") if r.type in ("updates", "contradicts")]
    assert [h.action for h in mem.history("e1.0", "n")] == ["created"]


def test_a_linked_revision_is_lifted_above_the_statement_it_revises_wherever_it_ranked():
    mem = _linked(offline=True)
    graph = mem.graph("n")
    rows = {o: i for i, o in enumerate(graph.obs_order)}
    score = np.zeros(len(graph.obs_order))
    score[rows["S1:1"]], score[rows["S3:1"]] = 5.0, -3.0  # the revision far below, outside any margin
    order = np.argsort(-score, kind="stable")
    lifted = newer_first_rule(graph, "Where does Alice work?", order, score, window=10, margin=1.5)
    assert lifted[rows["S3:1"]] > lifted[rows["S1:1"]] == 5.0
    past = newer_first_rule(graph, "Where did Alice work first?", order, score, window=10, margin=1.5)
    assert past[rows["S3:1"]] == -3.0  # a question about the past keeps the plain ranking
    elsewhere = newer_first_rule(graph, "What is the weather like today?", order, score, window=10, margin=1.5)
    assert elsewhere[rows["S3:1"]] == -3.0  # the revision says no word of the question: not lifted


@pytest.mark.parametrize("new, old, expected", [
    ("I am not vegetarian anymore, I eat fish now.", "I'm vegetarian, I haven't eaten meat in years.", True),
    ("The meeting is rescheduled to 4:30 PM.", "I have a meeting at 3 PM.", True),
    ("I now drive a blue Tesla.", "I drive a red Toyota.", True),
    ("I still drive a red Toyota.", "I drive a red Toyota.", False),
    ("I love my red Toyota.", "I drive a red Toyota.", False),
])
def test_what_counts_as_a_change(new, old, expected):
    assert changed(new, old) is expected


@pytest.mark.parametrize("text, question, expected", [
    ("My meeting with Danielle is rescheduled to 4:30 PM.", "When is my meeting with Danielle?", True),
    ("I postponed the trip to Porto until June.", "When is my trip to Porto?", True),
    ("I drive a Tesla now.", "What car do I drive?", True),
    ("My meeting with Danielle is at 3 PM.", "When is my meeting with Danielle?", False),  # states, no change
    ("I'm rescheduling nothing, the gym is closed.", "When is my meeting with Danielle?", False),  # no shared words
])
def test_a_change_is_said_with_words_of_the_question(text, question, expected):
    assert states_change(text, question) is expected
