"""`compassmem doctor`: what works and what does not, for the configured LLM and embedder."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import CompassMemError


def run_doctor(console: Console, llm_spec: str, embedder: str, base_url: str | None, api_key: str | None,
               config: Path | None) -> bool:
    from ..config import Settings
    from ..doctor import check_roles
    from ..embed import make_embedder
    from ..llm import make_llm

    table = Table("check", "status", "detail")
    ok = True
    try:
        t0 = time.perf_counter()
        emb = make_embedder(embedder, base_url=base_url, api_key=api_key)
        vecs = emb.embed(["a dog ran in the park", "a puppy played outside", "quarterly tax filing"])
        sim_close, sim_far = float(vecs[0] @ vecs[1]), float(vecs[0] @ vecs[2])
        good = sim_close > sim_far
        ok &= good
        table.add_row(escape(f"embedder {embedder}"), "[green]ok[/]" if good else "[yellow]weak[/]",
                      f"dim {vecs.shape[1]}, related {sim_close:.2f} > unrelated {sim_far:.2f}, "
                      f"{time.perf_counter() - t0:.2f} s")
    except CompassMemError as exc:
        ok = False
        table.add_row(escape(f"embedder {embedder}"), "[red]failed[/]", escape(str(exc)))
    settings = Settings.load(config)
    try:
        client = make_llm(llm_spec, settings.llm, base_url=base_url, api_key=api_key)
    except CompassMemError as exc:
        table.add_row(escape(f"llm {llm_spec}"), "[red]failed[/]", escape(str(exc)))
        console.print(table)
        return False
    if client is None:
        table.add_row("llm none", "[green]ok[/]", "offline engine: every role runs without an LLM")
    else:
        client.cache = None  # the doctor must talk to the model, not the cache
        for r in check_roles(client):
            ok &= r.ok
            table.add_row(f"llm role {r.role}", "[green]ok[/]" if r.ok else "[red]failed[/]",
                          escape(f"{r.seconds:.1f} s  {r.detail}"))
    console.print(table)
    return ok
