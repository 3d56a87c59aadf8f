"""How many prompt tokens an agentic search sends, without a model (issue "LLM mode II": ≤ 4 K tokens a question).

    python scripts/agentic-prompt-size.py MEMORY_DB [DATA_JSON] [N] [GGUF]

MEMORY_DB: a built LoCoMo-format memory (a copy is asked, never written); DATA_JSON: its questions
(default: the LoCoMo dev file); N: multi-hop and temporal questions per conversation (6). A stand-in
model answers every call with valid JSON (each explorer expands and moves to its first menu entry), so
the prompts are the ones the search builds for a model that walks the graph; tokens are counted by
the GGUF model's own tokenizer when one is given (its vocabulary only is loaded), else as words × 4/3
(graph.approx_tokens). Prints the median and largest prompt per question and per role.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from compassmem import Memory
from compassmem.config import LLMSettings
from compassmem.llm import Completion, LLMClient
from compassmem.roles import search_roles
from compassmem.search.engine import SearchEngine
from compassmem.search.graph import approx_tokens


class StandIn:
    """Counts each call's prompt tokens; answers with the first allowed value of every field."""

    model = "stand-in"

    def __init__(self, count) -> None:
        self.calls: list[tuple[str, int]] = []
        self.count = count

    def complete(self, messages, schema, *, temperature, max_tokens, name, timeout_s=None):
        self.calls.append((name, sum(self.count(m["content"]) for m in messages)))

        def decision(props: dict) -> dict:
            out = {"why": "stand-in", "action": "EXPAND", "satisfied": []}
            if "next" in props:
                items = props["next"]["items"]
                out["next"] = items.get("enum", [items.get("const")])[:1]
            return out

        if name == "explore":
            out = decision(schema["properties"])
        elif name == "explore_batch":
            out = {k: decision(schema["$defs"][ref["$ref"].rsplit("/", 1)[1]]["properties"])
                   for k, ref in schema["properties"].items()}
        else:
            out = {"plan": {"subgoals": ["a question"]}, "select": {"selected": []},
                   "refine": {"query": "what is still missing"}}.get(name, {"answer": "stand-in"})
        return Completion(json.dumps(out), 10, 5, 0.0)


def main(db: str, data: str, n: int, gguf: str | None = None) -> None:
    count = approx_tokens
    if gguf:
        from llama_cpp import Llama

        vocab = Llama(model_path=gguf, vocab_only=True, verbose=False)
        count = lambda text: len(vocab.tokenize(text.encode("utf-8"), add_bos=False))  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "memory.db"
        shutil.copy(db, copy)
        mem = Memory(copy)
        model = StandIn(count)
        client = LLMClient(model, LLMSettings(cache=False))
        roles = search_roles(client, mem.embedder, mem.settings, mem.store, "agentic")
        engine = SearchEngine(mem.embedder, roles, mem.settings.search, client, mem.settings.search.max_llm_calls)
        per_question: list[int] = []
        per_role: dict[str, list[int]] = {}
        for conv in json.loads(Path(data).read_text()):
            for q in [q for q in conv["qa"] if q.get("category") in (1, 2)][:n]:
                model.calls.clear()
                engine.ask(mem._source(conv["sample_id"]), q["question"])
                per_question.append(sum(t for _, t in model.calls))
                for role, tokens in model.calls:
                    per_role.setdefault(role, []).append(tokens)
        mem.close()
    print(f"{len(per_question)} questions: prompt tokens a question, median {statistics.median(per_question):.0f}, "
          f"largest {max(per_question)}")
    for role, tokens in per_role.items():
        print(f"  {role}: {len(tokens)} calls, median {statistics.median(tokens):.0f}, largest {max(tokens)}")


if __name__ == "__main__":
    here = Path(__file__).resolve().parents[1]
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else str(here / "../shared/data/locomo/locomo_dev.json"),
         int(sys.argv[3]) if len(sys.argv) > 3 else 6, sys.argv[4] if len(sys.argv) > 4 else None)
