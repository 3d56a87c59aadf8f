"""Topic evolution: online assignment at δ, periodic k-means re-clustering with stable topic ids."""

from __future__ import annotations

import re
from collections import Counter
from typing import Protocol

import numpy as np

from ..config import ConstructionSettings
from ..embed import dots, l2_normalise
from ..errors import CompassMemError
from ..llm import LLMClient
from ..models import Event, Topic
from ..prompts import prompt
from ..schemas import TopicLabelOut
from ..store import Store
from ..text import clip

_STOP = set("""a an the and or but if then so of to in on at for with from by as is are was were be been being i
you he she it we they me him her us them my your his its our their this that these those what which who whom
do does did have has had not no yes just really very too also can could would should will shall may might
must about into over after before up down out off again more most some any all both each few other such own
same than now there here when where why how im i'm it's that's don't didn't can't i've you're we're they're
yeah oh wow hey thanks thank great good nice love like know think get got go going went make made one lot
so much many well sure what's let's been being feel felt see saw way time things thing something awesome
amazing cool sounds glad totally definitely pretty stuff doing people guys image photo picture pic yesterday
today tomorrow tonight last week weeks month months year years ago recently soon above across afterwards
against almost alone along already although always among another anyone anything anyway anywhere around
became because become becomes behind below beside besides between beyond cannot done during either else
elsewhere enough even every everyone everything everywhere except first former further hence hereby herein
however indeed instead itself later latter least less meanwhile mine moreover mostly myself namely neither
never next nobody none nothing nowhere often once only onto others otherwise ours ourselves perhaps please
rather seem seemed seems several since somehow someone sometime sometimes somewhere still take taking though
through throughout thus together toward towards under until upon whatever whenever whereas wherever whether
while whoever whole within without yet yours yourself yourselves able actually anyways bit came come
coming find gonna gotta guess hope kind maybe mean means okay right say said says tell told try trying
want wanted wants wish""".split())
# "image" and "photo": shared pictures come with captions ("a photo of a dog"), which say little of a topic
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")


