"""Aggregation of results.jsonl into results.json, report.md and plots."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

from ..text import is_question
from .metrics import BUDGETS, paired_bootstrap, percentile

RECALLS = [f"recall@{b}" for b in BUDGETS]
ANSWERS = [f"answer@{b}" for b in BUDGETS]  # answer recall at a budget (NarrativeQA: no gold spans)
ANSWER_METRICS = ("rouge_l", "bleu4", *ANSWERS)
# Differences (with paired bootstrap CIs) are reported as each CompassMem mode present minus every other
# method: in LLM mode `compassmem` is the agentic search and `compassmem_graph` the graph search.
REFERENCES = ("compassmem", "compassmem_graph")
DIFF_KEYS = ("f1", RECALLS[1], "rouge_l", ANSWERS[1])  # the differences report.md shows (those measured)

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # LoCoMo's (REALTALK: 3 = inference)


def group(row: dict) -> str | None:
    """The question's group in the tables: the data set's own label where it has one (a BEAM ability, a
    LoCoMo-Plus relation type; ingest.QAItem.group), else its LoCoMo category."""
    return row.get("group") or CATEGORIES.get(row.get("category"))


def groups_in(rows: list[dict]) -> list[str]:
    """The groups present, LoCoMo's categories in their usual order first, then the others by name."""
    present = {group(r) for r in rows} - {None}
    return [c for c in CATEGORIES.values() if c in present] + sorted(present - set(CATEGORIES.values()))


