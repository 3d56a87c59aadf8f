"""API keys for the REST service: each key is bound to one tenant, and a tenant sees only its own
namespaces (stored as `tenant:<name>/<namespace>`, so isolation holds by construction, not by checks
scattered over endpoints).

A key reads `cm_<id>_<secret>`. Only the SHA-256 of the secret is stored (in the database's meta table,
under `api_key/<id>`), so a copy of the database does not leak usable keys; revoking keeps the record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets

from pydantic import BaseModel

from ..errors import InputError
from ..models import utcnow
from ..store import Store

PREFIX = "api_key/"
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY = re.compile(r"^cm_([0-9a-f]{12})_([A-Za-z0-9_-]{20,80})$")


class ApiKey(BaseModel):
    id: str
    tenant: str
    name: str = ""
    created_at: str
    revoked_at: str | None = None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def tenant_prefix(tenant: str) -> str:
    return f"tenant:{tenant}/"


def create(store: Store, tenant: str, name: str = "") -> tuple[str, ApiKey]:
    """A new key for `tenant`: (the key, shown once, and its record)."""
    if not isinstance(tenant, str) or not _TENANT.match(tenant):
        raise InputError(f"tenant must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit; "
                         f"got {tenant!r}")
    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(30)
    record = ApiKey(id=key_id, tenant=tenant, name=name[:100], created_at=utcnow())
    store.meta.set(PREFIX + key_id, json.dumps({**record.model_dump(), "sha256": _digest(secret)}))
    return f"cm_{key_id}_{secret}", record


def list_keys(store: Store) -> list[ApiKey]:
    return [ApiKey.model_validate({k: v for k, v in json.loads(value).items() if k != "sha256"})
            for _, value in store.meta.items(PREFIX)]


def revoke(store: Store, key_id: str) -> ApiKey:
    raw = store.meta.get(PREFIX + key_id) if isinstance(key_id, str) else None
    if raw is None:
        raise InputError(f"no API key '{key_id}' (compassmem keys list shows the ids)")
    data = json.loads(raw)
    data["revoked_at"] = data.get("revoked_at") or utcnow()
    store.meta.set(PREFIX + key_id, json.dumps(data))
    return ApiKey.model_validate({k: v for k, v in data.items() if k != "sha256"})


def authenticate(store: Store, key: str | None) -> ApiKey | None:
    """The key's record when it is well-formed, known, not revoked and its secret matches; else None."""
    m = _KEY.match(key or "")
    if not m:
        return None
    raw = store.meta.get(PREFIX + m.group(1))
    if raw is None:
        return None
    data = json.loads(raw)
    if data.get("revoked_at") or not hmac.compare_digest(data.get("sha256", ""), _digest(m.group(2))):
        return None
    return ApiKey.model_validate({k: v for k, v in data.items() if k != "sha256"})
