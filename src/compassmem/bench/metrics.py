"""The paper's metrics, reproduced exactly (quirks included), LoCoMo's official F1, and our evidence
recall — overall and at fixed token budgets, with paired bootstrap intervals for method differences.

F1: set-based token F1 as in the reference evaluate.py: lowercase, '. , ! ?' → space, whitespace split,
precision and recall over *unique* tokens, 0 when either side is empty.
BLEU-1: NLTK sentence_bleu with weights (1,0,0,0) and smoothing method1 on lowercased tokens. The
reference uses nltk.word_tokenize, which needs the punkt model (a download we cannot make here); we
use the same Treebank-style NLTKWordTokenizer that word_tokenize applies to each sentence, on the
whole text. The two differ only on sentence-internal periods of multi-sentence answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np

from ..text import content_words


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


def _bleu(prediction: object, gold: object, weights: tuple[float, ...]) -> float:
    tok, sentence_bleu, smooth = _bleu_tools()
    pred = tok.tokenize(str(prediction).lower())
    ref = tok.tokenize(str(gold).lower())
    if not pred or not ref:
        return 0.0
    return float(sentence_bleu([ref], pred, weights=weights, smoothing_function=smooth))


def bleu1(prediction: object, gold: object) -> float:
    return _bleu(prediction, gold, (1, 0, 0, 0))


def bleu4(prediction: object, gold: object) -> float:
    """NarrativeQA's BLEU-4 (uniform 1-4-gram weights, method1 smoothing), over the same tokens as BLEU-1."""
    return _bleu(prediction, gold, (0.25, 0.25, 0.25, 0.25))


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer  # Google's ROUGE-1.5.5 re-implementation, as NarrativeQA papers use

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: object, gold: object) -> float:
    """ROUGE-L F-measure (longest common subsequence, Porter-stemmed)."""
    return float(_rouge().score(str(gold), str(prediction))["rougeL"].fmeasure)


def answer_recall_at_budget(answers: Iterable[str], ranked_texts: Sequence[tuple[str, int]], budget: int) -> float | None:
    """Where there are no gold spans (NarrativeQA): 1.0 when every content word of at least one reference
    answer is inside the first `budget` tokens of the ranked evidence, else 0.0 (None: no answer has a
    content word). A retrieval measure for documents: did the memory hand over what the answer says?"""
    wanted = [set(content_words(a)) for a in answers]
    wanted = [w for w in wanted if w]
    if not wanted:
        return None
    seen: set[str] = set()
    used = 0
    for text, tokens in ranked_texts:
        if used + tokens > budget:
            break
        used += tokens
        seen.update(content_words(text))
    return float(any(w <= seen for w in wanted))


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


# ---------------------------------------------------------------------------------- LoCoMo's official F1
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = set(string.punctuation)


@lru_cache(maxsize=1)
def _porter():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def locomo_tokens(text: object) -> list[str]:
    """LoCoMo's normalisation: drop commas, lowercase, strip punctuation, drop a/an/the/and, Porter-stem."""
    s = "".join(ch for ch in str(text).replace(",", "").lower() if ch not in _PUNCT)
    stemmer = _porter()
    return [stemmer.stem(w) for w in _ARTICLES.sub(" ", s).split()]


def multiset_f1(prediction: object, gold: object) -> float:
    """Token F1 over multisets (repeated tokens count), as LoCoMo's evaluation computes it."""
    p, g = locomo_tokens(prediction), locomo_tokens(gold)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction: object, gold: object, category: int) -> float:
    """The official per-category rule: multi-hop (1) answers are lists, so each comma-separated gold
    part takes its best-matching predicted part and the parts are averaged; open-domain (3) gold is
    cut at its first ';'; the other categories compare the whole strings."""
    pred, ref = str(prediction), str(gold)
    if category == 3:
        ref = ref.split(";")[0].strip()
    if category == 1:
        preds = [x.strip() for x in pred.split(",")]
        refs = [x.strip() for x in ref.split(",")]
        return float(np.mean([max(multiset_f1(p, r) for p in preds) for r in refs]))
    return multiset_f1(pred, ref)


# ---------------------------------------------------------------------------------- recall at a budget
BUDGETS = (500, 1000, 2000)


def recall_at_budget(gold_ids: Iterable[str], ranked: Sequence[tuple[str, int]], budget: int) -> float | None:
    """Share of the gold turns inside the method's ranked evidence cut at `budget` tokens: every method
    is judged on the same amount of context, in the order it ranks its evidence (None: no gold)."""
    gold = set(gold_ids)
    if not gold:
        return None
    used, seen = 0, set()
    for obs_id, tokens in ranked:
        if used + tokens > budget:
            break
        used += tokens
        seen.add(obs_id)
    return len(gold & seen) / len(gold)


def newer_first(gold_ids: Iterable[str], superseded: Iterable[str], ranked: Sequence[str]) -> float | None:
    """1.0 when the best-ranked turn of the revised statement comes before the best-ranked turn of the
    statement it revises (BEAM knowledge updates and contradictions), else 0.0; None when nothing is
    revised. A turn outside the ranking ranks last."""
    older = set(superseded)
    newer = set(gold_ids) - older
    if not older or not newer:
        return None
    pos = {oid: i for i, oid in reversed(list(enumerate(ranked)))}
    last = len(ranked)
    best_new = min(pos.get(o, last) for o in newer)
    return float(best_new < min(pos.get(o, last) for o in older))


def paired_bootstrap(a: Sequence[float], b: Sequence[float], samples: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """Mean of a − b over paired questions and its 95 % percentile-bootstrap interval, in points
    (×100). Paired, because both methods answer the same questions: question difficulty cancels."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0:
        return (0.0, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(samples, d.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (round(100 * float(d.mean()), 2), round(100 * float(lo), 2), round(100 * float(hi), 2))
