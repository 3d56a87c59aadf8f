"""Retrieval's limits per query (search/retrieve.py): what one search reads and how it weighs BM25."""

from __future__ import annotations

import pytest

from compassmem import Memory, Settings
from compassmem.config import STATEMENT_LEXICAL_SHARE
from compassmem.embed.base import CachedEmbedder
from compassmem.search.retrieve import Loading


@pytest.mark.parametrize("query, lexical", [
    ("What did Ana adopt?", 0.2),  # a question names what it asks for: BM25 keeps its weight
    ("Caroline: I finally got through a manga without a dictionary.", 0.05),  # a message recalls, it does not repeat
    ("I turned down that promotion", 0.05),
    ("Can you list what I asked? Mention three.", 0.05),  # asks nothing at its end: the one rule, text.is_question
])
def test_a_query_that_asks_nothing_gives_bm25_the_statement_share_of_its_weight(query, lexical):
    limits = Loading.of(Settings().search, 0.2, 0.25)
    assert limits.for_query(query).lexical_weight == pytest.approx(lexical)


def test_a_share_of_one_leaves_every_query_alone():
    limits = Loading.of(Settings().search, 0.2, 1.0)
    assert limits.for_query("I turned down that promotion") is limits


def test_the_share_is_the_settings_else_the_embedders_own(tmp_path):
    class Semantic:  # an embedder that names no search weights of its own
        name, dim = "semantic", 3

    assert CachedEmbedder(Semantic()).statement_lexical_share == STATEMENT_LEXICAL_SHARE
    hashed = Memory(tmp_path / "a.db", embedder="hash")
    assert Loading.resolved(hashed.settings.search, hashed.embedder).statement_share == 1.0  # word overlap: BM25 is its meaning
    chosen = Settings.load(**{"search.statement_lexical_share": 0.5, "search.lexical_weight": 0.3})
    assert Loading.resolved(chosen.search, hashed.embedder) == Loading.of(chosen.search, 0.3, 0.5)
