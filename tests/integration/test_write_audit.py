"""No PVE write without an audit record: write-ahead records, cancels, kill -9, unknown outcomes, elicitation.

Every test compares what PVE (pvesim) actually ran with what the audit log says, through a real MCP
client and real proxmoxer over HTTPS.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import ElicitResult

from pve_steward.security.audit import AuditLog, pending, verify
from pve_steward.server import build_server
from pvesim.server import SimServer
from tests.integration.pve import control
from tests.redisserver import redis_server
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def writes_by_us(sim: SimServer, ttype: str, token: str = "operator@pve!mcp") -> list[Any]:
    return [t for t in list(sim.cluster.tasks) if t.type == ttype and t.user == token]


def unaudited(sim: SimServer, audit: Path, ttype: str) -> list[str]:
    """PVE tasks of ``ttype`` that no audit record accounts for.

    A task is accounted for by a record that names its UPID (``write_submitted`` or ``write_outcome``),
    or, when the process died before PVE's answer could be written down, by an ``executing`` record
    for the same guest that names no UPID (``audit pending`` lists it).
    """
    recs = records(audit)
    named = {r.get("upid") for r in recs if r.get("event") in ("write_submitted", "write_outcome")}
    with_upid = {r["write_id"] for r in recs if r.get("upid") and "write_id" in r}
    anonymous = [r for r in recs if r.get("event") == "write_executing" and r["write_id"] not in with_upid]
    missing: list[str] = []
    for task in writes_by_us(sim, ttype):
        if task.upid in named:
            continue
        match = next((r for r in anonymous if str(r["target"].get("vmid")) == task.id), None)
        if match is None:
            missing.append(task.upid)
        else:
            anonymous.remove(match)
    return missing


async def wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await anyio.sleep(0.02)


async def preview_token(c: Client, tool: str, **args: Any) -> str:
    result = await c.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    token = result.structured_content["confirm_token"]  # type: ignore[index]
    assert isinstance(token, str)
    return token


async def test_execution_is_recorded_before_the_request_and_its_outcome_after(
    start_sim: Any, server_for: Any, tmp_path: Path
) -> None:
    sim = start_sim("demo", speed=50)
    audit = tmp_path / "audit.jsonl"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        done = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    upid = done.structured_content["task"]["upid"]  # type: ignore[index]
    recs = records(audit)
    events = [r["event"] for r in recs if r.get("write_id")]
    assert events == ["write_executing", "write_submitted", "write_outcome"]
    executing, submitted, outcome = (r for r in recs if r.get("write_id"))
    assert executing["operation"] == "guest_reboot" and executing["target"]["vmid"] == 100
    assert executing["token"].startswith("sha256:") and token not in json.dumps(recs)
    assert executing["cluster"] == {"url": sim.address, "pve_token": "operator@pve!mcp"}
    assert submitted["upid"] == outcome["upid"] == upid and outcome["outcome"] == "ok"
    assert executing["seq"] < submitted["seq"] < outcome["seq"]
    assert verify(audit).ok and not pending(audit) and unaudited(sim, audit, "qmreboot") == []


async def test_a_client_cancel_after_the_post_does_not_stop_the_follow_up(
    start_sim: Any, server_for: Any, tmp_path: Path
) -> None:
    """The client cancels the call while PVE runs the task: the end is still recorded.

    In process the SDK runs the server's handler in the caller's task, so the cancel reaches the server
    as the call's scope is cancelled; the reboot ends (tasks/finish-all) only after that.
    """
    sim = start_sim("demo", speed=0.001)  # the reboot runs until the test finishes it
    audit = tmp_path / "audit.jsonl"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        call = anyio.CancelScope()

        async def execute() -> None:
            with call:
                await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})

        async with anyio.create_task_group() as tg:
            tg.start_soon(execute)
            # PVE answered the POST: the server follows the task
            await wait_for(lambda: any(r.get("event") == "write_submitted" for r in records(audit)))
            call.cancel()
            await anyio.to_thread.run_sync(control, sim, "tasks/finish-all")
        task = writes_by_us(sim, "qmreboot")[0]
        await wait_for(lambda: any(r.get("event") == "write_outcome" for r in records(audit)))
    outcome = next(r for r in records(audit) if r.get("event") == "write_outcome")
    assert not task.running and task.status == "OK"
    assert outcome["upid"] == task.upid and outcome["outcome"] == "ok" and outcome.get("client_cancelled") is True
    assert unaudited(sim, audit, "qmreboot") == [] and not pending(audit) and verify(audit).ok


def _server_command(sim: SimServer, tmp_path: Path) -> StdioServerParameters:
    token_id, secret = sim.token("operator@pve!mcp")
    pid_file = tmp_path / "server.pid"
    # exec keeps the PID, so the test can kill -9 the real server process
    script = f'echo $$ > "{pid_file}"; exec "{sys.executable}" -m pve_steward serve'
    env = {
        **os.environ,
        "PVE_STEWARD_URL": sim.address,
        "PVE_STEWARD_TOKEN_ID": token_id,
        "PVE_STEWARD_TOKEN_SECRET": secret,
        "PVE_STEWARD_FINGERPRINT": sim.fingerprint,
        "PVE_STEWARD_TIER": "operator",
        "PVE_STEWARD_GRANULAR_TOOLS": "true",
        "PVE_STEWARD_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
        "PVE_STEWARD_TOKEN_STORE": str(tmp_path / "used-tokens.sqlite3"),
        "PVE_STEWARD_RETRIES": "0",
    }
    return StdioServerParameters(command="/bin/sh", args=["-c", script], env=env)


@pytest.mark.slow
async def test_kill_9_during_follow_up_leaves_no_pve_write_unaudited(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim("demo", speed=5)  # a reboot runs 2 s: the kill lands while the server follows it
    audit = tmp_path / "audit.jsonl"
    rng = random.Random(16)
    cycles = 6
    for cycle in range(cycles):
        before = len(writes_by_us(sim, "qmreboot"))
        params = _server_command(sim, tmp_path)
        with anyio.move_on_after(60):
            async with Client(params) as c:
                token = await preview_token(c, "guest_reboot", vmid=100)
                await wait_for(lambda: not guest_locked(sim, 100))
                async with anyio.create_task_group() as tg:

                    async def execute(token: str = token) -> None:
                        try:
                            await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
                        except Exception:  # the server died under it: expected
                            return

                    tg.start_soon(execute)
                    await wait_for(lambda n=before: len(writes_by_us(sim, "qmreboot")) > n)
                    await anyio.sleep(rng.uniform(0.0, 0.8))  # anywhere from right after the POST to mid-task
                    os.kill(int((tmp_path / "server.pid").read_text()), signal.SIGKILL)
                    tg.cancel_scope.cancel()
        assert len(writes_by_us(sim, "qmreboot")) == before + 1, f"cycle {cycle}: no write reached PVE"
        AuditLog(audit)  # what the next start does: recover a torn tail (and the lock was released by the kill)
        assert verify(audit).ok, (cycle, verify(audit))
        assert unaudited(sim, audit, "qmreboot") == [], f"cycle {cycle}"
    assert len(writes_by_us(sim, "qmreboot")) == cycles
    assert len(pending(audit)) >= 1  # the killed writes are listed for a human to check


def guest_locked(sim: SimServer, vmid: int) -> bool:
    with sim.sim.mutate() as cluster:  # pvesim moves its tasks on when observed, as on each API request
        return any(t.running for t in cluster.tasks if t.id == str(vmid))


async def test_a_failed_status_read_after_the_post_says_outcome_unknown(
    start_sim: Any, server_for: Any, tmp_path: Path
) -> None:
    sim = start_sim("demo", speed=20)
    audit = tmp_path / "audit.jsonl"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        control(sim, "faults", {"errors": [{"pattern": r"/tasks/.*/status$", "status": 500, "message": "proxy down"}]})
        done = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert not done.is_error, done.content[0].text
    result = done.structured_content
    assert result is not None
    task = writes_by_us(sim, "qmreboot")[0]
    assert result["status"] == "unknown" and result["task"]["upid"] == task.upid
    step = result["next_step"]
    assert step.startswith("Submitted, outcome unknown, task in `task`")  # our words; PVE's in `error`, marked
    assert "check with get_task" in step and "do not retry" in step and "proxy down" in plain(result)["error"]
    outcome = next(r for r in records(audit) if r.get("event") == "write_outcome")
    assert outcome["outcome"] == "unknown" and outcome["upid"] == task.upid
    call = [r for r in records(audit) if r.get("tool") == "guest_reboot"][-1]
    assert call["task_state"] == "unknown" and call["upid"] == task.upid


async def test_a_post_without_an_answer_is_unknown_not_failed(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    sim = start_sim("demo", speed=20)
    audit = tmp_path / "audit.jsonl"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        control(sim, "faults", {"drop": [{"pattern": r"/status/reboot$"}]})
        done = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    result = done.structured_content
    assert result is not None and result["status"] == "unknown", done.content[0].text
    assert "outcome unknown, no task id yet" in result["next_step"] and "do not retry" in result["next_step"]
    outcome = next(r for r in records(audit) if r.get("event") == "write_outcome")
    assert outcome["outcome"] == "unknown"


async def test_progress_has_no_invented_total(start_sim: Any, server_for: Any) -> None:
    """pvesim's reboot logs no percentage: progress reports elapsed seconds with no total."""
    sim = start_sim("demo", speed=0.001)  # the reboot runs until the first "running" note finishes it
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))
        if len(seen) == 1:
            await anyio.to_thread.run_sync(control, sim, "tasks/finish-all")

    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token}, progress_callback=on_progress)
    assert len(seen) >= 2 and all(total is None for _, total, _ in seen)
    assert "running" in str(seen[0][2]) and "finished" in str(seen[-1][2]), seen
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)


