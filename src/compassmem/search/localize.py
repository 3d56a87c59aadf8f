"""Localisation: top-k similar events plus events of the first p distinct topics in the ranked list,
then a start-selection role picks diverse start nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..config import SearchSettings
from ..llm import LLMClient
from ..prompts import prompt
from ..schemas import SelectOut
from ..text import clip
from .graph import GraphView


@dataclass
class Candidate:
    event_id: str
    sim: float
    via: str  # "top_k" | "topic:<id>"


class StartSelector(Protocol):
    def select(self, question: str, subgoals: list[str], candidates: list[Candidate], graph: GraphView,
               subgoal_vecs: np.ndarray, max_pick: int) -> list[str]: ...


def candidates_for(graph: GraphView, query: np.ndarray, text: str, settings: SearchSettings,
                   exclude: set[str] | None = None, top_k: int | None = None) -> list[Candidate]:
    """Top-k by similarity, then members of the first p distinct topics met in the ranked pool."""
    k = top_k or settings.top_k
    all_sims = graph.similarity(query, [text])[:, 0]
    order = [i for i in np.argsort(-all_sims, kind="stable") if not (exclude and graph.ids[i] in exclude)]
    ranked = [(graph.ids[i], float(all_sims[i])) for i in order[: max(settings.pool_size, k)]]
    out = [Candidate(eid, sim, "top_k") for eid, sim in ranked[:k]]
    if not settings.use_topics or settings.topics_p == 0:
        return out
    chosen = {c.event_id for c in out}
    sims = dict(ranked)
    topics: list[str] = []
    for eid, _ in ranked:
        tid = graph.events[eid].topic_id
        if tid and tid not in topics:
            topics.append(tid)
        if len(topics) >= settings.topics_p:
            break
    for tid in topics:
        members = [m for m in graph.members.get(tid, []) if m not in chosen and not (exclude and m in exclude)]
        if not members:
            continue
        rows = np.array([all_sims[graph.index(m)] for m in members])
        for idx in np.argsort(-rows, kind="stable")[: settings.per_topic]:
            eid = members[int(idx)]
            chosen.add(eid)
            out.append(Candidate(eid, sims.get(eid, float(rows[idx])), f"topic:{tid}"))
    return out


class OfflineStartSelector:
    """Greedy subgoal coverage: the best candidate for each subgoal first, then the best by question."""

    def select(self, question, subgoals, candidates, graph, subgoal_vecs, max_pick):
        if not candidates:
            return []
        ids = [c.event_id for c in candidates]
        picks: list[str] = []
        if len(subgoal_vecs):
            cover = graph.similarity(subgoal_vecs, subgoals)[[graph.index(e) for e in ids]]  # candidates × subgoals
            for j in range(cover.shape[1]):
                best = ids[int(np.argmax(cover[:, j]))]
                if best not in picks:
                    picks.append(best)
        for c in sorted(candidates, key=lambda c: -c.sim):
            if len(picks) >= max_pick:
                break
            if c.event_id not in picks:
                picks.append(c.event_id)
        return picks[:max_pick]


class LLMStartSelector:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def select(self, question, subgoals, candidates, graph, subgoal_vecs, max_pick):
        if not candidates:
            return []
        listing = "\n".join(f"{c.event_id} ({c.sim:.2f}, {graph.events[c.event_id].time.label()}): "
                            f"{clip(graph.events[c.event_id].summary, 160)}" for c in candidates)
        goals = "\n".join(f"{i}. {g}" for i, g in enumerate(subgoals))
        out = self.llm.structured(prompt("select"), SelectOut, question=question, subgoals=goals,
                                  candidates=listing, max_pick=max_pick)
        valid = {c.event_id for c in candidates}
        picks = [x for x in dict.fromkeys(s.strip() for s in out.selected) if x in valid][:max_pick]
        if not picks:  # the model picked nothing usable: fall back to the two most similar
            picks = [c.event_id for c in sorted(candidates, key=lambda c: -c.sim)[:2]]
        return picks
