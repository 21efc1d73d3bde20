"""The planner's steps on their own: capacity (shared with N+1), stopped guests, HA hand-off, HA affinity."""

from __future__ import annotations

from pve_steward.analysis.capacity import analyze_nodes, capacity_nodes, node_room
from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.analysis.planner.guest_move import plan_guest_move
from pve_steward.analysis.planner.handoff import left_behind
from pve_steward.analysis.planner.placement import Placement
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import GiB
from tests.unit.test_planner import AMD, cluster, vm

T = Thresholds()


def lrm(node: str, status: str = "active") -> dict[str, object]:
    return {"type": "lrm", "node": node, "status": status, "id": f"lrm:{node}"}


def service(sid: str, node: str, crm: str, requested: str) -> dict[str, object]:
    return {"type": "service", "sid": sid, "node": node, "crm_state": crm, "request_state": requested, "state": crm}


def test_stopped_guests_need_no_room_on_full_targets() -> None:
    """Issue 15 item 6: the targets are over headroom; stopped guests still move, running ones do not."""
    full = {"src": (64, 8, AMD), "a": (32, 31, AMD)}
    plan = plan_evacuation(cluster([vm(100, 1, status="stopped"), vm(101, 1)], full), "src")
    assert [(s.vmid, s.mode, s.memory_bytes) for s in plan.steps] == [(100, "offline", 0)]
    assert [(b.vmid, b.code) for b in plan.blockers] == [(101, "MIGRATE_CAPACITY")]
    placement = Placement(cluster([], full), ["a"], 10)
    assert placement.choose(["a"], 0)[0] == "a" and placement.choose(["a"], GiB)[0] is None


def test_n_plus_1_and_the_planner_use_one_room() -> None:
    """Issue 15 item 5: the same node_room; maintenance and offline nodes are not capacity."""
    nodes = {"src": (64, 30, AMD), "a": (64, 50, AMD), "b": (64, 4, AMD)}
    d = cluster([vm(100, 24), vm(101, 4, node="a")], nodes)
    room = node_room(d, "b", 10)
    assert (room.total, room.committed, room.headroom) == (64 * GiB, 4 * GiB, int(6.4 * GiB))
    plan = plan_evacuation(d, "src")
    assert {t.node: t.committed_before_bytes for t in plan.targets} == {"a": 50 * GiB, "b": 4 * GiB}
    assert not [f for f in analyze_nodes(d, T) if f.code == "CLUSTER_NO_N_PLUS_1"]
    d2 = cluster([vm(100, 24), vm(101, 4, node="a")], nodes, ha_status=[lrm("b", "maintenance mode")])
    assert capacity_nodes(d2) == ["a", "src"]
    found = [f for f in analyze_nodes(d2, T) if f.code == "CLUSTER_NO_N_PLUS_1"]
    assert found and found[0].evidence["not_capacity"] == ["b"]
    assert plan_evacuation(d2, "src").verdict == "EVACUATION_BLOCKED"  # the planner agrees: nowhere to go


