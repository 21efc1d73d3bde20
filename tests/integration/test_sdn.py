"""SDN end to end: MCP client -> server -> proxmoxer -> pvesim's SDN model, as PVE 8 and PVE 9.

The demo plants: vnet lab20 failing its status check on pve2 (zone lab 'error' there), zone dmz created
but not applied, fabric fab1 'not ok' on pve3, and VM 104 with a NIC on vnet tenant1 whose zone
'tenants' covers pve1 and pve2 only.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.conftest import wait_task
from tests.integration.pve import api
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


async def _call(mcp: Any, tool: str, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool(tool, args)
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


def _sdn(report: dict[str, Any]) -> set[tuple[str, str, str | None]]:
    return {
        (f["code"], f["subject"]["id"], f["subject"].get("node"))
        for f in report["findings"]
        if f["code"].startswith("SDN_")
    }


@pytest.mark.parametrize("version", ["8.4.1", "9.1.2"])
async def test_sdn_findings_in_the_health_check(start_sim: Any, server_for: Any, version: str) -> None:
    sim = start_sim("demo", version=version)
    report = await _call(server_for(sim, "auditor@pve!mcp"), "check_cluster_health", areas=["sdn"], detail=True)
    expected = {("SDN_ZONE_ERROR", "lab", "pve2"), ("SDN_CONFIG_PENDING", "dmz", None)}
    if version.startswith("9"):  # fabrics (and their status in /cluster/resources) came with PVE 9
        expected.add(("SDN_FABRIC_NOT_OK", "fab1", "pve3"))
        expected |= {("SDN_FABRIC_NEIGHBOR_DOWN", "fab1", n) for n in ("pve1", "pve2", "pve3")}
    assert _sdn(report) == expected
    assert report["complete"] is True
    if version.startswith("9"):
        down = {f["evidence"]["neighbor"] for f in report["findings"] if f["code"] == "SDN_FABRIC_NEIGHBOR_DOWN"}
        assert down == {"pve1", "pve2", "pve3"}  # pve1 and pve2 lost pve3; pve3 lost both


async def test_a_zone_not_applied_on_a_node_is_pending(start_sim: Any, server_for: Any) -> None:
    from pvesim import load_scenario

    data = load_scenario("demo")
    data["sdn"]["reload_pending"] = ["pve3"]
    sim = start_sim(data)
    report = await _call(server_for(sim, "auditor@pve!mcp"), "check_cluster_health", areas=["sdn"], detail=True)
    assert ("SDN_ZONE_PENDING", "lab", "pve3") in _sdn(report)


async def test_vnet_zone_makes_a_target_ineligible_in_the_plan(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=2000)
    mcp = server_for(sim, "operator@pve!mcp")
    only_pve3 = await _call(mcp, "plan_node_evacuation", node="pve1", targets=["pve3"], allow_offline=True)
    blockers = {b["vmid"]: b for b in only_pve3["blockers"]}
    assert blockers[104]["code"] == "MIGRATE_SDN_VNET_UNAVAILABLE", only_pve3["blockers"]
    assert "tenant1" in blockers[104]["detail"]
    assert 104 not in {s["vmid"] for s in only_pve3["steps"]}
    plan = await _call(mcp, "plan_node_evacuation", node="pve1", allow_offline=True)
    assert {s["vmid"]: s["target"] for s in plan["steps"]}[104] == "pve2"


async def test_check_guest_migration_refuses_a_target_outside_the_zone(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=2000)
    mcp = server_for(sim, "operator@pve!mcp")
    move = await _call(mcp, "check_guest_migration", vmid=104, target="pve3")
    assert move["can_move"] is False
    assert [b["code"] for b in move["blockers"]] == ["MIGRATE_SDN_VNET_UNAVAILABLE"]
    ok = await _call(mcp, "check_guest_migration", vmid=104, target="pve2")
    assert ok["can_move"] is True and ok["mode"] == "live"
    # and PVE agrees: the live move to pve3 fails when the target creates the NIC (no bridge: the running zone
    # config leaves pve3 out, Zones.pm tap_create -> read_bridge_mtu), the one to pve2 succeeds
    pve = api(sim)
    upid = pve.nodes("pve1").qemu(104).migrate.post(target="pve3", online=1)
    status = wait_task(pve.nodes("pve1").tasks(upid).status.get, timeout=30)
    assert "bridge 'tenant1' does not exist" in str(status["exitstatus"])
    upid = pve.nodes("pve1").qemu(104).migrate.post(target="pve2", online=1)
    assert wait_task(pve.nodes("pve1").tasks(upid).status.get, timeout=30)["exitstatus"] == "OK"


async def test_an_unapplied_zone_edit_refuses_a_node_the_running_zone_has(start_sim: Any, server_for: Any) -> None:
    from pvesim import load_scenario

    data = load_scenario("demo")
    tenants = next(z for z in data["sdn"]["zones"] if z["id"] == "tenants")
    tenants["pending"] = {"nodes": ["pve1"]}  # edited, not applied: pve2 keeps its bridge
    sim = start_sim(data, speed=2000)
    mcp = server_for(sim, "operator@pve!mcp")
    move = await _call(mcp, "check_guest_migration", vmid=104, target="pve2")
    assert move["can_move"] is False
    assert [b["code"] for b in move["blockers"]] == ["MIGRATE_SDN_VNET_UNAVAILABLE"]
    # PVE: Zones.pm tap_plug reads the edited zone (get_plugin_config) and refuses pve2
    pve = api(sim)
    upid = pve.nodes("pve1").qemu(104).migrate.post(target="pve2", online=1)
    status = wait_task(pve.nodes("pve1").tasks(upid).status.get, timeout=30)
    assert "vnet tenant1 is not allowed on this node" in str(status["exitstatus"])


async def test_a_zone_in_error_blocks_only_the_failing_vnet(start_sim: Any, server_for: Any) -> None:
    from pvesim import load_scenario

    data = load_scenario("demo")
    data["sdn"]["vnets"].append({"id": "lab30", "zone": "lab", "tag": 30})  # healthy sibling of lab20
    vm = next(g for g in data["guests"] if g["vmid"] == 104)
    vm["config"]["net1"] = "virtio=BC:24:11:3A:11:04,bridge=lab30"
    sim = start_sim(data, speed=2000)
    mcp = server_for(sim, "operator@pve!mcp")
    report = await _call(mcp, "check_cluster_health", areas=["sdn"], detail=True)
    assert ("SDN_ZONE_ERROR", "lab", "pve2") in _sdn(report)  # zone lab is 'error' on pve2 (lab20 fails)
    move = await _call(mcp, "check_guest_migration", vmid=104, target="pve2")
    assert move["can_move"] is True, move["blockers"]
    vm["config"]["net1"] = "virtio=BC:24:11:3A:11:04,bridge=lab20"
    sim = start_sim(data, speed=2000)
    move = await _call(server_for(sim, "operator@pve!mcp"), "check_guest_migration", vmid=104, target="pve2")
    assert [b["code"] for b in move["blockers"]] == ["MIGRATE_SDN_VNET_UNAVAILABLE"]
    assert "missing vmbr0v20" in move["blockers"][0]["detail"]


async def test_a_vlan_tag_on_a_vnet_that_is_not_vlan_aware(start_sim: Any, server_for: Any) -> None:
    from pvesim import load_scenario

    data = load_scenario("demo")
    vm = next(g for g in data["guests"] if g["vmid"] == 104)
    vm["config"]["net1"] = "virtio=BC:24:11:3A:11:04,bridge=tenant1,tag=7"
    sim = start_sim(data, speed=2000)
    move = await _call(server_for(sim, "operator@pve!mcp"), "check_guest_migration", vmid=104, target="pve2")
    assert [b["code"] for b in move["blockers"]] == ["MIGRATE_SDN_VNET_UNAVAILABLE"]
    assert "not VLAN-aware" in move["blockers"][0]["detail"]
    # PVE: Zones/Plugin.pm tap_plug on the target
    pve = api(sim)
    upid = pve.nodes("pve1").qemu(104).migrate.post(target="pve2", online=1)
    status = wait_task(pve.nodes("pve1").tasks(upid).status.get, timeout=30)
    assert "vm vlans are not allowed on vnet tenant1" in str(status["exitstatus"])
    next(v for v in data["sdn"]["vnets"] if v["id"] == "tenant1")["vlanaware"] = 1
    sim = start_sim(data, speed=2000)
    move = await _call(server_for(sim, "operator@pve!mcp"), "check_guest_migration", vmid=104, target="pve2")
    assert move["can_move"] is True, move["blockers"]
    upid = api(sim).nodes("pve1").qemu(104).migrate.post(target="pve2", online=1)
    assert wait_task(api(sim).nodes("pve1").tasks(upid).status.get, timeout=30)["exitstatus"] == "OK"


async def test_a_guest_on_a_vnet_not_applied_yet_has_no_target(start_sim: Any, server_for: Any) -> None:
    from pvesim import load_scenario

    data = load_scenario("demo")
    data["sdn"]["vnets"].append({"id": "stage", "zone": "lab", "tag": 40, "state": "new"})
    vm = next(g for g in data["guests"] if g["vmid"] == 104)
    vm["config"]["net1"] = "virtio=BC:24:11:3A:11:04,bridge=stage"
    sim = start_sim(data, speed=2000)
    move = await _call(server_for(sim, "operator@pve!mcp"), "check_guest_migration", vmid=104, target="pve2")
    assert [b["code"] for b in move["blockers"]] == ["MIGRATE_SDN_VNET_UNAVAILABLE"]
    # PVE: Zones.pm tap_create falls back to the classic bridge, which does not exist
    pve = api(sim)
    upid = pve.nodes("pve1").qemu(104).migrate.post(target="pve2", online=1)
    status = wait_task(pve.nodes("pve1").tasks(upid).status.get, timeout=30)
    assert "bridge 'stage' does not exist" in str(status["exitstatus"])


@pytest.mark.parametrize("version", ["8.4.1", "9.1.2"])
async def test_an_unapplied_controller_change_is_pending(start_sim: Any, server_for: Any, version: str) -> None:
    from pvesim import load_scenario

    data = load_scenario("demo")
    data["sdn"]["controllers"] = [
        {"id": "evpn1", "type": "evpn", "asn": 65000, "peers": "10.0.0.11"},
        {"id": "evpn2", "type": "evpn", "asn": 65001, "peers": "10.0.0.12", "pending": {"asn": 65002}},
    ]
    sim = start_sim(data, version=version)
    report = await _call(server_for(sim, "auditor@pve!mcp"), "check_cluster_health", areas=["sdn"], detail=True)
    pending = {
        (f["subject"]["kind"], f["subject"]["id"]) for f in report["findings"] if f["code"] == "SDN_CONFIG_PENDING"
    }
    assert pending == {("sdn_zone", "dmz"), ("sdn_controller", "evpn2")}
    rows = api(sim).cluster.sdn.controllers.get(pending=1)
    assert {r["controller"]: r.get("state") for r in rows} == {"evpn1": None, "evpn2": "changed"}
