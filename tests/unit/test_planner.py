"""The pure evacuation planner on fixtures: conservative, deterministic, honest about blockers."""

from __future__ import annotations

import random

from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.analysis.planner.guest_move import plan_guest_move
from tests.unit.pve_fixtures import (
    GiB,
    cluster_status,
    data,
    guest_row,
    lxc_config,
    node_row,
    qemu_config,
    storage_cfg,
)

STORAGES = [storage_cfg("ceph-vm", "rbd"), storage_cfg("local-lvm", "lvmthin"), storage_cfg("local", "dir", "iso")]
AMD = {"cpuinfo": {"model": "AMD EPYC"}}
INTEL = {"cpuinfo": {"model": "Intel Xeon"}}


def _node_status(total_gib: int, used_gib: int, cpu: dict) -> dict:  # type: ignore[type-arg]
    return {"memory": {"total": total_gib * GiB, "used": used_gib * GiB}, **cpu}


def cluster(
    guests: list[tuple[dict, dict]],
    nodes: dict[str, tuple[int, int, dict]] | None = None,
    online: dict[str, bool] | None = None,
    **kw,
) -> ClusterData:  # type: ignore[no-untyped-def,type-arg]
    nodes = nodes or {"src": (128, 10, AMD), "a": (64, 0, AMD), "b": (64, 0, AMD)}
    online = online or dict.fromkeys(nodes, True)
    rows = [node_row(n, online=online[n], maxmem=spec[0] * GiB, mem=spec[1] * GiB) for n, spec in nodes.items()]
    d = data(
        cluster_status=cluster_status(online),
        resources=rows + [g for g, _ in guests],
        storage_config=STORAGES,
        configs={g["vmid"]: c for g, c in guests},
        node_status={n: _node_status(*spec) for n, spec in nodes.items() if online[n]},
        **kw,
    )
    d.preconditions = {
        g["vmid"]: {"running": 1, "local_resources": [], "local_disks": [], "not_allowed_nodes": {}}
        for g, _ in guests
        if g["type"] == "qemu"
    }
    return d


def vm(vmid: int, mem_gib: float, node: str = "src", status: str = "running", **cfg) -> tuple[dict, dict]:  # type: ignore[no-untyped-def,type-arg]
    mib = int(mem_gib * 1024)
    cfg = {"scsi0": f"ceph-vm:vm-{vmid}-disk-0,size=8G", **cfg}
    return guest_row(vmid, node, status=status, memory_mib=mib), qemu_config(f"vm{vmid}", memory=str(mib), **cfg)


def test_simple_plan_balances_largest_first() -> None:
    d = cluster([vm(100, 16), vm(101, 8), vm(102, 4), vm(103, 2, status="stopped")])
    plan = plan_evacuation(d, "src", headroom_pct=0)
    assert plan.verdict == "EVACUATION_READY" and plan.blockers == []
    placed = {s.vmid: s.target for s in plan.steps}
    assert placed == {100: "a", 101: "b", 102: "b", 103: "b"}  # 100 goes to a (tie on free memory: name order)
    assert [s.order for s in plan.steps] == [1, 2, 3, 4] and plan.steps[-1].downtime == "none"
    by_node = {t.node: t for t in plan.targets}
    assert by_node["a"].planned_bytes == 16 * GiB and by_node["b"].planned_bytes == 12 * GiB
    assert by_node["a"].free_after_bytes == 48 * GiB


def test_capacity_exactly_at_the_limit_and_headroom() -> None:
    nodes = {"src": (64, 0, AMD), "a": (32, 0, AMD)}
    exact = plan_evacuation(cluster([vm(100, 32)], nodes), "src", headroom_pct=0)
    assert exact.verdict == "EVACUATION_READY" and exact.targets[0].free_after_bytes == 0
    over = plan_evacuation(cluster([vm(100, 32)], nodes), "src", headroom_pct=10)
    assert over.verdict == "EVACUATION_BLOCKED" and [b.code for b in over.blockers] == ["MIGRATE_CAPACITY"]
    used = plan_evacuation(cluster([vm(100, 20)], {"src": (64, 0, AMD), "a": (32, 16, AMD)}), "src", headroom_pct=0)
    assert used.verdict == "EVACUATION_BLOCKED"  # the target's used memory counts when larger


