"""The facade: `Memory(db).add(...)` builds the Event Graph step by step, `Memory.ask(...)` searches it."""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .config import Settings
from .construct import Constructor
from .embed import make_embedder
from . import export_file, validate
from .errors import ConfigError, EventNotFound, InputError, NamespaceNotFound, StepConflict
from .ingest import Dataset, StepInput
from .llm import make_llm
from .construct.edit import Editor
from .models import (Answer, EditReceipt, Event, EventDetail, EventPage, Filters, ForgetReceipt, HistoryEntry,
                     Observation, SearchHit, StepRecord)
from .roles import construction_roles, search_roles
from .search.engine import SearchEngine
from .search.graph import GraphView
from .search.retrieve import Loading, load_for, passing
from .store import Store, open_store
from .scope import by_ids, namespace_for, page_through, read_names
from .store.base import cache_namespace, require_namespace
from .store.steps import construction_cost


APPEND_TRIES = 50  # an add without a step number, against other processes appending to the same namespace


@contextmanager
def _working_for(*namespaces: str) -> Iterator[None]:
    """Tag the LLM-cache rows written or replayed meanwhile with the namespaces (see Memory.forget)."""
    token = cache_namespace.set(namespaces)
    try:
        yield
    finally:
        cache_namespace.reset(token)


