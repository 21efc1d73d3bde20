"""Issue 15 migration rules end to end: MCP client -> server -> proxmoxer -> pvesim, as PVE 8 and PVE 9.

The plan is made with the auditor token (no VM.Migrate: config + storage only) and with the
operator token (PVE's precondition as a cross-check); both must agree, and every planned step
must then succeed through PVE's migrate endpoint while every refused guest is refused by it too.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from mcp import Client
from proxmoxer import ResourceException

from pvesim.server import SimServer
from pvesim.state import ReplicationJob
from tests.conftest import wait_task
from tests.integration.pve import api
from tests.untrusted import plain

pytestmark = pytest.mark.anyio
VERSIONS = ["8.4.1", "9.1.2"]
EXPECTED_BLOCKERS = {
    302: "MIGRATE_LINKED_CLONE",
    390: "MIGRATE_LINKED_CLONE",
    306: "MIGRATE_STORAGE_CONTENT",
    310: "HA_GUEST_LEFT_BEHIND",
    311: "HA_GUEST_LEFT_BEHIND",
}


async def _call(mcp: Any, tool: str, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool(tool, args)
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


def _run(sim: SimServer, node: str, gtype: str, vmid: int, **params: Any) -> str:
    pve = api(sim)
    upid = getattr(pve.nodes(node), gtype)(vmid).migrate.post(**params)
    return str(wait_task(pve.nodes(node).tasks(upid).status.get, timeout=30)["exitstatus"])


def execute(sim: SimServer, source: str, steps: list[dict[str, Any]]) -> None:
    """Each step as an operator runs it; a running guest planned offline is stopped first."""
    pve = api(sim)
    for step in steps:
        params: dict[str, Any] = {"target": step["target"]}
        if step["mode"] == "live":
            params["online"] = 1
            if step["with_local_disks"]:
                params["with-local-disks"] = 1
        elif step["downtime"] == "full":
            upid = pve.nodes(source).qemu(step["vmid"]).status.stop.post()
            wait_task(pve.nodes(source).tasks(upid).status.get, timeout=30)
        assert _run(sim, source, step["type"], step["vmid"], **params) == "OK", step


@pytest.mark.parametrize("version", VERSIONS)
async def test_plan_follows_pve_and_every_step_succeeds(start_sim: Any, server_for: Any, version: str) -> None:
    sim = start_sim("migration", version=version, speed=2000)
    auditor = await _call(server_for(sim, "auditor@pve!mcp"), "plan_node_evacuation", node="m1", allow_offline=True)
    operator = await _call(server_for(sim, "operator@pve!mcp"), "plan_node_evacuation", node="m1", allow_offline=True)
    for plan in (auditor, operator):
        assert {b["vmid"]: b["code"] for b in plan["blockers"]} == EXPECTED_BLOCKERS, plan["blockers"]
        steps = {s["vmid"]: (s["target"], s["mode"], s["downtime"]) for s in plan["steps"]}
        assert steps[300][1:] == ("live", "none")  # cloud-init drive on local-lvm: generated, not media
        assert steps[301][1:] == ("offline", "full")  # snapshot on a non-replicated local disk: not live
        assert steps[303] == ("m3", "offline", "none")  # the gpu mapping exists on m3 only
        assert steps[304][1:] == ("offline", "full") and steps[305][1:] == ("offline", "full")
        assert steps[307][1:] == ("offline", "none")
        moved = {h["vmid"]: h["moved_by_ha"] for h in plan["ha_guests"]}
        assert moved == {310: False, 311: False, 312: True}
    assert {s["basis"] for s in auditor["steps"]} == {"config"}
    assert {s["basis"] for s in operator["steps"]} == {"config+pve"}
    assert not [f for f in operator["findings"] if f["code"] == "MIGRATE_PVE_DISAGREES"]
    execute(sim, "m1", operator["steps"])
    left = {g.vmid for g in sim.cluster.guests.values() if g.node == "m1"}
    assert left == {302, 390, 306, 310, 311, 312}


@pytest.mark.parametrize("version", VERSIONS)
def test_pvesim_refuses_what_the_plan_refuses(start_sim: Any, version: str) -> None:
    sim = start_sim("migration", version=version, speed=2000)
    assert "clone of 'base-390-disk-0'" in _run(sim, "m1", "qemu", 302, target="m2")
    assert "referenced by linked clone(s)" in _run(sim, "m1", "qemu", 390, target="m2")
    assert "non-replicated snapshot" in _run(sim, "m1", "qemu", 301, target="m2", online=1, **{"with-local-disks": 1})
    assert "local devices: amd-sev" in _run(sim, "m1", "qemu", 305, target="m2", online=1)
    assert "missing mapped devices hostpci0" in _run(sim, "m1", "qemu", 303, target="m2")
    assert _run(sim, "m1", "qemu", 300, target="m2", online=1) == "OK"
    # an HA guest: the hamigrate task runs ha-manager migrate, which refuses a service in error state
    assert _run(sim, "m1", "qemu", 310, target="m2") == "command 'ha-manager migrate vm:310 m2' failed: exit code 255"


@pytest.mark.parametrize("version", VERSIONS)
async def test_an_ha_guest_in_error_state_is_not_movable(start_sim: Any, server_for: Any, version: str) -> None:
    """What PVE's hamigrate task does with it (above): the verdict says so before anyone tries."""
    sim = start_sim("migration", version=version, speed=2000)
    move = await _call(server_for(sim, "operator@pve!mcp"), "check_guest_migration", vmid=310, allow_offline=True)
    assert not move["can_move"] and move["migratability"]["verdict"] == "blocked"
    assert "MIGRATE_HA_ERROR" in {b["code"] for b in move["blockers"]}


