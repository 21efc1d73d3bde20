"""Every read operation under injected faults tells the truth.

The oracle: pvesim counts every error answer and dropped connection it serves. If a call made
pvesim fail at least once, its answer must be a clean error or say that it is partial (an
``incomplete`` list, a ``DATA_INCOMPLETE``/``CHECK_SKIPPED`` finding, ``complete: false``). Never a
crash, never a hang past the configured timeout, never an unqualified clean report.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pve_steward.security.handlers import SEVERAL_CLUSTERS
from pve_steward.surface.nodecheck import node_parameters
from pve_steward.surface.registry import load_registry
from pvesim.pbs import start_pbs
from pvesim.server import SimServer
from tests.integration.pve import control

pytestmark = pytest.mark.anyio

REGISTRY = load_registry()
READS = sorted(o.name for o in REGISTRY.operations.values() if not o.is_write and o.name not in SEVERAL_CLUSTERS)
ARGS: dict[str, dict[str, Any]] = {
    "node_status": {"node": "pve3"},
    "node_disks": {"node": "pve3"},
    "node_zfs_pools": {"node": "pve3"},
    "node_updates": {"node": "pve3"},
    "node_repositories": {"node": "pve3"},
    "node_certificates": {"node": "pve3"},
    "node_subscription": {"node": "pve3"},
    "get_guest": {"vmid": 112},
    "get_guests": {"vmids": [112, 113]},
    "guest_agent_info": {"vmid": 104},
    "list_snapshots": {"vmid": 113},
    "storage_content": {"node": "pve3", "storage": "local-zfs"},
    "get_backup_job": {"id": "backup-nightly"},
    "explain_finding": {"code": "BACKUP_STALE"},
    "plan_node_evacuation": {"node": "pve2"},
    "check_guest_migration": {"vmid": 112},
    "list_replication_jobs": {},
}


# Failures that are answers, each reported as its own finding: a guest agent that does not respond
# (GUEST_AGENT_SILENT) and PVE refusing the migrate precondition of a locked guest (MIGRATE_LOCKED).
# PVE's migrate precondition is only a cross-check: when that read fails for another reason, the
# server's own reading of the config decides (collect._take_preconditions), so nothing is missing.
SEMANTIC = re.compile(r"/agent/info$|^/nodes/[^/]+/qemu/\d+/migrate$")
# Operations that name a node first look the name up in GET /nodes (nodecheck.unknown_node). When that
# one read fails the call goes ahead and answers from its own reads, so one failed GET /nodes is not
# part of the answer. A second one would be: the operation's own read of /nodes.
NODE_PARAMS = {name: node_parameters(fn) for name, fn in REGISTRY.handlers.items()}


def real_failures(sim: SimServer, since: int, op: str, args: dict[str, Any]) -> list[tuple[int, str, str]]:
    count = sim.sim.failures_served - since
    log = sim.sim.failure_log[-count:] if count else []
    failed = [f for f in log if not SEMANTIC.search(f[2])]
    node_check = next((f for f in failed if f[1:] == ("GET", "/nodes")), None)
    if node_check is not None and any(args.get(p) is not None for p in NODE_PARAMS[op]):
        failed.remove(node_check)
    return failed


def flagged(body: Any) -> bool:
    """Does the answer say, somewhere, that it is partial (``partial``, ``incomplete``) or that a read failed?"""
    if isinstance(body, dict):
        if body.get("incomplete") or body.get("unread") or body.get("partial") or body.get("complete") is False:
            return True
        if body.get("code") in ("DATA_INCOMPLETE", "CHECK_SKIPPED"):
            return True
        return any(flagged(v) for v in body.values())
    if isinstance(body, list):
        return any(flagged(v) for v in body)
    return False


async def sweep(sim: SimServer, mcp: Any, upid: str) -> dict[str, str]:
    """Call every read; return how each ended: clean, flagged, error or unaffected."""
    outcomes: dict[str, str] = {}
    async with Client(mcp) as c:
        for op in READS:
            args = ARGS.get(op, {})
            if op in ("get_task", "task_log"):
                args = {"upid": upid}
            before = sim.sim.failures_served
            started = time.monotonic()
            result = await c.call_tool(op, args)
            elapsed = time.monotonic() - started
            failed = real_failures(sim, before, op, args)
            text = result.content[0].text if result.content else ""
            assert "Traceback" not in text, (op, text)
            assert elapsed < 120, (op, elapsed)  # a hang, not a slow answer on a loaded machine
            if result.is_error:
                assert not text.startswith("Error executing tool") and len(text) > 30, (op, text)
                assert failed or "refused" in text or "no " in text, (op, text)
                outcomes[op] = "error"
            else:
                partial = flagged(result.structured_content)
                assert partial or not failed, (op, "failed reads but a clean report", failed[:5])
                outcomes[op] = "flagged" if partial else "unaffected"
    return outcomes


def no_crash(audit: Path) -> None:
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert not [r for r in records if r.get("outcome") == "crashed"]


def a_upid(sim: SimServer) -> str:
    return str(next(t.upid for t in sim.cluster.tasks if t.node == "pve1"))


async def test_baseline_has_no_failures(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    """Without faults no read fails and nothing is partial, so every 'flagged' below is the fault's doing.

    A PBS is connected: without one the PBS area says "PBS: not configured" (CHECK_SKIPPED), by design."""
    sim = start_sim("demo")
    with start_pbs() as pbs:
        token_id, secret = pbs.token("steward@pbs!monitor")
        connection = {"pbs_token_id": token_id, "pbs_token_secret": secret, "pbs_fingerprint": pbs.fingerprint}
        mcp = server_for(sim, "root@pam!pvesim", pbs_url=pbs.address, **connection)
        outcomes = await sweep(sim, mcp, a_upid(sim))
    assert set(outcomes.values()) == {"unaffected"}, outcomes
    no_crash(tmp_path / "audit.jsonl")


@pytest.mark.parametrize(
    "faults",
    [
        {"errors": [{"pattern": r"/storage/[^/]+/content$", "status": 500, "message": "storage timeout"}]},
        {"errors": [{"pattern": r"^/cluster/backup", "status": 500}]},
        {"errors": [{"pattern": r"^/cluster/ha/", "status": 503, "message": "ha manager busy"}]},
        {"errors": [{"pattern": r"/(qemu|lxc)/\d+/(config|status/current)$", "status": 500}]},
        {"drop": [{"pattern": r"/tasks"}]},
        {"errors": [{"pattern": r"^/nodes/pve3/", "status": 596, "message": "Connection timed out"}]},
        {"errors": [{"pattern": ".", "rate": 0.15, "status": 500}], "seed": 7},
    ],
    ids=[
        "storage-content-500",
        "backup-jobs-500",
        "ha-503",
        "guest-config-500",
        "tasks-dropped",
        "pve3-596",
        "random-15pct",
    ],
)
async def test_reads_under_faults(start_sim: Any, server_for: Any, tmp_path: Path, faults: dict[str, Any]) -> None:
    sim = start_sim("demo")
    upid = a_upid(sim)
    control(sim, "faults", faults)
    outcomes = await sweep(sim, server_for(sim, "root@pam!pvesim", retries=1), upid)
    assert "flagged" in outcomes.values() or "error" in outcomes.values(), outcomes
    no_crash(tmp_path / "audit.jsonl")


async def test_reads_with_a_node_offline(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    upid = a_upid(sim)
    control(sim, "nodes/pve3", {"online": False})
    outcomes = await sweep(sim, server_for(sim, "root@pam!pvesim", retries=0), upid)
    assert outcomes["node_status"] == "error" and outcomes["check_cluster_health"] == "flagged"
    no_crash(tmp_path / "audit.jsonl")


async def test_a_token_losing_privileges_mid_session(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    mcp = server_for(sim, "auditor@pve!mcp")
    async with Client(mcp) as c:
        before = await c.call_tool("diagnose_capacity", {})
        control(sim, "tokens/auditor@pve!mcp", {"acl": [{"path": "/vms", "role": "PVEAuditor"}]})
        after = await c.call_tool("diagnose_capacity", {})
        node = await c.call_tool("node_status", {"node": "pve1"})
    assert not flagged(before.structured_content)
    assert flagged(after.structured_content)
    assert node.is_error and "Sys.Audit" in node.content[0].text and "grant PVEAuditor" in node.content[0].text


async def test_slow_api_never_hangs_past_the_timeout(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    # PVE answers after 30 s: a call that waited for it would take a minute (two attempts); ours gives up after
    # 1 s per attempt. The margin between (about 10x) is wider than a loaded machine stretches a call.
    control(sim, "faults", {"slow": [{"pattern": r"^/cluster/backup$", "delay": 30}]})
    mcp = server_for(sim, "root@pam!pvesim", timeout=1, retries=1)
    async with Client(mcp) as c:
        for op in ("list_backup_jobs", "diagnose_backups"):
            started = time.monotonic()
            result = await c.call_tool(op, {})
            elapsed = time.monotonic() - started
            assert elapsed < 25, (op, elapsed)  # 2 attempts x 1 s + backoff, per wave; never PVE's 30 s
            assert (result.is_error and "timed out" in result.content[0].text) or flagged(result.structured_content)


async def test_reads_are_retried_and_writes_never(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    control(sim, "faults", {"drop": [{"pattern": r"^/cluster/options$"}]})
    async with Client(server_for(sim, "root@pam!pvesim", retries=2)) as c:
        before = sim.sim.failures_served
        read = await c.call_tool("cluster_options", {})
        read_attempts = sim.sim.failures_served - before
    assert read.is_error and read_attempts == 3  # the first try and two retries

    control(sim, "faults", {"drop": [{"pattern": r"/status/reboot$"}]})
    async with Client(server_for(sim, "root@pam!pvesim", retries=2, tier="operator")) as c:
        body = (await c.call_tool("guest_reboot", {"vmid": 104})).structured_content
        before = sim.sim.failures_served
        done = await c.call_tool("guest_reboot", {"vmid": 104, "confirm_token": body["confirm_token"]})
        attempts = sim.sim.failures_served - before
    assert attempts == 1  # a write is never retried
    # No answer to the POST: PVE may have the request. The answer says so instead of inviting a retry.
    assert done.structured_content["status"] == "unknown"  # type: ignore[index]
    assert "connection" in done.content[0].text.lower() and "do not retry" in done.content[0].text


async def test_outputs_are_bounded_on_a_large_cluster(start_sim: Any, server_for: Any) -> None:
    """Output size does not grow with the cluster: lists page, findings are capped, long lists are cut."""
    from pvesim.generator import generate

    sim = start_sim(generate(nodes=6, guests=1500, seed=11), speed=5000)
    upid = str(sim.cluster.tasks[0].upid) if sim.cluster.tasks else None
    sizes: dict[str, int] = {}
    # the cluster never changes here: the operations share what they read (the read cache), as a user's would
    async with Client(server_for(sim, "root@pam!pvesim", read_cache_ttl=60)) as c:
        for op in READS:
            args = dict(ARGS.get(op, {}))
            if op in ("get_task", "task_log"):
                if upid is None:
                    continue
                args = {"upid": upid}
            for key in list(args):
                if key == "node":
                    args[key] = "pve01"
                if key == "vmid":
                    args[key] = min(sim.cluster.guests)
            if op == "storage_content":
                args = {"node": "pve01", "storage": "local-lvm"}
            if op == "get_backup_job":
                jobs = sim.cluster.backup_jobs
                if not jobs:
                    continue
                args = {"id": jobs[0]["id"]}
            result = await c.call_tool(op, args)
            sizes[op] = len(result.content[0].text)
    # 100 KB: the largest default page, diagnose_migratability's 50 verdicts and 50 findings, was
    # 60 KB and was 95 KB while each cluster string was wrapped (261203-3); marked once per object since 261206-57
    too_big = {op: n for op, n in sizes.items() if n > 100_000}
    assert not too_big, too_big
