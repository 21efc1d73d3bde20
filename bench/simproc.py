"""Run pvesim in its own process for benchmarks (as a real cluster would be: no shared GIL)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from pve_steward.config import Settings, load_settings

IDLE = "idle"  # Linux SCHED_IDLE: only CPU time nothing else wants, as a process on another machine would take


def niced(nice: int | str) -> list[str]:
    """The prefix that runs a command at CPU priority ``nice`` (nothing for 0), or at SCHED_IDLE for ``IDLE``;
    nice(1) and chrt(1) exec it, same pid."""
    if nice == IDLE:
        return ["chrt", "--idle", "0"]
    return ["nice", "-n", str(nice)] if nice else []


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a bench starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(port: int, seconds: float, poll: float = 0.1) -> None:
    """Until the pve-steward HTTP server on ``port`` answers /health with 200, for at most ``seconds`` (the bench
    then goes on, and its first call says what is wrong)."""
    import httpx2  # the SDK's client; only the HTTP benches need it

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            time.sleep(poll)


class SimProcess:
    def __init__(
        self,
        scenario: dict[str, Any],
        latency: float = 0.0,
        nice: int | str = 0,
        pveproxy: dict[str, Any] | None = None,
    ) -> None:
        """``nice``: the simulator's CPU priority (bench_heavy: PVE's CPUs are not the server's). ``pveproxy``:
        serve as PVE's nodes do, with their workers and a cost per request (pvesim/bound.py; bench_bound)."""
        scenario = dict(scenario)
        faults: dict[str, Any] = dict(scenario.get("faults") or {})
        if latency:
            faults["latency"] = latency
        if pveproxy is not None:
            faults["pveproxy"] = pveproxy
        if faults:
            scenario["faults"] = faults
        self._tmp = tempfile.TemporaryDirectory(prefix="pvesim-bench-")
        path = Path(self._tmp.name) / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [*niced(nice), sys.executable, "-m", "pvesim", "serve", "--scenario", str(path), "--port", str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.tokens: dict[str, str] = {}
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if m := re.match(r"Fingerprint: (\S+)", line):
                self.fingerprint = m.group(1)
            elif m := re.match(r"Token:\s+(\S+)\s+secret=(\S+)", line):
                self.tokens[m.group(1)] = m.group(2)
            elif line.startswith("Control:"):
                self.control = line.split()[2]
                break
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError("pvesim did not start")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def server_env(self, state: Path, token: str = "auditor@pve!mcp", **extra: str) -> dict[str, str]:
        """The environment of a `pve-steward serve` against this simulator, its audit log under ``state``."""
        return {
            **os.environ,
            "PVE_STEWARD_URL": self.address,
            "PVE_STEWARD_TOKEN_ID": token,
            "PVE_STEWARD_TOKEN_SECRET": self.tokens[token],
            "PVE_STEWARD_FINGERPRINT": self.fingerprint,
            "PVE_STEWARD_AUDIT_LOG": str(state / "audit.jsonl"),
            **extra,
        }

    def settings(self, state: Path, token: str = "root@pam!pvesim", **extra: Any) -> Settings:
        """The settings of an in-process server against this simulator, its audit log under ``state``."""
        values: dict[str, Any] = {"audit_log": state / "audit.jsonl", **extra}
        return load_settings(
            url=self.address,
            token_id=token,
            token_secret=self.tokens[token],
            fingerprint=self.fingerprint,
            **values,
        )

    def stop(self) -> None:
        self.proc.terminate()  # uvicorn waits for keep-alive clients on SIGTERM: give it a moment, then kill
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._tmp.cleanup()
