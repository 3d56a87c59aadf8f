"""One construction step: segment → relate → fuse → topics, committed in one transaction.

Steps are idempotent (same content → nothing changes) and append-only (step N+1 never rewrites the
ids of earlier steps), which is what lets memory grow for the lifetime of an agent.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from ..config import ConstructionSettings
from ..embed import CachedEmbedder
from ..errors import InputError, StepConflict
from ..llm import LLMClient
from ..models import Event, EventTime, Observation, Relation, StepRecord, Usage
from ..store import Store
from ..timeutil import iso, parse_date, resolve_in_text
from . import topics as topic_ops
from .fuse import FusionDecision, FusionJudge, decide, merge_into
from .relate import RelationExtractor
from .revise import Revision, RevisionFinder
from ..timeutil import find_expressions
from .segment import DraftEvent, Segmenter, extractive_summary, observation_text, participants_of


PLAN_TRIES = 5  # fusion planned again outside the write lock when another step landed meanwhile (LLM judge)


@dataclass
class _Draft:
    obs_vecs: np.ndarray
    events: list[Event]
    relations: list
    event_vecs: np.ndarray
    revisions: list[Revision] = field(default_factory=list)  # earlier turns this step's turns revise


@dataclass
class _Plan:
    version: int  # steps in the namespace when the decisions were made
    decisions: list[list[FusionDecision]]


@dataclass
class ConstructionRoles:
    """The construction roles; LLM-driven or offline, the pipeline cannot tell."""

    segmenter: Segmenter
    relations: RelationExtractor
    judge: FusionJudge
    labeler: topic_ops.TopicLabeler
    reviser: RevisionFinder


def content_hash(observations: list[Observation], world_time: str | None) -> str:
    payload = [world_time] + [[o.id, o.speaker, o.text, o.time, sorted(o.meta.items())] for o in observations]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


class Constructor:
    def __init__(self, store: Store, embedder: CachedEmbedder, roles: ConstructionRoles,
                 settings: ConstructionSettings | None = None, llm: LLMClient | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.roles = roles
        self.settings = settings or ConstructionSettings()
        self.llm = llm

    # ------------------------------------------------------------------ validation
    def _validate(self, namespace: str, step: int, observations: list[Observation]) -> None:
        seen: set[str] = set()
        for o in observations:
            if o.namespace != namespace or o.step != step:
                raise InputError(f"observation {o.id} belongs to {o.namespace}/step {o.step}, not {namespace}/step {step}")
            if o.id in seen:
                raise InputError(f"duplicate observation id '{o.id}' in step {step}")
            seen.add(o.id)
        earlier = {o.id for o in self.store.get_observations(namespace, sorted(seen)) if o.step != step}
        if earlier:
            raise InputError(f"observation id(s) already used by an earlier step: {', '.join(sorted(earlier)[:5])}")

    def _events_from_drafts(self, namespace: str, step: int, drafts: list[DraftEvent],
                            observations: list[Observation], world_date, skipped: list[str]) -> list[Event]:
        valid = {o.id: o.seq for o in observations}
        used: set[str] = set()
        events: list[Event] = []
        for i, d in enumerate(drafts):
            ids = [x for x in dict.fromkeys(d.observation_ids) if x in valid and x not in used]
            bad = [x for x in d.observation_ids if x not in valid]
            if bad:
                skipped.append(f"event {i + 1}: rejected unknown observation ids {bad[:5]}")
            if not ids or not d.summary.strip():
                skipped.append(f"event {i + 1}: dropped (no valid observation ids or empty summary)")
                continue
            used.update(ids)
            events.append(self._event(namespace, step, d, ids, valid, world_date, len(events)))
        runs: list[list[Observation]] = []
        cap = self.settings.max_event_turns
        for o in observations:  # what the segmenter left out still becomes memory, never silently lost
            if o.id in used:
                continue
            if runs and runs[-1][-1].seq == o.seq - 1 and len(runs[-1]) < cap:
                runs[-1].append(o)
            else:  # capped like offline events: one 18-turn blob would be handed whole to the answerer
                runs.append([o])
        for run in runs:
            skipped.append(f"observations {run[0].id}..{run[-1].id} not covered by the segmenter: kept as an extractive event")
            text = " ".join(o.text for o in run)
            exprs = find_expressions(text)
            draft = DraftEvent(extractive_summary(run), [o.id for o in run], participants_of(run), exprs[0] if exprs else None)
            events.append(self._event(namespace, step, draft, draft.observation_ids, valid, world_date, len(events)))
        return events

    @staticmethod
    def _event(namespace: str, step: int, d: DraftEvent, ids: list[str], seqs: dict[str, int], world_date,
               order: int) -> Event:
        resolved = resolve_in_text(d.time_expression or "", world_date) if d.time_expression else None
        time = EventTime(explicit=d.time_expression, step=step, order=order,
                         date=iso(resolved.start if resolved else world_date), end=iso(resolved.end) if resolved else None)
        return Event(id=f"e{step}.{order}", namespace=namespace, step=step, summary=d.summary.strip(),
                     participants=d.participants, time=time, observation_ids=sorted(ids, key=seqs.__getitem__))

    # ------------------------------------------------------------------ the step
    def add_step(self, namespace: str, step: int, observations: list[Observation],
                 world_time: str | None = None) -> StepRecord:
        if not observations:
            raise InputError(f"step {step} of '{namespace}' has no observations")
        digest = content_hash(observations, world_time)
        prior = self.store.steps.get(namespace, step)
        if prior is not None:
            if prior.content_hash == digest:
                return prior
            raise StepConflict(f"step {step} of '{namespace}' was already ingested with different content; "
                               f"to rebuild it: compassmem forget -n '{namespace}' --db …, then ingest again")
        self._validate(namespace, step, observations)
        skipped: list[str] = []
        cap = self.settings.max_observation_chars
        clipped = []
        for o in observations:
            if len(o.text) > cap:
                skipped.append(f"observation {o.id}: text truncated from {len(o.text)} to {cap} characters")
                o = o.model_copy(update={"text": o.text[:cap]})
            clipped.append(o)
        observations = clipped
        world_date = parse_date(world_time) or next((parse_date(o.time) for o in observations if o.time), None)
        if world_time and parse_date(world_time) is None:
            skipped.append(f"world_time '{world_time[:60]}' is not a date"
                           + ("; events are dated from their turns' times" if world_date else "; events have no date"))
        scope = (self.llm.operation(deadline_s=self.llm.settings.step_deadline_s, label=f"step {step} of '{namespace}'")
                 if self.llm is not None else nullcontext(Usage()))
        with scope as usage:
            # Everything slow (embeddings, model calls) happens before the write lock is taken, so other
            # writers and readers of the same database wait milliseconds, not minutes.
            draft = self._prepare(namespace, step, observations, world_time, world_date, skipped)
            draft.revisions = self.roles.reviser.find(self.store, namespace, observations)
            for attempt in range(PLAN_TRIES):
                plan = self._plan_fusion(namespace, draft)
                labels = topic_ops.DeferredLabels(self.roles.labeler)
                with self.store.transaction():
                    prior = self.store.steps.get(namespace, step)
                    if prior is not None:  # another writer committed this step meanwhile
                        if prior.content_hash == digest:
                            return prior
                        raise StepConflict(f"step {step} of '{namespace}' was just ingested by another writer "
                                           "with different content")
                    if self._version(namespace) != plan.version:  # another step landed: judge against it too
                        if self.llm is not None and attempt < PLAN_TRIES - 1:
                            continue  # the judge is a model: judge again with the lock released
                        plan = self._plan_fusion(namespace, draft, self.llm is None)  # no model call in here
                    record = self._apply(namespace, step, observations, draft, plan, digest, skipped, labels)
                    self._account(record, usage)
                    self.store.steps.put(record)
                    break
            if labels.wanted:  # the model names new topics now that the write lock is free
                record.skipped += labels.name(self.store, namespace)
                with self.store.transaction():
                    self._account(record, usage)
                    self.store.steps.put(record)
            # keep the store's indexes level with the step now (amortised: deltas fold into base files on a
            # geometric schedule), so the first ask after a long ingest does not pay for all of it
            self.store.refresh_indexes(namespace)
        return record

    def _link_revisions(self, namespace: str, step: int, draft: _Draft, final_id: dict[int, str]) -> int:
        """An `updates`/`contradicts` edge from the event holding each revising turn to the event holding the
        turn it revises (both turns as evidence), and a `superseded` entry in the older event's history."""
        owner = {o: final_id[i] for i, e in enumerate(draft.events) if i in final_id for o in e.observation_ids}
        older = self.store.owners(namespace, [r.old for r in draft.revisions]) if draft.revisions else {}
        n = 0
        for r in draft.revisions:
            new, old = owner.get(r.new), older.get(r.old)
            if new is None or old is None or new == old:
                continue
            self.store.add_relation(Relation(id=f"r{step}.v{n}", namespace=namespace, source=new, target=old,
                                             type=r.kind, origin="cross_step", confidence=r.confidence, step=step,
                                             evidence=[r.old, r.new]))
            self.store.history.add(namespace, old, "superseded", step, [r.new], f"by {new}")
            n += 1
        return n

    @staticmethod
    def _account(record: StepRecord, usage: Usage) -> None:
        record.llm_calls, record.prompt_tokens = usage.llm_calls, usage.prompt_tokens
        record.completion_tokens, record.latency_s = usage.completion_tokens, round(usage.latency_s, 3)

    def _version(self, namespace: str) -> int:
        return self.store.steps.count(namespace)  # a namespace never made, or deleted, has no steps: 0

    def _prepare(self, namespace: str, step: int, observations: list[Observation], world_time: str | None,
                 world_date, skipped: list[str]) -> _Draft:
        """The step's own work, which reads nothing of the store: embeddings, segmentation, relations."""
        obs_vecs = self.embedder.embed([observation_text(o) for o in observations])
        drafts = self.roles.segmenter.segment(step, observations, world_time)
        events = self._events_from_drafts(namespace, step, drafts, observations, world_date, skipped)
        if not events:
            raise InputError(f"step {step}: segmentation produced no valid event ({'; '.join(skipped[-3:])})")
        relations = self.roles.relations.relate(step, observations, events)
        return _Draft(obs_vecs, events, relations, self.embedder.embed([e.embed_text() for e in events]))

    def _plan_fusion(self, namespace: str, draft: _Draft, judge: bool = True) -> _Plan:
        """Fusion decisions against the events already stored (judge calls included, unless `judge` is
        False: then only similarity decides), and the namespace version they were made against."""
        store, s = self.store, self.settings
        version = self._version(namespace)
        decisions: list[list[FusionDecision]] = []
        judge_calls = 0
        with store.snapshot():  # one state for the step's lookups: PostgreSQL then scans its kept vectors
            found = [store.search_events(namespace, vec, s.judge_candidates + 8) if version else []
                     for vec in draft.event_vecs]
            wanted = list(dict.fromkeys(eid for hits in found for eid, _ in hits))  # one read for the candidates
            stored = {e.id: e for e in store.get_events(namespace, wanted)[0]} if wanted else {}
        for event, hits in zip(draft.events, found):
            candidates = [(stored.get(eid), sim) for eid, sim in hits]
            candidates = [(e, sim) for e, sim in candidates if e is not None and e.step < event.step]
            d, used = decide(event, candidates, self.roles.judge, s,
                             s.max_judge_calls_per_step - judge_calls if judge else 0)
            judge_calls += used
            decisions.append(d)
        return _Plan(version, decisions)

    def _apply(self, namespace: str, step: int, observations: list[Observation], draft: _Draft, plan: _Plan,
               digest: str, skipped: list[str], labels: topic_ops.DeferredLabels) -> StepRecord:
        """The writes of one step, inside its transaction; no model call (topics get keyword labels here,
        and a model's labels after the commit)."""
        store, s = self.store, self.settings
        store.ensure_namespace(namespace)
        record = StepRecord(namespace=namespace, step=step, content_hash=digest, observations=len(observations))
        drafts_rel = draft.relations
        final_id: dict[int, str] = {}
        cross: list[Relation] = []
        written: dict[str, tuple[Event, np.ndarray]] = {}  # the step's events, written together below
        changes: list[tuple[str, str, str, int | None, list[str], str | None]] = []
        topic_ids = topic_ops.TopicIds(store, namespace)
        for i, (event, vec, decisions) in enumerate(zip(draft.events, draft.event_vecs, plan.decisions)):
            if decisions[0].kind == "merge":
                tid = decisions[0].target.id
                target = (written[tid][0] if tid in written else store.get_event(namespace, tid)) or decisions[0].target
                order = {o.id: (o.step, o.seq) for o in store.get_observations(namespace, target.observation_ids)}
                order.update((o.id, (o.step, o.seq)) for o in observations)  # the step's own, not written yet
                fused = merge_into(target, event, order)
                written[fused.id] = (fused, self.embedder.embed([fused.embed_text()])[0])
                changes.append((namespace, fused.id, "merged", step, event.observation_ids, event.summary))
                final_id[i] = fused.id
                record.events_merged += 1
                continue
            event.topic_id = topic_ops.assign_online(store, namespace, event, vec, s, labels, topic_ids)
            written[event.id] = (event, vec)
            changes.append((namespace, event.id, "created", step, event.observation_ids, event.summary))
            final_id[i] = event.id
            record.events_new += 1
            for d in decisions:
                if d.kind == "link" and d.target is not None:
                    cross.append(Relation(id=f"r{step}.x{len(cross)}", namespace=namespace, source=d.target.id,
                                          target=event.id, type=d.relation_type or "related_to", origin="cross_step",
                                          confidence=round(max(0.0, min(1.0, d.sim)), 3), step=step,
                                          evidence=d.target.observation_ids[:1] + event.observation_ids[:1]))
        # the step's turns are written once their events are known, each with its event: set afterwards, every
        # row was written twice (on PostgreSQL a second row version and HNSW entry per turn)
        store.add_observations(observations, draft.obs_vecs,
                               {oid: final_id[i] for i, e in enumerate(draft.events) for oid in e.observation_ids})
        if written:
            store.put_events([e for e, _ in written.values()], np.stack([v for _, v in written.values()]))
        store.history.add_many(changes)
        valid_obs = {o.id for o in observations}
        seen_edges: set[tuple[str, str, str]] = set()
        within: list[Relation] = []
        for r in drafts_rel:
            src, dst = final_id.get(r.source), final_id.get(r.target)
            if src is None or dst is None or src == dst:
                continue
            rel = Relation(id=f"r{step}.{len(within)}", namespace=namespace, source=src, target=dst, type=r.type,
                           evidence=[x for x in r.evidence if x in valid_obs], origin="within_step", step=step)
            key = (rel.source, rel.target, rel.type)
            if key in seen_edges:
                continue
            seen_edges.add(key)
            within.append(rel)
        store.add_relations(within + cross)
        n_rel = len(within)
        revised = self._link_revisions(namespace, step, draft, final_id)
        record.relations = n_rel + len(cross) + revised
        record.cross_relations = len(cross)
        if topic_ops.due(store, namespace, s):
            topic_ops.recluster(store, namespace, s, labels)
            record.topics_reclustered = True
        record.skipped = skipped
        return record