@pytest.mark.parametrize("version", VERSIONS)
async def test_check_guest_migration_respects_ha_affinity(start_sim: Any, server_for: Any, version: str) -> None:
    sim = start_sim("migration", version=version, speed=2000)
    mcp = server_for(sim, "operator@pve!mcp")
    move = await _call(mcp, "check_guest_migration", vmid=312)
    codes = {r["code"] for r in move["migratability"]["reasons"]}
    assert "MIGRATE_HA_MANAGED" in codes
    if version.startswith("9"):  # PVE 9 rules: vm:320 on m2 must be kept apart (blocking-ha-resources)
        assert move["can_move"] and move["target"] == "m3"
        pinned = await _call(mcp, "check_guest_migration", vmid=312, target="m2")
        assert not pinned["can_move"] and pinned["blockers"][0]["code"] == "MIGRATE_HA_AFFINITY"
    else:  # PVE 8 has no affinity rules
        assert move["can_move"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_auditor_reads_snapshot_sections_for_an_exact_verdict(
    start_sim: Any, server_for: Any, version: str
) -> None:
    """Without VM.Migrate the snapshot sections (GET config?snapshot=) still settle the snapshot rule."""
    sim = start_sim("migration", version=version, speed=2000)
    move = await _call(server_for(sim, "auditor@pve!mcp"), "check_guest_migration", vmid=301)
    reasons = move["migratability"]["reasons"]
    assert move["migratability"]["basis"] == "config"
    codes = {r["code"] for r in reasons}
    assert "MIGRATE_LIVE_UNSUPPORTED" in codes and "MIGRATE_NOT_PROVABLE" not in codes
    assert not move["can_move"] and move["blockers"][0]["code"] == "MIGRATE_DOWNTIME_NOT_ALLOWED"
    offline = await _call(server_for(sim, "auditor@pve!mcp"), "check_guest_migration", vmid=301, allow_offline=True)
    assert offline["can_move"] and offline["mode"] == "offline" and offline["downtime"] == "full"


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_snapshot_holding_a_local_iso_blocks_as_pve_does(start_sim: Any, server_for: Any, version: str) -> None:
    """A VM on shared storage only, whose snapshot still holds a local ISO: PVE refuses it ('local cdrom image',
    QemuMigrate scan_local_volumes over foreach_volid), so the verdict reads the snapshot's section too."""
    sim = start_sim("migration", version=version, speed=2000)
    pve = api(sim)
    with sim.sim.mutate() as c:
        c.guests[307].config["ide2"] = "local:iso/debian.iso,media=cdrom"
    wait_task(pve.nodes("m1").tasks(pve.nodes("m1").qemu(307).snapshot.post(snapname="install")).status.get)
    with sim.sim.mutate() as c:
        c.guests[307].config["ide2"] = "none,media=cdrom"
    assert "local cdrom image" in _run(sim, "m1", "qemu", 307, target="m2")
    for token in ("auditor@pve!mcp", "operator@pve!mcp"):
        move = await _call(server_for(sim, token), "check_guest_migration", vmid=307, allow_offline=True)
        assert not move["can_move"] and [b["code"] for b in move["blockers"]] == ["MIGRATE_LOCAL_CDROM"], token
        assert "referenced in snapshot - install" in move["blockers"][0]["detail"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_disabled_replication_job_still_replicates_for_a_live_move(
    start_sim: Any, server_for: Any, version: str
) -> None:
    """QemuMigrate takes the job to the target whether or not it is disabled (find_local_replication_job) and
    marks its volumes replicated unless replicate=0 (get_replicatable_volumes): then a snapshot does not stop
    a live move there. pvesim and both tokens' verdicts agree, both ways."""
    sim = start_sim("migration", version=version, speed=2000)
    with sim.sim.mutate() as c:
        c.replication["301-0"] = ReplicationJob("301-0", 301, "m2", disable=True)
    for token in ("auditor@pve!mcp", "operator@pve!mcp"):
        move = await _call(server_for(sim, token), "check_guest_migration", vmid=301)
        assert move["can_move"] and (move["target"], move["mode"]) == ("m2", "live"), (token, move["blockers"])
    with sim.sim.mutate() as c:  # left out of replication everywhere it is named, the snapshot too
        c.guests[301].config["scsi0"] += ",replicate=0"
        for snap in c.guests[301].snapshots.values():
            snap.config["scsi0"] += ",replicate=0"
    move = await _call(server_for(sim, "auditor@pve!mcp"), "check_guest_migration", vmid=301)
    assert not move["can_move"] and move["blockers"][0]["code"] == "MIGRATE_DOWNTIME_NOT_ALLOWED"
    live = {"online": 1, "with-local-disks": 1}
    assert "non-replicated snapshot" in _run(sim, "m1", "qemu", 301, target="m2", **live)
    with sim.sim.mutate() as c:  # the snapshot's reference alone keeps it replicated (foreach_volid merges them)
        for snap in c.guests[301].snapshots.values():
            snap.config["scsi0"] = snap.config["scsi0"].replace(",replicate=0", "")
    move = await _call(server_for(sim, "auditor@pve!mcp"), "check_guest_migration", vmid=301)
    assert move["can_move"] and (move["target"], move["mode"]) == ("m2", "live")
    assert _run(sim, "m1", "qemu", 301, target="m2", **live) == "OK"


@pytest.mark.parametrize("version", VERSIONS)
async def test_ha_moves_a_vm_with_a_local_device_by_force(start_sim: Any, server_for: Any, version: str) -> None:
    """The LRM migrates an HA VM with force (PVEVM.pm migrate): a USB host device does not stop it, a PCI
    passthrough device still cannot move live (QEMU). The verdict and pvesim agree, both ways."""
    sim = start_sim("migration", version=version, speed=2000)
    pve = api(sim)
    with sim.sim.mutate() as c:
        c.guests[312].config["usb0"] = "host=046d:c52b"
    move = await _call(server_for(sim, "auditor@pve!mcp"), "check_guest_migration", vmid=312, target="m3")
    assert move["can_move"] and move["mode"] == "live", move["blockers"]
    assert _run(sim, "m1", "qemu", 312, target="m3", online=1) == "OK"  # the hamigrate request
    wait_task(lambda: _last_migration(pve, "m1", 312), timeout=30)
    assert sim.cluster.guests[312].node == "m3"
    with sim.sim.mutate() as c:
        c.guests[312].config["hostpci0"] = "0000:41:00.0"
    move = await _call(server_for(sim, "auditor@pve!mcp"), "check_guest_migration", vmid=312, target="m1")
    assert not move["can_move"] and move["blockers"][0]["code"] == "MIGRATE_DOWNTIME_NOT_ALLOWED"
    assert _run(sim, "m3", "qemu", 312, target="m1", online=1) == "OK"
    assert (
        "QEMU cannot migrate hostpci0" in wait_task(lambda: _last_migration(pve, "m3", 312), timeout=30)["exitstatus"]
    )
    assert sim.cluster.guests[312].node == "m3"


def _last_migration(pve: Any, node: str, vmid: int) -> dict[str, Any]:
    """The newest qmigrate task of the guest on the node (the LRM's, after an HA request)."""
    tasks = list(pve.nodes(node).tasks.get(vmid=vmid, typefilter="qmigrate", source="all"))
    return pve.nodes(node).tasks(max(tasks, key=lambda t: t["starttime"])["upid"]).status.get()  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", VERSIONS)
async def test_pending_changes_do_not_decide_a_move(start_sim: Any, server_for: Any, version: str) -> None:
    """PVE's migration loads the current config (the config API applies pending changes unless current=1): a
    passthrough device pending until the next start does not pin the running VM; one pending removal still does."""
    sim = start_sim("migration", version=version, speed=2000)
    with sim.sim.mutate() as c:
        c.guests[300].pending["hostpci0"] = "0000:41:00.0"
    for token in ("auditor@pve!mcp", "operator@pve!mcp"):
        move = await _call(server_for(sim, token), "check_guest_migration", vmid=300)
        assert move["can_move"] and move["mode"] == "live", (token, move["blockers"])
    with sim.sim.mutate() as c:
        c.guests[300].pending.clear()
        c.guests[300].config["hostpci0"] = "0000:41:00.0"
        c.guests[300].pending_delete["hostpci0"] = False
    move = await _call(server_for(sim, "auditor@pve!mcp"), "check_guest_migration", vmid=300, allow_offline=True)
    assert not move["can_move"] and move["blockers"][0]["code"] == "MIGRATE_PASSTHROUGH"
    assert "local devices: hostpci0" in _run(sim, "m1", "qemu", 300, target="m2", online=1)


async def test_an_auditors_verdict_for_an_ha_guest_follows_its_rules(start_sim: Any, server_for: Any) -> None:
    """Without VM.Migrate there is no precondition: the verdict applies the negative partner itself (PVE 9)."""
    sim = start_sim("migration", version="9.1.2", speed=2000)
    async with Client(server_for(sim, "auditor@pve!mcp")) as c:
        found = plain((await c.call_tool("diagnose_migratability", {"vmid": 312})).structured_content)
    verdict = found["guests"][0]
    blocked = {n for t in verdict["targets"] for n in t["nodes"] if not t["mode"]}
    assert "m2" in blocked and any("vm:320" in str(t["reasons"]) for t in verdict["targets"])


async def test_ha_migrate_follows_the_crms_resource_affinity(start_sim: Any, server_for: Any) -> None:
    """pve-ha-manager Manager.pm queue_resource_motion (PVE 9): a negative partner on the target refuses the
    command (the API answers with blocking-resources, nothing moves); positive partners go along
    (comigrated-resources). The preview says so before anyone confirms."""
    sim = start_sim("migration", version="9.1.2", speed=2000)
    pve = api(sim)
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        refused = await c.call_tool("ha_migrate", {"vmid": 312, "node": "m2"})
    assert refused.is_error and "kept apart from vm:320" in refused.content[0].text
    answer = pve.cluster.ha.resources("vm:312").migrate.post(node="m2")
    assert answer["blocking-resources"] == [{"sid": "vm:320", "cause": "resource-affinity"}]
    with sim.sim.mutate() as c:
        c.ha_rules["pair"] = {"type": "resource-affinity", "affinity": "positive", "resources": "vm:312,vm:311"}
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = (await c.call_tool("ha_migrate", {"vmid": 312, "node": "m3"})).structured_content
    assert body is not None and any("partners vm:311 to m3" in e for e in body["effects"])
    answer = pve.cluster.ha.resources("vm:312").migrate.post(node="m3")
    assert answer["comigrated-resources"] == ["vm:311"]
    deadline = time.monotonic() + 30
    where: dict[int, str] = {}
    while set(where.values()) != {"m3"} and time.monotonic() < deadline:  # pvesim ends tasks as they are read
        time.sleep(0.05)
        where = {
            int(r["vmid"]): str(r["node"]) for r in pve.cluster.resources.get(type="vm") if r["vmid"] in (311, 312)
        }
    assert where == {311: "m3", 312: "m3"}


@pytest.mark.parametrize("version", VERSIONS)
def test_pvesim_precondition_rows_as_pve_builds_them(start_sim: Any, version: str) -> None:
    """migrate_vm_precondition: cloud-init rows, mapped resources, snapshot references, HA blocking (PVE 9)."""
    pve = api(start_sim("migration", version=version))
    m1 = pve.nodes("m1").qemu
    ci = {d["volid"]: d for d in m1(300).migrate.get()["local_disks"]}
    assert ci["local-lvm:vm-300-cloudinit"]["cdrom"] and ci["local-lvm:vm-300-cloudinit"]["is_cloudinit"]
    usb = m1(304).migrate.get()
    assert usb["local_resources"] == ["usb0"] and usb["mapped-resource-info"] == {"usb0": {"name": "dongle"}}
    gpu = m1(303).migrate.get()
    assert gpu["local_resources"] == [] and gpu["allowed_nodes"] == ["m3"]
    assert gpu["not_allowed_nodes"]["m2"] == {"unavailable-resources": ["hostpci0"]}
    assert m1(305).migrate.get()["local_resources"] == ["amd-sev"]
    snap = m1(301).migrate.get()["local_disks"][0]
    assert snap["referenced_in_snapshot"] == {"before_upgrade": 1} and snap["is_attached"]
    ha = m1(312).migrate.get()
    if version.startswith("9"):
        assert ha["not_allowed_nodes"]["m2"]["blocking-ha-resources"] == [
            {"sid": "vm:320", "cause": "resource-affinity"}
        ]
        assert ha["allowed_nodes"] == ["m3"] and ha["has-dbus-vmstate"]
    else:
        assert ha["allowed_nodes"] == ["m2", "m3"] and "has-dbus-vmstate" not in ha
    with pytest.raises(Exception, match="content type 'images' is not available on storage 'isos'"):
        m1(306).migrate.post(target="m2")


@pytest.mark.parametrize("version", VERSIONS)
def test_pvesim_migrate_applies_pves_replication_checks(start_sim: Any, version: str) -> None:
    """qemu-server API2/Qemu.pm migrate_vm: a running replicated VM may live-migrate to any of its jobs'
    targets (find_local_replication_job), and these checks come before the HA branch; QemuMigrate.pm prepare
    (in the task) refuses only when the job to the target is marked for removal."""
    sim = start_sim("migration", version=version, speed=2000)
    pve = api(sim)
    live = {"online": 1, "with-local-disks": 1}
    with sim.sim.mutate() as c:
        c.replication["300-0"] = ReplicationJob("300-0", 300, "m2", remove_job="full")
    with pytest.raises(ResourceException, match="node 'm3' - not a replication target"):
        pve.nodes("m1").qemu(300).migrate.post(target="m3", **live)
    with sim.sim.mutate() as c:
        c.replication["300-1"] = ReplicationJob("300-1", 300, "m3")
    # the API accepts the move to m2; the task refuses it, the job to m2 being marked for removal
    assert _run(sim, "m1", "qemu", 300, target="m2", **live) == (
        "refusing to migrate replicated VM whose replication job is marked for removal"
    )
    assert _run(sim, "m1", "qemu", 300, target="m3", **live) == "OK"  # another job's removal does not matter
    assert sim.cluster.guests[300].node == "m3"
    # an HA-managed VM meets the same checks before PVE hands it to the HA manager
    with sim.sim.mutate() as c:
        c.replication["312-0"] = ReplicationJob("312-0", 312, "m2")
    with pytest.raises(ResourceException, match="node 'm3' - not a replication target"):
        pve.nodes("m1").qemu(312).migrate.post(target="m3", online=1)
    with pytest.raises(ResourceException, match="can't migrate running VM without --online"):
        pve.nodes("m1").qemu(312).migrate.post(target="m2")
    with sim.sim.mutate() as c:
        c.guests[312].config["lock"] = "backup"
    with pytest.raises(ResourceException, match=r"VM is locked \(backup\)"):
        pve.nodes("m1").qemu(312).migrate.post(target="m2", online=1)
