"""Helpers every CLI command shares: consoles, option definitions, opening a memory, parsing ranges.

Command modules import from here, never from each other, so app.py can import them all."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ..errors import ConfigError

console = Console()
err_console = Console(stderr=True)

LLM_HELP = "LLM spec: none (offline engine) | openai:MODEL (any OpenAI-compatible base URL) | gguf:PATH"
EMB_HELP = "Embedder: minilm (default, local ONNX) | hash (lexical, no model) | http:MODEL"

DbOpt = typer.Option(..., "--db", help="SQLite database file (created if missing), or a postgresql:// URL.")
LlmOpt = typer.Option("none", "--llm", help=LLM_HELP, envvar="COMPASSMEM_LLM")
BaseUrlOpt = typer.Option(None, "--base-url", help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL).")
KeyOpt = typer.Option(None, "--api-key", help="API key (default: $OPENAI_API_KEY).")
ConfigOpt = typer.Option(None, "--config", help="TOML file overriding method settings (see docs/config.md).")


SinceOpt = typer.Option(None, "--since", help="Only observations dated on or after this ISO date.")
UntilOpt = typer.Option(None, "--until", help="Only observations dated on or before this ISO date.")
SpeakerOpt = typer.Option(None, "--speaker", help="Only this speaker's observations; repeatable.")
MetaOpt = typer.Option(None, "--meta", help="Only observations whose metadata has KEY=VALUE; repeatable.")


UserOpt = typer.Option(None, "--user-id", help="mem0 scope: the user's memory (instead of --namespace).")
AgentOpt = typer.Option(None, "--agent-id", help="mem0 scope: an agent's memory (with or without --user-id).")
RunOpt = typer.Option(None, "--run-id", help="mem0 scope: one run's memory.")
NsOpt = typer.Option(None, "--namespace", "-n", help="Which memory (default: 'default'); or --user-id / "
                     "--agent-id / --run-id.")


def scope_kwargs(namespace: str | None, user_id: str | None, agent_id: str | None, run_id: str | None) -> dict:
    """The options as the library's keyword arguments, so a command reads (or writes) exactly what the
    same library call would: a read by --user-id covers the namespaces under it (scope.py)."""
    return {"namespace": namespace, "user_id": user_id, "agent_id": agent_id, "run_id": run_id}


def write_namespace(namespace: str | None, user_id: str | None, agent_id: str | None, run_id: str | None) -> str:
    """The one namespace the options name, as the library's `namespace_for` (scope.py): writes and
    namespace-wide operations are exact, where reads (scope_kwargs) cover the namespaces under a user."""
    from ..scope import namespace_for

    return namespace_for(namespace, user_id, agent_id, run_id)


def key_values(items: list[str] | None, option: str) -> dict[str, str]:
    """Repeated KEY=VALUE options as a dict; a malformed one is a one-line error naming its option."""
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"bad {option} '{item}'; expected KEY=VALUE")
        pairs[key] = value
    return pairs


def filters_from(since: str | None, until: str | None, speaker: list[str] | None,
                 meta: list[str] | None) -> dict | None:
    """The --since/--until/--speaker/--meta options as Memory's `filters` (None when none is given)."""
    pairs = key_values(meta, "--meta")
    given = {"since": since, "until": until, "speaker": speaker or None, "meta": pairs or None}
    return {k: v for k, v in given.items() if v is not None} or None


def is_url(db: str) -> bool:
    """A PostgreSQL URL rather than a SQLite file path."""
    return db.startswith(("postgres://", "postgresql://"))


def open_memory(db: str, llm: str = "none", embedder: str | None = None, config: Path | None = None,
                base_url: str | None = None, api_key: str | None = None, must_exist: bool = False):
    from ..config import Settings
    from ..memory import Memory

    if must_exist and db != ":memory:" and not is_url(db) and not Path(db).is_file():
        raise ConfigError(f"database not found: {db} (build one with `compassmem ingest`)")
    return Memory(db, llm=llm, embedder=embedder, settings=Settings.load(config), base_url=base_url, api_key=api_key)


def parse_range(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    lo, sep, hi = text.partition("-")
    try:
        return (int(lo), int(hi) if sep else int(lo))
    except ValueError:
        raise ConfigError(f"bad range '{text}'; expected N or N-M, e.g. 1-10") from None