def test_ha_guests_left_behind_by_maintenance() -> None:
    """Issue 15 item 21: error and requested stopped/disabled are not moved by HA maintenance."""
    guests = [vm(100, 4), vm(101, 4, status="stopped"), vm(102, 4, status="stopped"), vm(103, 4)]
    d = cluster(
        guests,
        ha_resources=[
            {"sid": "vm:100", "state": "started"},
            {"sid": "vm:101", "state": "stopped"},
            {"sid": "vm:102", "state": "disabled"},
            {"sid": "vm:103", "state": "started"},
        ],
        ha_status=[
            service("vm:100", "src", "error", "started"),
            service("vm:101", "src", "stopped", "stopped"),
            service("vm:102", "src", "stopped", "disabled"),
            service("vm:103", "src", "started", "started"),
        ],
    )
    plan = plan_evacuation(d, "src")
    moved = {h.vmid: h.moved_by_ha for h in plan.ha_guests}
    assert moved == {100: False, 101: False, 102: False, 103: True}
    left = {b.vmid for b in plan.blockers if b.code == "HA_GUEST_LEFT_BEHIND"}
    assert left == {100, 101, 102} and plan.verdict == "EVACUATION_PARTIAL"
    assert "--state disabled" in str(next(h.action for h in plan.ha_guests if h.vmid == 100))
    assert "1 HA-managed guest(s) left to HA maintenance" in plan.summary
    assert "MIGRATE_HA_MANAGED" in {f.code for f in plan.findings}
    assert left_behind("vm:9", "n", "started", "started") is None
    # frozen (an LRM restarting, HA disarmed): unfrozen only once its LRM is active, which maintenance is not
    frozen = left_behind("vm:9", "n", "started", "freeze")
    assert frozen is not None and "LRM is active again" in frozen
    from pve_steward.analysis.planner.handoff import ha_constraints

    rules = [
        {"rule": "kept", "type": "node-affinity", "resources": "vm:100", "nodes": "dst1", "strict": 1},
        {"rule": "dropped", "type": "node-affinity", "resources": "vm:100", "nodes": "x", "errors": {"nodes": ["?"]}},
    ]
    assert [c.split(":")[0] for c in ha_constraints(cluster([vm(100, 4)], ha_rules=rules), "vm:100")] == ["rule kept"]


def test_ha_affinity_leaving_no_target_is_reported_as_the_rule() -> None:
    """Issue 15 item 20: strict node affinity to the source only is the rule, not a memory shortage."""
    rule = {"rule": "pin", "type": "node-affinity", "resources": "vm:100", "nodes": "src", "strict": 1}
    d = cluster([vm(100, 4)], ha_resources=[{"sid": "vm:100", "state": "started"}], ha_rules=[rule])
    move = plan_guest_move(d, 100)
    assert not move.can_move and [b.code for b in move.blockers] == ["MIGRATE_HA_AFFINITY"]
    negative = {"rule": "apart", "type": "resource-affinity", "affinity": "negative", "resources": "vm:100,vm:200"}
    d2 = cluster(
        [vm(100, 4)],
        ha_resources=[{"sid": "vm:100", "state": "started"}, {"sid": "vm:200", "state": "started"}],
        ha_rules=[negative],
        ha_status=[service("vm:200", "a", "started", "started")],
    )
    assert plan_guest_move(d2, 100).target == "b"
    free = plan_guest_move(cluster([vm(100, 4)], ha_resources=[{"sid": "vm:100", "state": "started"}]), 100)
    assert free.can_move and free.target == "a"


def test_order_and_stop_steps_on_their_own() -> None:
    from pve_steward.analysis.planner.evacuation import order_steps, stop_reason
    from pve_steward.analysis.planner.models import Step

    def step(vmid: int, copy: int, downtime: str, mem: int) -> Step:
        return Step(
            order=0,
            vmid=vmid,
            name="g",
            type="qemu",
            target="a",
            mode="live",
            downtime=downtime,  # type: ignore[arg-type]
            memory_bytes=mem,
            copy_bytes=copy,
            reason="r",
        )

    ordered = order_steps([step(1, 5, "none", 1), step(2, 0, "full", 9), step(3, 0, "none", 2), step(4, 0, "none", 8)])
    assert [s.vmid for s in ordered] == [4, 3, 2, 1] and [s.order for s in ordered] == [1, 2, 3, 4]
    assert stop_reason(cluster([vm(100, 1)]), "src") is None
    assert "offline" in str(stop_reason(cluster([vm(100, 1)], online={"src": False, "a": True, "b": True}), "src"))
    assert "not in this cluster" in str(stop_reason(cluster([vm(100, 1)]), "zz"))


def test_evacuation_reports_an_ha_rule_that_leaves_no_node_as_the_rule() -> None:
    rule = {"rule": "pin", "type": "node-affinity", "resources": "vm:100", "nodes": "src", "strict": 1}
    d = cluster([vm(100, 4)], ha_resources=[{"sid": "vm:100", "state": "started"}], ha_rules=[rule])
    assert [b.code for b in plan_evacuation(d, "src").blockers] == ["MIGRATE_HA_AFFINITY"]
    roomy = {"rule": "pin", "type": "node-affinity", "resources": "vm:100", "nodes": "a", "strict": 1}
    full = cluster([vm(100, 80)], ha_resources=[{"sid": "vm:100", "state": "started"}], ha_rules=[roomy])
    assert [b.code for b in plan_evacuation(full, "src").blockers] == ["MIGRATE_CAPACITY"]