def n_clusters(n_events: int, settings: ConstructionSettings) -> int:
    """k = max(2, min(⌊n/5⌋, 50)) from the paper, never more than there are events."""
    return min(n_events, max(2, min(n_events // settings.events_per_topic, settings.max_topics)))


class TopicLabeler(Protocol):
    def label(self, events: list[Event]) -> str: ...


class KeywordLabeler:
    """The words most of a topic's events share: people's names and function words left out (a label of
    "ago, agree, ain't, balcony" told a reader nothing), words in more events first, then longer ones."""

    def label(self, events: list[Event]) -> str:
        names = {part.lower() for e in events for p in e.participants for part in p.split()}
        counts: Counter[str] = Counter()
        for e in events:
            words = {w.lower().strip("'-") for w in _WORD.findall(e.summary)}
            counts.update(w for w in words if w not in _STOP and w not in names
                          and not w.endswith(("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")))
        # ties broken by length, then the word itself: a set's order depends on the hash seed, labels must not
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))
        return ", ".join(w for w, _ in ranked[:4]) or "misc"


class LLMLabeler:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def label(self, events: list[Event]) -> str:
        listing = "\n".join(f"- {clip(e.summary, 200)}" for e in events[:8])
        return self.llm.structured(prompt("topic_label"), TopicLabelOut, events=listing).label.strip()


class DeferredLabels:
    """Topic labels inside a step's write transaction. A label from a model can take a minute, and no
    model call may run while the step holds the write lock (another writer would wait, then fail
    'busy'): inside the transaction a topic gets its keyword label at once, and the topics that want a
    model's label are remembered and named right after the commit (`name`)."""

    def __init__(self, labeler: TopicLabeler) -> None:
        self.labeler = labeler
        self.wanted: dict[str, list[Event]] = {}

    @property
    def uses_model(self) -> bool:
        return not isinstance(self.labeler, KeywordLabeler)

    def label(self, topic_id: str, events: list[Event], model: bool = True) -> str:
        if model and self.uses_model:
            self.wanted[topic_id] = list(events)
        else:  # a later keyword label for the topic (a re-clustering past its model cap) is the last word
            self.wanted.pop(topic_id, None)
        return KeywordLabeler().label(events)

    def name(self, store: Store, namespace: str) -> list[str]:
        """Ask the model for each wanted label (no lock held), then write each in a short transaction,
        unless the topic changed meanwhile. Returns what could not be named: the step is committed, so a
        failed label call keeps the keyword label instead of undoing the step."""
        problems = []
        for tid, events in self.wanted.items():
            try:
                label = self.labeler.label(events)
            except CompassMemError as exc:
                problems.append(f"topic {tid}: kept its keyword label ({str(exc)[:120]})")
                continue
            with store.transaction():
                found = store.get_topic(namespace, tid)
                if found is not None and found[0].label == KeywordLabeler().label(events):
                    store.put_topic(found[0].model_copy(update={"label": label}), found[1])
        self.wanted = {}
        return problems


def _next_topic_id(store: Store, namespace: str) -> int:
    nums = [int(t.id[1:]) for t in store.topics(namespace) if t.id[1:].isdigit()]
    return max(nums, default=-1) + 1


class TopicIds:
    """A step's new topic ids: the namespace's topics are read once, at the first new topic, not once per new
    event (a read of every topic each time, a round trip on PostgreSQL). Only for one write transaction."""

    def __init__(self, store: Store, namespace: str) -> None:
        self.store, self.namespace, self.next = store, namespace, None

    def take(self) -> str:
        if self.next is None:
            self.next = _next_topic_id(self.store, self.namespace)
        self.next += 1
        return f"t{self.next - 1}"


def assign_online(store: Store, namespace: str, event: Event, vec: np.ndarray, settings: ConstructionSettings,
                  namer: DeferredLabels, ids: TopicIds | None = None) -> str:
    """Join the most similar topic when its centroid is within δ, else open a new topic (its id from `ids`,
    the step's, else read now)."""
    best = store.search_topics(namespace, vec, 1)
    if best and best[0][1] >= settings.topic_delta:
        found = store.get_topic(namespace, best[0][0])
        if found is not None:  # running mean: centroid·size + new, renormalised
            old, centre = found
            store.put_topic(old.model_copy(update={"size": old.size + 1}), l2_normalise(centre * old.size + vec))
            return old.id
    tid = (ids or TopicIds(store, namespace)).take()
    store.put_topic(Topic(id=tid, namespace=namespace, label=namer.label(tid, [event]), size=1), vec)
    return tid


def due(store: Store, namespace: str, settings: ConstructionSettings) -> bool:
    """Whether this step (not yet recorded) re-clusters: every T steps, and only once the namespace holds
    `recluster_growth` times the events it held at the last re-clustering. Geometric growth bounds the
    total re-clustering work by a constant times the final size (each pass is O(n)). Off that schedule,
    when the topics have drifted to more than `recluster_drift` times k — BEAM's chats are three steps of
    ~100 turns, and their layer had one topic per event (57 topics for 58 events) — under the same growth
    rule: past k = max_topics online assignment opens a topic for nearly every new event, and without it
    a namespace of 10 K events re-clustered every ninth step (209 passes over a 40 K-turn haystack)."""
    last = store.meta.get(f"clustered_events/{namespace}")
    events = store.event_count(namespace)
    grown = last is None or events >= settings.recluster_growth * int(last)
    if settings.recluster_drift and grown:
        if len(store.topics(namespace)) > settings.recluster_drift * n_clusters(events, settings):
            return True
    return grown and not (store.steps.count(namespace) + 1) % settings.recluster_every


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


def recluster(store: Store, namespace: str, settings: ConstructionSettings, namer: DeferredLabels,
              max_llm_labels: int = 4, label_members: int = 12) -> int:
    """Re-cluster every event with k-means; clusters inherit the old topic id they overlap most."""
    from scipy.optimize import linear_sum_assignment  # heavy: imported only by the step that re-clusters
    from sklearn.cluster import KMeans, MiniBatchKMeans

    ids, mat = store.event_matrix(namespace)
    store.meta.set(f"clustered_events/{namespace}", str(len(ids)))
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
    store.delete_topics(namespace, [t.id for t in old_topics if t.id not in names.values()])
    changed: dict[str, str] = {}
    clusters = []  # (topic id, members, centroid, the central members to label it from, or None: label kept)
    for c in range(k):
        rows_c = np.flatnonzero(labels == c)
        if c not in names:
            names[c] = f"t{next_id}"
            next_id += 1
        tid = names[c]
        members = [ids[r] for r in rows_c]
        changed.update((eid, tid) for eid in members if current.get(eid) != tid)
        centre = l2_normalise(mat[rows_c].mean(axis=0))
        relabel = set(members) != old_members.get(tid) or not old_labels.get(tid)
        sample = [ids[r] for r in _central_members(mat, rows_c, centre, label_members)] if relabel else None
        clusters.append((tid, members, centre, sample))
    # every sample in one read: a statement per event was most of a re-clustering on PostgreSQL
    wanted = [eid for *_, sample in clusters if sample for eid in sample]
    read = {e.id: e for e in store.get_events(namespace, wanted, keep=False)[0]} if wanted else {}
    llm_labels = 0
    written: list[tuple[Topic, np.ndarray]] = []
    for tid, members, centre, sample in clusters:
        label = old_labels.get(tid, "")
        if sample is not None:
            use_llm = namer.uses_model and llm_labels < max_llm_labels
            llm_labels += int(use_llm)
            label = namer.label(tid, [read[eid] for eid in sample if eid in read], model=use_llm)
        written.append((Topic(id=tid, namespace=namespace, label=label, size=len(members)), centre))
    store.put_topics(written)  # one statement batch: a statement per topic was a tenth of a PostgreSQL step
    store.set_event_topics(namespace, changed)
    return k
