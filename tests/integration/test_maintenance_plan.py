"""Issue 41 end to end (MCP client -> server -> proxmoxer -> pvesim's 'maintenance' scenario): the plan in phases,
HA's room first, the stop list, readiness, duplicate IPs, and the single disagreements with PVE (aliased volumes,
HA disarmed, LRMs in doubt on online nodes, unapplied SDN subnets)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.conftest import wait_task
from tests.integration.pve import api
from tests.integration.test_planning import execute
from tests.untrusted import plain

pytestmark = pytest.mark.anyio
GiB = 1024**3


async def _call(mcp: Any, tool: str, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool(tool, args)
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


async def _plan(sim: SimServer, server_for: Any, **args: Any) -> dict[str, Any]:
    return await _call(server_for(sim, "operator@pve!mcp"), "plan_node_evacuation", node="p1", **args)


def _committed(sim: SimServer, node: str) -> int:
    """Configured memory of the node's running guests (what HA's moves and ours must fit beside)."""
    return sum(g.maxmem for g in sim.cluster.guests.values() if g.node == node and g.status == "running")


@pytest.mark.parametrize("version", ["8.4.1", "9.1.2"])  # PVE 8: the rule is a restricted group
async def test_ha_room_is_reserved_first_and_nothing_else_moves_into_it(
    start_sim: Any, server_for: Any, version: str
) -> None:
    sim = start_sim("maintenance", speed=2000, version=version)
    plan = await _plan(sim, server_for, allow_offline=True)
    ha = {h["vmid"]: h for h in plan["ha_guests"]}
    assert ha[200]["ha_targets"] == ["p2"] and ha[200]["ha_target_provable"] and ha[200]["problems"] == []
    assert ha[201]["ha_targets"] == ["p3"]  # basic scheduler: fewer services than p2 once vm:200 is there
    assert {(r["node"], tuple(r["vmids"]), r["memory_bytes"]) for r in plan["reserved"]} == {
        ("p2", (200,), 20 * GiB),
        ("p3", (201,), 4 * GiB),
    }
    assert [p["name"] for p in plan["phases"]] == ["ha", "keep_running", "rest", "stop_for_window"]
    assert plan["phases"][0]["vmids"] == [200, 201]
    assert not {b["vmid"] for b in plan["blockers"]} & {200, 201}
    targets = {t["node"]: t for t in plan["targets"]}
    assert targets["p2"]["reserved_bytes"] == 20 * GiB and targets["p2"]["free_after_bytes"] >= 0
    assert "First put p1 into HA maintenance mode" in plan["ha_recommendation"]
    # run the plan as an operator would: HA first (what maintenance does, as the CRM's requests), then the steps
    pve = api(sim)
    for sid, target in (("vm:200", "p2"), ("vm:201", "p3")):
        pve.cluster.ha.resources(sid).migrate.post(node=target)
    execute(sim, "p1", plan["steps"])
    for node in ("p2", "p3"):
        total = sim.cluster.nodes[node].memory_total
        assert _committed(sim, node) <= total - int(total * 0.1), node  # within the plan's 10 % headroom


async def test_a_short_cluster_yields_a_stop_list_non_production_first(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("maintenance", speed=2000)
    plan = await _plan(sim, server_for, allow_offline=True)
    stops = plan["stop_for_window"]
    assert [(s["vmid"], s["production"]) for s in stops] == [(101, False), (102, False), (107, True)]
    assert all(s["memory_bytes"] > 0 and s["why"] and s["node"] == "p1" for s in stops)
    assert "tag test" in stops[0]["signals"] and "even after stopping every non-production guest" in stops[2]["why"]
    assert plan["stop_sufficient"] is True and plan["stop_for_window_total"] == 3
    assert plan["phases"][3]["vmids"] == [101, 102, 107]
    paged = await _plan(sim, server_for, allow_offline=True, limit=1)  # the lists are paged like the steps
    assert [s["vmid"] for s in paged["stop_for_window"]] == [101] and paged["stop_for_window_total"] == 3
    assert len(paged["readiness"]["onboot_on_return"]) == 1 and paged["readiness"]["counts"]["onboot_on_return"] == 4
    assert {s["vmid"] for s in plan["steps"] if s["phase"] == "keep_running"} == {100, 106, 108, 109}
    # the request overrides the heuristics: keeping 101 running makes it production, 107 may stop
    kept = await _plan(sim, server_for, allow_offline=True, keep_running=[101], may_stop=[107])
    flags = {s["vmid"]: s["production"] for s in kept["stop_for_window"]}
    assert flags[107] is False and flags.get(101, True) is True
    assert kept["parameters"]["keep_running_vmids"] == [101]


async def test_onboot_starts_and_a_duplicate_ip_are_named(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("maintenance", speed=2000)
    plan = await _plan(sim, server_for, allow_offline=True)
    ready = plan["readiness"]
    starts = {(o["vmid"], o["when"]) for o in ready["onboot_on_return"]}
    assert {(103, "node_returns"), (104, "target_boots"), (101, "node_returns")} <= starts
    assert {(c["kind"], c["address"], c["vmid"], c["other_vmid"]) for c in ready["address_clashes"]} == {
        ("ip", "10.1.0.50", 103, 300)
    }
    assert ready["ha_shutdown_policy"] == "conditional" and "ignores the shutdown policy" in ready["ha_policy_note"]
    assert [(b["vmid"], b["age_hours"]) for b in ready["stale_backups"]] == [(101, 120.0)]
    assert ready["not_provable"] == []
    report = await _call(server_for(sim, "auditor@pve!mcp"), "check_cluster_health", areas=["guests"], detail=True)
    dup = {
        (f["subject"]["id"], f["severity"], f["evidence"]["source"], tuple(f["evidence"]["also_used_by"]))
        for f in report["findings"]
        if f["code"] == "GUEST_IP_DUPLICATE"
    }
    # 110's OS holds erp's address, set by hand: its guest agent reports it (docker0's is no NIC of PVE's)
    assert dup == {
        ("103", "warning", "config", (300,)),
        ("300", "warning", "config", (103,)),
        ("100", "critical", "config", (110,)),
        ("110", "critical", "agent", (100,)),
    }
    clash = [f for f in report["findings"] if f["code"] == "GUEST_ONBOOT_ADDRESS_CLASH"]
    assert [(f["subject"]["id"], f["evidence"]["address"], f["evidence"]["running"]) for f in clash] == [
        ("103", "10.1.0.50", [300])
    ]


async def test_aliased_volumes_are_refused_by_pve_and_blocked_by_the_plan(start_sim: Any, server_for: Any) -> None:
    """qemu-server QemuMigrate.pm scan_local_volumes: one image through two storages dies 'detected not supported
    aliased volumes', offline too."""
    sim = start_sim("maintenance", speed=2000)
    plan = await _plan(sim, server_for, allow_offline=True)
    assert {b["vmid"]: b["code"] for b in plan["blockers"]}[105] == "MIGRATE_ALIASED_VOLUME"
    move = await _call(server_for(sim, "operator@pve!mcp"), "check_guest_migration", vmid=105, allow_offline=True)
    assert not move["can_move"] and move["blockers"][0]["code"] == "MIGRATE_ALIASED_VOLUME"
    pve = api(sim)
    upid = pve.nodes("p1").qemu(105).migrate.post(target="p2")
    status = wait_task(pve.nodes("p1").tasks(upid).status.get, timeout=30)
    assert "detected not supported aliased volumes" in status["exitstatus"]
    assert sim.cluster.guests[105].node == "p1"


