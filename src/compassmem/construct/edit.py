"""Changing the past: deleting or rewriting observations after they were built into the Event Graph.

An edit keeps every invariant `add` keeps: each observation in exactly one event, no event without a
source, no relation to a missing event, indexes level with the tables. An event that loses all its
sources is deleted (its relations with it); an event that keeps some is re-derived from what is left
by the same segmenter that built it (summary, participants, time, vector), keeping its id and its
relations. Topic sizes, centroids and labels follow. Like a construction step, the slow part (model
calls, embeddings) runs before the write lock, and the writes commit in one transaction.

What may still hold the old text is removed too: the summaries in the event's history, every
LLM-cache row the namespace's work wrote, the index segments and base files; then the WAL is
checkpointed and the database files are scanned for the old text (the receipt says what was found).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from contextlib import nullcontext

import numpy as np

from ..embed import l2_normalise
from ..errors import InputError, ObservationNotFound
from ..models import EditReceipt, Event, EventTime, Observation, Topic, Usage
from ..timeutil import find_expressions, iso, parse_date, resolve_in_text
from .pipeline import Constructor
from .segment import extractive_summary, observation_text, participants_of

MIN_SCAN_CHARS = 12  # shorter texts ("ok", "yes") occur by chance; scanning for them proves nothing


@dataclass
class _Plan:
    seen: dict[str, tuple]  # affected event -> its observations (id, text) when planned
    deleted: list[Event] = field(default_factory=list)
    rederived: list[tuple[Event, np.ndarray, Event, np.ndarray]] = field(default_factory=list)  # old, vec, new, vec
    topics: dict[str, tuple[Topic, np.ndarray] | None] = field(default_factory=dict)  # None: delete the topic


class Editor:
    def __init__(self, constructor: Constructor) -> None:
        self.c = constructor
        self.store = constructor.store

    # ------------------------------------------------------------------ the two edits
    def delete(self, namespace: str, ids: list[str]) -> EditReceipt:
        old = self._existing(namespace, ids)
        gone = {o.id for o in old}
        receipt = EditReceipt(namespace=namespace, action="delete", observation_ids=[o.id for o in old])

        def write() -> None:
            receipt.removed["observations"] = len(self.store.delete_observations(namespace, sorted(gone)))
        return self._edit(namespace, gone, {}, "observations_deleted", write, receipt, [o.text for o in old])

    def update(self, namespace: str, observation_id: str, text: str) -> EditReceipt:
        old = self._existing(namespace, [observation_id])[0]
        new = old.model_copy(update={"text": text[: self.c.settings.max_observation_chars]})
        receipt = EditReceipt(namespace=namespace, action="update", observation_ids=[old.id])
        vec = self.c.embedder.embed([observation_text(new)])
        return self._edit(namespace, {old.id}, {old.id: new}, "updated",
                          lambda: self.store.add_observations([new], vec), receipt, [old.text])

    def _edit(self, namespace: str, touched: set[str], replaced: dict[str, Observation], action: str,
              write, receipt: EditReceipt, old_texts: list[str]) -> EditReceipt:
        """Either edit: plan before the write lock, re-plan under it if another writer changed the affected
        events meanwhile, then `write` the observation change and apply the plan in one transaction."""
        gone = touched if action == "observations_deleted" else set()
        with self._scope(f"{receipt.action} in '{namespace}'") as usage:
            plan = self._plan(namespace, self._owners(namespace, touched), gone, replaced)
            with self.store.transaction():
                if self._stale(namespace, plan, touched):
                    plan = self._plan(namespace, self._owners(namespace, touched), gone, replaced)
                write()
                self._apply(namespace, plan, touched, action, receipt)
        receipt.usage = usage.model_copy()
        return self._finish(namespace, old_texts, receipt)

    # ------------------------------------------------------------------ steps
    def _scope(self, label: str):
        llm = self.c.llm
        return llm.operation(deadline_s=llm.settings.step_deadline_s, label=label) if llm is not None else nullcontext(Usage())

    def _existing(self, namespace: str, ids: list[str]) -> list[Observation]:
        if not ids:
            raise InputError("no observation ids given")
        bad = [i for i in ids if not isinstance(i, str) or not i]
        if bad:
            raise InputError(f"observation ids must be non-empty strings, got {bad[0]!r}")
        found = self.store.get_observations(namespace, ids)
        missing = sorted(set(ids) - {o.id for o in found})
        if missing:
            raise ObservationNotFound(f"no observation {', '.join(repr(m) for m in missing[:5])} in namespace '{namespace}' "
                             "(compassmem get EVENT_ID shows an event's observation ids)")
        return found

    def _owners(self, namespace: str, ids: set[str]) -> list[str]:
        return sorted(set(self.store.owners(namespace, sorted(ids)).values()))

    def _stale(self, namespace: str, plan: _Plan, ids: set[str]) -> bool:
        """Whether another writer changed the affected events or the text of one of their observations
        since planning (a plan made from an old text would write that text back into the summary)."""
        events, _ = self.store.get_events(namespace, self._owners(namespace, ids))
        return self._state(namespace, events) != plan.seen

    def _state(self, namespace: str, events: list[Event]) -> dict[str, tuple]:
        owned = [o for e in events for o in e.observation_ids]
        texts = {o.id: o.text for o in self.store.get_observations(namespace, owned)}
        return {e.id: tuple((o, texts.get(o)) for o in e.observation_ids) for e in events}

    def _plan(self, namespace: str, event_ids: list[str], gone: set[str], replaced: dict[str, Observation]) -> _Plan:
        """The new state of every affected event and topic, computed before the write lock."""
        store = self.store
        events, vecs = store.get_events(namespace, event_ids)
        plan = _Plan(seen=self._state(namespace, events))
        for event, vec in zip(events, vecs):
            keep = [o for o in event.observation_ids if o not in gone]
            if not keep:
                plan.deleted.append(event)
                continue
            remaining = [replaced.get(o.id, o) for o in store.get_observations(namespace, keep)]
            new = self.rederive(event, remaining)
            plan.rederived.append((event, vec, new, self.c.embedder.embed([new.embed_text()])[0]))
        touched = {e.topic_id for e in plan.deleted} | {old.topic_id for old, *_ in plan.rederived}
        if touched - {None}:
            membership = store.event_topics(namespace)
            dropped = {e.id for e in plan.deleted}
            changed = {new.id: new for _, _, new, _ in plan.rederived}
            for tid in sorted(touched - {None}):
                found = store.get_topic(namespace, tid)
                members = [e for e, t in membership.items() if t == tid and e not in dropped]
                if found is None:
                    continue
                if not members:
                    plan.topics[tid] = None
                    continue
                topic, centre = found
                total = centre * topic.size
                total -= sum((v for e, v in zip(events, vecs) if e.topic_id == tid), np.zeros_like(centre))
                total += sum((nv for old, _, _, nv in plan.rederived if old.topic_id == tid), np.zeros_like(centre))
                sample, _ = store.get_events(namespace, members[:12])
                label = self.c.roles.labeler.label([changed.get(e.id, e) for e in sample])
                plan.topics[tid] = (topic.model_copy(update={"size": len(members), "label": label}), l2_normalise(total))
        return plan

    def rederive(self, event: Event, remaining: list[Observation]) -> Event:
        """The event as the segmenter describes what is left of it: one summary per draft (the first the
        summary, the rest its history, as fusion keeps them), its people and its time."""
        valid = {o.id for o in remaining}
        drafts = [d for d in self.c.roles.segmenter.segment(event.step, remaining, None)
                  if d.summary.strip() and valid.intersection(d.observation_ids)]
        summaries = [d.summary.strip() for d in drafts] or [extractive_summary(remaining)]
        people = list(dict.fromkeys([p for d in drafts for p in d.participants] + participants_of(remaining)))[:3]
        text = " ".join(o.text for o in remaining)
        time = event.time
        if not time.explicit or time.explicit.lower() not in text.lower():  # its time expression left with a turn
            anchor = next((parse_date(o.time) for o in remaining if o.time), None)
            expr = next((d.time_expression for d in drafts if d.time_expression), None) or next(iter(find_expressions(text)), None)
            resolved = resolve_in_text(expr, anchor) if expr else None
            time = EventTime(explicit=expr, step=time.step, order=time.order,
                             date=iso(resolved.start if resolved else anchor), end=iso(resolved.end) if resolved else None)
        return event.model_copy(update={"summary": summaries[0], "history": summaries[1:], "participants": people,
                                        "observation_ids": [o.id for o in remaining], "time": time})

    def _apply(self, namespace: str, plan: _Plan, touched: set[str], action: str, receipt: EditReceipt) -> None:
        store = self.store
        dead = [e.id for e in plan.deleted]
        receipt.removed["events"] = len(dead)
        receipt.removed["relations"] = store.delete_events(namespace, dead) if dead else 0
        receipt.removed["history_summaries"] = store.history.redact(namespace, dead + [n.id for _, _, n, _ in plan.rederived])
        for e in plan.deleted:
            store.history.add(namespace, e.id, "deleted", None, e.observation_ids, None)
        receipt.events_deleted = dead
        for old, _, new, vec in plan.rederived:
            store.put_event(new, vec)
            store.history.add(namespace, new.id, action, None, [o for o in old.observation_ids if o in touched], new.summary)
            receipt.events_rederived.append(new.id)
        if action == "observations_deleted":  # evidence may cite a turn of a third event (fused drafts)
            for r in store.relations_citing(namespace, sorted(touched)):
                store.add_relation(r.model_copy(update={"evidence": [x for x in r.evidence if x not in touched]}))
        gone = [tid for tid, state in plan.topics.items() if state is None]
        store.delete_topics(namespace, gone)
        store.put_topics([state for state in plan.topics.values() if state is not None])
        receipt.removed["topics"] = len(gone)
        # in the same transaction: a crash right after the commit must not leave cached prompts holding the text
        receipt.removed["llm_cache"] = store.cache.drop(namespace)

    def _finish(self, namespace: str, old_texts: list[str], receipt: EditReceipt) -> EditReceipt:
        """After the commit: the index rewrite, the WAL checkpoint, the byte scan. A crash before it leaves
        the old base files, which still hold the deleted rows' vectors (never returned: the vector log
        tombstones them) until the namespace's next edit or base rebuild."""
        store = self.store
        receipt.removed["index_files"] = store.compact(namespace)
        store.refresh_indexes(namespace)
        texts = sorted({t for t in old_texts if len(t) >= MIN_SCAN_CHARS and not store.text_held(t)})
        receipt.skipped_texts = len(set(old_texts)) - len(texts)
        receipt.scanned_texts = len(texts)
        receipt.scanned_files, receipt.found = store.leak_scan(texts)
        return receipt
