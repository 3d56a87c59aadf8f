"""Names a conversation calls its speakers by (search/people.py): a chat app records "emi_22" while the
other person says "Hey Kate!", and the question asks about Kate."""

from __future__ import annotations

import pytest

from compassmem import Memory
from compassmem.search.people import candidate_names, greets, resolve
from compassmem.search.rank import asker, named_participants

CHAT = [
    {"id": "D1:1", "speaker": "emi_22", "text": "Hi! Sorry, totally forgot to introduce myself, I'm Kate."},
    {"id": "D1:2", "speaker": "Elise", "text": "Hey Kate! Nice to meet you. I just got back from skiing."},
    {"id": "D1:3", "speaker": "emi_22", "text": "I love cooking, I take an Italian cooking class every week."},
    {"id": "D1:4", "speaker": "Elise", "text": "That's so cool Kate! What else do you like?"},
    {"id": "D1:5", "speaker": "emi_22", "text": "Hiking on weekends, mostly in the mountains."},
    {"id": "D1:6", "speaker": "Elise", "text": "I go hiking a lot too, my favourite trail is in Zion. What about you Kate?"},
]


@pytest.mark.parametrize("rows, name, speakers, expected", [
    # addressed by the other speaker, and introduces herself
    ([("Elise", "Hey Kate!"), ("Elise", "Thank you Kate, I will."), ("emi", "I'm Kate.")], "Kate", ["Elise", "emi"], "emi"),
    # addressed only: the other of two speakers
    ([("Ana", "Hello Bella! How are you?"), ("Ana", "Sounds lovely, Bella.")], "Bella", ["Ana", "Bo"], "Bo"),
    # "my name is" names a person even without a greeting
    ([("Bo", "My name is Liza, nice to meet you"), ("Ana", "What about you, Liza?")], "Liza", ["Ana", "Bo"], "Bo"),
    # a place at the end of a question is not a vocative of a person: never greeted
    ([("Ana", "Have you been to Hawaii?"), ("Bo", "I loved Hawaii.")], "Hawaii", ["Ana", "Bo"], None),
    # "I'm Italian" does not make a name
    ([("Ana", "I'm Italian."), ("Ana", "I'm Italian, after all.")], "Italian", ["Ana", "Bo"], None),
    # an assistant's draft letter greets a third person the user speaks of: no alias
    ([("Assistant", "Here is a draft:\n\nHi Greg,\n\nI hope you are well."),
      ("Assistant", "Hi Greg, thanks for the feedback."),
      ("User", "I sent the letter to Greg yesterday."), ("User", "Greg said it reads well."),
      ("User", "My follow-up with Greg is on Friday.")], "Greg", ["Assistant", "User"], None),
    # a vocative in a chat of three cannot say whom it addresses
    ([("Ana", "Hey Sam!"), ("Bo", "Hi Sam, welcome.")], "Sam", ["Ana", "Bo", "Cy"], None),
    # said once is not enough
    ([("Ana", "Hey Sam!")], "Sam", ["Ana", "Bo"], None),
])
def test_resolve_a_name_from_how_the_chat_uses_it(rows, name, speakers, expected):
    assert resolve(name, rows, speakers) == expected


@pytest.mark.parametrize("text, name, expected", [
    ("Hey Kate!", "Kate", True),
    ("Hi there, Kate, long time", "Kate", True),
    ("Hi, my name is Kate", "Kate", True),  # the greeting greets "my"; the introduction still counts
    ("so, call me Kate", "Kate", True),
    ("Thanks, Kate's mum", "Kate", True),
    ("Hey Katelyn", "Kate", False),
    ("I met Kate yesterday", "Kate", False),  # said about her, not to her
    ("Have you been to Hawaii?", "Hawaii", False),
])
def test_a_turn_greets_a_name(text, name, expected):
    assert greets(text, name) is expected


def test_candidates_are_capitalised_words_that_are_not_question_words_or_speakers():
    assert candidate_names("What are Kate's hobbies?", ["Emi", "elise"]) == ["Kate"]
    assert candidate_names("When did Elise visit Kate?", ["Emi", "elise"]) == ["Kate"]
    assert candidate_names("Where does Emi work?", ["Emi", "elise"]) == []


def test_a_question_about_the_name_the_chat_uses_lifts_that_speakers_turns(tmp_path):
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add(CHAT, namespace="chat", step=1, world_time="8 May 2023")
    assert named_participants(mem.graph("chat"), "What are Kate's hobbies?") == {"emi_22"}
    hits = mem.search("What are Kate's hobbies?", namespace="chat", limit=3)
    said = [o.speaker for h in hits for o in h.observations]
    assert said and said.count("emi_22") >= said.count("Elise")


def test_deleting_the_turns_that_use_a_name_forgets_it(tmp_path):
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add(CHAT, namespace="chat", step=1, world_time="8 May 2023")
    mem.delete(["D1:1", "D1:2", "D1:4", "D1:6"], namespace="chat")
    assert named_participants(mem.graph("chat"), "What are Kate's hobbies?") == set()


@pytest.mark.parametrize("question, speakers, expected", [
    ("How many commits have I merged?", ["Assistant", "User"], {"User"}),
    ("What is my sister's name?", ["assistant", "ana"], {"ana"}),
    ("How many commits were merged?", ["Assistant", "User"], set()),  # not in the first person
    ("What did I tell you?", ["Ana", "Bo"], set()),  # two people: "I" could be either
    ("What do I like?", ["User"], set()),  # nobody else: a prior would lift every turn alike
])
def test_a_first_person_question_is_about_the_one_person_talking_to_an_assistant(question, speakers, expected):
    assert asker(question, speakers) == expected


def test_the_answerer_reads_whose_lines_are_kates_and_the_answer_keeps_the_speaker_field(tmp_path):
    from compassmem.search.responder import Reply

    seen: list[str | None] = []

    class Recorder:  # stands in for the LLM responder: what would its prompt's speakers be?
        def respond(self, question, events, observations, max_tokens):
            seen.extend(o.speaker for o in observations)
            return Reply("cooking and hiking", "generated")

    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add(CHAT, namespace="chat", step=1, world_time="8 May 2023")
    mem.engine.roles.responder = Recorder()
    answer = mem.ask("What are Kate's hobbies?", namespace="chat")
    assert "emi_22 (Kate)" in seen and "emi_22" not in seen and "Elise" in seen
    handed = [o for item in answer.evidence for o in item.observation_ids]
    assert {mem.store.get_observations("chat", handed)[0].speaker} <= {"emi_22", "Elise"}
    seen.clear()
    mem.ask("What does Elise like?", namespace="chat")
    assert "emi_22" in seen  # no other name in the question: speakers as stored
