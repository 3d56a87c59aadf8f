"""Helpers for the tests that run the service for real (a uvicorn process on 127.0.0.1)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compassmem", *args], capture_output=True, text=True, timeout=300)


def start(args: list[str], url: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "compassmem", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read()}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def client(server, tenant: str | None) -> "httpx.Client":
    headers = {"Authorization": f"Bearer {server['keys'][tenant]}"} if tenant else {}
    return httpx.Client(base_url=server["base"], headers=headers, timeout=120)
