"""The diagnostics process (worker/): heavy calls over HTTP run in a child of the server, and say the same.

A real `pve-steward serve --diagnostics-process` over HTTP, a real MCP client,
proxmoxer over HTTPS against pvesim; the in-process server on the same cluster is the reference.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from pve_steward.config import Settings
from pve_steward.server import build_server
from pve_steward.serving.worker.link import ProcessGone, WorkerLink
from pve_steward.surface.naming import Naming
from pvesim.server import SimServer
from tests.httpserver import free_port, server_env, serving_process
from tests.integration.pve import control

pytestmark = pytest.mark.anyio
# where the idle policy is not what a test checks: a SCHED_IDLE child gets almost no CPU on a busy host,
# and a test's bounded waits on it would measure the load
LOW = {"PVE_STEWARD_DIAGNOSTICS_PRIORITY": "low"}


@contextmanager
def http_server(sim: SimServer, tmp_path: Path, **extra: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    tmp_path = tmp_path / "http"  # its own audit log: an in-process server of the test may hold the other
    tmp_path.mkdir()
    env = server_env(
        sim,
        tmp_path,
        "root@pam!pvesim",
        PVE_STEWARD_HTTP_PORT=str(port),
        PVE_STEWARD_GRANULAR_TOOLS="true",
        PVE_STEWARD_DIAGNOSTICS_PROCESS="true",
        **extra,
    )
    with serving_process([sys.executable, "-m", "pve_steward", "serve"], port, env) as started:
        yield started


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def diagnostics_children(pid: int) -> list[int]:
    return [
        kid for kid in children(pid) if b"pve_steward.serving.worker.child" in Path(f"/proc/{kid}/cmdline").read_bytes()
    ]


def priorities(pid: int) -> set[tuple[int, int]]:
    """(scheduling policy, nice) of each thread of ``pid`` (Linux sets both per thread)."""
    threads = [int(tid.name) for tid in Path(f"/proc/{pid}/task").iterdir()]
    return {(os.sched_getscheduler(tid), os.getpriority(os.PRIO_PROCESS, tid)) for tid in threads}


def mapped_boards(pid: int) -> set[str]:
    """The urgency boards (urgencyboard.py) ``pid`` has mapped: the front end's cheap calls, shared."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[-1] for line in lines if "pve-steward-urgency-" in line}


def lowered() -> int:
    """The child's nice: 10 above the front end's (this test's, which the server inherits), at most 19."""
    return min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)


def node_reads(metrics: str) -> float:
    """The /nodes requests a /metrics text counts (0 if none)."""
    prefix = 'pve_steward_pve_requests_total{endpoint="nodes"'
    return next((float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(prefix)), 0.0)


