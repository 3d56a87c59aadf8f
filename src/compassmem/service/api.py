"""The REST API: `compassmem serve` → FastAPI under /v1, one Memory per process, tenant keys.

Every endpoint is the Memory method of the same name. A request names a namespace (or mem0's user_id /
agent_id / run_id) relative to its key's tenant; the service stores it as `tenant:<name>/<namespace>`,
so no request can reach another tenant's data, and such data is "not found" (404), never "forbidden".
Endpoints are plain functions: FastAPI runs them in its thread pool, so a slow LLM answer never blocks
other requests. Errors are `application/problem+json` (RFC 9457) with one-line details.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from .. import __version__
from ..errors import (BudgetExceeded, CompassMemError, DeadlineExceeded, InputError, LLMError, NamespaceNotFound,
                      NotFound, StepConflict, StoreError)
from ..config import SearchMode
from ..memory import Memory
from ..scope import by_ids, namespace_for, read_names
from . import keys as keyring
from .limits import BodyLimit
from .viewer import MAX_EVENTS, graph_data, service_page

log = logging.getLogger("compassmem.service")

MAX_BODY_BYTES = 2_000_000


class Scope(BaseModel):
    """Which memory: a namespace, or user_id / agent_id / run_id (not both), relative to the tenant."""

    model_config = ConfigDict(extra="forbid")
    namespace: str | None = Field(None, max_length=200)
    user_id: str | None = Field(None, max_length=200)
    agent_id: str | None = Field(None, max_length=200)
    run_id: str | None = Field(None, max_length=200)


class AddRequest(Scope):
    messages: list[str | dict[str, Any]] = Field(..., min_length=1, max_length=1000, description=(
        "one step of observations: strings, {'text', 'speaker'?, 'id'?, 'time'?, 'meta'?} or mem0-style "
        "{'role', 'content'} messages"))
    world_time: str | None = Field(None, max_length=200)
    step: int | None = Field(None, ge=0, le=2**31 - 1)
    metadata: dict[str, Any] | None = Field(None, description="mem0's metadata: put on every observation's meta")


def query_scope(namespace: str | None = Query(None, max_length=200), user_id: str | None = Query(None, max_length=200),
                agent_id: str | None = Query(None, max_length=200),
                run_id: str | None = Query(None, max_length=200)) -> Scope:
    """The scope of a GET or DELETE, from its query: a namespace, or user_id / agent_id / run_id."""
    return Scope(namespace=namespace, user_id=user_id, agent_id=agent_id, run_id=run_id)


class SearchRequest(Scope):
    query: str = Field(..., max_length=10_000)
    limit: int = Field(10, ge=1, le=1000)
    filters: dict[str, Any] | None = None


class AskRequest(Scope):
    question: str = Field(..., max_length=10_000)
    filters: dict[str, Any] | None = None
    mode: SearchMode | None = Field(None, description="with an LLM: 'graph' lets the model only answer "
                                                                      "(1 call); default: the server's search.mode")


class UpdateRequest(Scope):
    text: str = Field(..., max_length=100_000)


class DeleteRequest(Scope):
    observation_ids: list[str] = Field(..., min_length=1, max_length=1000)


_STATUS = [(NotFound, 404, "Not found"), (StepConflict, 409, "Conflict"), (InputError, 400, "Bad input"),
           (DeadlineExceeded, 504, "Deadline"),
           (BudgetExceeded, 429, "Budget exceeded"), (LLMError, 502, "Model error"), (StoreError, 503, "Store busy"),
           (CompassMemError, 400, "Bad request")]


def problem(status: int, title: str, detail: str) -> JSONResponse:
    return JSONResponse({"type": "about:blank", "title": title, "status": status, "detail": detail},
                        status_code=status, media_type="application/problem+json")


class Tenant:
    """The caller's tenant: turns its namespaces into stored ones and back."""

    def __init__(self, key: keyring.ApiKey) -> None:
        self.key = key
        self.prefix = keyring.tenant_prefix(key.tenant)

    def namespace(self, scope: Scope | None = None, namespace: str | None = None) -> str:
        if scope is not None:
            inner = namespace_for(scope.namespace, scope.user_id, scope.agent_id, scope.run_id)
        else:
            inner = namespace_for(namespace)
        return self.prefix + inner

    def public(self, value: Any) -> Any:
        """A result as JSON, with the tenant prefix taken off every namespace and file paths reduced to
        their names (a receipt must not reveal where the server keeps its files)."""
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        if isinstance(value, list):
            return [self.public(v) for v in value]
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k == "namespace" and isinstance(v, str) and v.startswith(self.prefix):
                    v = v[len(self.prefix):]
                elif k == "scanned_files" and isinstance(v, list):
                    v = [str(x).rsplit("/", 1)[-1] for x in v]
                out[k] = self.public(v)
            return out
        return value


