"""The Store protocol: what construction and search need from persistence, and nothing more.

Every backend (SQLite today, PostgreSQL + pgvector next) must pass tests/test_store_conformance.py.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable, Iterable, Iterator, Protocol, runtime_checkable

import numpy as np

from ..errors import NamespaceNotFound

from ..models import Event, Filters, Observation, Relation, Topic
from .history import EventHistory
from .meta import Cache, Meta, cache_namespace
from .sql import SQL
from .steps import Steps

__all__ = ["Store", "require_namespace", "cache_namespace"]


def require_namespace(store: "Store", namespace: str) -> str:
    """The namespace, or NamespaceNotFound naming the ones that exist."""
    if not store.has_namespace(namespace):
        known = store.namespaces()
        hint = f" (known: {', '.join(known[:10])})" if known else " (the database is empty)"
        raise NamespaceNotFound(f"unknown namespace '{namespace}'{hint}")
    return namespace


@runtime_checkable
class Store(Protocol):
    # --- operations written once over the backend's executor (store/meta.py, store/history.py)
    sql: SQL
    meta: Meta  # database-wide settings (which embedder built it, API keys)
    cache: Cache  # LLM responses, shared across namespaces: keyed by the whole request
    history: EventHistory  # each event's change log (Memory.history)
    steps: Steps  # one record per construction step: what makes a re-ingest resume (store/steps.py)

    # --- lifecycle
    def close(self) -> None: ...
    def transaction(self) -> AbstractContextManager[None]:
        """Everything written inside commits together or not at all (one construction step)."""
        ...
    def snapshot(self) -> AbstractContextManager[None]:
        """Everything read inside sees one committed state, whatever other writers do meanwhile."""
        ...

    # --- namespaces
    def namespaces(self) -> list[str]: ...
    def ensure_namespace(self, namespace: str) -> None: ...
    def has_namespace(self, namespace: str) -> bool: ...
    def delete_namespace(self, namespace: str) -> dict[str, int]:
        """Remove the namespace and everything derived from it (cache rows tagged with it included);
        rows removed per table."""
        ...

    # --- observations
    def add_observations(self, observations: list[Observation], embeddings: np.ndarray | None = None,
                         owners: dict[str, str] | None = None) -> None:
        """Upsert observations; `owners` (observation id -> its event) is written with each row, so that
        put_events finds it set (on PostgreSQL a later UPDATE rewrites the row and its HNSW entry)."""
        ...
    def observation_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        """(ids, normalised matrix) of the observations stored with an embedding."""
        ...
    def get_observations(self, namespace: str, ids: list[str]) -> list[Observation]: ...
    def observation_vectors(self, namespace: str, ids: list[str]) -> np.ndarray:
        """Normalised embedding rows of these observations, in order (zeros where none is stored)."""
        ...
    def observations(self, namespace: str, step: int | None = None) -> list[Observation]: ...
    def observations_of(self, namespace: str, event_ids: list[str], keep: bool = True) -> tuple[list[Observation], np.ndarray]:
        """The observations owned by these events, in stream order, with their normalised vectors. `keep`
        (here and in get_events, relations_of): kept between calls like a search's rows; False for a caller
        that keeps what it makes of them (search/blocks.py), so they are not held twice."""
        ...
    def derived(self, namespace: str, kind: str, keys: list[str],
                work_out: Callable[[list[str]], dict[str, Any]], by_event: bool = False) -> dict[str, Any]:
        """Values worked out from the namespace's rows (`work_out(missing keys)`: one per key), kept between
        calls until the namespace is written to, like the rows a search reads; shared, so read-only.
        `by_event`: keyed by event id, each depending only on its event's rows (a write drops only those
        it touched, where the backend can tell)."""
        ...
    def owners(self, namespace: str, observation_ids: list[str]) -> dict[str, str]:
        """observation id → owning event id."""
        ...
    def observation_count(self, namespace: str) -> int: ...
    def speakers(self, namespace: str) -> list[str]: ...
    def utterances(self, namespace: str, ids: list[str]) -> list[tuple[str | None, str]]:
        """(speaker, text) of these observations."""
        ...


    # --- events with embeddings
    def put_event(self, event: Event, embedding: np.ndarray) -> None: ...
    def put_events(self, events: list[Event], embeddings: np.ndarray) -> None:
        """Upsert several events (row i of `embeddings` is event i's vector) in one transaction and as few
        statements as the backend allows: a construction step writes all of its events at once."""
        ...
    def get_event(self, namespace: str, event_id: str) -> Event | None: ...
    def get_events(self, namespace: str, ids: list[str], keep: bool = True) -> tuple[list[Event], np.ndarray]:
        """These events in the order asked (unknown ids skipped), with their normalised vectors."""
        ...
    def events(self, namespace: str, offset: int = 0, limit: int | None = None) -> list[Event]: ...
    def event_count(self, namespace: str) -> int: ...
    def event_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]:
        """(ids, L2-normalised matrix) of a namespace's events, rows aligned with ids."""
        ...

    # --- ranked search: the store owns its indexes (a PostgreSQL store answers these natively)
    def search_events(self, namespace: str, query: np.ndarray, k: int, exact: bool = True) -> list[tuple[str, float]]:
        """(event id, cosine) of the k nearest events, best first; exact=False: the index's own candidates
        and (possibly quantised) scores, for callers that re-score what they load."""
        ...
    def search_observations(self, namespace: str, query: np.ndarray, k: int,
                            exact: bool = True) -> list[tuple[str, float]]: ...
    def lexical_search(self, namespace: str, text: str, k: int) -> list[tuple[str, float]]:
        """(observation id, BM25 > 0) of the k best observations for text.index_terms(text), best first."""
        ...
    def refresh_indexes(self, namespace: str) -> None: ...
    def check_indexes(self, namespace: str) -> list[str]:
        """Disagreements between the indexes and the tables; empty when they agree."""
        ...

    # --- relations
    def add_relation(self, relation: Relation) -> None: ...
    def add_relations(self, relations: list[Relation]) -> None:
        """Upsert several relations in one statement batch."""
        ...
    def relations(self, namespace: str) -> list[Relation]: ...
    def relations_of(self, namespace: str, event_ids: list[str], within: bool = False,
                     keep: bool = True) -> list[Relation]:
        """Relations with either end in these events, in stored order; `within`: with both ends in them
        (the edges of a loaded subgraph, without reading every relation that leaves it)."""
        ...

    # --- topics
    def put_topic(self, topic: Topic, centroid: np.ndarray) -> None: ...
    def put_topics(self, topics: list[tuple[Topic, np.ndarray]]) -> None:
        """Upsert several topics with their centroids in one statement batch (a re-clustering writes them all)."""
        ...
    def delete_topics(self, namespace: str, topic_ids: list[str]) -> None: ...
    def topics(self, namespace: str) -> list[Topic]: ...
    def get_topic(self, namespace: str, topic_id: str) -> tuple[Topic, np.ndarray] | None:
        """The topic and its centroid."""
        ...
    def topic_matrix(self, namespace: str) -> tuple[list[str], np.ndarray]: ...
    def search_topics(self, namespace: str, query: np.ndarray, k: int) -> list[tuple[str, float]]: ...
    def set_event_topics(self, namespace: str, assignment: dict[str, str]) -> None: ...
    def event_topics(self, namespace: str) -> dict[str, str | None]:
        """event id → topic id, without loading whole events: re-clustering reads it every T steps."""
        ...

    # --- editing (Memory.delete / update / history, filters)
    def delete_observations(self, namespace: str, ids: list[str]) -> list[Observation]:
        """Remove observations and their index entries; returns the ones removed."""
        ...
    def delete_events(self, namespace: str, ids: list[str]) -> int:
        """Remove events with their relations and index entries; returns relations removed."""
        ...
    def relations_citing(self, namespace: str, observation_ids: list[str]) -> list[Relation]:
        """Relations whose evidence cites any of these observations."""
        ...
    def filter_observations(self, namespace: str, filters: Filters) -> list[str]:
        """Ids of the observations that satisfy every condition, in stream order."""
        ...
    def compact(self, namespace: str) -> int:
        """Rewrite the namespace's indexes so deleted rows live in no index file; returns files removed."""
        ...
    def text_held(self, text: str) -> bool:
        """Whether any observation, in any namespace, contains this text."""
        ...
    def leak_scan(self, texts: list[str]) -> tuple[list[str], list[str]]:
        """(where it looked, 'place: text' for each text still readable there): the proof in a receipt."""
        ...
    def checkpoint(self) -> None:
        """Make deleted rows unrecoverable from any log the backend keeps (SQLite: the WAL)."""
        ...

    # --- export / import (exact, backend rows; see memory.Memory.export)
    def export_rows(self, namespace: str) -> Iterator[tuple[str, dict]]: ...
    def import_rows(self, rows: Iterable[tuple[str, dict]]) -> int: ...
