"""Two replicas of the HTTP server on one real redis-server, as a team deployment runs them (issue 20).

The client alternates between two server processes: any replica answers any request (the 2026-07-28
protocol has no sessions), a confirmation token previewed on one runs once on the other and is
refused afterwards on both, killing one replica loses no write, and ``/ready`` says when a replica
cannot serve (PVE or the used-token store unreachable) while ``/health`` still answers, also while
Redis hangs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pvesim.server import SimServer
from tests.httpserver import free_port, server_env, serving, serving_process
from tests.redisserver import redis_server, running_redis

pytestmark = pytest.mark.anyio
TOKEN = "replica-bearer-token-for-tests-0123456789"


def replica_env(sim: SimServer, tmp_path: Path, name: str, store: str, key: Path) -> dict[str, str]:
    return server_env(
        sim,
        tmp_path,
        "operator@pve!mcp",
        PVE_STEWARD_TIER="operator",
        PVE_STEWARD_GRANULAR_TOOLS="true",
        PVE_STEWARD_HTTP_BEARER_TOKEN=TOKEN,
        PVE_STEWARD_TOKEN_STORE=store,
        PVE_STEWARD_REQUEST_BUDGET="500",
        PVE_STEWARD_CONFIRM_KEY_FILE=str(key),
        PVE_STEWARD_AUDIT_LOG=str(tmp_path / f"audit-{name}.jsonl"),
    )


def replica(env: dict[str, str]) -> Any:
    port = free_port()
    return serving([sys.executable, "-m", "pve_steward", "serve"], port, {**env, "PVE_STEWARD_HTTP_PORT": str(port)})


def replica_process(env: dict[str, str]) -> Any:
    port = free_port()
    cmd = [sys.executable, "-m", "pve_steward", "serve"]
    return serving_process(cmd, port, {**env, "PVE_STEWARD_HTTP_PORT": str(port)})


def budget_drawers(store: str) -> set[int]:
    """The processes with a connection to the request budget that has run its script (CLIENT LIST names them,
    budget.client_name), each counted as the replica it belongs to (the process or its parent)."""
    import redis

    shared = redis.Redis.from_url(store)
    try:
        clients = shared.client_list()
    finally:
        shared.close()
    pids = {
        int(c["name"].rsplit(":", 1)[1])
        for c in clients
        if c.get("name", "").startswith("pve-steward-budget:") and c.get("cmd") in ("evalsha", "eval")
    }
    return {_replica_of(pid) for pid in pids}


def _replica_of(pid: int) -> int:
    """``pid``, or its parent when it is a replica's diagnostics process."""
    parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    cmdline = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
    return parent if b"pve_steward" in cmdline and b"serve" in cmdline else pid


@asynccontextmanager
async def client(base: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
    ):
        yield c


def shared_key(tmp_path: Path) -> Path:
    key = tmp_path / "confirm.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    return key


def reboots(sim: SimServer) -> list[Any]:
    return [t for t in list(sim.cluster.tasks) if t.type == "qmreboot" and t.user == "operator@pve!mcp"]


