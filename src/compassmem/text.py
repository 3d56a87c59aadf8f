"""The word analyzer every lexical part shares: the store's full-text index, BM25 baselines, the offline
roles. One definition, so a stored index and a query can never disagree about what a word is."""

from __future__ import annotations

import re
from functools import lru_cache

_STOP = set("""a an the and or but of to in on at for with from by as is are was were be been do does did what
which who whom whose when where why how has have had that this these those it its their his her they he she
you your i me my we our can could would should will about into did does any some ever""".split())
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")


def stem(word: str) -> str:
    """A light suffix stripper: enough for 'finished'/'finish' and 'paintings'/'painting' to meet."""
    w = word.lower().strip("'")
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("ches", "shes", "sses", "xes")):
        return w[:-2]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        return w[:-1]
    return w


def content_words(text: str) -> list[str]:
    return list(_content_words(text))


@lru_cache(maxsize=32_768)
def _content_words(text: str) -> tuple[str, ...]:
    """Remembered per text: an ask compares the same summaries and turns with several goals, and a
    namespace's texts recur from ask to ask."""
    return tuple(stem(w) for w in _WORD.findall(text) if w.lower() not in _STOP and len(w) > 1)


def index_terms(text: str) -> list[str]:
    """content_words reduced to [0-9a-z]: what a full-text index stores and is queried with (no
    apostrophes or hyphens, which a tokenizer would split differently on each side)."""
    out = []
    for w in content_words(text):
        t = re.sub(r"[^0-9a-z]", "", w)
        if t:
            out.append(t)
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z\"'(])")


def sentences(text: str) -> list[str]:
    """A text cut after . ! ? followed by a capital or an opening quote (good enough for turns and prose)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def said(speaker: str | None, text: str) -> str:
    """Who said what, one way everywhere a turn is shown: "speaker: text", or the text alone when no one
    did (a book's narration)."""
    return f"{speaker}: {text}" if speaker else text


def clip(text: str, limit: int) -> str:
    """A text shortened for a prompt or a screen: whole when it fits in `limit` characters, else cut at the
    last word boundary within them (a word with no boundary is cut where the limit falls) and marked "…"."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # one character more: a space there means the last word fits whole
    return (head.rsplit(" ", 1)[0] if " " in head else text[:limit]).rstrip() + "…"


def is_question(text: str) -> bool:
    """Whether a text asks something, by its final mark ("…?"): what a turn that is answered by the next
    one, a clause an answer must not be, and a sentence that cannot state a change all have in common."""
    return text.rstrip().endswith("?")
