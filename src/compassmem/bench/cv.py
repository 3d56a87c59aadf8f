"""Leave-one-conversation-out cross-validation of tuned settings.

Every grid point answers every question (one memory, built once, shared by all points). Then, for each
conversation, the point that scores best on the *other* conversations is chosen and that conversation is
scored with it. The union of those held-out rows is the cross-validated result: what a release should
expect on conversations nobody tuned on. The in-sample best point is reported beside it, so the gap
between the two is visible.
"""

from __future__ import annotations

import itertools
import json
from statistics import mean
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

from ..config import Settings
from ..errors import ConfigError
from .methods import CompassMemMethod
from .report import summarise
from .runner import BenchConfig, Progress, answer_rows, prepare

Grid = dict[str, list[Any]]


def parse_grid(specs: list[str]) -> Grid:
    """['search.event_weight=0.25,0.5', …] → {'search.event_weight': [0.25, 0.5], …}"""
    grid: Grid = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        if not sep or "." not in key or not values.strip():
            raise ConfigError(f"bad grid '{spec}'; expected section.name=v1,v2 (e.g. search.event_weight=0.25,0.5)")
        grid[key.strip()] = [_value(v.strip()) for v in values.split(",") if v.strip()]
    return grid


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def points(grid: Grid) -> list[dict[str, Any]]:
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def _with(base: Settings, point: dict[str, Any]) -> Settings:
    data = base.model_dump()
    for key, value in point.items():
        section, name = key.split(".", 1)
        data[section][name] = value
    return Settings.model_validate(data)


def _score(rows: list[dict], metric: str) -> float:
    vals = [r[metric] for r in rows if r.get(metric) is not None]
    return mean(vals) if vals else 0.0


def run_cv(cfg: BenchConfig, grid: Grid, metric: str = "recall@1000", progress: Progress | None = None) -> dict:
    """Answer with every grid point (resumable: each point's rows live in their own file), then choose per
    held-out conversation. Returns the report dict also written to cv.json."""
    from ..memory import Memory

    cfg.out.mkdir(parents=True, exist_ok=True)
    ds, main = prepare(cfg, progress)
    grid_points = points(grid)
    per_point: list[list[dict]] = []
    for i, point in enumerate(grid_points):
        settings = _with(cfg.settings, point)
        mem = Memory(llm=cfg.llm, embedder=cfg.embedder, store=main.store, settings=settings,
                     base_url=cfg.base_url, api_key=cfg.api_key)
        method = CompassMemMethod("compassmem", mem)
        path = cfg.out / f"point-{i:03d}.jsonl"
        label = ", ".join(f"{k}={v}" for k, v in point.items())
        per_point.append(answer_rows(cfg, ds, main, [method], path,
                                     (lambda phase, d, t, label=label: progress(f"point {i + 1}/{len(grid_points)} {label}", d, t))
                                     if progress else None))
    namespaces = sorted({r["namespace"] for r in per_point[0]})
    chosen: dict[str, dict[str, Any]] = {}
    held_out: list[dict] = []
    for ns in namespaces:
        train = [_score([r for r in rows if r["namespace"] != ns], metric) for rows in per_point]
        best = max(range(len(grid_points)), key=lambda i: (train[i], -i))
        chosen[ns] = {"point": grid_points[best], "train_score": round(train[best], 4)}
        held_out += [r for r in per_point[best] if r["namespace"] == ns]
    overall = [_score(rows, metric) for rows in per_point]
    in_best = max(range(len(grid_points)), key=lambda i: (overall[i], -i))
    result = {
        "metric": metric, "grid": grid, "chosen_per_heldout": chosen,
        "cross_validated": summarise(held_out, [])["methods"]["compassmem"],
        "in_sample_best": {"point": grid_points[in_best],
                           "summary": summarise(per_point[in_best], [])["methods"]["compassmem"]},
        "points": [{"point": p, metric: round(s, 4)} for p, s in zip(grid_points, overall)],
    }
    (cfg.out / "cv.json").write_text(json.dumps(result, indent=2))
    (cfg.out / "cv.md").write_text(cv_markdown(result))
    return result


