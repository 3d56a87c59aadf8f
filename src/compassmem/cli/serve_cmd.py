"""`compassmem serve`, `compassmem keys …` and `compassmem mcp`: the memory over a wire (service/).
They need the server extra; without it they say which command installs it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from .. import validate
from ..errors import ConfigError
from .common import (AgentOpt, BaseUrlOpt, ConfigOpt, DbOpt, EMB_HELP, KeyOpt, LlmOpt, NsOpt, RunOpt, UserOpt, console,
                     is_url, open_memory, write_namespace)

keys_app = typer.Typer(help="API keys for `compassmem serve`: each key is bound to one tenant.", no_args_is_help=True)


def _need_server_extra() -> None:
    from importlib.util import find_spec

    missing = [m for m in ("fastapi", "uvicorn", "mcp") if find_spec(m) is None]
    if missing:
        raise ConfigError(f"the service needs the server extra ({', '.join(missing)} missing): "
                          "pip install 'compassmem[server]'")


def serve(
    db: str = DbOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8080, "--port", help="Port to listen on."),
    llm: str = LlmOpt, embedder: Optional[str] = typer.Option(None, "--embedder", help=EMB_HELP),
    config: Optional[Path] = ConfigOpt, base_url: Optional[str] = BaseUrlOpt, api_key: Optional[str] = KeyOpt,
    max_body: int = typer.Option(2_000_000, "--max-body", help="Largest request body in bytes."),
) -> None:
    """Serve the REST API (/v1, OpenAPI docs at /docs) for one database; clients need a key from
    `compassmem keys create`."""
    _need_server_extra()
    import uvicorn

    from ..service.api import create_app

    mem = open_memory(db, llm, embedder, config, base_url, api_key)
    console.print(f"[green]serving[/] {escape(db)} on http://{escape(host)}:{port}/v1 (docs: /docs)")
    uvicorn.run(create_app(mem, max_body), host=host, port=port, log_level="warning")
    mem.close()


def mcp(
    db: str = DbOpt,
    transport: str = typer.Option("stdio", "--transport", help="stdio (for a desktop assistant) | http"),
    host: str = typer.Option("127.0.0.1", "--host", help="http: address to listen on."),
    port: int = typer.Option(8081, "--port", help="http: port (the endpoint is /mcp)."),
    llm: str = LlmOpt, embedder: Optional[str] = typer.Option(None, "--embedder", help=EMB_HELP),
    config: Optional[Path] = ConfigOpt, base_url: Optional[str] = BaseUrlOpt, api_key: Optional[str] = KeyOpt,
) -> None:
    """Serve the memory as MCP tools named as the library's methods.

    Tools: add, search, ask, list, get, history, update, delete, forget, namespaces, stats."""
    _need_server_extra()
    if transport not in ("stdio", "http"):
        raise ConfigError(f"--transport must be stdio or http, not '{transport}'")
    from ..service.mcp_server import create_mcp

    mem = open_memory(db, llm, embedder, config, base_url, api_key)
    server = create_mcp(mem)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)
    mem.close()


def view(
    db: str = DbOpt,
    namespace: Optional[str] = NsOpt,
    user_id: Optional[str] = UserOpt, agent_id: Optional[str] = AgentOpt, run_id: Optional[str] = RunOpt,
    out: Path = typer.Option(Path("graph.html"), "--out", "-o", help="The HTML file to write."),
    question: Optional[str] = typer.Option(None, "--question", "-q", help="Also ask this and draw the exploration."),
    llm: str = LlmOpt, config: Optional[Path] = ConfigOpt, base_url: Optional[str] = BaseUrlOpt,
    api_key: Optional[str] = KeyOpt,
) -> None:
    """Write the namespace's Event Graph as one standalone HTML file (works offline): events on a
    timeline coloured by topic, typed relations, source turns on click, an ask's path highlighted."""
    from ..service.viewer import graph_data, render_html

    out = validate.output_file(out)
    namespace = write_namespace(namespace, user_id, agent_id, run_id)
    mem = open_memory(db, llm, None, config, base_url, api_key, must_exist=True)
    answer = mem.ask(question, namespace) if question else None
    data = graph_data(mem, namespace, answer)
    mem.close()
    out.write_text(render_html(data), encoding="utf-8")
    console.print(f"[green]✓[/] {len(data['events'])} events, {len(data['relations'])} relations → {escape(str(out))}")


def _open_store(db: str, must_exist: bool = True):
    """The database alone: managing keys needs no embedder or model (and must not pick one for it)."""
    from ..store import open_store

    if must_exist and not is_url(db) and not Path(db).is_file():
        raise ConfigError(f"database not found: {db}")
    return open_store(db)


@keys_app.command("create")
def keys_create(db: str = DbOpt, tenant: str = typer.Option(..., "--tenant", help="The tenant the key may act for."),
                name: str = typer.Option("", "--name", help="A label for the key.")) -> None:
    """Create a key (printed once: only its hash is stored)."""
    from ..service import keys

    store = _open_store(db, must_exist=False)
    key, record = keys.create(store, tenant, name)
    store.close()
    console.print(f"[green]✓[/] key {record.id} for tenant {escape(record.tenant)}:")
    print(key)


@keys_app.command("list")
def keys_list(db: str = DbOpt) -> None:
    """Every key: id, tenant, name, created, revoked."""
    from ..service import keys

    store = _open_store(db)
    for k in keys.list_keys(store):
        state = f"revoked {k.revoked_at}" if k.revoked_at else "active"
        console.print(f"{k.id}  tenant={escape(k.tenant)}  {escape(k.name)}  created {k.created_at}  {state}",
                      highlight=False)
    store.close()


@keys_app.command("revoke")
def keys_revoke(key_id: str = typer.Argument(..., help="The key id (compassmem keys list)."), db: str = DbOpt) -> None:
    """Revoke a key: requests with it get 401 from then on."""
    from ..service import keys

    store = _open_store(db)
    record = keys.revoke(store, key_id)
    store.close()
    console.print(f"[green]✓[/] revoked {record.id} (tenant {escape(record.tenant)})")
