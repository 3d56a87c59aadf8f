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


@pytest.mark.parametrize("question, named", [
    ("What did Caroline research?", ["Caroline Smith"]),
    ("When did caroline's dog get sick?", ["Caroline Smith"]),
    ("What do Melanie and Caroline both like?", ["Caroline Smith", "Melanie"]),
    ("What is the capital of France?", []),
    ("Did Al go?", []),  # names shorter than 3 letters are not matched: too many false hits
])
def test_named_speakers(question, named):
    assert named_speakers(question, ["Caroline Smith", "Melanie", "Al"]) == named


def test_hybrid_people_names_the_speaker_the_chat_calls_by_another_name(tmp_path):
    """hybrid_people gives the flat retriever CompassMem's people rules, so their gain is not the graph's:
    a question about "Kate" lifts the turns of the speaker recorded as emi_22."""
    from compassmem import Memory
    from compassmem.bench.methods import HybridTurns
    from compassmem.search.extract import ExtractiveResponder

    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add([{"id": "D1:1", "speaker": "Elise", "text": "Hey Kate! How was your weekend?"},
             {"id": "D1:2", "speaker": "emi_22", "text": "Lovely, I went skiing in the Alps."},
             {"id": "D1:3", "speaker": "Elise", "text": "Thanks Kate, I stayed home and read a novel."},
             {"id": "D1:4", "speaker": "Elise", "text": "My weekend hobby is reading and cooking."}],
            namespace="n", step=1)
    responder = ExtractiveResponder(mem.embedder, mem.store)
    first = {}
    for people in (False, True):
        method = HybridTurns(mem, responder, mem.embedder, 2, 1000, speaker=True, people=people)
        first[people] = method.answer("n", "What is Kate's weekend hobby?").ranking[0]
    assert first[True] == "D1:2" and first[False] != "D1:2"
