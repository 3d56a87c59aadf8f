"""Client / AsyncClient: the Memory API over a `compassmem serve` REST server (httpx).

The same method names, arguments and return types as `Memory` (`add`, `search`, `ask`, `list`, `get`,
`history`, `update`, `delete`, `forget`, `namespaces`, `stats`, `export`, `import_file`, and mem0's
`get_all`, `delete_all`, `reset`), so code moves between an embedded memory and a shared server by
changing one line. Errors arrive as the library's own types: a 404 is `NamespaceNotFound`,
`EventNotFound` or `ObservationNotFound`, a 400/422 is `InputError`, a 409 `StepConflict`, and so on;
whatever else the server answers is a `ServiceError` with its status.

Each method is written once, as the request it makes and how its answer is read (`_Call`); the two
clients differ only in how they send it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from . import validate
from .scope import by_ids, namespace_for, read_names
from .errors import (BudgetExceeded, CompassMemError, ConfigError, DeadlineExceeded, EventNotFound, InputError,
                     LLMError, NamespaceNotFound, NotFound, ObservationNotFound, ServiceError, StepConflict,
                     StoreError)
from .models import (Answer, EditReceipt, EventDetail, EventPage, ForgetReceipt, HistoryEntry, SearchHit,
                     StepRecord)

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass
class _Call:
    """One request and how to read its answer."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    read: Callable[[httpx.Response], Any] = field(default=lambda r: r.json())


def _scope(namespace: str | None, user_id: str | None, agent_id: str | None, run_id: str | None) -> dict[str, str]:
    return {k: v for k, v in {"namespace": namespace, "user_id": user_id, "agent_id": agent_id,
                              "run_id": run_id}.items() if v is not None}


def _as(kind: Any) -> Callable[[httpx.Response], Any]:
    adapter = TypeAdapter(kind)
    return lambda r: adapter.validate_python(r.json())


def _error(response: httpx.Response) -> CompassMemError:
    """The library's error for a problem+json answer (api.py's _STATUS, read backwards)."""
    try:
        detail = str(response.json().get("detail") or response.text)
    except ValueError:
        detail = response.text[:300] or response.reason_phrase
    status = response.status_code
    if status == 404:
        for cls, words in ((NamespaceNotFound, "namespace"), (EventNotFound, "event"),
                           (ObservationNotFound, "observation")):
            if detail.startswith(("unknown " + words, "no " + words)) or f"no {words} " in detail:
                return cls(detail)
        return NotFound(detail)
    if status == 409:
        return StepConflict(detail, retryable="retry-after" in response.headers)
    if status in (400, 413, 422):
        return InputError(detail)
    if status == 401:
        return ConfigError(f"the server refused the API key: {detail}")
    known = {429: BudgetExceeded, 503: StoreError, 504: DeadlineExceeded}
    if status in known:
        return known[status](detail)
    if status == 502:
        return LLMError("server", detail)
    return ServiceError(status, detail)


# ---------------------------------------------------------------- the API, once
def add(observations: Any, namespace: str | None = None, step: int | None = None, world_time: str | None = None, *,
        user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
        metadata: dict[str, Any] | None = None) -> _Call:
    """Add one step of observations (Memory.add)."""
    items = [observations] if isinstance(observations, (str, dict)) else list(observations)
    body = {"messages": items, "world_time": world_time, "step": step, "metadata": metadata,
            **_scope(namespace, user_id, agent_id, run_id)}
    return _Call("POST", "/v1/memories", json=body, read=_as(StepRecord))


