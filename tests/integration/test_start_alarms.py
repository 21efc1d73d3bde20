"""Start-up alarms reach the operator (issue 42, item 5).

A broken audit chain, writes without a recorded outcome and an unreachable used-token store were logged
while the server was built, before logging was set up, through a logger that already had a handler (the
one forwarding records to clients): nothing was shown. Here `pve-steward serve` starts over stdio and over
HTTP with all three, and its stderr must name each.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pvesim.server import SimServer
from tests.httpserver import free_port, server_env

WRITE = """
import sys, pathlib
from pve_steward.security.audit import AuditLog
log = AuditLog(pathlib.Path(sys.argv[1]))
log.append({"event": "write_executing", "write_id": "w-1", "operation": "guest_reboot", "target": {"vmid": 100}})
for i in range(3):
    log.append({"event": "tool_call", "tool": "list_guests", "outcome": "ok", "i": i})
"""
ALARMS = ("IS BROKEN at line", "have no recorded outcome", "cannot be reached")


def damaged_audit_log(path: Path) -> None:
    """A write with no outcome, and a record cut out of the middle (the chain breaks there)."""
    subprocess.run([sys.executable, "-c", WRITE, str(path)], check=True, timeout=60)
    lines = path.read_text().splitlines(keepends=True)
    del lines[2]
    path.write_text("".join(lines))


def stderr_until(env: dict[str, str], wanted: tuple[str, ...], seconds: float = 60) -> str:
    """What a server started with ``env`` wrote to stderr until every ``wanted`` text appeared (or the time ran
    out); it is stopped then, and its stderr read to the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pve_steward", "serve"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stream = proc.stderr
    assert stream is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + seconds
        while not all(w in "".join(lines) for w in wanted) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pipe in (proc.stdin, proc.stderr):
            if pipe is not None:
                pipe.close()
    return "".join(lines)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_start_up_alarms_are_on_stderr(demo_sim: SimServer, tmp_path: Path, transport: str) -> None:
    damaged_audit_log(tmp_path / "audit.jsonl")
    env = server_env(
        demo_sim,
        tmp_path,
        "operator@pve!mcp",
        PVE_STEWARD_TRANSPORT=transport,
        PVE_STEWARD_HTTP_PORT=str(free_port()),
        PVE_STEWARD_TIER="operator",
        PVE_STEWARD_TOKEN_STORE=f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
        PVE_STEWARD_TOKEN_STORE_TIMEOUT="1",
        PVE_STEWARD_DIAGNOSTICS_PROCESS="false",
    )
    seen = stderr_until(env, ALARMS)
    for alarm in ALARMS:
        assert alarm in seen, seen
    assert "Traceback" not in seen


def test_a_shared_confirm_key_on_a_local_store_warns_and_replicas_refuse_it(
    demo_sim: SimServer, tmp_path: Path
) -> None:
    """Issue 42: replicas sharing --confirm-key-file, each on its own local token store, accepted each other's used
    tokens with no warning. One server warns loudly; --replicas 2 refuses to start."""
    key = tmp_path / "confirm.key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)
    base = server_env(
        demo_sim,
        tmp_path,
        "operator@pve!mcp",
        PVE_STEWARD_TRANSPORT="stdio",
        PVE_STEWARD_TIER="operator",
        PVE_STEWARD_CONFIRM_KEY_FILE=str(key),
        PVE_STEWARD_TOKEN_STORE=str(tmp_path / "used.sqlite3"),
    )
    warned = stderr_until(base, ("SINGLE USE AT RISK",))
    refused = subprocess.run(
        [sys.executable, "-m", "pve_steward", "serve"],
        env={**base, "PVE_STEWARD_REPLICAS": "2"},
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "accepts tokens this one already used" in warned, warned
    assert refused.returncode == 64 and "replicas = 2" in refused.stderr and "only this host sees" in refused.stderr
    assert "Traceback" not in refused.stderr
