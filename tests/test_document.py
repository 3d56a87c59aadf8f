"""Long documents as a stream of experience (issue "Long documents"): cut at their own structure, without
boilerplate, in reading order, and resumable."""

from __future__ import annotations

import json

import pytest

from compassmem import Memory
from compassmem.document import clean, sections, steps
from compassmem.errors import InputError
from compassmem.ingest import load

BOOK = """The Project Gutenberg EBook of A Small Tale
*** START OF THIS PROJECT GUTENBERG EBOOK A SMALL TALE ***

Produced by Someone and the Online Distributed Proofreading Team

A SMALL TALE

CHAPTER I

Anna lived in a mill by the river. She baked bread
every morning before dawn.

Her brother Tom left for the city because the mill could not feed them both.

CHAPTER II. THE LETTER

A letter came from Tom in the spring. He had found work at the docks.

Anna read it twice and then burned it.

End of the Project Gutenberg EBook of A Small Tale
*** END OF THIS PROJECT GUTENBERG EBOOK ***
"""

SCRIPT = """<b><!-- </b>if (window!= top) top.location.href=location.href<b>-->
</b>
INT. DINER - NIGHT

Rain on the windows. SAM sits alone.

                    SAM
          Where were you last night?

                    LUCY (O.S.)
          Out. Looking for the dog.

                    SAM V.O.
          She always was.

EXT. PARKING LOT - CONTINUOUS

Lucy runs to her car.

Writers : Someone
Genres : Drama
"""


def test_boilerplate_is_left_out_and_chapters_are_sections():
    text = clean(BOOK)
    assert "Gutenberg" not in text and "Produced by" not in text and text.startswith("A SMALL TALE")
    found = sections(BOOK)
    assert [s.title for s in found] == [None, "CHAPTER I", "CHAPTER II. THE LETTER"]
    assert found[1].paragraphs[0] == ("Anna lived in a mill by the river. She baked bread every morning before "
                                      "dawn.", None)  # wrapped lines joined


@pytest.mark.parametrize("trailer", ["End of Project Gutenberg's A Small Tale, by Someone",
                                     "*** END OF THIS PROJECT GUTENBERG EBOOK A SMALL TALE ***",
                                     "*** END OF THE PROJECT GUTENBERG EBOOK A SMALL TALE ***"])
def test_each_form_of_the_gutenberg_trailer_ends_the_story(trailer):
    book = BOOK.split("End of the Project")[0] + trailer + "\n\nSection 1. General Terms of Use and Redistributing\n"
    text = clean(book)
    assert text.rstrip().endswith("Anna read it twice and then burned it.") and "Terms of Use" not in text


def test_a_script_is_cut_at_its_scene_headings_and_dialogue_is_said_by_its_character():
    found = sections(SCRIPT)
    assert [s.title for s in found] == ["INT. DINER - NIGHT", "EXT. PARKING LOT - CONTINUOUS"]
    assert found[0].paragraphs == [("Rain on the windows. SAM sits alone.", None),
                                   ("Where were you last night?", "Sam"), ("Out. Looking for the dog.", "Lucy"),
                                   ("She always was.", "Sam")]  # a cue's extension, in parentheses or not
    assert found[1].paragraphs == [("Lucy runs to her car.", None)]  # no page code, no credits


def test_steps_keep_reading_order_and_their_size():
    long_book = "\n\n".join(f"CHAPTER {i}\n\n" + "\n\n".join(f"Paragraph {i}.{j} " + "word " * 60 for j in range(30))
                            for i in range(1, 4))
    out = steps(long_book, "book", "A Long Book", max_step_chars=3000)
    assert [n for n, _ in out] == list(range(1, len(out) + 1))
    assert all(sum(len(o.text) for o in obs) <= 3000 for _, obs in out)
    ids = [o.id for _, obs in out for o in obs]
    assert ids == [f"p{i}" for i in range(1, len(ids) + 1)]
    assert out[0][1][0].meta == {"title": "A Long Book", "section": "CHAPTER 1"}
    assert all(o.step == n for n, obs in out for o in obs)


def test_a_paragraph_longer_than_the_limit_is_cut_at_sentence_ends():
    para = " ".join(f"Sentence number {i} is here." for i in range(200))
    (_, obs), = steps(para, "n", max_step_chars=100_000, max_paragraph_chars=500)
    assert len(obs) > 1 and all(len(o.text) <= 500 for o in obs) and all(o.text.endswith(".") for o in obs)
    assert " ".join(o.text for o in obs) == para


def test_add_document_builds_a_graph_and_resumes(tmp_path):
    mem = Memory(tmp_path / "book.db", embedder="hash")
    first = mem.add_document(BOOK, namespace="tale", title="A Small Tale")
    assert mem.store.steps.count("tale") == len(first) >= 1
    again = mem.add_document(BOOK, namespace="tale", title="A Small Tale")  # the same text: nothing new
    assert [r.content_hash for r in again] == [r.content_hash for r in first]
    assert mem.store.steps.count("tale") == len(first)
    answer = mem.ask("Why did Tom leave the mill?", "tale")
    assert "p3" in answer.observation_ids()
    with pytest.raises(InputError, match="empty"):
        mem.add_document("   ", namespace="empty")
    mem.close()


def test_text_and_narrativeqa_full_files_are_read(tmp_path):
    (tmp_path / "tale.txt").write_text(BOOK)
    ds = load(tmp_path / "tale.txt", "text")
    assert ds.namespaces() == ["tale"] and ds.questions == []
    folder = tmp_path / "full"
    folder.mkdir()
    (folder / "documents.jsonl").write_text(json.dumps({"document_id": "abcdef0123456789", "kind": "gutenberg",
                                                        "title": "A Small Tale", "summary": "NOT INDEXED",
                                                        "text": BOOK}) + "\n")
    (folder / "qa.jsonl").write_text(json.dumps({"document_id": "abcdef0123456789", "question": "Who left?",
                                                 "answers": ["Tom", "Her brother"]}) + "\n")
    ds = load(folder, "narrativeqa-full")
    assert ds.namespaces() == ["nqa-abcdef0123"]
    assert [(q.question, q.answers) for q in ds.questions] == [("Who left?", ["Tom", "Her brother"])]
    assert all("NOT INDEXED" not in o.text for s in ds.steps for o in s.observations)