def test_configured_memory_not_usage_is_reserved() -> None:
    guests = [vm(100, 40)]
    guests[0][0]["mem"] = 1 * GiB  # barely used, but configured 40 GiB
    plan = plan_evacuation(cluster(guests, {"src": (64, 0, AMD), "a": (32, 0, AMD)}), "src", headroom_pct=0)
    assert plan.blockers[0].code == "MIGRATE_CAPACITY"


def test_all_targets_full_and_one_offline() -> None:
    nodes = {"src": (128, 0, AMD), "a": (16, 15, AMD), "b": (64, 0, AMD)}
    online = {"src": True, "a": True, "b": False}
    plan = plan_evacuation(cluster([vm(100, 8)], nodes, online), "src", headroom_pct=0)
    assert plan.excluded_targets == {"b": "offline"} and plan.blockers[0].code == "MIGRATE_CAPACITY"
    assert plan.verdict == "EVACUATION_BLOCKED"


def test_ha_guests_are_never_scheduled() -> None:
    d = cluster(
        [vm(100, 4), vm(101, 4)],
        ha_resources=[{"sid": "vm:101", "type": "vm", "state": "started"}],
        ha_rules=[{"rule": "pin", "type": "node-affinity", "resources": "vm:101", "nodes": "src,a", "strict": 1}],
    )
    plan = plan_evacuation(d, "src")
    assert [s.vmid for s in plan.steps] == [100] and plan.verdict == "EVACUATION_READY"
    assert plan.ha_guests[0].sid == "vm:101" and "strict" in plan.ha_guests[0].constraints[0]
    assert "node-maintenance enable src" in (plan.ha_recommendation or "")


def test_ha_guest_that_would_stall_maintenance_is_a_blocker() -> None:
    d = cluster([vm(101, 4, hostpci0="0000:41:00.0")], ha_resources=[{"sid": "vm:101", "state": "started"}])
    plan = plan_evacuation(d, "src")
    assert plan.verdict == "EVACUATION_BLOCKED" and plan.blockers[0].code == "HA_GUEST_NOT_MIGRATABLE"
    mixed = cluster(
        [vm(100, 4), vm(101, 4, hostpci0="0000:41:00.0")], ha_resources=[{"sid": "vm:101", "state": "started"}]
    )
    assert plan_evacuation(mixed, "src").verdict == "EVACUATION_PARTIAL"
    squeezed = cluster([vm(101, 80)], ha_resources=[{"sid": "vm:101", "state": "started"}])
    assert plan_evacuation(squeezed, "src").blockers[0].code == "MIGRATE_CAPACITY"


def test_passthrough_local_disk_and_downtime_rules() -> None:
    guests = [
        vm(100, 4, hostpci0="0000:41:00.0"),
        vm(101, 4, scsi0="local-lvm:vm-101-disk-0,size=40G"),
        (guest_row(200, "src", gtype="lxc", memory_mib=1024), lxc_config("ct")),
    ]
    plan = plan_evacuation(cluster(guests), "src", headroom_pct=0)
    assert {(b.vmid, b.code) for b in plan.blockers} == {
        (100, "MIGRATE_PASSTHROUGH"),
        (200, "MIGRATE_DOWNTIME_NOT_ALLOWED"),
    }
    step = next(s for s in plan.steps if s.vmid == 101)
    assert step.with_local_disks and step.copy_bytes == 40 * GiB and step.mode == "live"
    allowed = plan_evacuation(cluster(guests), "src", allow_offline=True, headroom_pct=0)
    ct = next(s for s in allowed.steps if s.vmid == 200)
    assert ct.mode == "restart" and ct.downtime == "restart" and allowed.steps[-1].vmid in (101, 200)


def test_heterogeneous_cpus() -> None:
    nodes = {"src": (64, 0, AMD), "intel": (64, 0, INTEL), "amd": (16, 0, AMD)}
    plan = plan_evacuation(cluster([vm(100, 12, cpu="host")], nodes), "src", headroom_pct=0)
    assert plan.steps[0].target == "amd"  # intel has more room but a different CPU
    full = plan_evacuation(cluster([vm(100, 20, cpu="host")], nodes), "src", headroom_pct=0)
    assert full.blockers[0].code == "MIGRATE_CAPACITY"


