"""`compassmem bench …` (filled in by the benchmark harness)."""

from __future__ import annotations

import typer

bench_app = typer.Typer(help="Benchmarks: LoCoMo, NarrativeQA, scale.", no_args_is_help=True)
