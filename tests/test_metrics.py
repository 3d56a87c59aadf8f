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


# ------------------------------------------------------------------ LoCoMo's official F1, by hand
from compassmem.bench.metrics import (locomo_f1, locomo_tokens, multiset_f1, paired_bootstrap,  # noqa: E402
                                      recall_at_budget)


def test_locomo_normalisation_stems_and_drops_articles_and_punctuation():
    # commas vanish, "the"/"and" go, punctuation goes, Porter stems "running" -> "run", "dogs" -> "dog"
    assert locomo_tokens("The running, dogs and a cat!") == ["run", "dog", "cat"]


def test_multiset_f1_counts_repeated_tokens():
    # pred [cat, cat, sat] vs gold [cat, sat, mat]: common = cat×1 + sat = 2; P = 2/3, R = 2/3
    assert multiset_f1("cat cat sat", "cat sat mat") == pytest.approx(2 / 3)
    assert multiset_f1("", "x") == 0.0 and multiset_f1("dog", "cat") == 0.0


def test_locomo_f1_category_rules():
    # multi-hop: gold parts [psychology], [counseling certification]; best pred part for each: 1.0 and
    # 'counseling' vs 'counseling certification' = P 1, R 1/2 -> 2/3; mean = 5/6
    assert locomo_f1("Psychology, counseling", "Psychology, counseling certification", 1) == pytest.approx(5 / 6)
    # open-domain: gold cut at ';'
    assert locomo_f1("likely yes", "Likely yes; she said so", 3) == 1.0
    # temporal / single-hop: one string; [she, paint, it, in, 2022] vs [paint, 2022]: P 2/5, R 1
    assert locomo_f1("She painted it in 2022", "painting 2022", 2) == pytest.approx(2 * (2 / 5) / (2 / 5 + 1))
    assert locomo_f1(2022, 2022, 2) == 1.0


def test_recall_at_budget_cuts_the_ranking_at_the_token_budget():
    ranked = [("a", 300), ("b", 300), ("c", 500), ("d", 10)]
    assert recall_at_budget(["a", "c"], ranked, 500) == 0.5       # only a fits
    assert recall_at_budget(["a", "c"], ranked, 1100) == 1.0      # a + b + c = 1100
    assert recall_at_budget(["d"], ranked, 1000) == 0.0           # c overflows: the cut is a prefix
    assert recall_at_budget([], ranked, 1000) is None


def test_paired_bootstrap_interval_contains_the_mean_and_is_deterministic():
    a, b = [1, 1, 0, 1, 1, 0, 1, 1], [0, 1, 0, 0, 1, 0, 1, 0]
    mean, lo, hi = paired_bootstrap(a, b)
    assert mean == 37.5 and lo <= mean <= hi and lo >= 0
    assert paired_bootstrap(a, b) == (mean, lo, hi)
    assert paired_bootstrap([0.5] * 5, [0.5] * 5) == (0.0, 0.0, 0.0)
