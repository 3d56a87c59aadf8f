"""Our sparse BM25 gives rank_bm25's BM25Okapi scores (what the tuned settings were chosen with)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from compassmem.bench.bm25 import BM25

words = st.sampled_from("ana ben luna puppy camp beach paint the a run swim cake dog cat".split())


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(docs=st.lists(st.lists(words, min_size=1, max_size=12), min_size=1, max_size=30),
       query=st.lists(st.one_of(words, st.just("unknown")), max_size=6))
def test_scores_equal_rank_bm25(docs, query):
    ours = BM25(docs).get_scores(query)
    theirs = BM25Okapi(docs).get_scores(query)
    assert np.allclose(ours, theirs, rtol=1e-9, atol=1e-9)


def test_empty_query_and_empty_corpus():
    assert not BM25([["a"], ["b"]]).get_scores([]).any()
    assert BM25([]).get_scores(["a"]).shape == (0,)