def without_times(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without evidence and messages (they name ages and times: the simulated cluster's clock runs)."""
    text = json.dumps(answer, sort_keys=True)
    timeless = ("evidence", "message")
    return dict(json.loads(text, object_hook=lambda o: {k: v for k, v in o.items() if k not in timeless}))


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return dict(result.structured_content)


async def test_heavy_calls_run_in_a_child_and_answer_as_in_process(
    start_sim: Callable[..., SimServer], tmp_path: Path, settings_for: Callable[..., Settings]
) -> None:
    sim = start_sim("demo")
    async with Client(build_server(settings_for(sim, "root@pam!pvesim"))) as c:
        reference = structured(await c.call_tool("check_cluster_health", {"limit": 500}))
        ref_migration = structured(await c.call_tool("diagnose_migratability", {}))
    with http_server(sim, tmp_path) as (proc, base):
        started = time.monotonic()
        while not diagnostics_children(proc.pid) and time.monotonic() < started + 10:
            time.sleep(0.05)  # started in the background when the server starts, before any heavy call
        [warm] = diagnostics_children(proc.pid)
        notes: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            notes.append((done, total, message))

        async with Client(base + "/mcp") as c:
            health = structured(
                await c.call_tool("check_cluster_health", {"limit": 500}, progress_callback=on_progress)
            )
            migration = structured(await c.call_tool("diagnose_migratability", {}))
            [child] = diagnostics_children(proc.pid)
            assert child == warm  # the heavy calls used the process started with the server
            assert os.getpriority(os.PRIO_PROCESS, child) > os.getpriority(os.PRIO_PROCESS, proc.pid)
            assert priorities(child) == {(os.SCHED_IDLE, lowered())}  # every thread of it, its request pool's too
            [board] = mapped_boards(child)  # its reads give way to the front end's cheap calls
            assert board in mapped_boards(proc.pid) and board.endswith("(deleted)")  # one memory, and no file
            guest = structured(await c.call_tool("get_guest", {"vmid": 100}))  # cheap: the front end answers
        # a scrape waits 5 s at most for the child's figures, and a SCHED_IDLE child on a busy host may get no
        # CPU that long: scraped until they are there (60 s at most, only against a hang)
        deadline = time.monotonic() + 60
        while (nodes := node_reads(metrics := httpx2.get(base + "/metrics", timeout=30).text)) <= 20:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert without_times(health) == without_times(reference)  # every finding, count and summary alike
    assert without_times(migration) == without_times(ref_migration)
    assert guest["vmid"] == 100
    assert [n[0] for n in notes] == [0, 2] and notes[0][2].startswith("reading the cluster")  # relayed by the child
    assert nodes > 20  # the child's reads are in the front end's /metrics
    assert (
        metrics.count("# TYPE pve_steward_pve_requests_total counter") == 1
    )  # one family, the processes' values added
    deadline = time.monotonic() + 10
    while diagnostics_children(proc.pid) and time.monotonic() < deadline:  # ends with the server
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or b"zombie" in Path(f"/proc/{child}/status").read_bytes().lower()


async def test_diagnostics_priority_low_keeps_the_child_at_nice_10_in_the_default_policy(
    start_sim: Callable[..., SimServer], tmp_path: Path
) -> None:
    sim = start_sim("demo")
    with http_server(sim, tmp_path, PVE_STEWARD_DIAGNOSTICS_PRIORITY="low") as (proc, base):
        async with Client(base + "/mcp") as c:
            structured(await c.call_tool("diagnose_backups", {}))
            [child] = diagnostics_children(proc.pid)
            assert priorities(child) == {(os.SCHED_OTHER, lowered())}
            assert priorities(proc.pid) == {(os.SCHED_OTHER, os.getpriority(os.PRIO_PROCESS, 0))}  # the front end's


async def test_a_refusal_in_the_child_reaches_the_caller_and_the_audit(
    start_sim: Callable[..., SimServer], tmp_path: Path
) -> None:
    sim = start_sim("demo")
    with http_server(sim, tmp_path, PVE_STEWARD_AUDIT_READS="true", **LOW) as (_proc, base):
        async with Client(base + "/mcp") as c:
            result = await c.call_tool("diagnose_migratability", {"vmid": 999_999})
    assert result.is_error
    assert result.content[0].text == "no guest 999999 is visible in this cluster"
    records = [json.loads(line) for line in (tmp_path / "http" / "audit.jsonl").read_text().splitlines()]
    [record] = [r for r in records if r.get("tool") == "diagnose_migratability"]
    assert record["outcome"] == "refused" and "999999" in record["reason"]  # the front end's guard recorded it


async def test_a_dead_child_is_a_clear_error_and_the_next_call_starts_another(
    start_sim: Callable[..., SimServer], tmp_path: Path
) -> None:
    sim = start_sim("demo")
    with http_server(sim, tmp_path, PVE_STEWARD_READ_CACHE_TTL="0", **LOW) as (proc, base):
        async with Client(base + "/mcp") as c:
            structured(await c.call_tool("diagnose_backups", {}))
            [first] = diagnostics_children(proc.pid)
            # the read waits until the child is killed (the fault is cleared after, the simulator drops it at stop)
            control(sim, "faults", {"slow": [{"pattern": "^/cluster/resources", "delay": 60.0}]})
            async with anyio.create_task_group() as tg:
                answers: list[Any] = []

                async def ask() -> None:
                    answers.append(await c.call_tool("diagnose_capacity", {}))

                before = sim.sim.requests
                tg.start_soon(ask)
                with anyio.fail_after(60):
                    while sim.sim.requests == before:  # the run has reached PVE from the child, and waits on the
                        await anyio.sleep(0.01)  # slow read there (a check cannot end before its wave 1)
                os.kill(first, signal.SIGKILL)
            control(sim, "faults", {})
            [gone] = answers
            assert gone.is_error
            assert gone.content[0].text.startswith("the diagnostics process ended (exit code -9) before it answered")
            again = structured(await c.call_tool("diagnose_capacity", {}))
            [second] = diagnostics_children(proc.pid)
    assert second != first and again["area"] == "capacity"


async def test_stdio_and_injected_clients_keep_heavy_calls_in_process(
    start_sim: Callable[..., SimServer], settings_for: Callable[..., Settings]
) -> None:
    sim = start_sim("demo")
    assert settings_for(sim).offload_heavy is False  # off unless asked for (it costs a second process's memory)
    assert settings_for(sim, transport="http", diagnostics_process=True).offload_heavy is True
    assert settings_for(sim, diagnostics_process=True).offload_heavy is False  # stdio: one caller
    before = set(children(os.getpid()))
    settings = settings_for(sim, transport="http", diagnostics_process=True)
    async with Client(build_server(settings, clock=lambda: 1.8e9)) as c:
        structured(await c.call_tool("diagnose_backups", {}))  # an injected clock: the child could not share it
        assert set(children(os.getpid())) == before


class _Call:
    """What WorkerLink.call reads of a tool call's context: the cluster, the operation, progress."""

    def __init__(self, op: str) -> None:
        self.app = types.SimpleNamespace(cluster=None, naming=Naming(), pve_version=None)
        self.op = types.SimpleNamespace(name=op)

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        return None


async def test_a_caller_cancelled_while_the_child_starts_leaves_a_link_that_still_answers(
    start_sim: Callable[..., SimServer], settings_for: Callable[..., Settings]
) -> None:
    link = WorkerLink(settings_for(start_sim("demo"), transport="http", diagnostics_priority="low"), [])
    try:
        with anyio.move_on_after(0.3):  # the child is still importing
            await link.call(_Call("diagnose_ha"), {})
        with anyio.fail_after(60):  # only against a hang: the child's start has START_TIMEOUT (60 s)
            report = await link.call(_Call("diagnose_ha"), {"limit": 5})
        assert report.area == "cluster_ha" and link.started == 1  # the cancelled start left nothing half-set
    finally:
        await link.close()


async def test_close_answers_the_calls_still_waiting(
    start_sim: Callable[..., SimServer], settings_for: Callable[..., Settings]
) -> None:
    sim = start_sim("demo")
    control(sim, "faults", {"slow": [{"pattern": "^/cluster/resources", "delay": 20.0}]})
    link = WorkerLink(settings_for(sim, transport="http", diagnostics_priority="low"), [])
    outcome: list[BaseException] = []

    async def waiting() -> None:
        try:
            await link.call(_Call("diagnose_capacity"), {})
        except ProcessGone as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiting)
        with anyio.fail_after(60):
            while not link._pending:  # started and sent: the child waits on the slow read
                await anyio.sleep(0.01)
        with anyio.fail_after(10):
            await link.close()
    assert len(outcome) == 1 and "ended" in str(outcome[0])
    with pytest.raises(ProcessGone, match="stopping"):
        await link.call(_Call("diagnose_capacity"), {})  # no new child after close
