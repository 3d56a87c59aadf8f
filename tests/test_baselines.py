"""The turn baselines a user would build instead of CompassMem (issue "Search quality III"): their fusion
and speaker prior, as tables."""

from __future__ import annotations

import pytest

from compassmem.bench.methods import named_speakers, rrf
from compassmem.models import Observation


def _obs(*ids: str) -> list[Observation]:
    return [Observation(id=i, namespace="n", step=1, text=f"turn {i}") for i in ids]


@pytest.mark.parametrize("rankings, fused", [
    ([["a", "b", "c"], ["a", "b", "c"]], ["a", "b", "c"]),
    ([["a", "b", "c"], ["c", "b", "a"]], ["a", "c", "b"]),  # a and c tie (1/61 + 1/63); the first list's order wins
    ([["a", "b"], ["c"]], ["a", "c", "b"]),  # c only in one list, at rank 1: ties a; b is rank 2 in one list
    ([["a", "b", "c"], ["b"], ["b"]], ["b", "a", "c"]),  # a list of one moves its item up
])
def test_reciprocal_rank_fusion(rankings, fused):
    assert [o.id for o in rrf([_obs(*r) for r in rankings])] == fused


def test_a_list_weighted_down_counts_less_in_the_fusion():
    lists = [_obs("a", "b"), _obs("b", "a")]
    assert [o.id for o in rrf(lists)] == ["a", "b"]  # a tie: the first list's order
    assert [o.id for o in rrf(lists, weights=[0.25, 1.0])] == ["b", "a"]


@pytest.mark.parametrize("question, named", [
    ("What did Caroline research?", ["Caroline Smith"]),
    ("When did caroline's dog get sick?", ["Caroline Smith"]),
    ("What do Melanie and Caroline both like?", ["Caroline Smith", "Melanie"]),
    ("What is the capital of France?", []),
    ("Did Al go?", []),  # names shorter than 3 letters are not matched: too many false hits
])
def test_named_speakers(question, named):
    assert named_speakers(question, ["Caroline Smith", "Melanie", "Al"]) == named


def _speaker_rankings(tmp_path, turns: list[dict], question: str,
                      dates: list[str] | None = None) -> dict[bool, list[str]]:
    """hybrid_speaker's (False) and hybrid_people's (True) rankings of `question` over `turns` (with
    `dates`: turn i said on dates[i], one step each)."""
    from compassmem import Memory
    from compassmem.bench.methods import HybridTurns
    from compassmem.search.offline_answerer import ExtractiveResponder

    mem = Memory(tmp_path / "m.db", embedder="hash")
    if dates:
        for step, (turn, day) in enumerate(zip(turns, dates), 1):
            mem.add([turn], namespace="n", step=step, world_time=day)
    else:
        mem.add(turns, namespace="n", step=1)
    responder = ExtractiveResponder(mem.embedder, mem.store)
    return {people: HybridTurns(mem, responder, mem.embedder, len(turns), 1000, speaker=True,
                                people=people).answer("n", question).ranking
            for people in (False, True)}


def test_hybrid_people_names_the_speaker_the_chat_calls_by_another_name(tmp_path):
    """hybrid_people gives the flat retriever CompassMem's people rules, so their gain is not the graph's:
    a question about "Kate" lifts the turns of the speaker recorded as emi_22."""
    ranked = _speaker_rankings(tmp_path, [
        {"id": "D1:1", "speaker": "Elise", "text": "Hey Kate! How was your weekend?"},
        {"id": "D1:2", "speaker": "emi_22", "text": "Lovely, I went skiing in the Alps."},
        {"id": "D1:3", "speaker": "Elise", "text": "Thanks Kate, I stayed home and read a novel."},
        {"id": "D1:4", "speaker": "Elise", "text": "My weekend hobby is reading and cooking."}],
        "What is Kate's weekend hobby?")
    assert ranked[True][0] == "D1:2" and ranked[False][0] != "D1:2"


def test_hybrid_people_asks_without_the_names_it_uses_for_speakers(tmp_path):
    """CompassMem's ranking counts a named person through who speaks, not through the name in the text
    (search.unnamed_weight); hybrid_people does the same, so that rule's gain is not the graph's either."""
    ranked = _speaker_rankings(tmp_path, [
        {"id": "D1:1", "speaker": "Elise", "text": "Hey Kate!"},
        {"id": "D1:2", "speaker": "Kate", "text": "Mostly skiing in winter, I love it."},
        {"id": "D1:3", "speaker": "Elise", "text": "I bake bread on Sundays, I love it too."}],
        "What does Kate love?")
    assert ranked[False][:2] == ["D1:2", "D1:1"]  # the greeting second, on the name alone
    assert ranked[True][:2] == ["D1:2", "D1:3"]


def test_hybrid_people_lifts_what_was_said_on_the_date_the_question_names(tmp_path):
    """CompassMem's ranking lifts the turns said on a day or in a month the question names
    (search.date_weight); hybrid_people has the same rule, so its gain is not the graph's."""
    ranked = _speaker_rankings(tmp_path, [
        {"id": "D1:1", "speaker": "Mel", "text": "I painted a lake at sunset."},
        {"id": "D2:1", "speaker": "Mel", "text": "I painted a horse in a field."},
        {"id": "D3:1", "speaker": "Mel", "text": "I painted my old car."}],
        "What did Mel paint on October 13, 2023?", dates=["2 May 2023", "13 October 2023", "20 December 2023"])
    assert ranked[True][0] == "D2:1" and ranked[False][0] == "D1:1"
