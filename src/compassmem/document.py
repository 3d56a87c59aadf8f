"""Long documents — books, scripts, reports — as a stream of experience.

A document is cut at its own structure: chapters, books and parts, acts and scenes, a script's INT./EXT.
headings; each section is one or more construction steps (a step holds at most `max_step_chars`, so a
long chapter is several steps and a book without headings is cut at paragraph boundaries). Paragraphs
are the observations (a paragraph longer than `max_paragraph_chars` is cut at sentence ends); a script's
dialogue is said by its character. Story order is the time: steps are numbered in reading order, which is
what events, relations and topics are built along, as for a conversation. Project Gutenberg's and
IMSDb's boilerplate is left out. Ids are positions (`p<paragraph>`), so the same text gives the same
steps and re-ingesting it resumes instead of duplicating.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import validate
from .models import Observation

MAX_STEP_CHARS = 6_000  # ~1,500 tokens: one segmentation and relation pass
MAX_PARAGRAPH_CHARS = 1_500

_HEADING = re.compile(
    r"^(?:(?:CHAPTER|Chapter|BOOK|Book|PART|Part|ACT|Act|SCENE|Scene)\b.{0,70}"  # chapter, book, act, scene
    r"|(?:INT\.|EXT\.|INT/EXT|INTERIOR\b|EXTERIOR\b).{0,100}"  # a script's scene heading
    r"|[IVXLC]{1,7}\.?|\d{1,3}\.?)$")  # a bare chapter number
# a script's speaker, without the extension a cue may carry, in parentheses or not ("BANKY V.O." is Banky)
_CUE = re.compile(r"^([A-Z][A-Z .'\-]{1,30}?)(?:\s*(\()?(?:V\.O\.|O\.S\.|CONT'D|O\.C\.|cont'd)(?(2)\)))?$")
_NOT_CUE = re.compile(r"^(?:INT|EXT|CUT|FADE|DISSOLVE|THE END|CONTINUED|TITLE|SUPER|CLOSE|ANGLE|BACK TO)\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+")
# the trailer's first line, as its releases wrote it: "End of Project Gutenberg's X", "End of the Project
# Gutenberg EBook of X", "*** END OF THIS PROJECT GUTENBERG EBOOK X ***" (older) / "*** END OF THE …" (since 2020)
_GUTENBERG_END = re.compile(r"^\s*(?:\*\*\*\s*)?End of (?:the |this )?Project Gutenberg", re.I | re.M)
_GUTENBERG_START = re.compile(r"^\s*\*\*\*\s*START OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.I | re.M)
_IMSDB_END = re.compile(r"^\s*Writers\s*:\s", re.M)
_WORDY = re.compile(r"[^\W_]")
_TAG = re.compile(r"<[^>\n]{0,200}>")
_SCRIPT_CODE = re.compile(r"top\.location|window\s*!=|function\s*\(|//-->|document\.write")


@dataclass
class Section:
    """A run of paragraphs under one heading (None before the first)."""

    title: str | None
    paragraphs: list[tuple[str, str | None]]  # (text, speaker)


def clean(text: str) -> str:
    """The text without the boilerplate that is not the story: a Gutenberg licence header and trailer, a
    'Produced by …' credit, IMSDb's trailing credits."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\xa0", " ")
    text = "\n".join("" if _SCRIPT_CODE.search(line) or not _WORDY.search(line) else line  # code, rules, "<!--"
                     for line in _TAG.sub("", text).split("\n"))
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end():]
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[: end.start()]
    credits = _IMSDB_END.search(text, max(0, len(text) - 3000))  # the credits IMSDb appends
    if credits:
        text = text[: credits.start()]
    text = text.strip()
    first, sep, rest = text.partition("\n\n")
    if first.lstrip().startswith("Produced by"):
        text = rest
    return text.strip()


def _blocks(text: str) -> list[str]:
    """Paragraphs: runs of lines between blank lines, a heading always on its own."""
    out: list[str] = []
    for block in re.split(r"\n[ \t]*\n", text):
        lines = [line.strip() for line in block.split("\n") if line.strip()]
        current: list[str] = []
        for line in lines:
            if _HEADING.match(line):
                if current:
                    out.append("\n".join(current))
                    current = []
                out.append(line)
            else:
                current.append(line)
        if current:
            out.append("\n".join(current))
    return out


def _pieces(text: str, limit: int) -> list[str]:
    """A long paragraph cut at sentence ends into pieces of at most `limit` characters (a sentence longer
    than that is cut where it must be)."""
    if len(text) <= limit:
        return [text]
    pieces, current = [], ""
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > limit:
            pieces, current = pieces + ([current] if current else []) + [sentence[:limit]], ""
            sentence = sentence[limit:]
        if current and len(current) + 1 + len(sentence) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    return pieces + ([current] if current else [])


def sections(text: str, max_paragraph_chars: int = MAX_PARAGRAPH_CHARS) -> list[Section]:
    """The cleaned text's sections in reading order. In a script, a block that opens with a character cue
    (a short upper-case line) is that character's dialogue."""
    out = [Section(None, [])]
    for block in _blocks(clean(text)):
        if _HEADING.match(block):
            out.append(Section(" ".join(block.split()), []))
            continue
        first, _, rest = block.partition("\n")
        cue = _CUE.match(first)
        speaker = None
        if cue and rest and not _NOT_CUE.match(first) and len(first.split()) <= 4:
            speaker, block = cue.group(1).strip().title(), rest
        flat = " ".join(block.split())
        out[-1].paragraphs += [(p, speaker) for p in _pieces(flat, max_paragraph_chars)]
    return [s for s in out if s.paragraphs]


def steps(text: str, namespace: str, title: str | None = None, max_step_chars: int = MAX_STEP_CHARS,
          max_paragraph_chars: int = MAX_PARAGRAPH_CHARS) -> list[tuple[int, list[Observation]]]:
    """(step, observations) in reading order. A section starts a new step once the current one holds a third
    of max_step_chars (short scenes share a step), and no step holds more than max_step_chars."""
    namespace = validate.namespace_name(namespace)
    out: list[tuple[int, list[Observation]]] = []
    n = 0
    batch: list[Observation] = []
    used = 0
    for section in sections(validate.text_of(text, "document text"), max_paragraph_chars):
        if batch and used >= max_step_chars // 3:
            out.append((len(out) + 1, batch))
            batch, used = [], 0
        for para, speaker in section.paragraphs:
            if batch and used + len(para) > max_step_chars:
                out.append((len(out) + 1, batch))
                batch, used = [], 0
            n += 1
            batch.append(Observation(id=f"p{n}", namespace=namespace, step=len(out) + 1, seq=len(batch),
                                     speaker=speaker, text=para,
                                     meta={k: v for k, v in (("title", title), ("section", section.title)) if v}))
            used += len(para)
    if batch:
        out.append((len(out) + 1, batch))
    return out