@pytest.mark.parametrize(
    ("lrm", "text", "code"),
    [
        ("dead", "old timestamp - dead?", "HA_LRM_DEAD"),
        ("unreadable", "unable to read lrm status", "HA_LRM_DEAD"),
        ("time_drift", "detected time drift!", "HA_LRM_TIME_DRIFT"),
    ],
)
async def test_an_online_node_whose_lrm_is_in_doubt_is_no_target(
    start_sim: Any, server_for: Any, lrm: str, text: str, code: str
) -> None:
    sim = start_sim("maintenance", speed=2000)
    sim.cluster.nodes["p3"].lrm = lrm
    pve = api(sim)
    rows = {r["id"]: r for r in pve.cluster.ha.status.current.get()}
    assert rows["lrm:p3"]["status"].startswith(f"p3 ({text}")
    assert ("timestamp" in rows["lrm:p3"]) is (lrm != "unreadable")
    manager = pve.cluster.ha.status.manager_status.get()
    assert manager["manager_status"]["node_status"]["p3"] == "online"  # the CRM still counts it online
    health = await _call(server_for(sim, "auditor@pve!mcp"), "check_cluster_health", areas=["ha"], detail=True)
    assert (code, "p3") in {(f["code"], f["subject"]["id"]) for f in health["findings"]}
    plan = await _plan(sim, server_for, allow_offline=True)
    assert "p3" in plan["excluded_targets"] and "our policy" in plan["excluded_targets"]["p3"]
    assert all(s["target"] == "p2" for s in plan["steps"])
    assert {b["vmid"]: b["code"] for b in plan["blockers"]}[201] == code  # HA's scheduler still picks p3