def test_without_pve_precondition_the_verdict_stands_on_the_config() -> None:
    """Issue 15 item 8: an auditor token (no VM.Migrate) still gets a plan; each verdict names its basis."""
    d = cluster([vm(100, 4), vm(101, 2, status="stopped"), vm(102, 2, hostpci0="0000:41:00.0")])
    d.preconditions = {}
    d.missing.append(
        Missing(
            what="preconditions",
            path="/x",
            error="token lacks VM.Migrate",
            status=403,
            affects=("migration",),
            optional=True,
        )
    )
    plan = plan_evacuation(d, "src")
    assert {s.vmid: s.mode for s in plan.steps} == {100: "live", 101: "offline"} and plan.complete is True
    assert [(b.vmid, b.code) for b in plan.blockers] == [(102, "MIGRATE_PASSTHROUGH")]
    move = plan_guest_move(d, 101)
    assert move.can_move and move.migratability.basis == "config"
    checked = plan_guest_move(cluster([vm(100, 4)]), 100)
    assert checked.migratability.basis == "config+pve"


def test_source_offline_or_no_quorum_blocks_everything() -> None:
    offline = cluster([vm(100, 4)], online={"src": False, "a": True, "b": True})
    assert plan_evacuation(offline, "src").verdict == "EVACUATION_BLOCKED"
    d = cluster([vm(100, 4)])
    d.cluster_status[0]["quorate"] = 0
    plan = plan_evacuation(d, "src")
    assert plan.verdict == "EVACUATION_BLOCKED" and "quorum" in plan.summary
    empty = plan_evacuation(cluster([]), "src")
    assert empty.verdict == "EVACUATION_READY" and empty.steps == []


def test_allowed_and_denied_targets() -> None:
    plan = plan_evacuation(cluster([vm(100, 4)]), "src", allowed=["b"])
    assert plan.steps[0].target == "b" and plan.excluded_targets == {"a": "not in the allowed targets"}
    denied = plan_evacuation(cluster([vm(100, 4)]), "src", denied=["a"])
    assert denied.steps[0].target == "b"


def test_many_guests_deterministic_and_within_capacity() -> None:
    rng = random.Random(7)
    guests = [
        vm(100 + i, rng.choice([1, 2, 4, 8]), status=rng.choice(["running", "running", "stopped"])) for i in range(300)
    ]
    nodes = {"src": (2048, 0, AMD), "a": (512, 40, AMD), "b": (384, 0, AMD), "c": (256, 100, AMD)}
    plans = [plan_evacuation(cluster(list(g), nodes), "src") for g in (guests, list(reversed(guests)))]
    assert plans[0].model_dump() == plans[1].model_dump()  # input order does not matter
    for t in plans[0].targets:
        assert t.committed_before_bytes + t.headroom_bytes + t.planned_bytes <= t.total_bytes
    assert {s.vmid for s in plans[0].steps} | {b.vmid for b in plans[0].blockers} == {g[0]["vmid"] for g in guests}


def test_single_guest_move() -> None:
    d = cluster([vm(100, 8, cpu="host")], {"src": (64, 0, AMD), "intel": (64, 0, INTEL), "amd": (32, 0, AMD)})
    ok = plan_guest_move(d, 100, headroom_pct=0)
    assert ok.can_move and ok.target == "amd" and ok.mode == "live" and ok.target_free_after_bytes == 24 * GiB
    no = plan_guest_move(d, 100, "intel")
    assert not no.can_move and no.blockers[0].code == "MIGRATE_CPU_HOST"
    same = plan_guest_move(d, 100, "src")
    assert not same.can_move and same.blockers[0].code == "MIGRATE_NO_TARGET"


def test_unread_ha_rules_leave_only_ha_guests_unproven() -> None:
    """HA rules decide an HA guest's targets (guest_move.ha_targets); a plain guest does not depend on them,
    yet its answer still names every read that failed."""
    gap = Missing(what="cluster data (HA rules)", path="ha_rules", error="500 boom", status=500, affects=("ha",))
    mapping = Missing(
        what="pci device mappings", path="/cluster/mapping/pci", error="500", affects=("migration",), optional=True
    )
    d = cluster([vm(100, 4), vm(101, 4)], ha_resources=[{"sid": "vm:101", "state": "started"}])
    d.missing += [gap, mapping]
    plain_move, ha_move = plan_guest_move(d, 100), plan_guest_move(d, 101)
    assert plain_move.complete is True and ha_move.complete is False
    assert [str(u) for u in plain_move.unread] == ["cluster data (HA rules): 500 boom", "pci device mappings: 500"]
    plan = plan_evacuation(d, "src")
    assert plan.complete is False and any(f.code == "DATA_INCOMPLETE" for f in plan.findings)
    d.ha_by_vmid.clear()
    assert plan_evacuation(d, "src").complete is True
