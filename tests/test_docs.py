"""Docs that run (issue "What memory users expect", item 5): every code block of README.md,
docs/service.md and docs/formats.md is executed, in order, in a fresh folder, as a newcomer would paste it: Python blocks in
a fresh interpreter (a block with top-level `await` inside asyncio.run), shell blocks line by line
through bash, JSON blocks parsed. What a test cannot do as written is adapted here, and only this:

- the ports 8080 / 8081 become free ports, and a server line (`compassmem serve`, `compassmem mcp`)
  starts in the background until the file's blocks are done;
- `$KEY` / `KEY` is the key the file's own `compassmem keys create` printed (`KEY=cm_…` lines, which
  stand for pasting it, are left out);
- `pip install` lines are left out (this environment is the install), and so is the test command;
- the PostgreSQL block's URL is a real throwaway server's, and its `conv.jsonl` is written first;
- blocks that need a model or an account are listed in SKIP with the test that covers them instead.

A new block fails here until it runs or is listed, so the docs cannot drift from the code. The other
pages' blocks are benchmark runs of minutes to hours (docs/benchmarks.md, docs/llm-mode.md): those are not
run here, but every `compassmem` command in them must name a real command with options it has."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

ROOT = Path(__file__).parent.parent
SKIP = {  # (file, first line of the block) -> why it is not run here, and what tests it instead
    ("README.md", 'Memory("agent.db", llm="openai:gpt-4o-mini")'):
        "needs an OpenAI account, a vLLM server and a GGUF file; tests/test_real_llm.py runs these specs "
        "against a real llama.cpp server and an in-process GGUF model",
}
PG_URL = "postgresql://me@db-host:5432/memory"


def blocks(name: str) -> list[tuple[str, str]]:
    text = (ROOT / name).read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.2)
    raise AssertionError(f"{what} did not listen on {port}")


def _commands(script: str) -> list[str]:
    """A shell block's commands: continuation lines joined, and a quote left open (a JSON body written
    over several lines) carried on to the line that closes it."""
    out: list[str] = []
    pending = ""
    for line in script.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        if pending.split(" #")[0].count("'") % 2 == 0:
            out.append(pending)
            pending = ""
    return out + ([pending] if pending else [])


class Session:
    """One docs file's blocks, run in one folder with the same servers and key throughout."""

    def __init__(self, folder: Path, pg_url: str | None) -> None:
        self.folder = folder
        self.ports = {"8080": str(_free_port()), "8081": str(_free_port())}
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "NO_COLOR": "1", "COLUMNS": "200"}
        self.servers: list[subprocess.Popen] = []
        self.pg_url = pg_url

    def adapt(self, code: str) -> str:
        for port, free in self.ports.items():
            code = code.replace(port, free)
        return code.replace(PG_URL, self.pg_url) if self.pg_url else code

    def python(self, code: str) -> None:
        code = self.adapt(code)
        if re.search(r"^\s*(async with|await) ", code, re.M):  # top-level await, as in a notebook or asyncio REPL
            imports = "".join(line + "\n" for line in code.splitlines() if line.startswith(("from ", "import ")))
            body = "".join(f"    {line}\n" for line in code.splitlines() if not line.startswith(("from ", "import ")))
            code = f"import asyncio\n{imports}\nasync def _main():\n{body}\nasyncio.run(_main())\n"
        prelude = "import os\nKEY = os.environ.get('KEY')\n"
        r = subprocess.run([sys.executable, "-c", prelude + code], cwd=self.folder, env=self.env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"python block failed:\n{code}\n{r.stderr[-2000:]}"

    def shell(self, code: str) -> None:
        for line in _commands(self.adapt(code)):
            parts = [p.strip() for p in line.split(" #")[0].split(" && ")]
            command = " && ".join(p for p in parts if not p.startswith(("pip install", "python3 -m pip install")))
            if not command or command.startswith(("bash scripts/test.sh", "KEY=cm_")):
                continue
            if re.match(r"compassmem (serve|mcp)\b", command):
                self.background(command)
                continue
            if " ingest conv.jsonl" in command:
                (self.folder / "conv.jsonl").write_text(json.dumps(
                    {"namespace": "ana", "step": 1, "id": "t1", "speaker": "Ana", "text": "I adopted a puppy."}) + "\n")
            r = subprocess.run(["bash", "-c", command], cwd=self.folder, env=self.env, capture_output=True, text=True,
                               timeout=300)
            assert r.returncode == 0, f"`{command}` failed ({r.returncode}):\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}"
            if command.startswith("compassmem keys create"):
                self.env["KEY"] = r.stdout.strip().splitlines()[-1]
            if command.startswith("curl"):
                assert r.stdout.strip() and not re.search(r'"status":\s*[45]\d\d', r.stdout), r.stdout  # no problem

    def background(self, command: str) -> None:
        """A server line: started and left running (stdio MCP: started on empty input, must exit cleanly)."""
        if command.startswith("compassmem mcp") and "--transport http" not in command:
            r = subprocess.run(["bash", "-c", command], cwd=self.folder, env=self.env, capture_output=True,
                               text=True, timeout=120, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, r.stderr[-2000:]
            return
        if "--port" not in command:
            port = _free_port()
            command += f" --port {port}"
        else:
            port = int(re.search(r"--port (\d+)", command).group(1))
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.folder, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.servers.append(proc)
        _wait_port(port, proc, command)

    def mcp_http(self) -> None:
        """The MCP client blocks talk to `compassmem mcp --transport http` on the docs' port 8081."""
        self.background(f"compassmem mcp --db agent.db --transport http --port {self.ports['8081']}")

    def close(self) -> None:
        for proc in self.servers:
            proc.terminate()
            proc.wait(timeout=30)


def skipped(name: str, first: str) -> bool:
    return any(name == n and first.startswith(start) for n, start in SKIP)


def run_file(name: str, folder: Path, pg_url: str | None) -> list[str]:
    session = Session(folder, pg_url)
    ran = []
    try:
        for lang, code in blocks(name):
            first = code.strip().splitlines()[0]
            if skipped(name, first):
                continue
            if lang == "json":
                config = json.loads(code)
                if isinstance(config, dict) and "mcpServers" in config:
                    assert config["mcpServers"]["compassmem"]["args"][0] == "mcp"
            elif lang == "jsonl":
                assert all(isinstance(json.loads(line), dict) for line in code.splitlines() if line.strip())
            elif lang == "text":  # a sample input shown as it is (a document); nothing to run
                pass
            elif lang == "python":
                if "streamable_http_client" in code and not any("mcp --db agent.db --transport http" in " ".join(p.args)
                                                                for p in session.servers):
                    session.mcp_http()
                session.python(code)
            elif lang == "bash":
                session.shell(code)
            else:
                raise AssertionError(f"{name}: a ```{lang} block; run it here or list it in SKIP")
            ran.append(first)
    finally:
        session.close()
    return ran


def test_the_readme_runs(tmp_path, pg_url):
    ran = run_file("README.md", tmp_path, pg_url)
    assert len(ran) == len(blocks("README.md")) - 1  # every block but the one SKIP lists
    assert (tmp_path / "graph.html").is_file() and (tmp_path / "all.jsonl").is_file()


def test_the_service_guide_runs(tmp_path):
    ran = run_file("docs/service.md", tmp_path, None)
    assert len(ran) == len(blocks("docs/service.md"))


def test_every_skipped_block_still_exists():
    for name, start in SKIP:
        assert any(code.strip().startswith(start) for _, code in blocks(name)), (name, start)


def test_the_formats_guide_runs(tmp_path):
    ran = run_file("docs/formats.md", tmp_path, None)
    assert len(ran) == len(blocks("docs/formats.md"))


def test_every_command_in_the_docs_names_a_real_command_and_real_options():
    """The benchmark commands above each table cannot run in a test (minutes to hours each); a renamed
    command or option would still leave them unrunnable, and that is checked here, on every page."""
    import shlex

    from typer.main import get_command

    from compassmem.cli.app import app

    root = get_command(app)
    checked = 0
    for page in ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]:
        for lang, code in blocks(page):
            if lang not in ("bash", "sh", ""):
                continue
            for line in _commands(code):
                line = line.split(" #")[0].strip()
                if not line.startswith("compassmem "):
                    continue
                tokens = shlex.split(line.replace("<", "'<").replace(">", ">'"))
                cmd, i = root, 1
                while hasattr(cmd, "get_command") and i < len(tokens):  # a group (typer vendors its own click)
                    sub = cmd.get_command(cmd.context_class(cmd), tokens[i])
                    if sub is None:
                        break
                    cmd, i = sub, i + 1
                assert not hasattr(cmd, "get_command"), (page, line)
                options = {o for p in cmd.params for o in [*p.opts, *p.secondary_opts]}
                for t in tokens[i:]:
                    if t.startswith("--"):
                        assert t.split("=")[0] in options, f"{page}: {t} is not an option of: {line}"
                checked += 1
    assert checked >= 20