def search(query: str, namespace: str | None = None, limit: int = 10, *, filters: dict | None = None,
           user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> _Call:
    """Events ranked for a query, no answer, no LLM call (Memory.search)."""
    body = {"query": query, "limit": limit, "filters": filters, **_scope(namespace, user_id, agent_id, run_id)}
    return _Call("POST", "/v1/search", json=body, read=_as(list[SearchHit]))


def ask(question: str, namespace: str | None = None, *, filters: dict | None = None, user_id: str | None = None,
        agent_id: str | None = None, run_id: str | None = None, mode: str | None = None) -> _Call:
    """Answer by searching the Event Graph (Memory.ask)."""
    body = {"question": question, "filters": filters, "mode": mode, **_scope(namespace, user_id, agent_id, run_id)}
    return _Call("POST", "/v1/ask", json=body, read=_as(Answer))


def list_(namespace: str | None = None, offset: int = 0, limit: int = 100, *, user_id: str | None = None,
          agent_id: str | None = None, run_id: str | None = None) -> _Call:
    """A page of events in stored order (Memory.list)."""
    params = {"offset": offset, "limit": limit, **_scope(namespace, user_id, agent_id, run_id)}
    return _Call("GET", "/v1/memories", params=params, read=_as(EventPage))


def get(event_id: str, namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
        run_id: str | None = None) -> _Call:
    """One event with its observations and relations (Memory.get)."""
    return _Call("GET", f"/v1/memories/{_segment(event_id)}", params=_scope(namespace, user_id, agent_id, run_id),
                 read=_as(EventDetail))


def history(event_id: str, namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
            run_id: str | None = None) -> _Call:
    """What happened to an event (Memory.history)."""
    return _Call("GET", f"/v1/memories/{_segment(event_id)}/history",
                 params=_scope(namespace, user_id, agent_id, run_id), read=_as(list[HistoryEntry]))


def update(observation_id: str, text: str, namespace: str | None = None, *, user_id: str | None = None,
           agent_id: str | None = None, run_id: str | None = None) -> _Call:
    """Replace an observation's text (Memory.update)."""
    return _Call("PUT", f"/v1/observations/{_segment(observation_id)}",
                 json={"text": text, **_scope(namespace, user_id, agent_id, run_id)}, read=_as(EditReceipt))


def delete(observation_ids: str | list[str], namespace: str | None = None, *, user_id: str | None = None,
           agent_id: str | None = None, run_id: str | None = None) -> _Call:
    """Delete observations or events (Memory.delete)."""
    ids = [observation_ids] if isinstance(observation_ids, str) else list(observation_ids)
    return _Call("POST", "/v1/observations/delete",
                 json={"observation_ids": ids, **_scope(namespace, user_id, agent_id, run_id)}, read=_as(EditReceipt))


def forget(namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
           run_id: str | None = None) -> _Call:
    """Delete a whole namespace (Memory.forget)."""
    scope = _scope(namespace, user_id, agent_id, run_id)
    if not scope:
        raise InputError("forget needs a namespace (or user_id / agent_id / run_id)")
    return _Call("DELETE", "/v1/namespaces", params=scope, read=_as(ForgetReceipt))


def namespaces() -> _Call:
    """The namespaces of the key's tenant (Memory.namespaces)."""
    return _Call("GET", "/v1/namespaces", read=_as(list[str]))


def stats(namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
          run_id: str | None = None) -> _Call:
    """Counts and construction cost (Memory.stats)."""
    return _Call("GET", "/v1/stats", params=_scope(namespace, user_id, agent_id, run_id))


def export(namespace: str | None, path: str | Path) -> _Call:
    """Write a namespace as export JSONL to a local file; returns its row count (Memory.export). The
    server exports one namespace at a time (None: 'default')."""
    out = validate.output_file(path)

    def write(r: httpx.Response) -> int:
        out.write_bytes(r.content)
        return max(0, r.content.count(b"\n") - 1)  # the header line is not a row
    return _Call("GET", "/v1/export", params=_scope(namespace, None, None, None), read=write)


def import_file(path: str | Path) -> _Call:
    """Restore the namespaces of an export file under the key's tenant (Memory.import_file)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"export file not found: {p}")
    return _Call("POST", "/v1/import", content=p.read_bytes(), read=lambda r: list(r.json()["imported"]))


def get_all(namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
            run_id: str | None = None, limit: int = 100) -> _Call:
    """mem0's get_all: the scope's first `limit` events (Memory.get_all)."""
    call = list_(namespace, 0, limit, user_id=user_id, agent_id=agent_id, run_id=run_id)
    call.read = lambda r: EventPage.model_validate(r.json()).items
    return call


def _under(names: list[str], namespace: str | None, user_id: str | None, agent_id: str | None,
           run_id: str | None) -> list[str]:
    """delete_all's namespaces: the named scope and those under it (Memory._reading)."""
    if namespace is None and user_id is None and agent_id is None and run_id is None:
        raise InputError("delete_all needs a namespace (or user_id / agent_id / run_id)")
    base = namespace_for(namespace, user_id, agent_id, run_id)
    found = read_names(names, base, by_ids(user_id, agent_id, run_id))
    if not found:
        raise NamespaceNotFound(f"unknown namespace '{base}'")
    return found


def _segment(value: str) -> str:
    """An id as one URL path segment (ids may hold ':' or '/')."""
    return quote(str(value), safe="")


_API = {"add": add, "search": search, "ask": ask, "list": list_, "get": get, "history": history, "update": update,
        "delete": delete, "forget": forget, "namespaces": namespaces, "stats": stats, "export": export,
        "import_file": import_file, "get_all": get_all}


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _checked(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise _error(response)
    return response


class Client:
    """A `Memory` over HTTP. `base_url`: where `compassmem serve` listens; `api_key`: from `compassmem
    keys create`. Use as a context manager, or call close()."""

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *, timeout: float = 120.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=base_url, headers=_headers(api_key), timeout=timeout, transport=transport)

    def _run(self, call: _Call) -> Any:
        try:
            response = self._http.request(call.method, call.path, params=call.params, json=call.json,
                                          content=call.content)
        except httpx.HTTPError as exc:
            raise ServiceError(0, f"cannot reach {self._http.base_url}: {exc}") from None
        return call.read(_checked(response))

    def delete_all(self, namespace: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
                   run_id: str | None = None) -> list[ForgetReceipt]:
        """mem0's delete_all: forget a named scope and the namespaces under it (Memory.delete_all)."""
        return [self.forget(n) for n in _under(self.namespaces(), namespace, user_id, agent_id, run_id)]

    def reset(self) -> list[ForgetReceipt]:
        """mem0's reset: forget every namespace of the key's tenant."""
        return [self.forget(n) for n in self.namespaces()]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The same as Client, for asyncio code (httpx.AsyncClient)."""

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *, timeout: float = 120.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(api_key), timeout=timeout,
                                       transport=transport)

    async def _run(self, call: _Call) -> Any:
        try:
            response = await self._http.request(call.method, call.path, params=call.params, json=call.json,
                                                content=call.content)
        except httpx.HTTPError as exc:
            raise ServiceError(0, f"cannot reach {self._http.base_url}: {exc}") from None
        return call.read(_checked(response))

    async def delete_all(self, namespace: str | None = None, *, user_id: str | None = None,
                         agent_id: str | None = None, run_id: str | None = None) -> list[ForgetReceipt]:
        """mem0's delete_all: forget a named scope and the namespaces under it (Memory.delete_all)."""
        return [await self.forget(n) for n in _under(await self.namespaces(), namespace, user_id, agent_id, run_id)]

    async def reset(self) -> list[ForgetReceipt]:
        """mem0's reset: forget every namespace of the key's tenant."""
        return [await self.forget(n) for n in await self.namespaces()]

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _sync_method(spec: Callable[..., _Call]) -> Callable[..., Any]:
    @functools.wraps(spec)
    def method(self: Client, *args: Any, **kwargs: Any) -> Any:
        return self._run(spec(*args, **kwargs))
    return method


def _async_method(spec: Callable[..., _Call]) -> Callable[..., Any]:
    @functools.wraps(spec)
    async def method(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
        return await self._run(spec(*args, **kwargs))
    return method


for _name, _spec in _API.items():
    setattr(Client, _name, _sync_method(_spec))
    setattr(AsyncClient, _name, _async_method(_spec))

__all__ = ["AsyncClient", "Client"]