def cv_markdown(result: dict) -> str:
    """cv.md: the setting chosen for each held-out conversation (or NarrativeQA document), then the
    cross-validated scores beside the in-sample best — evidence recall per budget and category for
    conversations, answer recall per budget for documents (no gold spans)."""
    from .report import ANSWERS, RECALLS

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.2f}"

    documents = result["cross_validated"].get(ANSWERS[1]) is not None
    unit = "document" if documents else "conversation"
    cats = [] if documents else list(result["cross_validated"]["categories"])
    if documents:
        head, tail = ANSWERS, [("ROUGE-L", "rouge_l"), ("F1", "f1")]
    else:
        head, tail = RECALLS, [("LoCoMo F1", "locomo_f1"), ("F1", "f1")]
    out = [f"Leave-one-{unit}-out, chosen by {result['metric']}.", "",
           f"| held-out {unit} | settings chosen on the other {unit}s | their score there |", "|---|---|---|"]
    for ns, c in result["chosen_per_heldout"].items():
        out.append(f"| {ns} | {', '.join(f'{k}={v}' for k, v in c['point'].items())} | {pct(c['train_score'])} |")
    out += ["", "| | " + " | ".join([*head, *(f"{c} @1000" for c in cats), *(t for t, _ in tail)]) + " |",
            "|---|" + "---|" * (len(head) + len(cats) + len(tail))]
    for label, m in (("cross-validated", result["cross_validated"]), ("in-sample best", result["in_sample_best"]["summary"])):
        cells = [pct(m.get(k)) for k in head] + [pct(m["categories"].get(c, {}).get("recall@1000")) for c in cats]
        out.append(f"| {label} | " + " | ".join(cells + [pct(m.get(k)) for _, k in tail]) + " |")
    best = result["in_sample_best"]["point"]
    out += ["", f"In-sample best: {', '.join(f'{k}={v}' for k, v in best.items())}.", ""]
    return "\n".join(out)


CRITERIA = ("macro", "rank")


def pooled(runs: dict[str, "Path"], metric: str = "recall@1000", criterion: str = "macro") -> dict:
    """One setting for every kind of data: leave-one-conversation-out over several `bench cv` runs of the same
    grid (one per data set). For each held-out conversation, the point chosen is the one best over the data
    sets on their other conversations — by the macro-average of the metric (each kind counts the same,
    however many questions it has), or by its mean rank among the points (`criterion="rank"`: scale-free,
    so one data set on which a knob moves 8 points does not outvote three on which it moves 1); the
    held-out rows give each data set's cross-validated figure. The point best on all the data is the
    default to ship."""
    from pathlib import Path

    if criterion not in CRITERIA:
        raise ConfigError(f"criterion must be one of {', '.join(CRITERIA)}, not {criterion!r}")
    loaded: dict[str, list[list[dict]]] = {}
    grid_points: list[dict[str, Any]] | None = None
    for name, out in runs.items():
        out = Path(out)
        if not (out / "cv.json").is_file():
            raise ConfigError(f"{out} holds no cv.json: run `compassmem bench cv --out {out}` first")
        spec = json.loads((out / "cv.json").read_text())
        these = points(spec["grid"])
        if grid_points is not None and these != grid_points:
            raise ConfigError(f"{out} was run with another grid than the first run")
        grid_points = these
        loaded[name] = [[json.loads(line) for line in (out / f"point-{i:03d}.jsonl").read_text().splitlines()]
                        for i in range(len(these))]
    assert grid_points is not None

    def value(leave: tuple[str, str] | None) -> list[float]:
        """Each point's worth over the data sets, the held-out conversation `leave` left out."""
        scores = {name: [_score([r for r in per if (name, r["namespace"]) != leave], metric) for per in rows]
                  for name, rows in loaded.items()}
        if criterion == "macro":
            return [mean(s[i] for s in scores.values()) for i in range(len(grid_points))]
        return [-mean(1 + sum(v > s[i] for v in s) + 0.5 * (sum(v == s[i] for v in s) - 1) for s in scores.values())
                for i in range(len(grid_points))]

    def best_of(values: list[float]) -> int:
        return max(range(len(values)), key=lambda i: (values[i], -i))

    result: dict[str, Any] = {"metric": metric, "criterion": criterion, "points": grid_points, "data_sets": {}}
    for name, rows in loaded.items():
        held_out, chosen = [], {}
        for ns in sorted({r["namespace"] for r in rows[0]}):
            best = best_of(value((name, ns)))
            chosen[ns] = grid_points[best]
            held_out += [r for r in rows[best] if r["namespace"] == ns]
        result["data_sets"][name] = {"chosen_per_heldout": chosen, "cross_validated": round(_score(held_out, metric), 4),
                                     "per_point": [round(_score(r, metric), 4) for r in rows]}
    everything = value(None)
    best = best_of(everything)
    result["default"] = {"point": grid_points[best], criterion: round(everything[best], 4)}
    return result


_CRITERION_WORDS = {"macro": "macro-average over the data sets", "rank": "mean rank among the points over the data sets"}


def pooled_markdown(result: dict) -> str:
    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.2f}"

    names = list(result["data_sets"])
    labels = [", ".join(f"{k}={v}" for k, v in p.items()) for p in result["points"]]
    out = [f"One setting for all data, leave-one-conversation-out across {', '.join(names)}, chosen by "
           f"{result['metric']} ({_CRITERION_WORDS[result.get('criterion', 'macro')]}).", "",
           "| point | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for i, label in enumerate(labels):
        out.append(f"| {label} | " + " | ".join(pct(result["data_sets"][n]["per_point"][i]) for n in names) + " |")
    out.append("| **cross-validated** | " + " | ".join(f"**{pct(result['data_sets'][n]['cross_validated'])}**"
                                                    for n in names) + " |")
    default = ", ".join(f"{k}={v}" for k, v in result["default"]["point"].items())
    out += ["", f"Best on all the data (the default to ship): {default}.", ""]
    return "\n".join(out)