def test_ha_maintenance_copies_local_disks_but_failover_has_no_copy() -> None:
    """PVEVM.pm migrate passes with-local-disks: maintenance moves them; recovery after a failure cannot."""
    from pve_steward.analysis.migration.findings import analyze_migratability

    d = cluster(
        [vm(100, 4, scsi0="local-lvm:vm-100-disk-0,size=8G")], ha_resources=[{"sid": "vm:100", "state": "started"}]
    )
    plan = plan_evacuation(d, "src")
    assert plan.blockers == [] and plan.ha_guests[0].moved_by_ha and plan.ha_guests[0].problems == []
    findings, _ = analyze_migratability(d)
    assert [f.code for f in findings] == ["HA_GUEST_NOT_MIGRATABLE"] and "failover" in findings[0].message


def _ha(guests: list, nodes: dict, **kw: object):  # type: ignore[no-untyped-def,type-arg]
    sids = [{"sid": f"vm:{g[0]['vmid']}", "state": "started"} for g in guests]
    return cluster(guests, nodes, ha_resources=sids, **kw)


def test_ha_maintenance_counts_on_every_node_its_scheduler_may_choose() -> None:
    """pve-ha-manager select_service_node: the top-priority online nodes of the rule or group, chosen by service
    count or load, not by free memory (Usage/Basic.pm). A plan counts on HA only when each of them has room."""
    from pve_steward.analysis.planner.ha_placement import ha_candidates

    nodes = {"src": (128, 20, AMD), "a": (32, 18, AMD), "b": (64, 0, AMD)}  # a: 14 GiB free, b: 64
    one = [vm(100, 16)]
    # no rule: HA may choose a or b, and a lacks room (the old first fit put it on b and said READY)
    plan = plan_evacuation(_ha(one, nodes), "src", headroom_pct=0)
    assert [(b.vmid, b.code) for b in plan.blockers] == [(100, "MIGRATE_CAPACITY")] and "a lack" in plan.blockers[
        0
    ].detail
    # a strict rule 'b:2,a:1' sends it to b only while b is online: fits
    prio = {"rule": "p", "type": "node-affinity", "resources": "vm:100", "nodes": "b:2,a:1", "strict": 1}
    assert plan_evacuation(_ha(one, nodes, ha_rules=[prio]), "src", headroom_pct=0).blockers == []
    # a non-strict rule naming a: a first, the others only at priority -1 (NodeAffinity.pm plugin_compile)
    soft = {"rule": "s", "type": "node-affinity", "resources": "vm:100", "nodes": "a", "strict": 0}
    d = _ha(one, nodes, ha_rules=[soft])
    assert ha_candidates(d, "vm:100", ["a", "b"]) == ["a"] and ha_candidates(d, "vm:100", ["b"]) == ["b"]
    assert [b.code for b in plan_evacuation(d, "src", headroom_pct=0).blockers] == ["MIGRATE_CAPACITY"]
    # PVE 8: an unrestricted group with priorities behaves alike
    grouped = _ha(one, nodes, ha_groups=[{"group": "g", "nodes": "b:2,a:1", "restricted": 0}])
    grouped.ha_resources[0]["group"] = "g"
    assert ha_candidates(grouped, "vm:100", ["a", "b"]) == ["b"]
    # the operator's denied nodes do not steer HA: b stays HA's choice and is not a stall
    pinned = {"rule": "only-b", "type": "node-affinity", "resources": "vm:100", "nodes": "b", "strict": 1}
    denied = plan_evacuation(_ha(one, nodes, ha_rules=[pinned]), "src", headroom_pct=0, denied=["b"])
    assert [b.code for b in denied.blockers] == []