def create_app(memory: Memory, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    app = FastAPI(title="CompassMem", version=__version__,
                  description="Event-centric memory for LLM agents. Authenticate with `Authorization: Bearer "
                              "<key>` (compassmem keys create --tenant NAME).")
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)

    def tenant(request: Request) -> Tenant:
        header = request.headers.get("authorization", "")
        key = header[7:].strip() if header.lower().startswith("bearer ") else request.headers.get("x-api-key")
        record = keyring.authenticate(memory.store, key)
        if record is None:
            raise HTTPException(401, "a valid API key is required (Authorization: Bearer <key>)")
        return Tenant(record)

    def known(t: Tenant, namespace: str) -> str:
        """The stored namespace, or 404 naming only the caller's own name for it."""
        if not memory.store.has_namespace(namespace):
            raise NamespaceNotFound(f"unknown namespace '{namespace[len(t.prefix):]}'")
        return namespace

    def reading(t: Tenant, scope: Scope) -> dict[str, Any]:
        """A read's namespace and whether it covers the namespaces under it (a scope given by user_id /
        agent_id / run_id does, as in the library), or 404 naming only the caller's own name."""
        stored = t.namespace(scope)
        nested = by_ids(scope.user_id, scope.agent_id, scope.run_id)
        if not read_names(memory.store.namespaces(), stored, nested):
            raise NamespaceNotFound(f"unknown namespace '{stored[len(t.prefix):]}'")
        return {"namespace": stored, "nested": nested}

    @app.exception_handler(CompassMemError)
    def _library_error(request: Request, exc: CompassMemError) -> JSONResponse:
        status, title = next((s, t) for cls, s, t in _STATUS if isinstance(exc, cls))
        detail = str(exc)
        prefix = getattr(request.state, "tenant_prefix", None)
        if prefix:
            detail = detail.replace(prefix, "")
        response = problem(status, title, detail)
        if isinstance(exc, StepConflict) and exc.retryable:
            response.headers["Retry-After"] = "1"
        return response

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body") or "request"
        return problem(422, "Invalid request", f"{where}: {first.get('msg')}")

    @app.exception_handler(HTTPException)
    def _http(request: Request, exc: HTTPException) -> JSONResponse:
        titles = {401: "Unauthorized", 404: "Not found", 405: "Method not allowed", 413: "Request too large"}
        return problem(exc.status_code, titles.get(exc.status_code, "Error"), str(exc.detail))

    @app.exception_handler(Exception)
    def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return problem(500, "Internal error", f"{type(exc).__name__}; the server log has the details")

    def authed(request: Request, t: Tenant = Depends(tenant)) -> Tenant:
        request.state.tenant_prefix = t.prefix
        return t

    @app.get("/v1/health", tags=["service"])
    def health() -> dict:
        """Liveness: no key needed."""
        return {"status": "ok", "version": __version__}

    @app.post("/v1/memories", tags=["memories"])
    def add(body: AddRequest, t: Tenant = Depends(authed)) -> dict:
        """Add one step of observations (a session, a chunk); the Event Graph grows incrementally."""
        return t.public(memory.add(body.messages, t.namespace(body), body.step, body.world_time,
                                   metadata=body.metadata))

    @app.post("/v1/search", tags=["memories"])
    def search(body: SearchRequest, t: Tenant = Depends(authed)) -> list[dict]:
        """Ranked events with their source observations and scores; no answer, no LLM call."""
        return t.public(memory.search(body.query, limit=body.limit, filters=body.filters, **reading(t, body)))

    @app.post("/v1/ask", tags=["memories"])
    def ask(body: AskRequest, t: Tenant = Depends(authed)) -> dict:
        """The full method: plan, explore the graph, answer from the evidence (cites observation ids)."""
        return t.public(memory.ask(body.question, filters=body.filters, mode=body.mode, **reading(t, body)))

    @app.get("/v1/memories", tags=["memories"])
    def list_events(scope: Scope = Depends(query_scope), offset: int = Query(0, ge=0, le=2**31),
                    limit: int = Query(100, ge=1, le=1000), t: Tenant = Depends(authed)) -> dict:
        """A page of the namespace's events in stored order."""
        return t.public(memory.list(offset=offset, limit=limit, **reading(t, scope)))

    @app.get("/v1/memories/{event_id}", tags=["memories"])
    def get(event_id: str, scope: Scope = Depends(query_scope), t: Tenant = Depends(authed)) -> dict:
        """One event with its source observations and typed relations."""
        return t.public(memory.get(event_id, **reading(t, scope)))

    @app.get("/v1/memories/{event_id}/history", tags=["memories"])
    def history(event_id: str, scope: Scope = Depends(query_scope), t: Tenant = Depends(authed)) -> list[dict]:
        """What happened to an event: created, merged, updated, observations deleted, deleted,
        superseded (a later turn revises it: construct/revise.py)."""
        return t.public(memory.history(event_id, **reading(t, scope)))

    @app.put("/v1/observations/{observation_id}", tags=["edit"])
    def update(observation_id: str, body: UpdateRequest, t: Tenant = Depends(authed)) -> dict:
        """Replace an observation's text; its event is re-derived; returns the receipt."""
        return t.public(memory.update(observation_id, body.text, known(t, t.namespace(body))))

    @app.post("/v1/observations/delete", tags=["edit"])
    def delete(body: DeleteRequest, t: Tenant = Depends(authed)) -> dict:
        """Delete observations and everything derived from them; returns the receipt."""
        return t.public(memory.delete(body.observation_ids, known(t, t.namespace(body))))

    @app.delete("/v1/namespaces", tags=["edit"])
    def forget(scope: Scope = Depends(query_scope), t: Tenant = Depends(authed)) -> dict:
        """Forget a whole namespace (named, or user_id / agent_id / run_id); returns the receipt."""
        if not any((scope.namespace, scope.user_id, scope.agent_id, scope.run_id)):
            raise InputError("forget needs a namespace (or user_id / agent_id / run_id)")
        return t.public(memory.forget(known(t, t.namespace(scope))))

    @app.get("/v1/namespaces", tags=["memories"])
    def namespaces(t: Tenant = Depends(authed)) -> list[str]:
        """The tenant's namespaces."""
        return [n[len(t.prefix):] for n in memory.namespaces() if n.startswith(t.prefix)]

    @app.get("/v1/stats", tags=["memories"])
    def stats(scope: Scope = Depends(query_scope), t: Tenant = Depends(authed)) -> dict:
        """Counts of observations, events, relations, topics, merges and construction cost."""
        return t.public(memory.stats(known(t, t.namespace(scope))))

    @app.get("/v1/graph", tags=["viewer"])
    def graph(scope: Scope = Depends(query_scope), question: str | None = Query(None, max_length=10_000),
              limit: int = Query(MAX_EVENTS, ge=1, le=MAX_EVENTS), t: Tenant = Depends(authed)) -> dict:
        """What the viewer draws: the namespace's latest `limit` events, their relations and topics; with a
        question, the ask's exploration path and evidence too."""
        stored = known(t, t.namespace(scope))
        answer = memory.ask(question, stored) if question else None
        return t.public(graph_data(memory, stored, answer, limit, public_namespace=stored[len(t.prefix):]))

    @app.get("/viewer", tags=["viewer"], response_class=HTMLResponse)
    def viewer() -> str:
        """The graph viewer (asks for a key and a namespace, then draws /v1/graph; no external scripts)."""
        return service_page()

    @app.get("/v1/export", tags=["edit"], response_class=PlainTextResponse)
    def export(scope: Scope = Depends(query_scope), t: Tenant = Depends(authed)) -> Response:
        """The namespace as export JSONL (docs/formats.md); POST it to /v1/import to restore it."""
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "export.jsonl"
            memory.export(known(t, t.namespace(scope)), path)
            return Response(path.read_bytes(), media_type="application/x-ndjson")

    @app.post("/v1/import", tags=["edit"])
    async def import_(request: Request, t: Tenant = Depends(authed)) -> dict:
        """Restore namespaces from an export (refused if one exists). Every namespace in the file is stored
        under the caller's tenant, whatever the file says: an export of this tenant's (its names carry
        the tenant's prefix), of another tenant's or of a local database lands in this tenant's space
        and nowhere else; every row is checked before anything is written (docs/formats.md)."""
        import asyncio
        import tempfile
        from pathlib import Path

        def rename(name: str) -> str:
            return t.prefix + (name[len(t.prefix):] if name.startswith(t.prefix) else name)

        data = await request.body()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "import.jsonl"
            path.write_bytes(data)
            try:
                imported = await asyncio.to_thread(memory.import_file, path, rename=rename)
            except CompassMemError as exc:  # the message names the body, not where the server kept it
                raise type(exc)(str(exc).replace(str(path), "the body")) from None
        return {"imported": [n[len(t.prefix):] for n in imported]}

    return app
