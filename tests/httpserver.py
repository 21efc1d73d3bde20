"""A server subprocess that serves HTTP, for tests that talk to it over a real socket."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2

from pvesim.server import SimServer

# a raw MCP initialize over streamable HTTP, for tests that check what the transport answers before any session
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def server_env(sim: SimServer, tmp_path: Path, token: str = "auditor@pve!mcp", **extra: str) -> dict[str, str]:
    """The environment of a `pve-steward serve` over HTTP against ``sim`` with ``token`` (plus ``extra``)."""
    token_id, secret = sim.token(token)
    return {
        **os.environ,
        "PVE_STEWARD_URL": sim.address,
        "PVE_STEWARD_TOKEN_ID": token_id,
        "PVE_STEWARD_TOKEN_SECRET": secret,
        "PVE_STEWARD_FINGERPRINT": sim.fingerprint,
        "PVE_STEWARD_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
        "PVE_STEWARD_TRANSPORT": "http",
        **extra,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(cmd: list[str], port: int, env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[str]:
    """Start ``cmd`` (which must listen on ``port``), wait until /health answers, yield the base URL."""
    with serving_process(cmd, port, env, cwd) as (_proc, base):
        yield base


@contextmanager
def serving_process(
    cmd: list[str], port: int, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """As ``serving``, and yield the process too (for tests that look at what it started)."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # a server that did not start at all, not a slow one on a loaded machine
        # one client for the polls: httpx2.get builds a client, and its TLS context, each time (37 ms of CPU, so
        # a second of the test worker's CPU per server start at ten polls a second)
        with httpx2.Client(timeout=1) as poll:
            while True:
                try:
                    if poll.get(f"{base}/health").status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    if proc.poll() is None:  # still starting: stop it, or reading its stderr waits for ever
                        proc.kill()
                        proc.wait(timeout=10)
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise AssertionError(f"server did not start: {err}")
                time.sleep(0.1)
        yield proc, base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()