class Human:
    """An elicitation callback that records every question and answers as told."""

    def __init__(self, action: str = "accept", confirm: bool = True) -> None:
        self.questions: list[str] = []
        self.action = action
        self.confirm = confirm

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.questions.append(params.message)
        if self.action != "accept":
            return ElicitResult(action=self.action)  # type: ignore[arg-type]
        return ElicitResult(action="accept", content={"confirm": self.confirm})


async def test_the_human_is_asked_only_for_a_token_valid_for_exactly_this_call(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=50)
    human = Human()
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator"), elicitation_callback=human) as c:
        token = await preview_token(c, "snapshot_create", vmid=104, name="snap_a")
        other_guest = await c.call_tool("snapshot_create", {"vmid": 100, "name": "snap_a", "confirm_token": token})
        other_name = await c.call_tool("snapshot_create", {"vmid": 104, "name": "snap_b", "confirm_token": token})
        other_op = await c.call_tool("guest_shutdown", {"vmid": 104, "confirm_token": token})
        assert human.questions == []  # a token that does not fit the call asks nothing
        assert all(r.is_error for r in (other_guest, other_op, other_name))
        done = await c.call_tool("snapshot_create", {"vmid": 104, "name": "snap_a", "confirm_token": token})
        assert done.structured_content["status"] == "completed"  # type: ignore[index]
        assert len(human.questions) == 1
        replay = await c.call_tool("snapshot_create", {"vmid": 104, "name": "snap_a", "confirm_token": token})
    question = human.questions[0]
    assert "snapshot_create" in question and '"snap_a"' in question and "vmid=104" in question
    assert "104" in question and "snap_b" not in question
    assert replay.is_error and "already used" in replay.content[0].text and len(human.questions) == 1
    assert "snap_b" not in sim.cluster.guests[104].snapshots and "snap_a" not in sim.cluster.guests[100].snapshots