async def test_ha_disarmed_freeze_and_ignore(start_sim: Any, server_for: Any) -> None:
    """pve-ha-manager 5.1.3+ disarm-ha: maintenance requests are ignored (Manager.pm update_crm_commands); freeze
    applies no command, ignore hands the resources to plain migrations (Config.pm $service_check_ha_state)."""
    sim = start_sim("maintenance", speed=2000)
    sim.cluster.ha_disarm = {"mode": "freeze", "state": "disarmed"}
    pve = api(sim)
    rows = {r["id"]: r for r in pve.cluster.ha.status.current.get()}
    assert rows["fencing"]["armed-state"] == "disarmed" and rows["fencing"]["resource_mode"] == "freeze"
    assert "disarm mode, watchdog released" in rows["lrm:p2"]["status"]
    assert rows["service:vm:200"]["crm_state"] == "freeze"
    assert pve.cluster.ha.status.manager_status.get()["manager_status"]["disarm"] == {
        "mode": "freeze",
        "state": "disarmed",
    }
    frozen = await _plan(sim, server_for, allow_offline=True)
    advice = frozen["ha_recommendation"]
    assert advice.startswith("HA is disarmed in freeze mode") and "Re-arm HA" in advice
    assert "First put p1 into HA maintenance" not in advice
    assert all(not h["moved_by_ha"] for h in frozen["ha_guests"]) and frozen["reserved"] == []
    assert {b["vmid"] for b in frozen["blockers"] if b["code"] == "HA_GUEST_LEFT_BEHIND"} == {200, 201}
    pve.cluster.ha.resources("vm:201").migrate.post(node="p3")  # queued, never carried out while disarmed
    assert sim.cluster.guests[201].node == "p1"

    sim.cluster.ha_disarm = {"mode": "ignore", "state": "disarmed"}
    ignored = await _plan(sim, server_for, allow_offline=True)
    assert ignored["ha_guests"] == [] and "Do not enable HA maintenance" in ignored["ha_recommendation"]
    step = next(s for s in ignored["steps"] if s["vmid"] == 201)
    execute(sim, "p1", [step])  # a plain migration: PVE no longer routes it through HA
    assert sim.cluster.guests[201].node == step["target"]


async def test_unapplied_subnets_are_pending_sdn_changes(start_sim: Any, server_for: Any) -> None:
    """pve-network SDN.pm has_pending_changes counts subnets; Subnets.pm index with pending=1 shows them."""
    sim = start_sim("maintenance", speed=2000)
    pve = api(sim)
    rows = pve.cluster.sdn.vnets("vnet1").subnets.get(pending=1)
    new = next(r for r in rows if r["subnet"] == "zone1-10.9.1.0-24")
    assert new["state"] == "new" and new["pending"] == {"gateway": "10.9.1.1"} and new["cidr"] == "10.9.1.0/24"
    assert [r["subnet"] for r in pve.cluster.sdn.vnets("vnet1").subnets.get()] == [
        "zone1-10.9.0.0-24",
        "zone1-10.9.1.0-24",
    ]
    assert [r["subnet"] for r in pve.cluster.sdn.vnets("vnet1").subnets.get(running=1)] == ["zone1-10.9.0.0-24"]
    report = await _call(server_for(sim, "auditor@pve!mcp"), "check_cluster_health", areas=["sdn"], detail=True)
    pending = [
        (f["subject"]["id"], f["evidence"]["state"]) for f in report["findings"] if f["code"] == "SDN_CONFIG_PENDING"
    ]
    assert pending == [("zone1-10.9.1.0-24", "new")] and report["complete"] is True


async def test_options_a_token_sees_only_in_part_are_not_taken_for_defaults(start_sim: Any, server_for: Any) -> None:
    """Without Sys.Audit on / PVE answers /cluster/options with console and tag-style only (pve-manager
    API2/Cluster.pm get_options): that must not read as 'basic scheduler, conditional policy'."""
    import pvesim
    from pvesim.scenario import DEFAULT_TOKENS

    data = pvesim.load_scenario("maintenance")
    scoped = [{"path": p, "role": "PVEAuditor"} for p in ("/nodes", "/vms", "/storage")]
    data["tokens"] = [*DEFAULT_TOKENS, {"id": "scoped@pve!mcp", "user_acl": scoped, "acl": scoped}]
    sim = start_sim(data, speed=2000)
    plan = await _call(server_for(sim, "scoped@pve!mcp"), "plan_node_evacuation", node="p1", allow_offline=True)
    ready = plan["readiness"]
    assert ready["ha_shutdown_policy"] is None
    assert any("HA shutdown policy" in g for g in ready["not_provable"])
