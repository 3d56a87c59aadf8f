"""Start-up stays light: the package and the CLI's help load no numeric stack; the model checksum is
verified once per installed file. (Times themselves are measured by benchmarks, not asserted here.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numpy", "sklearn", "scipy", "onnxruntime")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_import_compassmem_loads_no_numeric_stack():
    assert not {m for m in HEAVY if m in _modules_after("import compassmem")}


def test_cli_help_and_version_load_no_numeric_stack():
    code = ("import sys\nsys.argv = ['compassmem', '--help']\nfrom compassmem.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass")
    assert not {m for m in HEAVY if m in _modules_after(code)}
    version = subprocess.run([sys.executable, "-m", "compassmem", "--version"], capture_output=True, text=True)
    assert version.stdout.strip().startswith("compassmem ")


def test_asking_does_not_import_clustering():
    mods = _modules_after("from compassmem import Memory\nm = Memory(embedder='hash')\n"
                          "m.add(['Ana adopted a puppy.'], namespace='n', step=1)\nm.ask('Who adopted a puppy?', 'n')")
    assert "sklearn" not in mods


def test_model_checksum_is_remembered_and_a_bad_file_is_refused(tmp_path, monkeypatch):
    from compassmem.embed import minilm
    from compassmem.errors import ConfigError

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    good = tmp_path / "model.onnx"
    good.write_bytes(b"weights")
    monkeypatch.setattr(minilm, "MODEL_SHA256", __import__("hashlib").sha256(b"weights").hexdigest())
    minilm._verify(good)
    assert str(good.resolve()) in (tmp_path / "cache" / "compassmem" / "verified-models").read_text()
    hashed = []
    real = minilm.hashlib.sha256
    monkeypatch.setattr(minilm.hashlib, "sha256", lambda b: hashed.append(1) or real(b))
    minilm._verify(good)  # remembered: not hashed again
    assert not hashed
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(minilm, "MODEL_SHA256", real(b"weights").hexdigest())
    bad = tmp_path / "other.onnx"
    bad.write_bytes(b"tampered")
    with pytest.raises(ConfigError, match="checksum mismatch"):
        minilm._verify(bad)