class Memory:
    def __init__(self, db: str | Path = ":memory:", llm: str | None = "none", embedder: str | None = None,
                 settings: Settings | None = None, base_url: str | None = None, api_key: str | None = None,
                 store: Store | None = None) -> None:
        if not isinstance(db, (str, Path)):
            raise ConfigError(f"db must be a path (or ':memory:'), got {type(db).__name__}; "
                              "pass an opened store as Memory(store=...)")
        self.settings = settings or Settings()
        self.store = store or open_store(db)
        built_with = self.store.meta.get("embedder")
        embedder = embedder or built_with or "minilm"
        if built_with is not None and built_with != embedder:
            raise ConfigError(f"this database was built with embedder '{built_with}', not '{embedder}'; "
                              f"pass --embedder {built_with}")
        self.embedder = make_embedder(embedder, base_url=base_url, api_key=api_key)
        if built_with is None:
            self.store.meta.set("embedder", embedder)
        self.llm = make_llm(llm, self.settings.llm, cache=self.store.cache, base_url=base_url, api_key=api_key)
        self.constructor = Constructor(self.store, self.embedder,
                                       construction_roles(self.llm, self.embedder, self.settings),
                                       self.settings.construction, self.llm)
        self.editor = Editor(self.constructor)
        self._engines: dict[str, SearchEngine] = {}
        self._append_lock = threading.Lock()
        self._appended: dict[str, int] = {}  # namespace -> the last step number an add without one reserved
        self.engine = self._engine(self.settings.search.mode)

    def _engine(self, mode: str) -> SearchEngine:
        """The search engine of a mode ('agentic' or 'graph', see SearchSettings.mode), made once."""
        engines = self._engines
        if mode not in engines:
            budget = self.settings.search.max_llm_calls if self.llm is not None and mode == "agentic" else None
            engines[mode] = SearchEngine(self.embedder, search_roles(self.llm, self.embedder, self.settings,
                                                                     self.store, mode), self.settings.search, self.llm,
                                         budget)
        return engines[mode]

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    def add(self, observations: Iterable[Observation | dict[str, Any] | str] | str | dict[str, Any],
            namespace: str | None = None, step: int | None = None, world_time: str | None = None, *,
            user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
            metadata: dict[str, Any] | None = None) -> StepRecord:
        """Add one step of observations (a session, a chunk). A string is one turn; dicts may be
        {'text', 'speaker', 'id', 'time', 'meta'} or mem0-style {'role', 'content'} messages. The
        memory is `namespace`, or the one user_id / agent_id / run_id name (scope.py). `metadata`
        (mem0's name) is put on every observation, under each one's own 'meta'; filters match it."""
        namespace = namespace_for(namespace, user_id, agent_id, run_id)
        world_time = validate.world_time(world_time)
        meta = validate.metadata(metadata)
        if isinstance(observations, (str, dict, Observation)):
            observations = [observations]
        try:
            items = list(observations)
        except TypeError:
            raise InputError(f"observations must be a list (or one string / dict), got "
                             f"{type(observations).__name__}") from None
        if step is not None:
            return self._add_step(namespace, validate.step_number(step), items, world_time, meta)
        # No step number: append. The number is reserved under a lock, so concurrent adds in this process
        # never collide; another process may still take the same number first, and then the step is
        # simply built again under the next one (its slow work is redone, nothing is lost).
        for _ in range(APPEND_TRIES):
            with self._append_lock:
                step = max(self.store.steps.last(namespace) or 0, self._appended.get(namespace, 0)) + 1
                self._appended[namespace] = validate.step_number(step)
            try:
                return self._add_step(namespace, step, items, world_time, meta)
            except StepConflict:
                continue
        raise StepConflict(f"'{namespace}': {APPEND_TRIES} step numbers in a row were taken by other writers "
                           "meanwhile; nothing was written, send the add again", retryable=True)

    def _add_step(self, namespace: str, step: int, items: list, world_time: str | None,
                  meta: dict[str, str] | None = None) -> StepRecord:
        obs = [validate.observation(item, namespace, step, seq, world_time) for seq, item in enumerate(items)]
        if meta:
            obs = [o.model_copy(update={"meta": {**meta, **o.meta}}) for o in obs]
        with _working_for(namespace):
            return self.constructor.add_step(namespace, step, obs, world_time)

    def ingest(self, dataset: Dataset, on_step: Callable[[StepInput, StepRecord], None] | None = None) -> list[StepRecord]:
        records = []
        for item in dataset.steps:
            with _working_for(item.namespace):
                record = self.constructor.add_step(item.namespace, item.step, item.observations, item.world_time)
            records.append(record)
            if on_step:
                on_step(item, record)
        return records

    def add_document(self, text: str, namespace: str | None = None, title: str | None = None, *,
                     user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                     on_step: Callable[[StepInput, StepRecord], None] | None = None) -> list[StepRecord]:
        """Add a long document — a book, a script, a report — as a stream of experience: cut at its own
        chapters, scenes or sections (else at paragraphs), one construction step after another in reading
        order, paragraphs as observations (document.py). Re-adding the same text resumes: the steps it
        already holds are skipped. Returns every step's record."""
        from .document import steps

        namespace = namespace_for(namespace, user_id, agent_id, run_id)
        title = validate.optional_text(title, "title")
        return self.ingest(Dataset([StepInput(namespace, n, obs, None) for n, obs in steps(text, namespace, title)],
                                   []), on_step)

    def forget(self, namespace: str | None = None, scan: int = 200, *, user_id: str | None = None,
               agent_id: str | None = None, run_id: str | None = None) -> ForgetReceipt:
        """Delete a namespace and everything derived from it — events, relations, topics, vectors, the
        full-text index, index files, and the LLM-cache rows its work wrote or replayed — then prove it:
        up to `scan` of its longest distinct texts are searched for, byte for byte, in the database file
        and its -wal file. Returns the receipt (rows removed per table, what the scan found)."""
        if namespace is None and user_id is None and agent_id is None and run_id is None:
            raise InputError("forget needs a namespace (or user_id / agent_id / run_id)")
        namespace = namespace_for(namespace, user_id, agent_id, run_id)
        if not self.store.has_namespace(namespace):
            raise NamespaceNotFound(f"unknown namespace '{namespace}': nothing to forget")
        texts = sorted({o.text for o in self.store.observations(namespace) if len(o.text) >= 12},
                       key=len, reverse=True)[:scan]
        removed = self.store.delete_namespace(namespace)
        receipt = ForgetReceipt(namespace=namespace, removed={k: v for k, v in removed.items() if k != "index_files"},
                                index_files_removed=removed.get("index_files", 0), scanned_texts=len(texts))
        receipt.scanned_files, receipt.found = self.store.leak_scan(texts)
        return receipt

    def delete(self, observation_ids: str | list[str], namespace: str | None = None, *, user_id: str | None = None,
               agent_id: str | None = None, run_id: str | None = None) -> EditReceipt:
        """Delete observations (or events: an event id stands for all of its observations) and everything
        derived from them: an event left with no source is deleted
        (with its relations), one that keeps some is re-derived from them; topic membership, vectors,
        full-text rows, history summaries and the namespace's LLM-cache rows follow. The receipt lists
        what was removed and a byte scan of the database files for the deleted text."""
        namespace = require_namespace(self.store, namespace_for(namespace, user_id, agent_id, run_id))
        ids = [observation_ids] if isinstance(observation_ids, str) else observation_ids
        if not isinstance(ids, list):
            raise InputError(f"observation_ids must be a string or a list of strings, got {type(ids).__name__}")
        ids = self._turn_ids(namespace, [validate.identifier(i, "observation id") for i in ids])
        with _working_for(namespace):
            return self.editor.delete(namespace, list(dict.fromkeys(ids)))

    def _turn_ids(self, namespace: str, ids: list[str]) -> list[str]:
        """Observation ids, an event id standing for all of its observations (mem0 deletes a memory by
        its id; here a memory is an event): an id that names an observation stays one."""
        found = {o.id for o in self.store.get_observations(namespace, ids)}
        out: list[str] = []
        for i in ids:
            event = None if i in found else self.store.get_event(namespace, i)
            out += event.observation_ids if event is not None else [i]
        return out

    def update(self, observation_id: str, text: str, namespace: str | None = None, *, user_id: str | None = None,
               agent_id: str | None = None, run_id: str | None = None) -> EditReceipt:
        """Replace an observation's text (or that of an event with one observation, by the event's id) and
        re-derive its event (summary, time, vector, topic), as if it had been ingested that way; the old
        text is removed from history and cache, then scanned for."""
        namespace = require_namespace(self.store, namespace_for(namespace, user_id, agent_id, run_id))
        text = validate.text_of(text, "text")
        observation_id = validate.identifier(observation_id, "observation id")
        turns = self._turn_ids(namespace, [observation_id])
        if len(turns) > 1:
            raise InputError(f"event '{observation_id}' has {len(turns)} observations ({', '.join(turns[:5])}); "
                             "update one of them by its id")
        observation_id = turns[0]
        with _working_for(namespace):
            return self.editor.update(namespace, observation_id, text)

    def history(self, event_id: str, namespace: str | None = None, *, user_id: str | None = None,
                agent_id: str | None = None, run_id: str | None = None,
                nested: bool | None = None) -> list[HistoryEntry]:
        """What happened to an event, oldest first: created, merged, updated, observations deleted, deleted,
        superseded (a later turn revises it: construct/revise.py)."""
        names = self._reading(namespace, user_id, agent_id, run_id, nested)
        event_id = validate.identifier(event_id, "event id")
        for namespace in names:  # the first namespace the scope covers that has the event's history
            entries = self.store.history.of(namespace, event_id)
            if entries:
                return entries
        raise EventNotFound(f"no history for event '{event_id}' in namespace '{names[0]}' (compassmem list "
                            "shows the ids; events built before the history table (schema v3) have none)")

    # ------------------------------------------------------------------ export / import
    def export(self, namespace: str | None, path: str | Path) -> int:
        """Write one namespace, or with namespace=None every namespace, to a JSONL file (docs/formats.md,
        "export"): a header line, then every stored row — observations, steps, events, relations, topics,
        history, vectors included — exactly as stored, so `import_file` reproduces them. Returns the
        number of rows."""
        path = validate.output_file(path)
        if namespace is None:
            names = self.store.namespaces()
        else:
            names = [require_namespace(self.store, validate.namespace_name(namespace))]
        return export_file.write(self.store, names, Path(path))

    def import_file(self, path: str | Path, *, rename: Callable[[str], str] | None = None) -> list[str]:
        """Load the namespaces written by `export`, all or nothing: every row is checked first (fixed columns,
        typed values, references between rows; export_file.py), then written in one transaction. Refused
        when one of them exists or the file was made with another embedder. `rename` maps each of the
        file's namespaces to the one it is stored as (the REST service puts them under the caller's
        tenant). Returns the stored namespaces."""
        return export_file.load(self.store, Path(path), rename or (lambda n: n), self.embedder.dim or None)

    # ------------------------------------------------------------------ reading
    def graph(self, namespace: str) -> GraphView:
        """The whole namespace as a GraphView (inspection, small memories); ask and search load only
        the part a question needs."""
        view = GraphView.load(self.store, validate.namespace_name(namespace))
        view.lexical_weight = Loading.resolved(self.settings.search, self.embedder).lexical_weight
        return view

    def _source(self, namespace: str, filters: Filters | dict | None = None) -> Callable[[list[str], Any], GraphView]:
        """A loader of the part of `namespace` some query texts need (search/retrieve.load_for), restricted to the
        observations that pass `filters`; a filter that passes none is an error that says so."""
        namespace = validate.namespace_name(namespace)
        allowed = passing(self.store, namespace, validate.filters(filters))
        limits = Loading.resolved(self.settings.search, self.embedder)

        def load(texts: list[str], vectors: Any) -> GraphView:
            return load_for(self.store, namespace, texts, vectors, limits, allowed)
        return load

    def _reading(self, namespace: str | None, user_id: str | None, agent_id: str | None, run_id: str | None,
                 nested: bool | None) -> list[str]:
        """The namespaces a read covers, as mem0 users expect: the one named and, when it is named by
        user_id / agent_id / run_id (or `nested` is True), every namespace under it — user:ana covers
        user:ana/agent:planner and user:ana/run:r7. Writes stay exact. NamespaceNotFound when none exists."""
        base = namespace_for(namespace, user_id, agent_id, run_id)
        nested = by_ids(user_id, agent_id, run_id) if nested is None else nested
        names = read_names(self.store.namespaces(), base, nested)
        if not names:
            require_namespace(self.store, base)
        return names

    def _sources(self, names: list[str], filters: Filters | dict | None) -> list[Callable[[list[str], Any], GraphView]]:
        """A loader per namespace; with filters, those of the namespaces where something passes them (an
        error only when nothing passes anywhere)."""
        sources, first_error = [], None
        for name in names:
            try:
                sources.append(self._source(name, filters))
            except InputError as exc:
                first_error = first_error or exc
        if not sources and first_error is not None:
            raise first_error
        return sources

    def ask(self, question: str, namespace: str | None = None, *, filters: Filters | dict | None = None,
            user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
            mode: str | None = None, nested: bool | None = None) -> Answer:
        """Answer by actively searching the namespace's Event Graph (only the observations that pass
        `filters`: {'since', 'until', 'speaker', 'meta'}, see models.Filters); a scope covers the
        namespaces under it (`_reading`), and the evidence of all of them is ranked together. `mode`:
        'agentic' or 'graph' for this call (default: settings.search.mode; it matters only with an LLM)."""
        question = validate.question(question, self.settings.search.max_question_chars)
        engine = self._engine(validate.search_mode(mode)) if mode is not None else self.engine
        names = self._reading(namespace, user_id, agent_id, run_id, nested)
        with _working_for(*names):
            answer = engine.ask(self._sources(names, filters), question)
        answer.namespace = namespace_for(namespace, user_id, agent_id, run_id)
        return answer

    def search(self, query: str, namespace: str | None = None, limit: int = 10, *,
               filters: Filters | dict | None = None, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None, nested: bool | None = None) -> list[SearchHit]:
        """Events ranked for a query, with their matching observations, scores and times, and no answer:
        for agents that answer themselves; over every namespace a scope covers, best first (each hit names
        its namespace). Makes no LLM call, whatever model is configured."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InputError(f"limit must be an integer from 1 to 1000, got {limit!r}")
        query = validate.question(query, self.settings.search.max_question_chars)
        names = self._reading(namespace, user_id, agent_id, run_id, nested)
        hits = [h for src in self._sources(names, filters) for h in self.engine.search(src, query, limit)]
        return sorted(hits, key=lambda h: -h.score)[:limit] if len(names) > 1 else hits

    def events(self, namespace: str = "default") -> list[Event]:
        return self.store.events(namespace)

    def list(self, namespace: str | None = None, offset: int = 0, limit: int = 100, *, user_id: str | None = None,
             agent_id: str | None = None, run_id: str | None = None, nested: bool | None = None) -> EventPage:
        """A page of the namespace's events in the order they were stored; a scope's page runs through the
        namespaces it covers one after another (each event names its namespace)."""
        offset, limit = validate.page(offset, limit)
        names = self._reading(namespace, user_id, agent_id, run_id, nested)
        counts = [self.store.event_count(n) for n in names]
        items = page_through(names, counts, self.store.events, offset, limit)
        return EventPage(namespace=namespace_for(namespace, user_id, agent_id, run_id), offset=offset, limit=limit,
                         total=sum(counts), items=items)

    def get(self, event_id: str, namespace: str | None = None, *, user_id: str | None = None,
            agent_id: str | None = None, run_id: str | None = None, nested: bool | None = None) -> EventDetail:
        """One event with its source observations and the typed relations that touch it (in a scope: the
        first namespace it covers that holds the id, the scope's own first)."""
        names = self._reading(namespace, user_id, agent_id, run_id, nested)
        event_id = validate.identifier(event_id, "event id")
        for name in names:
            event = self.store.get_event(name, event_id)
            if event is not None:
                return EventDetail(event=event, observations=self.store.get_observations(name, event.observation_ids),
                                   relations=self.store.relations_of(name, [event.id]))
        raise EventNotFound(f"no event '{event_id}' in namespace '{', '.join(names)}' (compassmem list shows the ids)")

    def namespaces(self) -> list[str]:
        return self.store.namespaces()

    # ------------------------------------------------------------------ mem0's names
    def get_all(self, namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
                run_id: str | None = None, limit: int = 100) -> list[Event]:
        """mem0's get_all: the scope's events (a memory is an event here; a user's include their agents' and
        runs'), the first `limit` in stored order."""
        return self.list(namespace, 0, limit, user_id=user_id, agent_id=agent_id, run_id=run_id).items

    def delete_all(self, namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
                   run_id: str | None = None) -> list[ForgetReceipt]:
        """mem0's delete_all: every memory of one named scope, the namespaces under it included (a user's
        agents and runs), each forgotten with its receipt."""
        if namespace is None and user_id is None and agent_id is None and run_id is None:
            raise InputError("delete_all needs a namespace (or user_id / agent_id / run_id)")
        return [self.forget(n) for n in self._reading(namespace, user_id, agent_id, run_id, None)]

    def reset(self) -> list[ForgetReceipt]:
        """mem0's reset: forget every namespace of the database, each with its receipt."""
        return [self.forget(n) for n in self.store.namespaces()]

    def stats(self, namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
              run_id: str | None = None) -> dict[str, Any]:
        """Counts of observations, events, relations (by type), topics and merges, and construction cost."""
        namespace = require_namespace(self.store, namespace_for(namespace, user_id, agent_id, run_id))
        rels = self.store.relations(namespace)
        steps = self.store.steps.all(namespace)
        return {
            "namespace": namespace,
            "observations": self.store.observation_count(namespace),
            "steps": len(steps),
            "events": self.store.event_count(namespace),
            "relations": len(rels),
            "relations_by_type": dict(Counter(r.type for r in rels).most_common()),
            "cross_step_relations": sum(1 for r in rels if r.origin == "cross_step"),
            "topics": len(self.store.topics(namespace)),
            "merges": sum(s.events_merged for s in steps),
            "construction": construction_cost(steps),
            "skipped": [f"step {s.step}: {note}" for s in steps for note in s.skipped],
        }