async def test_meta_tools_ask_about_the_call_too(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=50)
    human = Human()
    mcp = server_for(sim, "operator@pve!mcp", tier="operator", granular_tools=False)
    async with Client(mcp, elicitation_callback=human) as c:
        write_tool = "operate"  # the operator tier's write meta-tool
        first = await c.call_tool(write_tool, {"action": "guest_suspend", "vmid": 100})
        assert not first.is_error, first.content[0].text
        token = first.structured_content["result"]["confirm_token"]  # type: ignore[index]
        wrong = await c.call_tool(write_tool, {"action": "guest_suspend", "vmid": 102, "confirm_token": token})
        assert human.questions == [] and wrong.is_error
        done = await c.call_tool(write_tool, {"action": "guest_suspend", "vmid": 100, "confirm_token": token})
    assert not done.is_error, done.content[0].text
    assert len(human.questions) == 1 and "guest_suspend" in human.questions[0] and "vmid=100" in human.questions[0]


async def test_a_declining_human_stops_the_write_and_nothing_is_executed(
    start_sim: Any, server_for: Any, tmp_path: Path
) -> None:
    sim = start_sim("demo", speed=50)
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator"), elicitation_callback=Human("decline")) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        result = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert result.is_error and "decline" in result.content[0].text
    assert writes_by_us(sim, "qmreboot") == []
    assert not any(r.get("event") == "write_executing" for r in records(tmp_path / "audit.jsonl"))


