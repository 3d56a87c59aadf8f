"""Topic evolution: online assignment at δ, periodic k-means re-clustering with stable topic ids."""

from __future__ import annotations

import re
from collections import Counter
from typing import Protocol

import numpy as np

from ..config import ConstructionSettings
from ..embed import dots, l2_normalise
from ..llm import LLMClient
from ..models import Event, Topic
from ..prompts import prompt
from ..schemas import TopicLabelOut
from ..store import Store

_STOP = set("""a an the and or but if then so of to in on at for with from by as is are was were be been being i
you he she it we they me him her us them my your his its our their this that these those what which who whom
do does did have has had not no yes just really very too also can could would should will shall may might
must about into over after before up down out off again more most some any all both each few other such own
same than now there here when where why how im i'm it's that's don't didn't can't i've you're we're they're
yeah oh wow hey thanks thank great good nice love like know think get got go going went make made one lot
so much many well sure what's let's been being feel felt see saw way time things thing something""".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")


def n_clusters(n_events: int, settings: ConstructionSettings) -> int:
    """k = max(2, min(⌊n/5⌋, 50)) from the paper, never more than there are events."""
    return min(n_events, max(2, min(n_events // settings.events_per_topic, settings.max_topics)))


class TopicLabeler(Protocol):
    def label(self, events: list[Event]) -> str: ...


class KeywordLabeler:
    def label(self, events: list[Event]) -> str:
        counts: Counter[str] = Counter()
        for e in events:
            words = {w.lower() for w in _WORD.findall(e.summary)}
            counts.update(w for w in words if w not in _STOP)
        # ties broken by the word itself: a set's order depends on the hash seed, labels must not
        return ", ".join(w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4]) or "misc"


class LLMLabeler:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def label(self, events: list[Event]) -> str:
        listing = "\n".join(f"- {e.summary[:200]}" for e in events[:8])
        return self.llm.structured(prompt("topic_label"), TopicLabelOut, events=listing).label.strip()


def _next_topic_id(store: Store, namespace: str) -> int:
    nums = [int(t.id[1:]) for t in store.topics(namespace) if t.id[1:].isdigit()]
    return max(nums, default=-1) + 1


def assign_online(store: Store, namespace: str, event: Event, vec: np.ndarray, settings: ConstructionSettings,
                  labeler: TopicLabeler) -> str:
    """Join the most similar topic when its centroid is within δ, else open a new topic."""
    best = store.search_topics(namespace, vec, 1)
    if best and best[0][1] >= settings.topic_delta:
        found = store.get_topic(namespace, best[0][0])
        if found is not None:  # running mean: centroid·size + new, renormalised
            old, centre = found
            store.put_topic(old.model_copy(update={"size": old.size + 1}), l2_normalise(centre * old.size + vec))
            return old.id
    tid = f"t{_next_topic_id(store, namespace)}"
    store.put_topic(Topic(id=tid, namespace=namespace, label=labeler.label([event]), size=1), vec)
    return tid


def due(store: Store, namespace: str, settings: ConstructionSettings) -> bool:
    """Whether this step (not yet recorded) re-clusters: every T steps, and only once the namespace holds
    `recluster_growth` times the events it held at the last re-clustering. Geometric growth bounds the
    total re-clustering work by a constant times the final size (each pass is O(n))."""
    if (store.step_count(namespace) + 1) % settings.recluster_every:
        return False
    last = store.get_meta(f"clustered_events/{namespace}")
    return last is None or store.event_count(namespace) >= settings.recluster_growth * int(last)


def _warm_start(store: Store, namespace: str, topics: list[Topic], mat: np.ndarray, k: int) -> np.ndarray:
    """Initial centres: the centroids of the k largest current topics, topped up farthest-first from
    the events when there are fewer topics than k. Starting from the layer users already see keeps
    topic ids stable across re-clusters and needs a handful of Lloyd iterations instead of ten
    k-means++ restarts, which dominated ingest time on large namespaces."""
    sizes = {t.id: t.size for t in topics}
    tids, cents = store.topic_matrix(namespace)
    order = sorted(range(len(tids)), key=lambda i: -sizes.get(tids[i], 0))[:k]
    chosen = [cents[i] for i in order] if len(cents) and cents.shape[1] == mat.shape[1] else []
    if len(chosen) < k:  # only then is the distance to the chosen centres needed
        if not chosen:
            chosen.append(mat[0])
        closest = dots(mat, np.stack(chosen)).max(axis=1)
        while len(chosen) < k:
            far = int(np.argmin(closest))
            chosen.append(mat[far])
            closest = np.maximum(closest, dots(mat, mat[far]))
    return np.stack(chosen).astype(mat.dtype)


def _central_members(mat: np.ndarray, rows: np.ndarray, centre: np.ndarray, n: int) -> np.ndarray:
    """The n members nearest the centroid: a label drawn from them describes the cluster, and naming
    a cluster costs O(n) reads instead of reading every member."""
    sims = dots(mat[rows], centre)
    return rows[np.argsort(-sims, kind="stable")[:n]]


def recluster(store: Store, namespace: str, settings: ConstructionSettings, labeler: TopicLabeler,
              max_llm_labels: int = 4, label_members: int = 12) -> int:
    """Re-cluster every event with k-means; clusters inherit the old topic id they overlap most."""
    from scipy.optimize import linear_sum_assignment  # heavy: imported only by the step that re-clusters
    from sklearn.cluster import KMeans, MiniBatchKMeans

    ids, mat = store.event_matrix(namespace)
    store.set_meta(f"clustered_events/{namespace}", str(len(ids)))
    if len(ids) < 2:
        return len(store.topics(namespace))
    k = n_clusters(len(ids), settings)
    old_topics = store.topics(namespace)
    init = _warm_start(store, namespace, old_topics, mat, k)
    if len(ids) <= 20_000:  # the paper's setting: k-means over every event
        labels = KMeans(n_clusters=k, init=init, n_init=1, random_state=42).fit_predict(mat)
    else:  # same objective, bounded cost for very large namespaces
        labels = MiniBatchKMeans(n_clusters=k, init=init, n_init=1, random_state=42, batch_size=4096,
                                 max_no_improvement=5).fit_predict(mat)
    current = store.event_topics(namespace)
    old_index = {t.id: j for j, t in enumerate(old_topics)}
    overlap = np.zeros((k, len(old_topics)))
    old_members: dict[str, set[str]] = {}
    for row, eid in enumerate(ids):
        tid = current.get(eid)
        if tid in old_index:
            overlap[labels[row], old_index[tid]] += 1
            old_members.setdefault(tid, set()).add(eid)
    names: dict[int, str] = {}
    if old_topics:
        rows, cols = linear_sum_assignment(-overlap)
        for r, c in zip(rows, cols):
            if overlap[r, c] > 0:
                names[int(r)] = old_topics[c].id
    next_id = _next_topic_id(store, namespace)
    old_labels = {t.id: t.label for t in old_topics}
    for t in old_topics:
        if t.id not in names.values():
            store.delete_topic(namespace, t.id)
    changed: dict[str, str] = {}
    llm_labels = 0
    for c in range(k):
        rows_c = np.flatnonzero(labels == c)
        if c not in names:
            names[c] = f"t{next_id}"
            next_id += 1
        tid = names[c]
        members = [ids[r] for r in rows_c]
        changed.update((eid, tid) for eid in members if current.get(eid) != tid)
        centre = l2_normalise(mat[rows_c].mean(axis=0))
        label = old_labels.get(tid, "")
        if set(members) != old_members.get(tid) or not label:
            use_llm = not isinstance(labeler, KeywordLabeler) and llm_labels < max_llm_labels
            chosen = labeler if use_llm else KeywordLabeler()
            llm_labels += int(use_llm)
            sample = [store.get_event(namespace, ids[r]) for r in _central_members(mat, rows_c, centre, label_members)]
            label = chosen.label([e for e in sample if e is not None])
        store.put_topic(Topic(id=tid, namespace=namespace, label=label, size=len(members)), centre)
    store.set_event_topics(namespace, changed)
    return k
