"""The first five minutes, tried as a new user would: the real `pve-steward` and `pvesim` commands in
subprocesses, against pvesim over HTTPS where a cluster is needed."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.httpserver import free_port

pytestmark = pytest.mark.anyio
STEWARD = [sys.executable, "-m", "pve_steward"]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The user's environment without our settings, with state under tmp_path (XDG_STATE_HOME)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PVE_STEWARD_")}
    return {**env, "XDG_STATE_HOME": str(tmp_path / "state"), "NO_COLOR": "1", **extra}


def cluster_env(sim: SimServer, tmp_path: Path, token: str = "auditor@pve!mcp", **extra: str) -> dict[str, str]:
    token_id, secret = sim.token(token)
    return clean_env(
        tmp_path,
        PVE_STEWARD_URL=sim.address,
        PVE_STEWARD_TOKEN_ID=token_id,
        PVE_STEWARD_TOKEN_SECRET=secret,
        PVE_STEWARD_FINGERPRINT=sim.fingerprint,
        **extra,
    )


def run(args: list[str], env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STEWARD, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


@contextmanager
def started(cmd: list[str], env: dict[str, str], until: str = "Press Ctrl-C") -> Iterator[list[str]]:
    """Run a server command; yield the lines it printed up to and including the one containing ``until``."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if until in line:
                break
        else:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"no '{until}' line; stdout {lines}, stderr {err}")
        yield lines
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def endpoint(lines: list[str]) -> str:
    match = next(m for line in lines if (m := re.search(r"(http://127\.0\.0\.1:(\d+)/mcp)", line)))
    assert match.group(2) != "0"
    return match.group(1)


