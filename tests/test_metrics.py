"""The paper's metrics on hand-computed examples, quirks included."""

import pytest

from compassmem.bench.metrics import best_over_references, bleu1, evidence_recall, percentile, token_f1


def test_f1_is_set_based_over_unique_tokens():
    # pred tokens {the, cat, sat} (duplicates collapse), gold {the, cat, ran}: P = R = 2/3
    assert token_f1("the the cat sat", "The cat ran") == pytest.approx(2 / 3)


def test_f1_punctuation_quirk_only_four_marks():
    # '.', ',', '!', '?' become spaces; other punctuation stays glued: "may;" != "may"
    assert token_f1("7 May, 2023.", "7 may 2023") == 1.0
    assert token_f1("may;", "may") == 0.0


def test_f1_empty_and_numbers():
    assert token_f1("", "x") == 0.0 and token_f1("x", "") == 0.0
    assert token_f1(2022, "2022") == 1.0  # LoCoMo has integer answers


def test_bleu1_with_smoothing_and_brevity_penalty():
    assert bleu1("paintings and stained glass", "paintings and stained glass") == pytest.approx(1.0)
    # 2 of 2 unigrams match, but the candidate is shorter: BP = exp(1 - 4/2) = e^-1
    assert bleu1("stained glass", "paintings and stained glass") == pytest.approx(0.36787944, rel=1e-6)
    # NLTK quirk kept: with no unigram match at all the score is 0, smoothing does not apply
    assert bleu1("dog", "a cat") == 0.0
    # one of two unigrams matches, equal length: precision 1/2, BP 1
    assert bleu1("a dog", "a cat") == pytest.approx(0.5)


def test_narrativeqa_takes_best_reference():
    refs = ["He is a student in Phoenix.", "A loner"]
    assert best_over_references(token_f1, "a loner", refs) == 1.0


def test_evidence_recall_and_percentile():
    assert evidence_recall(["D1:3", "D2:1"], ["D1:3", "D9:9"]) == 0.5
    assert evidence_recall([], ["x"]) is None
    assert percentile([1, 2, 3, 4], 0.5) == 2.5 and percentile([], 0.9) == 0.0