def test_ha_may_not_choose_a_node_the_guest_cannot_go_to() -> None:
    """select_service_node knows nothing of storage: HA may pick a node where the guest's disk is missing, and
    the LRM's migration then fails (PVEVM.pm migrate, check_storage_availability)."""
    from tests.unit.pve_fixtures import storage_cfg
    from tests.unit.test_planner import STORAGES

    nodes = {"src": (128, 20, AMD), "a": (64, 0, AMD), "b": (64, 0, AMD)}
    limited = [*STORAGES, storage_cfg("rbd2", "rbd", nodes="src,a", shared=1)]
    d = _ha([vm(100, 4, scsi0="rbd2:vm-100-disk-0,size=8G")], nodes)
    d.storage_config = limited
    plan = plan_evacuation(d, "src", headroom_pct=0)
    assert [(b.vmid, b.code) for b in plan.blockers] == [(100, "HA_GUEST_NOT_MIGRATABLE")]
    assert "HA may choose b" in plan.blockers[0].detail


def test_ha_disarmed_in_ignore_mode_leaves_guests_to_plain_migrations() -> None:
    """pve-ha-manager Config.pm: while HA is disarmed in ignore mode its resources 'can be managed directly', so a
    migrate is a plain one and maintenance mode would do nothing (the CRM ignores it while disarmed)."""
    from pve_steward.analysis.checks.guests_common import not_ha_managed
    from pve_steward.analysis.migration.verdict import assess

    fencing = {"type": "fencing", "id": "fencing", "node": "src", "armed-state": "disarmed", "resource_mode": "ignore"}
    d = _ha([vm(100, 4)], {"src": (128, 20, AMD), "a": (64, 0, AMD), "b": (64, 0, AMD)}, ha_status=[fencing])
    plan = plan_evacuation(d, "src", headroom_pct=0)
    assert [s.vmid for s in plan.steps] == [100] and plan.ha_guests == []
    # issue 41 item 5: never advise HA maintenance while disarmed, say what to do instead
    assert "Do not enable HA maintenance" in (plan.ha_recommendation or "")
    assert "node-maintenance enable" not in (plan.ha_recommendation or "")
    assert "HA_DISARMED" in {f.code for f in plan.findings}
    assert "MIGRATE_HA_MANAGED" not in {r.code for r in assess(d, 100).reasons}
    assert not_ha_managed(d, T) == []  # HA_DISARMED reports the state once
    armed = _ha(
        [vm(100, 4)], {"src": (128, 20, AMD), "a": (64, 0, AMD)}, ha_status=[{**fencing, "armed-state": "armed"}]
    )
    assert [h.vmid for h in plan_evacuation(armed, "src", headroom_pct=0).ha_guests] == [100]


def test_a_stopped_negative_peer_does_not_block_ha_placement() -> None:
    """The scheduler counts a negative peer's node only while the peer holds it (Usage.pm get_used_service_nodes:
    not stopped, not request_start), while a migrate command counts it anyway (Config.pm
    get_resource_motion_info): the evacuation hands the guest to HA, a manual move to that node is refused."""
    apart = {"rule": "apart", "type": "resource-affinity", "affinity": "negative", "resources": "vm:100,vm:200"}
    peer = service("vm:200", "a", "stopped", "stopped")
    nodes = {"src": (128, 20, AMD), "a": (64, 0, AMD), "b": (64, 0, AMD)}
    d = _ha([vm(100, 4)], nodes, ha_rules=[apart], ha_status=[peer], online={"src": True, "a": True, "b": False})
    d.ha_resources.append({"sid": "vm:200", "state": "stopped"})
    plan = plan_evacuation(d, "src", headroom_pct=0)
    assert plan.blockers == [] and [h.vmid for h in plan.ha_guests if h.moved_by_ha] == [100]
    move = plan_guest_move(d, 100)
    assert not move.can_move and [b.code for b in move.blockers] == ["MIGRATE_HA_AFFINITY"]
    running = _ha([vm(100, 4)], nodes, ha_rules=[apart], ha_status=[service("vm:200", "a", "started", "started")])
    running.ha_resources.append({"sid": "vm:200", "state": "started"})
    held = plan_evacuation(running, "src", headroom_pct=0)  # a is held; b remains: HA may choose only b
    assert held.blockers == []