def connects_now(url: str) -> bool:
    """One TCP connect, no retry: the banner must come after the port is bound."""
    port = int(url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        return True


async def test_demo_admin_tier_ignores_cluster_env_and_can_do_admin_actions(tmp_path: Path) -> None:
    hostile = clean_env(
        tmp_path,
        PVE_STEWARD_URL="pve.example.invalid",
        PVE_STEWARD_TOKEN_SECRET_FILE=str(tmp_path / "missing-secret"),
        PVE_STEWARD_FINGERPRINT="not-a-fingerprint",
    )
    demo = [*STEWARD, "demo", "--tier", "admin", "--http-port", "0", "--speed", "500"]
    with started(demo, hostile) as lines:
        url = endpoint(lines)
        assert connects_now(url)
        async with Client(url) as c:
            job = {"action": "backup_job_set_enabled", "id": "backup-weekly-local", "enabled": True}
            job_preview = (await c.call_tool("administer", job)).structured_content
            assert job_preview is not None and job_preview["result"]["status"] == "preview", job_preview
            done = await c.call_tool("administer", {**job, "confirm_token": job_preview["result"]["confirm_token"]})
    banner = "\n".join(lines)
    assert "ignoring PVE_STEWARD_URL, PVE_STEWARD_TOKEN_SECRET_FILE, PVE_STEWARD_FINGERPRINT" in banner
    assert "token: root@pam!pvesim (roles: Administrator on /)" in banner and "tier: admin" in banner
    assert not done.is_error and done.structured_content["result"]["status"] == "completed", done.content
    assert all(check["ok"] for check in job_preview["result"]["checks"]), job_preview

    verified = run(["audit", "verify"], clean_env(tmp_path))  # no --file: finds the demo's log
    demo_log = tmp_path / "state" / "pve-steward" / "demo-audit.jsonl"
    assert verified.returncode == 0, verified.stderr
    assert f"{demo_log}: OK" in verified.stdout and "backup_job_set_enabled" in demo_log.read_text()


def test_demo_refuses_cluster_flags_with_one_line(tmp_path: Path) -> None:
    done = run(["demo", "--url", "pve1.lan", "--token-id", "ops@pve!mcp"], clean_env(tmp_path))
    assert done.returncode == 64
    assert "--url, --token-id are not used by the demo" in done.stderr and "pve-steward serve" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_port_in_use_is_one_line_naming_the_flag(demo_sim: SimServer, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = str(holder.getsockname()[1])
        demo = run(["demo", "--http-port", port], clean_env(tmp_path))
        serve = run(["serve", "--transport", "http", "--http-port", port], cluster_env(demo_sim, tmp_path))
    for done in (demo, serve):
        assert done.returncode == 64, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("pve-steward:")]
        assert errors == [
            f"pve-steward: port {port} on 127.0.0.1 is already in use; choose another with "
            "--http-port (or stop what listens there)"
        ], done.stderr
        assert "Traceback" not in done.stderr and "MCP endpoint" not in done.stdout


async def test_serve_over_http_prints_endpoint_cluster_tier_and_mode(demo_sim: SimServer, tmp_path: Path) -> None:
    audit_log = tmp_path / "serve-audit.jsonl"
    env = cluster_env(demo_sim, tmp_path, PVE_STEWARD_AUDIT_LOG=str(audit_log))
    # a flag beats the environment, also across the two ways of giving the secret
    env["PVE_STEWARD_TOKEN_SECRET_FILE"] = str(tmp_path / "missing-secret")
    secret = env.pop("PVE_STEWARD_TOKEN_SECRET")
    cmd = [*STEWARD, "serve", "--transport", "http", "--http-port", "0", "--token-secret", secret]
    with started(cmd, env) as lines:
        url = endpoint(lines)
        assert connects_now(url)
        async with Client(url) as c:
            overview = await c.call_tool("cluster", {"action": "cluster_overview"})
    banner = "\n".join(lines)
    assert f"MCP endpoint {url}" in banner
    assert f"cluster: Proxmox VE at {demo_sim.address} as auditor@pve!mcp; PVE version: checked on first use" in banner
    assert "tier: read_only" in banner and "mode: domain meta-tools" in banner
    assert not overview.is_error
    verified = run(["audit", "verify"], env)  # finds the log serve wrote (PVE_STEWARD_AUDIT_LOG)
    assert verified.returncode == 0 and f"{audit_log}: OK" in verified.stdout, verified.stderr


def test_pvesim_prints_the_real_port_and_its_version(tmp_path: Path) -> None:
    version = subprocess.run([sys.executable, "-m", "pvesim", "--version"], capture_output=True, text=True, check=False)
    assert version.returncode == 0 and version.stdout.startswith("pvesim ")
    with started([sys.executable, "-m", "pvesim", "serve", "--port", "0"], clean_env(tmp_path), "Control:") as lines:
        url = next(line.split()[1] for line in lines if line.startswith("URL:"))
        token, secret = next(line.split()[1:3] for line in lines if "auditor@pve!mcp" in line)
        assert not url.startswith("https://127.0.0.1:0/")
        roles = {line.split()[1]: line.split("(", 1)[1].rstrip(")") for line in lines if line.startswith("Token:")}
        assert roles == {  # which role each token has: the tier it serves follows from it (README)
            "root@pam!pvesim": "roles: Administrator on /",
            "auditor@pve!mcp": "roles: PVEAuditor on /",
            "monitor@pve!mcp": "roles: PVEAuditor + BackupLister on /; BackupLister = Datastore.AllocateSpace, "
            "VM.Backup",
            "operator@pve!mcp": "roles: PVEAuditor + HAOperator on /; PVEVMAdmin on /vms; PVEDatastoreUser on "
            "/storage; HAOperator = Sys.Console",
        }
        answer = httpx2.get(
            f"{url}/version",
            headers={"Authorization": f"PVEAPIToken={token}={secret.removeprefix('secret=')}"},
            verify=False,
        )
    assert answer.status_code == 200 and answer.json()["data"]["version"] == "9.1.2"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        taken = subprocess.run(
            [sys.executable, "-m", "pvesim", "serve", "--port", str(port)], capture_output=True, text=True, check=False
        )
    assert taken.returncode == 1 and taken.stdout == ""
    assert (
        taken.stderr == f"pvesim: port {port} on 127.0.0.1 is in use; choose another with --port (0 picks a free one)\n"
    )


def check(sim: SimServer | None, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = cluster_env(sim, tmp_path, **env) if sim is not None else clean_env(tmp_path, **env)
    return run(["check", "--retries", "0", *args], base)


@pytest.mark.parametrize(
    ("cmd", "banner_on", "until", "kinds"),
    [
        ([*STEWARD, "demo", "--stdio"], "stderr", "audit log:", {"pvesim", "pbssim"}),
        ([*STEWARD, "demo", "--http-port", "0"], "stdout", "Press Ctrl-C", {"pvesim", "pbssim"}),
        ([sys.executable, "-m", "pvesim", "serve", "--port", "0"], "stdout", "Control:", {"pvesim"}),
    ],
    ids=["demo-stdio", "demo-http", "pvesim-serve"],
)
def test_sigterm_ends_the_command_and_leaves_no_simulator_key_behind(
    tmp_path: Path, cmd: list[str], banner_on: str, until: str, kinds: set[str]
) -> None:
    """docker stop, systemd or a client ending its server send SIGTERM: the simulators' temporary certificate and
    private key go, and the process still ends at once (stdin stays open, as a client that never closes it)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = clean_env(tmp_path, TMPDIR=str(temp))
    out, err = (subprocess.PIPE, subprocess.DEVNULL) if banner_on == "stdout" else (subprocess.DEVNULL, subprocess.PIPE)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err, text=True)
    try:
        banner = proc.stdout or proc.stderr  # the one piped
        assert banner is not None
        assert any(until in line for line in banner), f"{cmd} ended before its '{until}' line"
        made = {p.name.split("-")[0]: p for p in temp.iterdir()}
        assert set(made) == kinds and all(list(p.glob("*.key")) for p in made.values())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
        assert list(temp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream:
                stream.close()


def test_connection_errors_say_what_happened(demo_sim: SimServer, tmp_path: Path) -> None:
    wrong_secret = check(demo_sim, tmp_path, "--token-secret", "not-the-secret")
    refused_port = free_port()
    refused = check(demo_sim, tmp_path, "--url", f"127.0.0.1:{refused_port}")
    wrong_pin = check(demo_sim, tmp_path, "--fingerprint", "AB" * 32)
    as_json = check(demo_sim, tmp_path, "--token-secret", "not-the-secret", "--json")

    assert wrong_secret.returncode == 3
    assert "authentication failed (401)" in wrong_secret.stderr and "cannot reach" not in wrong_secret.stderr
    assert refused.returncode == 3 and f"connection refused by 127.0.0.1:{refused_port}" in refused.stderr
    assert "check the host and port in --url" in refused.stderr
    assert wrong_pin.returncode == 3 and "fingerprint mismatch" in wrong_pin.stderr
    assert f"the server presented {demo_sim.fingerprint}" in wrong_pin.stderr
    body = json.loads(as_json.stdout)
    assert as_json.returncode == 3 and body["exit_code"] == 3 and body["error"]["kind"] == "connection"
    assert "authentication failed (401)" in body["error"]["message"]
    for done in (wrong_secret, refused, wrong_pin, as_json):
        assert "Traceback" not in done.stderr


def test_check_usage_errors_never_look_like_a_check_result(tmp_path: Path) -> None:
    bad_choice = check(None, tmp_path, "--color", "purple")
    bad_area = check(None, tmp_path, "--areas", "backups,bogus", "--json")
    bad_url = check(None, tmp_path, "--url", "http://pve1.lan", "--token-id", "ops@pve!mcp")
    no_cluster = check(None, tmp_path)
    assert bad_choice.returncode == 64 and "invalid choice: 'purple'" in bad_choice.stderr
    assert bad_area.returncode == 64 and json.loads(bad_area.stdout)["error"]["kind"] == "usage"
    assert bad_url.returncode == 64 and "url (--url): the PVE API is only served over HTTPS" in bad_url.stderr
    assert no_cluster.returncode == 64 and "url and token_id are required" in no_cluster.stderr


def test_check_prints_a_header_pass_lines_and_a_summary_in_the_same_words(demo_sim: SimServer, tmp_path: Path) -> None:
    done = check(demo_sim, tmp_path)
    assert done.returncode == 2, done.stderr
    out = done.stdout
    assert out.startswith("= PVE-STEWARD CHECK =")
    assert "cluster:     demo (3 nodes)" in out and "PVE version: 9.1.2" in out
    assert "token:       auditor@pve!mcp" in out and re.search(r"time:\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", out)
    assert "PASS: no warnings or failures in high availability" in out
    body, summary = out.split("= SUMMARY =")
    for label in ("PASS", "INFO", "NOTICE", "SKIP", "WARN", "FAIL"):
        printed = len(re.findall(rf"^{label}: ", body, re.MULTILINE))
        assert re.search(rf"^{label}:\s+{printed}$", summary, re.MULTILINE), (label, printed, summary)
    assert "CRITICAL" not in summary and "WARNING:" not in summary
