"""Picks each role's implementation: LLM-driven when a client is given, offline otherwise.

This is the only place that knows both families exist; pipeline and engine take what they get.
"""

from __future__ import annotations

from .config import Settings
from .construct import ConstructionRoles
from .construct.fuse import LLMFusionJudge, OfflineFusionJudge
from .construct.relate import LLMRelationExtractor, OfflineRelationExtractor
from .construct.revise import LLMRevisionFinder, OfflineRevisionFinder
from .construct.segment import LLMSegmenter, OfflineSegmenter
from .construct.topics import KeywordLabeler, LLMLabeler
from .embed import CachedEmbedder
from .llm import LLMClient
from .search.engine import SearchRoles
from .search.explorer import LLMPolicy, OfflinePolicy
from .search.localize import LLMStartSelector, OfflineStartSelector
from .search.planner import LLMPlanner, OfflinePlanner
from .search.offline_answerer import ExtractiveResponder
from .search.responder import LLMResponder
from .store import Store


def construction_roles(llm: LLMClient | None, embedder: CachedEmbedder, settings: Settings) -> ConstructionRoles:
    if llm is None:
        return ConstructionRoles(OfflineSegmenter(embedder, settings.construction), OfflineRelationExtractor(),
                                 OfflineFusionJudge(settings.construction), KeywordLabeler(),
                                 OfflineRevisionFinder(embedder, settings.construction))
    return ConstructionRoles(LLMSegmenter(llm), LLMRelationExtractor(llm), LLMFusionJudge(llm), LLMLabeler(llm),
                             LLMRevisionFinder(llm, embedder, settings.construction))


def search_roles(llm: LLMClient | None, embedder: CachedEmbedder, settings: Settings, store: Store,
                 mode: str | None = None) -> SearchRoles:
    """`mode` (default: settings.search.mode): 'agentic' gives every search role to the model; 'graph' keeps
    planning, start selection and exploration offline and gives the model only the answer."""
    if llm is None or (mode or settings.search.mode) == "graph":
        return SearchRoles(OfflinePlanner(), OfflineStartSelector(), lambda graph, sims: OfflinePolicy(graph, sims),
                           ExtractiveResponder(embedder, store) if llm is None else LLMResponder(llm))
    show, menu = settings.search.use_relations, settings.search.menu_size
    return SearchRoles(LLMPlanner(llm), LLMStartSelector(llm), lambda graph, sims: LLMPolicy(llm, graph, show, sims, menu),
                       LLMResponder(llm))