async def test_a_used_token_is_refused_after_a_restart(start_sim: Any, settings_for: Any, tmp_path: Path) -> None:
    """Same key file, same state dir: the restarted server (a new store object on the same file) refuses the token."""
    sim = start_sim("demo", speed=50)
    key = tmp_path / "confirm.key"
    key.write_bytes(b"r" * 32)
    key.chmod(0o600)  # a key others can read is refused (261203-3)
    settings = settings_for(sim, "operator@pve!mcp", tier="operator", confirm_key_file=key)
    async with Client(build_server(settings)) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        done = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert done.structured_content["status"] == "completed"  # type: ignore[index]
    async with Client(build_server(settings)) as c:  # the restart
        again = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert again.is_error and "already used" in again.content[0].text
    assert len(writes_by_us(sim, "qmreboot")) == 1


async def test_replicas_on_one_redis_run_a_token_once(start_sim: Any, settings_for: Any, tmp_path: Path) -> None:
    sim = start_sim("demo", speed=50)
    key = tmp_path / "confirm.key"
    key.write_bytes(b"r" * 32)
    key.chmod(0o600)  # a key others can read is refused (261203-3)
    with redis_server(tmp_path) as url:

        def replica(name: str) -> Any:
            return build_server(
                settings_for(
                    sim,
                    "operator@pve!mcp",
                    tier="operator",
                    confirm_key_file=key,
                    token_store=url,
                    audit_log=tmp_path / f"audit-{name}.jsonl",
                )
            )

        async with Client(replica("a")) as a:
            token = await preview_token(a, "guest_reboot", vmid=100)
            done = await a.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
        async with Client(replica("b")) as b:
            again = await b.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert done.structured_content["status"] == "completed"  # type: ignore[index]
    assert again.is_error and "already used" in again.content[0].text
    assert len(writes_by_us(sim, "qmreboot")) == 1


async def test_an_unreachable_token_store_refuses_writes(start_sim: Any, settings_for: Any, tmp_path: Path) -> None:
    from tests.httpserver import free_port

    sim = start_sim("demo", speed=50)
    settings = settings_for(sim, "operator@pve!mcp", tier="operator", token_store=f"redis://127.0.0.1:{free_port()}/0")
    async with Client(build_server(settings)) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
        refused = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert refused.is_error and "cannot be reached" in refused.content[0].text
    assert "fail closed" in refused.content[0].text and writes_by_us(sim, "qmreboot") == []


async def test_a_token_from_another_cluster_is_refused(start_sim: Any, settings_for: Any, tmp_path: Path) -> None:
    """Two clusters, one key file (one operator's config): a token previewed on one does not run on the other."""
    one, two = start_sim("demo", speed=50), start_sim("demo", speed=50)
    key = tmp_path / "confirm.key"
    key.write_bytes(b"r" * 32)
    key.chmod(0o600)  # a key others can read is refused (261203-3)
    async with Client(build_server(settings_for(one, "operator@pve!mcp", tier="operator", confirm_key_file=key))) as c:
        token = await preview_token(c, "guest_reboot", vmid=100)
    other = settings_for(two, "operator@pve!mcp", tier="operator", confirm_key_file=key, audit_log=tmp_path / "b.jsonl")
    async with Client(build_server(other)) as c:
        refused = await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert refused.is_error and "another cluster" in refused.content[0].text
    assert writes_by_us(two, "qmreboot") == []
