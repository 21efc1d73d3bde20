"""The planner against pvesim: every planned step, executed through PVE's migrate endpoint, succeeds."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from pvesim.generator import generate
from pvesim.server import SimServer
from tests.conftest import wait_task
from tests.integration.pve import api
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


async def _plan(mcp: Any, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("plan_node_evacuation", args)
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


def execute(sim: SimServer, source: str, steps: list[dict[str, Any]]) -> None:
    """Run each step the way an operator (or the guest_migrate write) would, and require success."""
    pve = api(sim)
    for step in steps:
        params: dict[str, Any] = {"target": step["target"]}
        if step["type"] == "qemu" and step["mode"] == "live":
            params["online"] = 1
            if step["with_local_disks"]:
                params["with-local-disks"] = 1
        if step["type"] == "lxc" and step["mode"] == "restart":
            params["restart"] = 1
        upid = getattr(pve.nodes(source), step["type"])(step["vmid"]).migrate.post(**params)
        status = wait_task(pve.nodes(source).tasks(upid).status.get, timeout=30)
        assert status["exitstatus"] == "OK", (step, status)


def remaining_non_ha(sim: SimServer, node: str) -> set[int]:
    cluster = sim.cluster
    return {
        g.vmid
        for g in cluster.guests.values()
        if g.node == node and (g.sid not in cluster.ha_resources or cluster.ha_resources[g.sid].state == "ignored")
    }


async def test_demo_plan_steps_all_succeed(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=2000)
    plan = await _plan(server_for(sim, "operator@pve!mcp"), node="pve1", allow_offline=True)
    assert plan["verdict"] == "EVACUATION_PARTIAL" and plan["complete"] is True
    assert {b["vmid"]: b["code"] for b in plan["blockers"]} == {105: "MIGRATE_PASSTHROUGH"}
    assert {h["sid"] for h in plan["ha_guests"]} == {"vm:101", "vm:102"}
    assert "node-maintenance enable pve1" in plan["ha_recommendation"]
    assert {s["vmid"] for s in plan["steps"]} == {100, 103, 104, 120, 121, 9000}
    assert all(s["target"] == "pve2" for s in plan["steps"])  # pve3 is overcommitted
    execute(sim, "pve1", plan["steps"])
    assert remaining_non_ha(sim, "pve1") == {105}


async def test_generated_cluster_evacuation(start_sim: Any, server_for: Any) -> None:
    sim = start_sim(generate(nodes=5, guests=120, seed=3), speed=5000)
    plan = await _plan(server_for(sim, "operator@pve!mcp"), node="pve01", allow_offline=True, headroom_percent=5)
    blocked = {b["vmid"] for b in plan["blockers"]}
    assert plan["steps"] and len(plan["steps"]) + len(blocked) + len(plan["ha_guests"]) >= 20
    for target in plan["targets"]:
        assert target["free_after_bytes"] >= 0
    execute(sim, "pve01", plan["steps"])
    assert remaining_non_ha(sim, "pve01") == blocked


async def test_plan_is_deterministic_and_parameters_are_validated(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim, "operator@pve!mcp")
    first = await _plan(mcp, node="pve2")
    second = await _plan(mcp, node="pve2")
    assert first == second
    assert {b["vmid"]: b["code"] for b in first["blockers"]}[106] in ("MIGRATE_LOCAL_CDROM", "MIGRATE_PVE_DISAGREES")
    async with Client(mcp) as c:
        unknown = await c.call_tool("plan_node_evacuation", {"node": "pve9"})
        bad_target = await c.call_tool("plan_node_evacuation", {"node": "pve1", "targets": ["nope"]})
        hostile = await c.call_tool("plan_node_evacuation", {"node": "pve1/../x"})
    assert unknown.is_error and "no node 'pve9'" in unknown.content[0].text
    assert bad_target.is_error and "no node 'nope' (parameter 'targets'); nodes are: pve1" in bad_target.content[0].text
    assert hostile.is_error and "invalid node" in hostile.content[0].text


async def test_check_guest_migration(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim, "operator@pve!mcp")) as c:
        blocked = plain(
            (await c.call_tool("check_guest_migration", {"vmid": 108, "target": "pve3"})).structured_content
        )
        ok = plain((await c.call_tool("check_guest_migration", {"vmid": 108})).structured_content)
        ct = plain((await c.call_tool("check_guest_migration", {"vmid": 120})).structured_content)
        ct_allowed = await c.call_tool("check_guest_migration", {"vmid": 120, "allow_offline": True})
    assert not blocked["can_move"] and blocked["blockers"][0]["code"] == "MIGRATE_CPU_HOST"
    assert ok["can_move"] and ok["target"] == "pve1" and ok["mode"] == "live" and ok["downtime"] == "none"
    assert not ct["can_move"] and ct["blockers"][0]["code"] == "MIGRATE_DOWNTIME_NOT_ALLOWED"
    assert ct_allowed.structured_content["mode"] == "restart"


async def test_auditor_token_plans_from_the_config(demo_sim: SimServer, server_for: Any) -> None:
    """Issue 15 item 8: without VM.Migrate the plan stands on config + storage and matches the operator's."""
    auditor = await _plan(server_for(demo_sim, "auditor@pve!mcp"), node="pve1")
    operator = await _plan(server_for(demo_sim, "operator@pve!mcp"), node="pve1")
    assert not [b for b in auditor["blockers"] if b["code"] == "MIGRATE_NOT_PROVABLE"]
    moves = {(s["vmid"], s["target"], s["mode"]) for s in auditor["steps"]}
    assert moves == {(s["vmid"], s["target"], s["mode"]) for s in operator["steps"]}
    assert {b["vmid"]: b["code"] for b in auditor["blockers"]} == {b["vmid"]: b["code"] for b in operator["blockers"]}
    assert {s["basis"] for s in auditor["steps"]} == {"config"}
    assert {s["basis"] for s in operator["steps"] if s["type"] == "qemu"} == {"config+pve"}
    stopped = [s for s in auditor["steps"] if s["mode"] == "offline"]
    assert stopped and all(s["memory_bytes"] == 0 for s in stopped)