def test_ha_keeps_positive_peers_together() -> None:
    """Positive resource affinity (PVE 9): the peers end on one node, next to a peer that stays where it runs
    (apply_positive_resource_affinity); a peer's node rule binds them all (create_implicit_positive_resource_
    affinity_node_affinity_rules), and a peer's negative partner is theirs too (implicit negative rules)."""
    from pve_steward.analysis.planner.ha_placement import ha_candidates, together

    pair = {"rule": "pair", "type": "resource-affinity", "affinity": "positive", "resources": "vm:100,vm:101"}
    nodes = {"src": (128, 40, AMD), "a": (64, 44, AMD), "b": (64, 44, AMD)}  # 20 GiB free on a and on b
    both = _ha([vm(100, 16), vm(101, 16)], nodes, ha_rules=[pair])
    plan = plan_evacuation(both, "src", headroom_pct=0)
    assert sorted((b.vmid, b.code) for b in plan.blockers) == [(100, "MIGRATE_CAPACITY"), (101, "MIGRATE_CAPACITY")]
    assert "32.0 GiB (vm:100, vm:101, kept together)" in plan.blockers[0].detail
    # the peer stays on a, which has no room: only a will do, though b is empty
    roomy = {"src": (128, 40, AMD), "a": (64, 60, AMD), "b": (64, 0, AMD)}
    stays = _ha([vm(100, 16), vm(101, 4, node="a")], roomy, ha_rules=[pair])
    stays.ha_status = [service("vm:101", "a", "started", "started")]
    assert [b.code for b in plan_evacuation(stays, "src", headroom_pct=0).blockers] == ["MIGRATE_CAPACITY"]
    # merged rules, an inherited node rule, an implicit negative partner
    chain = {"rule": "chain", "type": "resource-affinity", "affinity": "positive", "resources": "vm:101,vm:102"}
    pin = {"rule": "pin", "type": "node-affinity", "resources": "vm:102", "nodes": "a", "strict": 1}
    d = _ha([vm(100, 4)], roomy, ha_rules=[pair, chain, pin])
    assert together(d)["vm:100"] == {"vm:100", "vm:101", "vm:102"}
    assert ha_candidates(d, "vm:100", ["a", "b"]) == ["a"]
    apart = {"rule": "apart", "type": "resource-affinity", "affinity": "negative", "resources": "vm:101,vm:300"}
    blocked = _ha([vm(100, 4)], roomy, ha_rules=[pair, apart], online={"src": True, "a": True, "b": False})
    blocked.ha_status = [service("vm:300", "a", "started", "started"), service("vm:101", "src", "stopped", "stopped")]
    blocked.ha_resources += [{"sid": "vm:101", "state": "stopped"}, {"sid": "vm:300", "state": "started"}]
    assert [b.code for b in plan_evacuation(blocked, "src", headroom_pct=0).blockers] == ["MIGRATE_HA_AFFINITY"]


def test_a_manual_ha_move_takes_its_positive_partners_along() -> None:
    """Manager.pm queue_resource_motion migrates the positive partners to the same target: a move of vm:100
    needs room for vm:101 as well, and says so."""
    pair = {"rule": "pair", "type": "resource-affinity", "affinity": "positive", "resources": "vm:100,vm:101"}
    tight = {"src": (128, 40, AMD), "a": (64, 40, AMD), "b": (64, 40, AMD)}  # 24 GiB free on each
    d = _ha([vm(100, 16), vm(101, 16)], tight, ha_rules=[pair])
    move = plan_guest_move(d, 100, headroom_pct=0)
    assert not move.can_move and [b.code for b in move.blockers] == ["MIGRATE_CAPACITY"]
    assert move.memory_bytes == 32 * GiB and any("partners vm:101" in n for n in move.notes)
    alone = plan_guest_move(_ha([vm(100, 16), vm(101, 16)], tight), 100, headroom_pct=0)
    assert alone.can_move and alone.memory_bytes == 16 * GiB