def _avg(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(mean(vals), 4) if vals else None


def summarise(rows: list[dict], timings: list[dict]) -> dict[str, Any]:
    by_method: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_method[r["method"]].append(r)
    methods: dict[str, Any] = {}
    for name, rs in by_method.items():
        answered = [r for r in rs if not r["skipped"]]
        cats = {}
        for label in groups_in(answered):
            sub = [r for r in answered if group(r) == label]
            if sub:
                cats[label] = {"n": len(sub), "f1": _avg([r["f1"] for r in sub]), "bleu1": _avg([r["bleu1"] for r in sub]),
                               "j": _avg([r.get("j") for r in sub]),
                               "locomo_f1": _avg([r.get("locomo_f1") for r in sub]),
                               "evidence_recall": _avg([r["evidence_recall"] for r in sub]),
                               **{k: _avg([r.get(k) for r in sub]) for k in RECALLS}}
        lat = [r["latency_s"] for r in answered]
        entry: dict[str, Any] = {
            "n": len(answered), "skipped": len(rs) - len(answered),
            "skip_reason": next((r["skipped"] for r in rs if r["skipped"]), None),
            "f1": _avg([r["f1"] for r in answered]), "bleu1": _avg([r["bleu1"] for r in answered]),
            "j": _avg([r.get("j") for r in answered]), "judged": sum(r.get("j") is not None for r in answered),
            "locomo_f1": _avg([r.get("locomo_f1") for r in answered]),
            "evidence_recall": _avg([r["evidence_recall"] for r in answered]),
            **{k: _avg([r.get(k) for r in answered]) for k in RECALLS},
            **{k: _avg([r.get(k) for r in answered]) for k in ANSWER_METRICS},
            "newer_first": _avg([r.get("newer_first") for r in answered]),
            "newer_first_n": sum(r.get("newer_first") is not None for r in answered),
            "answers_that_are_questions": sum(is_question(str(r["answer"])) for r in answered),
            "context_tokens": _avg([r["context_tokens"] for r in answered]),
            "categories": cats,
            # a call replayed from the cache (a resumed run) is still a call the method makes
            "efficiency": {"llm_calls": _avg([r["llm_calls"] + (r.get("cached_calls") or 0) for r in answered]),
                           "cached_calls": _avg([r.get("cached_calls") or 0 for r in answered]),
                           "prompt_tokens": _avg([r["prompt_tokens"] for r in answered]),
                           "completion_tokens": _avg([r["completion_tokens"] for r in answered]),
                           "latency_mean_s": _avg(lat), "latency_p50_s": round(percentile(lat, 0.5), 4),
                           "latency_p95_s": round(percentile(lat, 0.95), 4)},
        }
        searched = [r["search"] for r in answered if r.get("search")]
        if searched:
            acts = {k: sum(s[k] for s in searched) for k in ("expand", "skip", "answer")}
            total_acts = sum(acts.values()) or 1
            lengths = [n for s in searched for n in s["path_lengths"]]
            entry["search"] = {
                "subgoals": _avg([s["subgoals"] for s in searched]),
                "satisfaction_rate": _avg([s["satisfied"] / s["subgoals"] for s in searched if s["subgoals"]]),
                "fully_satisfied": sum(s["satisfied"] == s["subgoals"] for s in searched),
                "start_nodes": _avg([s["start_nodes"] for s in searched]),
                "steps": _avg([s["steps"] for s in searched]), "paths": _avg([s["paths"] for s in searched]),
                "path_length": _avg(lengths), "max_path_length": max(lengths, default=0),
                "actions": acts, "actions_pct": {k: round(100 * v / total_acts, 1) for k, v in acts.items()},
                "refinement_rate": _avg([float(s["refined"]) for s in searched]),
                # of the refined questions, the share where the refined round kept something new
                "refinement_kept_rate": _avg([float(s.get("refined_kept", 0) > 0) for s in searched if s["refined"]]),
                "kept": _avg([s["kept"] for s in searched]), "kept_none": sum(s["kept"] == 0 for s in searched),
                # of the decisions that had neighbours on offer, the share that named one or met a sub-goal
                "moved_pct": round(100 * sum(s.get("moved", 0) for s in searched)
                                   / (sum(s.get("offered", 0) for s in searched) or 1), 1),
            }
        methods[name] = entry
    for i, ref in enumerate(REFERENCES):
        if ref not in by_method:
            continue
        for name, entry in methods.items():
            if name not in REFERENCES[: i + 1]:  # one direction per pair of modes
                entry[f"vs_{ref}"] = _differences(by_method[ref], by_method[name])
    construction: dict[str, Any] = {}
    for label in sorted({t["memory"] for t in timings}):
        ts = [t for t in timings if t["memory"] == label]
        walls = [t["wall_s"] for t in ts]
        obs = sum(t["observations"] for t in ts)
        construction[label] = {"steps": len(ts), "observations": obs, "wall_s": round(sum(walls), 3),
                               "observations_per_s": round(obs / sum(walls), 1) if sum(walls) else None,
                               "step_p50_s": round(percentile(walls, 0.5), 4), "step_p95_s": round(percentile(walls, 0.95), 4),
                               "llm_calls_per_step": _avg([t["llm_calls"] for t in ts]),
                               "tokens_per_step": _avg([t["prompt_tokens"] + t["completion_tokens"] for t in ts])}
    return {"methods": methods, "construction": construction}


def _differences(ref: list[dict], other: list[dict]) -> dict[str, Any]:
    """CompassMem minus `other` on F1 and each budgeted recall, overall and per category, over the
    questions both answered: mean difference in points and its paired bootstrap 95 % interval. Paired,
    so that a gap of a point or two on 30 questions is shown for what it is."""
    theirs = {r["qid"]: r for r in other if not r["skipped"]}
    pairs = [(r, theirs[r["qid"]]) for r in ref if not r["skipped"] and r["qid"] in theirs]
    out: dict[str, Any] = {}
    for key in ("f1", *RECALLS, "rouge_l", *ANSWERS):
        groups = {"all": pairs, **{label: [p for p in pairs if group(p[0]) == label]
                                   for label in groups_in([a for a, _ in pairs])}}
        out[key] = {}
        for label, ps in groups.items():
            ps = [(a, b) for a, b in ps if a.get(key) is not None and b.get(key) is not None]
            if ps:
                out[key][label] = paired_bootstrap([a[key] for a, _ in ps], [b[key] for _, b in ps])
    return out


def _fmt(v: Any, pct: bool = True) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and pct:
        return f"{100 * v:.2f}"
    return str(v)


def markdown(summary: dict[str, Any], title: str, command: str) -> str:
    m = summary["methods"]
    names = list(m)
    out = [f"# {title}", "", f"Command: `{command}`", "",
           "F1 / BLEU-1 / evidence recall in %, micro-averaged over answered questions; context = tokens handed "
           "to the responder (words×4/3); LLM calls/q counts calls replayed from the cache too, tokens/q only "
           "the calls that ran.", "",
           "| method | n | F1 | BLEU-1 | evidence recall | context tokens | LLM calls/q | tokens/q | latency p50 / p95 (s) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        e, eff = m[n], m[n]["efficiency"]
        tok = (eff["prompt_tokens"] or 0) + (eff["completion_tokens"] or 0)
        note = f" (skipped {e['skipped']}: {e['skip_reason']})" if e["skipped"] else ""
        out.append(f"| {n}{note} | {e['n']} | {_fmt(e['f1'])} | {_fmt(e['bleu1'])} | {_fmt(e['evidence_recall'])} | "
                   f"{_fmt(e['context_tokens'], False)} | {_fmt(eff['llm_calls'], False)} | {round(tok, 1)} | "
                   f"{eff['latency_p50_s']} / {eff['latency_p95_s']} |")
    if any(m[n].get(RECALLS[0]) is not None for n in names):
        out += ["", "Evidence recall at fixed context budgets (%): each method's evidence in the order it ranks "
                "it, cut at B tokens. LoCoMo F1 is the official metric (multiset, Porter-stemmed).", "",
                "| method | " + " | ".join(RECALLS) + " | LoCoMo F1 | answers that are questions |",
                "|---|" + "---|" * (len(RECALLS) + 2)]
        for n in names:
            out.append(f"| {n} | " + " | ".join(_fmt(m[n].get(k)) for k in RECALLS) +
                       f" | {_fmt(m[n].get('locomo_f1'))} | {m[n].get('answers_that_are_questions', '–')} |")
    if any(m[n].get("newer_first") is not None for n in names):
        out += ["", "Newer facts first (%): of the questions whose evidence revises an earlier statement (BEAM's knowledge "
                "updates and contradictions), the share where the revising turn ranks above the revised one.", "",
                "| method | questions | newer first |", "|---|---|---|"]
        for n in names:
            out.append(f"| {n} | {m[n].get('newer_first_n', 0)} | {_fmt(m[n].get('newer_first'))} |")
    cats = list(dict.fromkeys(c for n in names for c in m[n]["categories"]))
    if any(m[n].get(ANSWERS[0]) is not None for n in names):
        out += ["", "NarrativeQA's metrics (max over the reference answers) and answer recall at fixed budgets: the share "
                "of questions where every content word of a reference answer is inside the first B tokens handed "
                "over (%):", "", "| method | ROUGE-L | BLEU-1 | BLEU-4 | F1 | " + " | ".join(ANSWERS) + " |",
                "|---|" + "---|" * (4 + len(ANSWERS))]
        for n in names:
            out.append(f"| {n} | {_fmt(m[n].get('rouge_l'))} | {_fmt(m[n].get('bleu1'))} | {_fmt(m[n].get('bleu4'))} | "
                       f"{_fmt(m[n].get('f1'))} | " + " | ".join(_fmt(m[n].get(k)) for k in ANSWERS) + " |")
    if any(m[n].get("j") is not None for n in names):
        judge = summary.get("judge") or "?"
        out += ["", f"LLM-as-judge accuracy J (%), judge `{judge}` (question, gold answer, answer -> CORRECT / WRONG, "
                "the mem0 / Zep protocol). A small local judge gives an indicative figure, not one to set beside "
                "published J.", "", "| method | judged | J | " + " | ".join(cats) + " |", "|---|---|---|" + "---|" * len(cats)]
        for n in names:
            cells = [_fmt(d.get("j")) if (d := m[n]["categories"].get(c)) else "–" for c in cats]
            out.append(f"| {n} | {m[n]['judged']} | {_fmt(m[n].get('j'))} | " + " | ".join(cells) + " |")
    if cats and any(m[n].get(RECALLS[1]) is not None for n in names):
        out += ["", f"Per category — {RECALLS[1]} / {RECALLS[2]} (%):", "", "| method | " + " | ".join(cats) + " |",
                "|---|" + "---|" * len(cats)]
        for n in names:
            cells = [f"{_fmt(d.get(RECALLS[1]))} / {_fmt(d.get(RECALLS[2]))}" if (d := m[n]["categories"].get(c)) else "–"
                     for c in cats]
            out.append(f"| {n} | " + " | ".join(cells) + " |")
    labels = ["all", *cats]
    for ref in REFERENCES:
        for key in DIFF_KEYS:
            diffs = [n for n in names if m[n].get(f"vs_{ref}", {}).get(key, {}).get("all")]
            if not diffs:
                continue
            out += ["", f"{ref} minus each method, {key}, points [paired bootstrap 95 % CI]:", "",
                    "| method | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
            for n in diffs:
                d = m[n][f"vs_{ref}"][key]
                out.append(f"| {n} | " + " | ".join(f"{d[c][0]:+.2f} [{d[c][1]:+.1f}, {d[c][2]:+.1f}]" if c in d else "–"
                                                    for c in labels) + " |")
    if cats:
        out += ["", "Per category — F1 / evidence recall (%):", "",
                "| method | " + " | ".join(f"{c} (n={next(m[n]['categories'][c]['n'] for n in names if c in m[n]['categories'])})" for c in cats) + " |",
                "|---|" + "---|" * len(cats)]
        for n in names:
            cells = []
            for c in cats:
                d = m[n]["categories"].get(c)
                cells.append(f"{_fmt(d['f1'])} / {_fmt(d['evidence_recall'])}" if d else "–")
            out.append(f"| {n} | " + " | ".join(cells) + " |")
    searched = [n for n in names if "search" in m[n]]
    if searched:
        out += ["", "Search statistics (cf. the paper's Table 4):", "",
                "| method | subgoals | satisfied % | fully satisfied | start nodes | steps | paths | path len (max) | "
                "EXPAND / SKIP / ANSWER % | refinement % (new kept %) | kept (none) | moved % |", "|---|" + "---|" * 11]
        for n in searched:
            s = m[n]["search"]
            a = s["actions_pct"]
            out.append(f"| {n} | {s['subgoals']} | {_fmt(s['satisfaction_rate'])} | {s['fully_satisfied']} | "
                       f"{s['start_nodes']} | {s['steps']} | {s['paths']} | {s['path_length']} ({s['max_path_length']}) | "
                       f"{a['expand']} / {a['skip']} / {a['answer']} | {_fmt(s['refinement_rate'])} "
                       f"({_fmt(s.get('refinement_kept_rate', 0.0))}) | "
                       f"{s['kept']} ({s['kept_none']}) | {s.get('moved_pct', 0.0)} |")
    if summary["construction"]:
        out += ["", "Construction:", "", "| memory | steps | observations | wall (s) | obs/s | step p50 / p95 (s) | "
                "LLM calls/step | tokens/step |", "|---|---|---|---|---|---|---|---|"]
        for label, c in summary["construction"].items():
            out.append(f"| {label} | {c['steps']} | {c['observations']} | {c['wall_s']} | {c['observations_per_s']} | "
                       f"{c['step_p50_s']} / {c['step_p95_s']} | {c['llm_calls_per_step']} | {c['tokens_per_step']} |")
    return "\n".join(out) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = summary["methods"]
    names = [n for n in m if m[n]["categories"]]
    cats = list(dict.fromkeys(c for n in names for c in m[n]["categories"]))
    if not names or not cats:
        return
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(names)
    for ax, metric in zip(axes, ("f1", "evidence_recall")):
        for i, n in enumerate(names):
            vals = [100 * (m[n]["categories"].get(c, {}).get(metric) or 0) for c in cats]
            ax.bar([x + i * width for x in range(len(cats))], vals, width, label=n)
        ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(cats))], cats)
        ax.set_title(metric.replace("_", " "))
        ax.set_ylabel("%")
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_reports(out: Path, rows: list[dict], timings: list[dict], title: str, command: str) -> dict[str, Any]:
    from .judge import attach

    judge = attach(out, rows)
    summary = summarise(rows, timings)
    summary["command"] = command
    summary["title"] = title
    summary["judge"] = judge
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    (out / "report.md").write_text(markdown(summary, title, command))
    plot(summary, out / "per_category.png")
    return summary
