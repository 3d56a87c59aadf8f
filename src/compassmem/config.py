"""Every tunable number of the method in one validated place, with the paper's values as defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError

LEXICAL_WEIGHT = 0.2  # BM25's weight beside a semantic embedder (SearchSettings.lexical_weight unset), GraphView's default
# the share of it a query that asks nothing keeps beside a semantic embedder (SearchSettings.statement_lexical_share unset)
STATEMENT_LEXICAL_SHARE = 0.25


class ConstructionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    merge_threshold: float = Field(0.9, ge=0, le=1, description="sim above which the judge is asked 'same event?'")
    related_threshold: float = Field(0.55, ge=0, le=1, description="sim above which a cross-step edge is considered")
    judge_candidates: int = Field(2, ge=0, le=10, description="nearest existing events judged per new event")
    max_judge_calls_per_step: int = Field(12, ge=0)
    revision_similarity: float = Field(0.5, ge=0, le=1, description="cosine between a sentence that states a change "
                                       "and the same person's earlier sentence above which it may revise it "
                                       "(construct/revise.py; offline also needs a changed number, negation or word)")
    max_revision_calls_per_step: int = Field(4, ge=0, description="model calls a step may spend deciding revisions")
    offline_revisions: bool = Field(False, description="link revisions without a model too (construct/revise.py): "
                                    "right on short chats, but most links it made on LoCoMo were restatements, so off")
    topic_delta: float = Field(0.9, ge=0, le=1, description="δ: online topic assignment threshold")
    recluster_every: int = Field(4, ge=1, description="T: re-cluster all events every T steps ...")
    recluster_growth: float = Field(1.25, ge=1.0, le=10, description="... once the namespace has grown by this "
                                    "factor since the last re-clustering (1.0: the paper's schedule, every T "
                                    "steps); makes the topic layer's total cost linear in the events")
    recluster_drift: float = Field(2.0, ge=0, le=100, description="re-cluster off schedule too once the namespace "
                                   "has more than this many times the topics k-means would make (0: never, the "
                                   "paper's): a memory of a few large steps (a 100-turn chat session a step) never "
                                   "reaches step T, and online assignment at δ opens a topic for nearly every event; "
                                   "it waits for recluster_growth like the schedule, so the cost stays linear")
    max_topics: int = Field(50, ge=2, description="upper bound of k at re-clustering")
    events_per_topic: int = Field(5, ge=1, description="k = max(2, min(⌊n / this⌋, max_topics))")
    max_event_turns: int = Field(6, ge=1, description="turns per event: offline segmenter and uncovered-turn repair")
    boundary_threshold: float = Field(0.3, ge=-1, le=1, description="offline segmenter: sim below it starts an event")
    max_observation_chars: int = Field(20_000, ge=100, description="longer texts are truncated, with a note in stats")


SearchMode = Literal["agentic", "graph"]  # validate.search_mode, the REST body and SearchSettings share it


class SearchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: SearchMode = Field(
        "agentic", description="with an LLM: 'agentic' - the model plans, picks start nodes and explores (the paper); "
                               "'graph' - the offline explorers walk the graph and the model only writes the answer "
                               "(1 call per question). Without an LLM both are the offline search")
    top_k: int = Field(5, ge=1, le=100, description="k: directly retrieved candidates")
    topics_p: int = Field(5, ge=0, le=50, description="p: distinct topics taken from the ranked list")
    pool_size: int = Field(50, ge=1, description="ranked list length scanned for topics")
    per_topic: int = Field(3, ge=1, le=10, description="start candidates taken per topic")
    max_start_nodes: int = Field(5, ge=1, le=20, description="start nodes the selector may pick")
    anchor_starts: int = Field(1, ge=0, le=5, description="most similar candidates that start whatever the selector picks")
    explorers: int = Field(3, ge=1, le=16, description="parallel explorers over one queue")
    max_next: int = Field(3, ge=0, le=10, description="neighbours an EXPAND may enqueue")
    menu_size: int = Field(3, ge=1, le=40, description="agentic mode: the neighbours a model explorer is shown per "
                           "event, those most similar to the question or an open sub-goal")
    max_steps: int = Field(24, ge=1, description="explorer steps per round (all explorers together)")
    max_llm_calls: int = Field(4, ge=2, le=100, description="agentic mode: model calls per question, all roles "
                               "together; exploration then decides each round of all explorers in one call and stops "
                               "when only the answer's call is left (refinement only if 2 calls are left)")
    refinement: bool = Field(True, description="one gap-aware round when subgoals stay open")
    use_planner: bool = Field(True, description="off: the question is the only subgoal and is not read as asking for a set (ablation)")
    use_topics: bool = Field(True, description="off: no topic candidates at localisation (ablation)")
    use_relations: bool = Field(True, description="off: explorers see no neighbours and the ranking has neither the relation term nor the thread term (ablation; the no_relations preset also sets neighbour_events 0)")
    max_subgoals: int = Field(5, ge=1, le=5, description="the planner's 2–5 subgoals, capped")
    max_question_chars: int = Field(4000, ge=10, description="longer questions are refused")
    candidates: int = Field(100, ge=1, le=5000, description="per query text: nearest and best-BM25 observations a search loads from the store's indexes")
    candidate_events: int = Field(30, ge=1, le=1000, description="per query text: nearest events a search loads")
    max_events: int = Field(180, ge=1, le=5000, description="best-scoring events found that a search loads, with all their observations (180: leave-one-conversation-out over the dev sets and two haystacks, docs/benchmarks.md; a conversation buried among 10 K others' turns has a third of its answers never loaded at 120)")
    expand_events: int = Field(20, ge=0, le=1000, description="best loaded events whose typed neighbours are loaded too")
    neighbour_events: int = Field(60, ge=0, le=5000, description="at most this many of those neighbours beyond the loaded events, taken in turn from each of the best: in a memory of many conversations a relation links an event to its own thread (60: leave-one-conversation-out over the dev sets and two haystacks, docs/benchmarks.md)")
    lexical_weight: float | None = Field(None, ge=0, le=5, description="weight of BM25 (scaled to the query's best) next to embedding similarity; unset: the embedder's own — 0.2 for a semantic embedder (minilm, http:), chosen by leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM, and 0.6 for the lexical hash embedder (docs/benchmarks.md)")
    max_context_tokens: int = Field(3000, ge=100, description="evidence handed to a baseline's responder (harness)")
    evidence_tokens: int = Field(1000, ge=50, description="the top of the evidence ranking handed to the responder")
    ranking_tokens: int = Field(2000, ge=50, description="how much of the evidence ranking an Answer lists")
    statement_lexical_share: float | None = Field(None, ge=0, le=1, description="share of lexical_weight for a query that asks nothing (no final \"?\": a message to recall memories by, such as a LoCoMo-Plus trigger), which shares few words with what it recalls; unset: the embedder's own — 0.25 for a semantic embedder (leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM over 0-1, docs/benchmarks.md), 1 for hash (its cosine is word overlap: BM25 is what it has)")
    subject_weight: float = Field(0.4, ge=0, le=5, description="ranking: weight of a turn's cosine to the question's subject alone (its words less people, places and question words: 'sports' in 'What types of sports did Kevin do?'; 0.4: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM, docs/benchmarks.md)")
    unnamed_weight: float = Field(0.75, ge=0, le=1, description="ranking: share of a turn's similarity to the question taken from the question less the names of the people it names ('What are hobbies?' for 'What are Kate's hobbies?'): the name meets greetings and turns that address the person, while the turns that answer are the person's own and rarely say the name; who said a turn is the participant term's to judge (0.75: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM, docs/benchmarks.md)")
    participant_weight: float = Field(0.6, ge=0, le=5, description="ranking: bonus of a turn by a person the question names")
    date_weight: float = Field(0.3, ge=0, le=5, description="ranking: bonus of a turn said on the day or in the month the question names ('What did Melanie paint on October 13, 2023?', 'in July 2023'), give or take date_slack_days: the memory knows when each turn was said, a question that names a date asks about what was said then (0.3: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM over 0-1, docs/benchmarks.md)")
    date_slack_days: int = Field(3, ge=0, le=60, description="days either side of a date the question names that still count as that date (a question's date may be the day a thing happened, told a few days later: 'last Saturday')")
    event_weight: float = Field(1.0, ge=0, le=5, description="ranking: share of the event's score each of its turns gets")
    set_event_weight: float = Field(0.5, ge=0, le=1, description="ranking: share of event_weight for a question that asks for a set (\"What are Kate's hobbies?\", search/planner.py asks_for_several): its answers are single turns in many events (0.5: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM over 0.25-1, docs/benchmarks.md)")
    assistant_event_share: float = Field(0.0, ge=0, le=1, description="ranking: share of its event's score an assistant's turn gets (a reply is long and restates: with its event's score it came with every matching user turn and filled a small budget; 0: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM over 0-1, docs/benchmarks.md)")
    thread_weight: float = Field(0.3, ge=0, le=5, description="ranking: penalty of a question's turn whose event is more than thread_hops typed relations from the events of its best thread_seeds turns: in a memory of many conversations a look-alike turn of another conversation is off the thread the best turns are on (0.3 with 3 hops: leave-one-conversation-out over the dev sets and two haystacks, docs/benchmarks.md); a statement recalled by, such as a LoCoMo-Plus trigger, has no thread")
    thread_seeds: int = Field(10, ge=1, le=1000, description="best turns whose events the thread starts from")
    thread_hops: int = Field(3, ge=0, le=20, description="typed relations a turn's event may be from those events and still be on the thread")
    passage_length_weight: float = Field(0.4, ge=0, le=5, description="ranking: penalty w·log(tokens/25) of a passage no one said (a paragraph of a book or report) longer than 25 tokens: the evidence is handed within a token budget, and one 300-token paragraph costs the room of a dozen short ones (0.4: leave-one-document-out on the NarrativeQA full texts, docs/benchmarks.md; a chat turn has a speaker and is never touched)")
    relation_weight: float = Field(0.0, ge=0, le=5, description="ranking: relevance carried one hop over typed relations (0: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM chose none over 0.1-0.4, docs/benchmarks.md; relations still guide the explorers and what a search loads)")
    reply_weight: float = Field(0.15, ge=0, le=5, description="ranking: share of a question turn's own score its reply gets (the next turn of the session, a person's own, not an assistant's), for a question: the answer to 'What did you paint?' is the turn after it, which may share no word with the question asked of the memory (0.15: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM, docs/benchmarks.md)")
    kept_weight: float = Field(0.1, ge=0, le=5, description="ranking: bonus of events the explorers kept")
    newer_window: int = Field(10, ge=0, le=200, description="newer facts first: the best-ranked observations among which a later restatement by the same person outranks an earlier one, for questions about the present (0: off; leave-one-chat-out on BEAM, docs/benchmarks.md)")
    newer_margin: float = Field(1.5, ge=0, le=10, description="newer facts first: how far below the earlier statement a later one may score and still be lifted above it")
    newer_max_words: int = Field(100, ge=0, le=10000, description="newer facts first: a turn longer than this many words is not taken for a restatement (a pasted document or a long request says 'new' somewhere; 100: leave-one-conversation-out across LoCoMo, REALTALK, LoCoMo-Plus and BEAM over 0-400, docs/benchmarks.md); 0: no limit")


class LLMSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0, le=2, description="0 makes runs repeatable and cacheable")
    max_tokens: int = Field(1536, ge=16, description="completion cap per call; the schemas' worst case fits in 1536")
    retries: int = Field(2, ge=0, le=10, description="re-asks after invalid output, with the error as feedback")
    timeout_s: float = Field(120.0, gt=0, description="per HTTP request (capped by what is left of the deadline)")
    ask_deadline_s: float = Field(600.0, gt=0, description="one ask, all its model calls and retries together")
    step_deadline_s: float = Field(1800.0, gt=0, description="one construction step, all its model calls together")
    n_ctx: int = Field(8192, ge=512, description="context window of an in-process GGUF model")
    max_calls: int | None = Field(None, ge=1, description="budget per operation (one ask / one step)")
    max_tokens_budget: int | None = Field(None, ge=1, description="token budget per operation")
    cache: bool = Field(True, description="replay identical LLM calls from the database")


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    construction: ConstructionSettings = Field(default_factory=ConstructionSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> "Settings":
        data: dict[str, Any] = {}
        if path is not None:
            p = Path(path)
            if not p.is_file():
                raise ConfigError(f"config file not found: {p}")
            try:
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"config file {p} is not valid TOML: {exc}") from None
        for key, value in overrides.items():
            section, _, name = key.partition(".")
            data.setdefault(section, {})[name] = value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ConfigError(f"invalid setting '{where}': {first['msg']}") from None


def settings_markdown() -> str:
    """The tables of docs/config.md, made from the models so the page cannot drift from the code."""
    parts = []
    for section, model in (("construction", ConstructionSettings), ("search", SearchSettings), ("llm", LLMSettings)):
        rows = [f"| `{name}` | `{f.default}` | {f.description or ''} |" for name, f in model.model_fields.items()]
        parts.append(f"## [{section}]\n\n| key | default | meaning |\n|---|---|---|\n" + "\n".join(rows))
    return "\n\n".join(parts) + "\n"
