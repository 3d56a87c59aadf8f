"""Embedders, selected by a spec string: 'minilm' (default), 'hash', 'http:MODEL'."""

from __future__ import annotations

import os

from ..errors import ConfigError
from .base import CachedEmbedder, Embedder, dots, l2_normalise
from .disk import ENV, DiskEmbeddings
from .hashing import HashEmbedder

__all__ = ["Embedder", "CachedEmbedder", "HashEmbedder", "make_embedder", "l2_normalise", "dots", "EMBEDDER_SPECS"]

EMBEDDER_SPECS = "minilm | hash | http:MODEL"
_SHARED: dict[str, CachedEmbedder] = {}


def make_embedder(spec: str = "minilm", base_url: str | None = None, api_key: str | None = None) -> CachedEmbedder:
    """Embedders are heavy to load and stateless, so one instance per spec is shared in a process. With
    COMPASSMEM_EMBED_CACHE set to a file, vectors are also kept there (embed/disk.py)."""
    spec = (spec or "minilm").strip()
    disk = os.environ.get(ENV) or None  # embed/disk.py: vectors kept across processes
    key = f"{spec}|{base_url}|{disk}"
    if key in _SHARED:
        return _SHARED[key]
    if spec == "minilm":
        from .minilm import MiniLMEmbedder

        inner: Embedder = MiniLMEmbedder()
    elif spec == "hash" or spec.startswith("hash:"):
        dim = spec.partition(":")[2]
        if dim and not dim.isdigit():
            raise ConfigError(f"bad embedder spec '{spec}': expected hash or hash:DIM")
        inner = HashEmbedder(int(dim) if dim else 512)
    elif spec.startswith("http:") and spec[5:]:
        from .http import HTTPEmbedder

        inner = HTTPEmbedder(spec[5:], base_url=base_url, api_key=api_key)
    else:
        raise ConfigError(f"unknown embedder spec '{spec}'; expected one of: {EMBEDDER_SPECS}")
    if disk:
        inner = DiskEmbeddings(inner, disk)
    _SHARED[key] = CachedEmbedder(inner)
    return _SHARED[key]
