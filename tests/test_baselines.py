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
