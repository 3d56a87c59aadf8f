"""The paper's metrics, reproduced exactly (quirks included), plus our evidence recall.

F1: set-based token F1 as in the reference evaluate.py: lowercase, '. , ! ?' → space, whitespace split,
precision and recall over *unique* tokens, 0 when either side is empty.
BLEU-1: NLTK sentence_bleu with weights (1,0,0,0) and smoothing method1 on lowercased tokens. The
reference uses nltk.word_tokenize, which needs the punkt model (a download we cannot make here); we
use the same Treebank-style NLTKWordTokenizer that word_tokenize applies to each sentence, on the
whole text. The two differ only on sentence-internal periods of multi-sentence answers.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Iterable


def f1_tokens(text: object) -> list[str]:
    s = str(text).lower()
    for ch in ".,!?":
        s = s.replace(ch, " ")
    return s.split()


def token_f1(prediction: object, gold: object) -> float:
    p, g = set(f1_tokens(prediction)), set(f1_tokens(gold))
    if not p or not g:
        return 0.0
    common = len(p & g)
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


@lru_cache(maxsize=1)
def _bleu_tools():
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return NLTKWordTokenizer(), sentence_bleu, SmoothingFunction().method1


def bleu1(prediction: object, gold: object) -> float:
    tok, sentence_bleu, smooth = _bleu_tools()
    pred = tok.tokenize(str(prediction).lower())
    ref = tok.tokenize(str(gold).lower())
    if not pred or not ref:
        return 0.0
    return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=smooth))


def best_over_references(metric: Callable[[object, object], float], prediction: object, references: Iterable[object]) -> float:
    """NarrativeQA has several reference answers: a prediction scores its best match."""
    return max((metric(prediction, r) for r in references), default=0.0)


def evidence_recall(gold_ids: list[str], handed_ids: Iterable[str]) -> float | None:
    """Share of the gold evidence turns present in what the answerer was given (None: no gold)."""
    gold = set(gold_ids)
    if not gold:
        return None
    return len(gold & set(handed_ids)) / len(gold)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    idx = (len(s) - 1) * q
    lo, hi = int(idx), min(int(idx) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (idx - lo)