async def test_two_replicas_share_tokens_and_either_answers(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim("demo", speed=50)
    key = shared_key(tmp_path)
    with (
        redis_server(tmp_path) as store,
        replica_process(replica_env(sim, tmp_path, "a", store, key)) as (proc_a, a),
        replica_process(replica_env(sim, tmp_path, "b", store, key)) as (proc_b, b),
    ):
        for base in (a, b):
            ready = httpx2.get(f"{base}/ready")
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"] == {"cluster:default": "ok", "token_store": "ok"}
        async with client(a) as ca:
            preview = await ca.call_tool("guest_reboot", {"vmid": 100})
            health_a = await ca.call_tool("check_cluster_health", {"areas": ["cluster"]})
        token = preview.structured_content["confirm_token"]  # type: ignore[index]
        async with client(b) as cb:
            done = await cb.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
            health_b = await cb.call_tool("check_cluster_health", {"areas": ["cluster"]})
        async with client(a) as ca:
            again = await ca.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
        drawing = budget_drawers(store)  # while both run (the budget key itself expires ~1 s after a draw)
    assert drawing == {proc_a.pid, proc_b.pid}, drawing  # both replicas drew from the one budget
    assert not done.is_error and done.structured_content["status"] == "completed"  # type: ignore[index]
    assert again.is_error and "already used" in again.content[0].text
    assert len(reboots(sim)) == 1
    assert health_a.structured_content["counts"] == health_b.structured_content["counts"]  # type: ignore[index]
    records = [json.loads(line) for line in (tmp_path / "audit-b.jsonl").read_text().splitlines()]
    assert any(r.get("event") == "write_outcome" for r in records)


async def test_killing_a_replica_loses_nothing(start_sim: Any, tmp_path: Path) -> None:
    """A replica killed with SIGKILL after its write: the write and its audit record are there, and the
    other replica refuses the token (the claim lives in Redis, not in the dead process)."""
    sim = start_sim("demo", speed=50)
    key = shared_key(tmp_path)
    with redis_server(tmp_path) as store:
        env_a = replica_env(sim, tmp_path, "a", store, key)
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pve_steward", "serve"],
            env={**env_a, "PVE_STEWARD_HTTP_PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            a = f"http://127.0.0.1:{port}"
            await _wait_ready(a)
            async with client(a) as ca:
                preview = await ca.call_tool("guest_reboot", {"vmid": 100})
                token = preview.structured_content["confirm_token"]  # type: ignore[index]
                done = await ca.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        with replica(replica_env(sim, tmp_path, "b", store, key)) as b:
            async with client(b) as cb:
                replay = await cb.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
                still = await cb.call_tool("get_guest", {"vmid": 100})
    assert not done.is_error and len(reboots(sim)) == 1
    assert replay.is_error and "already used" in replay.content[0].text
    assert not still.is_error
    events = [json.loads(line)["event"] for line in (tmp_path / "audit-a.jsonl").read_text().splitlines()]
    assert "write_executing" in events and "write_outcome" in events


async def _wait_ready(base: str) -> None:
    with anyio.fail_after(120), httpx2.Client(timeout=2) as poll:  # one client: each builds a TLS context
        while True:
            try:
                if poll.get(f"{base}/ready").status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            await anyio.sleep(0.1)


async def test_ready_says_what_a_replica_lacks(start_sim: Any, tmp_path: Path) -> None:
    """/ready is 503 naming the used-token store or the cluster; /health stays 200 (the process lives)."""
    sim = start_sim("demo")
    key = shared_key(tmp_path)
    dead_store = f"redis://127.0.0.1:{free_port()}/0"
    with replica(replica_env(sim, tmp_path, "a", dead_store, key)) as a:
        ready = httpx2.get(f"{a}/ready")
        assert httpx2.get(f"{a}/health").status_code == 200
    assert ready.status_code == 503
    assert ready.json()["checks"]["token_store"] == "the used-token store cannot be reached"
    assert ready.json()["checks"]["cluster:default"] == "ok"
    env = {**replica_env(sim, tmp_path, "b", "memory", key), "PVE_STEWARD_URL": f"https://127.0.0.1:{free_port()}"}
    del env["PVE_STEWARD_REQUEST_BUDGET"]  # a budget needs Redis; this replica has none
    with replica(env) as b:
        unreachable = httpx2.get(f"{b}/ready")
    assert unreachable.status_code == 503 and unreachable.json()["checks"]["cluster:default"].startswith("cannot reach")


async def test_a_hung_redis_leaves_the_server_answering_and_runs_a_token_once(start_sim: Any, tmp_path: Path) -> None:
    """Issue 42: the used-token store was queried on the event loop, so an unresponsive Redis stalled the whole
    server (/health 9.9 s during five confirms). Here Redis is stopped (SIGSTOP: connections are accepted,
    nothing answers) while five confirmations of one token wait on it: /health answers while they all still
    wait; once Redis answers again, exactly one of them runs."""
    sim = start_sim("demo", speed=50)
    key = shared_key(tmp_path)
    with running_redis(tmp_path) as redis:
        env = {**replica_env(sim, tmp_path, "a", redis.url, key), "PVE_STEWARD_TOKEN_STORE_TIMEOUT": "60"}
        del env["PVE_STEWARD_REQUEST_BUDGET"]  # the budget's Redis calls are the API workers' own affair
        with replica(env) as a:
            async with client(a) as ca:
                preview = await ca.call_tool("guest_reboot", {"vmid": 100})
            token = preview.structured_content["confirm_token"]  # type: ignore[index]
            results: list[Any] = []
            async with AsyncExitStack() as stack:
                sessions = [await stack.enter_async_context(client(a)) for _ in range(5)]

                async def confirm(c: Client) -> None:
                    results.append(await c.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token}))

                redis.pause()
                try:
                    async with anyio.create_task_group() as tg:
                        for c in sessions:
                            tg.start_soon(confirm, c)
                        await anyio.sleep(0.5)  # let them reach the store (they cannot get past it)
                        async with httpx2.AsyncClient(timeout=60) as http:
                            health = await http.get(f"{a}/health")
                        waiting = 5 - len(results)
                        redis.resume()
                finally:
                    redis.resume()
    assert health.status_code == 200 and waiting == 5, "/health answered while every confirmation waited on Redis"
    ran = [r for r in results if not r.is_error]
    assert len(ran) == 1 and ran[0].structured_content["status"] == "completed"  # type: ignore[index]
    assert all("already used" in r.content[0].text for r in results if r.is_error)
    assert len(reboots(sim)) == 1
