"""Event blocks (search/blocks.py): a view cut from blocks kept between asks must read exactly as one worked
out row by row, must never let a caller change what the next ask reads, and must follow every commit."""

from __future__ import annotations

from datetime import date

from compassmem import Memory
from compassmem.models import Relation
from compassmem.search.blocks import blocks_of
from compassmem.search.graph import GraphView

TURNS = [
    {"id": "D1:1", "speaker": "Ana", "text": "I adopted a puppy yesterday. Guess her name?"},
    {"id": "D1:2", "speaker": "Ben", "text": "Luna? What breed is she?"},
    {"id": "D1:3", "speaker": "Ana", "text": "A border collie, very smart."},
    {"id": "D1:4", "speaker": "assistant", "text": "Border collies need a lot of exercise. Shall I find a trainer?"},
    {"id": "D1:5", "speaker": "Ana", "text": "Yes please."},
    {"id": "D1:6", "speaker": None, "text": " ".join(["A long passage of a book that nobody says aloud."] * 8)},
]


def _memory(tmp_path) -> Memory:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add(TURNS[:3], namespace="n", step=1, world_time="8 May 2023")
    mem.add(TURNS[3:], namespace="n", step=2, world_time="9 May 2023")
    return mem


def _row_by_row(view: GraphView) -> GraphView:
    """The same view made by hand: its per-turn columns worked out from its turns in stream order at once,
    not cut from each event's block and joined."""
    plain = GraphView(view.namespace, view.events, view.ids, view.matrix, view.adjacency, view.topics, view.members,
                      view.observations, view.obs_matrix, view.obs_event)
    plain._obs_order = view.obs_order
    return plain


def test_a_view_cut_from_blocks_reads_as_one_worked_out_from_all_its_turns_at_once(tmp_path):
    view = _memory(tmp_path).graph("n")
    plain = _row_by_row(view)
    assert view.obs_order == sorted(view.obs_order, key=lambda o: (view.observations[o].step, view.observations[o].seq))
    assert view.question_before().tolist() == plain.question_before().tolist()
    assert view.question_before().max() >= 0  # "What breed is she?" is answered by the next turn
    assert view.assistant_mask().tolist() == plain.assistant_mask().tolist() and view.assistant_mask().any()
    assert view.passage_lengths().tolist() == plain.passage_lengths().tolist() and view.passage_lengths().max() > 25
    day = date(2023, 5, 9)
    assert view.date_mask(day, day).tolist() == plain.date_mask(day, day).tolist() and view.date_mask(day, day).any()
    assert {view.event_of(o) for o in view.obs_order} == set(view.ids)


def test_a_block_lists_each_relation_once_from_each_end_in_stored_order(tmp_path):
    mem = _memory(tmp_path)
    a, b = mem.graph("n").ids[:2]
    mem.store.add_relations([Relation(id="r1", namespace="n", source=a, target=b, type="causal"),
                             Relation(id="r2", namespace="n", source=b, target=a, type="temporal"),
                             Relation(id="r3", namespace="n", source=a, target=a, type="causal")])  # a loop
    first, second = blocks_of(mem.store, "n", [a, b])
    assert [(n.event_id, n.type, n.outgoing) for n in first.neighbours] == [(b, "causal", True), (b, "temporal", False)]
    assert [(n.event_id, n.type, n.outgoing) for n in second.neighbours] == [(a, "causal", False), (a, "temporal", True)]
    assert blocks_of(mem.store, "n", ["no such event", b]) == [second]


def test_what_a_caller_changes_is_not_what_the_next_ask_reads(tmp_path):
    mem = _memory(tmp_path)
    view = mem.graph("n")
    for e in view.events.values():
        e.summary = "changed by the caller"
        e.observation_ids.clear()
    view.topics.clear()
    again = mem.graph("n")
    assert all(e.summary != "changed by the caller" and e.observation_ids for e in again.events.values())
    assert mem.search("What breed is Luna?", "n")[0].summary != "changed by the caller"


def test_blocks_follow_every_commit(tmp_path):
    mem = _memory(tmp_path)
    before = set(mem.graph("n").observations)
    mem.add([{"id": "D2:1", "speaker": "Ben", "text": "Luna learned to fetch the frisbee today."}], namespace="n", step=3)
    assert set(mem.graph("n").observations) == before | {"D2:1"}
    hit = mem.search("Who learned to fetch the frisbee?", "n")[0]
    assert any(o.id == "D2:1" for o in hit.observations)
