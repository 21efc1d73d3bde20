"""The evacuation plan in phases (issue 41 items 1, 2, 5): HA's room first, production, the rest, the stop list,
readiness; HA disarmed; nodes whose LRM is in doubt."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.data import Missing
from pve_steward.analysis.planner.evacuation import plan_evacuation, with_running_configs
from pve_steward.analysis.planner.ha_scores import Demand, Usage
from pve_steward.analysis.planner.production import Overrides, classify
from tests.unit.pve_fixtures import GiB, backup_row, guest_row, qemu_config
from tests.unit.test_planner import AMD, cluster, vm
from tests.unit.test_planner_rules import lrm, service

BASIC = {"crs": {"ha": "basic"}, "ha": {"shutdown_policy": "conditional"}}


def ha(sid: str, **extra: Any) -> dict[str, Any]:
    return {"sid": sid, "type": "vm", "state": "started", **extra}


def pin(name: str, sids: str, nodes: str, strict: int = 1) -> dict[str, Any]:
    return {"rule": name, "type": "node-affinity", "resources": sids, "nodes": nodes, "strict": strict}


def tagged(vmid: int, mem: float, tags: str = "", node: str = "src", status: str = "running", **cfg: Any) -> Any:
    row, config = vm(vmid, mem, node=node, status=status, **cfg)
    if tags:
        row["tags"], config["tags"] = tags, tags
    return row, config


# ---------------------------------------------------------------- phase 1: HA's room first


def test_ha_guest_with_one_allowed_target_keeps_its_room() -> None:
    """The bug of issue 41: non-HA guests were placed greedily on the node with most room, then the HA guest
    whose rule allows only that node was reported MIGRATE_CAPACITY. Now HA's room is reserved first."""
    nodes = {"src": (256, 10, AMD), "a": (64, 0, AMD), "b": (64, 0, AMD)}
    guests = [vm(100, 50), vm(200, 16)]
    d = cluster(
        guests,
        nodes,
        ha_resources=[ha("vm:200")],
        ha_rules=[pin("only-a", "vm:200", "src,a")],
        ha_status=[service("vm:200", "src", "started", "started")],
    )
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC)
    assert plan.blockers == [] and plan.verdict == "EVACUATION_READY"
    assert [(s.vmid, s.target) for s in plan.steps] == [(100, "b")]  # not onto a, whose room HA needs
    h = plan.ha_guests[0]
    assert h.ha_targets == ["a"] and h.ha_target_provable and h.problems == []
    assert [(r.node, r.vmids, r.memory_bytes) for r in plan.reserved] == [("a", [200], 16 * GiB)]
    assert {t.node: t.reserved_bytes for t in plan.targets} == {"a": 16 * GiB, "b": 0}
    assert [p.name for p in plan.phases] == ["ha", "keep_running", "rest", "stop_for_window"]
    assert plan.phases[0].vmids == [200] and plan.phases[1].vmids == [100]


def test_pve8_group_allowing_one_other_node_keeps_its_room() -> None:
    """The same with a PVE 8 restricted group allowing one other node."""
    nodes = {"src": (256, 10, AMD), "a": (64, 0, AMD), "b": (64, 0, AMD)}
    d = cluster(
        [vm(100, 50), vm(200, 16)],
        nodes,
        version={"version": "8.4.14", "release": "8.4"},
        ha_resources=[ha("vm:200", group="pair")],
        ha_groups=[{"group": "pair", "nodes": "src,a", "restricted": 1}],
        ha_status=[service("vm:200", "src", "started", "started")],
    )
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC)
    assert plan.blockers == [] and [(s.vmid, s.target) for s in plan.steps] == [(100, "b")]
    assert plan.ha_guests[0].ha_targets == ["a"]


def test_no_move_pushes_an_ha_guest_out_even_when_room_is_short() -> None:
    """With room for either the HA guest or the plain one on a (the only target), HA keeps it: the plain guest
    has no room and the stop list says so."""
    nodes = {"src": (256, 10, AMD), "a": (64, 0, AMD)}
    d = cluster(
        [vm(100, 50), vm(200, 16)],
        nodes,
        ha_resources=[ha("vm:200")],
        ha_status=[service("vm:200", "src", "started", "started")],
    )
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC)
    assert [(b.vmid, b.code) for b in plan.blockers] == [(100, "MIGRATE_CAPACITY")]
    assert "kept for HA's moves" in plan.blockers[0].detail
    assert [(s.vmid, s.production) for s in plan.stop_for_window] == [(100, True)]
    assert plan.stop_sufficient is True


def test_basic_scheduler_replayed_in_sid_order() -> None:
    """Basic: fewest services, ties by name, each move counted before the next (Manager.pm manage, Usage/Basic.pm);
    PVE 8 counts HA services only, so the choice is provable."""
    nodes = {"src": (256, 0, AMD), "a": (64, 0, AMD), "b": (64, 0, AMD), "c": (64, 0, AMD)}
    movers = [vm(100, 1), vm(101, 1), vm(102, 1)]
    others = [vm(300, 1, node="a"), vm(301, 1, node="a"), vm(302, 1, node="c")]
    status = [service(f"vm:{v}", "src", "started", "started") for v in (100, 101, 102)]
    status += [service("vm:300", "a", "started", "started"), service("vm:301", "a", "started", "started")]
    status += [service("vm:302", "c", "started", "started")]
    d = cluster(
        movers + others,
        nodes,
        version={"version": "8.4.14", "release": "8.4"},
        ha_resources=[ha(f"vm:{v}") for v in (100, 101, 102, 300, 301, 302)],
        ha_status=status,
    )
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC)
    assert {h.vmid: h.ha_targets for h in plan.ha_guests} == {100: ["b"], 101: ["b"], 102: ["c"]}
    assert all(h.ha_target_provable for h in plan.ha_guests)
    # PVE 9 without the status API's fencing row: 5.1.2+ counts running guests outside HA, earlier releases
    # do not; with two plain guests running on b the two differ, so room is kept on both nodes
    plain = [vm(400, 1, node="b"), vm(401, 1, node="b")]
    d9 = cluster(movers + others + plain, nodes, ha_resources=d.ha_resources, ha_status=list(status))
    nine = plan_evacuation(d9, "src", headroom_pct=0, options=BASIC)
    first = next(h for h in nine.ha_guests if h.vmid == 100)
    assert first.ha_targets == ["b", "c"] and not first.ha_target_provable
    # the fencing row (pve-ha-manager 5.1.3+) settles it: guests outside HA count
    fenced = cluster(
        movers + others + plain,
        nodes,
        ha_resources=d.ha_resources,
        ha_status=[*status, {"type": "fencing", "id": "fencing", "node": "a", "armed-state": "armed"}],
    )
    counted = plan_evacuation(fenced, "src", headroom_pct=0, options=BASIC)
    assert {h.vmid: h.ha_targets for h in counted.ha_guests} == {100: ["c"], 101: ["a"], 102: ["b"]}


def test_static_scheduler_scores_memory_and_dynamic_is_not_provable() -> None:
    """Static: TOPSIS over CPU and memory shares (proxmox-resource-scheduling pve_static.rs); dynamic follows live
    load: room is kept on every node HA may choose."""
    usage = Usage("static", {"a": (32, 64 * GiB), "b": (32, 256 * GiB)})
    scores = usage.scores(Demand(4, 16 * GiB))
    assert scores["b"] < scores["a"]  # lower is better: b takes the service with the smaller memory share
    assert Usage("basic", {"a": (1, 1), "b": (1, 1)}).scores(Demand(1, 1)) == {"a": 0.0, "b": 0.0}
    nodes = {"src": (256, 0, AMD), "a": (64, 0, AMD), "b": (256, 0, AMD)}
    d = cluster(
        [vm(100, 16)], nodes, ha_resources=[ha("vm:100")], ha_status=[service("vm:100", "src", "started", "started")]
    )
    static = plan_evacuation(d, "src", headroom_pct=0, options={"crs": {"ha": "static"}})
    assert static.ha_guests[0].ha_targets == ["b"] and static.ha_guests[0].ha_target_provable
    dynamic = plan_evacuation(d, "src", headroom_pct=0, options={"crs": "ha=dynamic"})
    h = dynamic.ha_guests[0]
    assert h.ha_targets == ["a", "b"] and not h.ha_target_provable
    assert {r.node: r.memory_bytes for r in dynamic.reserved} == {"a": 16 * GiB, "b": 16 * GiB}
    assert "cannot know" in str(dynamic.phases[0].note)


# ---------------------------------------------------------------- production


def test_production_is_recognised_and_overridable() -> None:
    guests = [
        tagged(100, 1, "test"),
        tagged(101, 1, "prod;test"),
        tagged(102, 1, "", name_override=None),
        tagged(103, 1, "non-prod"),
        tagged(104, 1, "", protection=1),
        tagged(105, 1, "keep"),
    ]
    guests[2][0]["name"] = "web-staging-01"
    guests[5][0]["pool"] = "sandbox"
    d = cluster(guests, ha_resources=[ha("vm:106")])
    ov = Overrides()
    got = {v: classify(d, v, ov).production for v in (100, 101, 102, 103, 104, 105)}
    assert got == {100: False, 101: True, 102: False, 103: False, 104: True, 105: False}
    assert classify(d, 100, ov).signals == ("tag test",)
    assert classify(d, 999, ov).production  # nothing known: in doubt, production
    forced = Overrides.of(keep_vmids=[100], stop_tags=["prod"])
    assert classify(d, 100, forced).production and not classify(d, 101, forced).production
    assert classify(d, 104, Overrides.of(stop_vmids=[104])).production is False


# ---------------------------------------------------------------- phase 4: the stop list


def _short() -> Any:
    nodes = {"src": (256, 0, AMD), "a": (48, 8, AMD)}
    guests = [
        vm(100, 40),  # production (no word says otherwise)
        tagged(101, 16, "test"),
        vm(102, 8),
        tagged(110, 8, "staging", node="a"),
        vm(103, 4),  # HA
    ]
    guests[2][0]["name"] = "dev-box"
    return cluster(
        guests, nodes, ha_resources=[ha("vm:103")], ha_status=[service("vm:103", "src", "started", "started")]
    )


def test_short_cluster_stops_non_production_so_production_moves() -> None:
    plan = plan_evacuation(_short(), "src", headroom_pct=0, options=BASIC)
    assert [(s.vmid, s.node, s.production) for s in plan.stop_for_window] == [
        (101, "src", False),
        (102, "src", False),
        (110, "a", False),
    ]
    assert plan.stop_sufficient is True
    step = next(s for s in plan.steps if s.vmid == 100)
    assert step.target == "a" and step.phase == "keep_running" and "once the non-production" in step.reason
    assert {s.vmid for s in plan.steps} == {100}  # 101 and 102 are stopped instead of moved
    assert 103 not in {s.vmid for s in plan.stop_for_window}  # never an HA guest
    assert plan.phases[3].vmids == [101, 102, 110] and plan.blockers == []
    assert "to stop for the window" in plan.summary
    # what decided
    assert plan.stop_for_window[0].signals == ["tag test", "onboot 1"]
    assert plan.stop_for_window[2].memory_bytes == 4 * GiB  # 110 uses half its 8 GiB: stopping it frees what it held


def test_production_is_stopped_last_and_only_when_nothing_else_helps() -> None:
    """A second production guest takes a's room: the first has none even after every non-production stop, so it
    is listed last, as production; the request may call it stoppable instead."""
    d = _short()
    big = vm(104, 30)
    d.resources.append(big[0])
    d.configs[104] = big[1]
    d.preconditions[104] = {"running": 1, "local_resources": [], "local_disks": [], "not_allowed_nodes": {}}
    for key in ("guests", "_by_type", "parsed", "guest_ids"):
        d.__dict__.pop(key, None)
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC)
    last = plan.stop_for_window[-1]
    assert (last.vmid, last.production) == (100, True) and "even after stopping" in last.why
    assert [s.production for s in plan.stop_for_window] == [False, False, True]
    assert (100, "MIGRATE_CAPACITY") in {(b.vmid, b.code) for b in plan.blockers}
    assert next(s for s in plan.steps if s.vmid == 104).phase == "keep_running"
    freed = plan_evacuation(d, "src", headroom_pct=0, options=BASIC, overrides=Overrides.of(stop_vmids=[100]))
    assert next(s for s in freed.stop_for_window if s.vmid == 100).production is False


def test_ha_room_short_frees_non_production_on_its_node_or_says_it_is_not_enough() -> None:
    nodes = {"src": (256, 0, AMD), "a": (32, 24, AMD)}
    guests = [vm(200, 20), tagged(110, 16, "lab", node="a")]
    status = [service("vm:200", "src", "started", "started")]
    d = cluster(guests, nodes, ha_resources=[ha("vm:200")], ha_status=status)
    d.node_status["a"]["memory"]["used"] = 16 * GiB
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC)
    assert [(s.vmid, s.node) for s in plan.stop_for_window] == [(110, "a")] and plan.stop_sufficient is True
    assert "for HA's moves" in plan.stop_for_window[0].why and plan.blockers == []
    prod = cluster([vm(200, 20), vm(110, 16, node="a")], nodes, ha_resources=[ha("vm:200")], ha_status=status)
    prod.node_status["a"]["memory"]["used"] = 16 * GiB
    stuck = plan_evacuation(prod, "src", headroom_pct=0, options=BASIC)
    assert stuck.stop_for_window == []  # a production guest is never stopped to make HA room
    assert stuck.stop_sufficient is False and [(b.vmid, b.code) for b in stuck.blockers] == [(200, "MIGRATE_CAPACITY")]


# ---------------------------------------------------------------- readiness


def test_readiness_names_onboot_starts_clashes_policy_and_old_backups() -> None:
    guests = [
        vm(120, 2, status="stopped", hostpci0="0000:41:00.0", ipconfig0="ip=10.0.0.5/24,gw=10.0.0.1"),
        vm(121, 2, status="stopped"),
        vm(122, 2, status="stopped", onboot=0),
        vm(100, 2),
    ]
    d = cluster(guests, ha_resources=[])
    d.backup_jobs = [{"id": "daily", "type": "vzdump", "schedule": "21:00", "all": 1, "enabled": 1, "storage": "pbs"}]
    d.backups = [backup_row(100, "pbs", 5 * 86400), backup_row(121, "pbs", 3600)]
    d.backup_storages_read = ["pbs"]
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC, backups_read=True)
    r = plan.readiness
    assert r is not None
    assert [(o.vmid, o.node, o.when) for o in r.onboot_on_return] == [
        (120, "src", "node_returns"),
        (121, next(s.target for s in plan.steps if s.vmid == 121), "target_boots"),
    ]
    assert r.ha_shutdown_policy == "conditional" and r.ha_policy_note is None  # no HA guest on the node
    stale = {b.vmid: b.age_hours for b in r.stale_backups}
    assert stale[100] == 120.0 and stale[120] is None and 121 not in stale
    assert any("address clashes" in g for g in r.not_provable)
    running = {
        130: qemu_config("other", ipconfig0="ip=10.0.0.5/24"),
        131: qemu_config("mac", net0="virtio=BC:24:11:00:00:02,bridge=vmbr0"),
    }
    d.resources += [guest_row(130, "a"), guest_row(131, "b")]
    for key in ("guests", "_by_type", "guest_ids"):
        d.__dict__.pop(key, None)
    clashes = with_running_configs(plan, d, running, 0).readiness
    assert clashes is not None and clashes.not_provable == []
    got = sorted((c.kind, c.address, c.vmid, c.other_vmid) for c in clashes.address_clashes)
    assert ("ip", "10.0.0.5", 120, 130) in got
    # a VLAN apart is another network: no clash
    apart = {130: qemu_config("other", ipconfig0="ip=10.0.0.5/24", net0="virtio=BC:24:11:00:00:09,bridge=vmbr0,tag=7")}
    calm = with_running_configs(plan, d, apart, 2).readiness
    assert calm is not None and not [c for c in calm.address_clashes if c.kind == "ip"]
    assert calm.not_provable == [
        "address clashes: 2 running guest config(s) could not be read, so clashes with them are unknown"
    ]


def test_a_failed_backup_read_leaves_the_plan_incomplete_and_says_what_it_costs() -> None:
    """A backup on a storage whose content list failed is unseen, so "no backup" may be wrong: the plan says
    its readiness stands on a failed read (DATA_INCOMPLETE, complete false), migration verdicts stand."""
    d = cluster([vm(100, 2)], ha_resources=[])
    d.backup_jobs = [{"id": "daily", "type": "vzdump", "schedule": "21:00", "all": 1, "enabled": 1, "storage": "pbs"}]
    d.missing.append(
        Missing(
            what="content of pbs",
            path="/nodes/src/storage/pbs/content",
            error="500 storage timeout",
            status=500,
            affects=("backups",),
        )
    )
    plan = plan_evacuation(d, "src", headroom_pct=0, options=BASIC, backups_read=True)
    assert plan.complete is False
    assert [f.code for f in plan.findings if f.subject.kind == "data"] == ["DATA_INCOMPLETE"]
    assert plan.readiness is not None
    assert any(g.startswith("backup age: 1 read(s)") for g in plan.readiness.not_provable)
    assert [s.vmid for s in plan.steps] == [100]
    # a list PVE hides from the token is said as hidden, not as a failed read
    d.missing.append(
        Missing(what="backup jobs", path="/cluster/backup", error="not visible", affects=("backups",), hidden=True)
    )
    hidden = plan_evacuation(d, "src", headroom_pct=0, options=BASIC, backups_read=True).readiness
    assert hidden is not None and [g for g in hidden.not_provable if g.startswith("backup age")] == [
        "backup age: 1 read(s) of backup jobs or contents failed and 1 backup list(s) not visible to this token "
        "(see the skipped checks), so the list is not whole"
    ]
    # a plan that does not judge backup age does not stand on those reads
    assert plan_evacuation(d, "src", headroom_pct=0, options=BASIC).complete is True


def test_shutdown_policy_notes_follow_lrm_pm() -> None:
    from pve_steward.analysis.hastate import Disarm
    from pve_steward.analysis.planner.readiness import policy_note

    assert "ignores the shutdown policy" in str(policy_note("conditional", 2, 0, None))
    assert "starts them there again" in str(policy_note("conditional", 0, 1, None))
    assert "recovers them on other nodes once" in str(policy_note("failover", 0, 1, None))
    assert "holds it up" in str(policy_note("migrate", 0, 1, None))
    assert "shut the node's HA guests down yourself" in str(policy_note("freeze", 1, 0, Disarm("disarmed", "freeze")))
    assert "ordinary guests" in str(policy_note(None, 0, 0, Disarm("disarming", "ignore")))
    assert policy_note("conditional", 0, 0, None) is None


# ---------------------------------------------------------------- item 5: disarm, LRM in doubt


def test_ha_disarmed_in_freeze_mode_advises_no_maintenance() -> None:
    """Manager.pm update_crm_commands ignores node maintenance while disarmed; in freeze mode no migrate request is
    carried out either: HA guests stay, and the plan says what to do instead."""
    fencing = {"type": "fencing", "id": "fencing", "node": "a", "armed-state": "disarmed", "resource_mode": "freeze"}
    d = cluster(
        [vm(100, 4), vm(101, 4)],
        ha_resources=[ha("vm:101")],
        ha_status=[fencing, service("vm:101", "src", "freeze", "started")],
    )
    plan = plan_evacuation(d, "src", options=BASIC)
    h = plan.ha_guests[0]
    assert not h.moved_by_ha and "Re-arm HA" in str(h.action)
    assert (101, "HA_GUEST_LEFT_BEHIND") in {(b.vmid, b.code) for b in plan.blockers}
    rec = str(plan.ha_recommendation)
    assert rec.startswith("HA is disarmed in freeze mode") and "arm-ha" in rec
    assert plan.phases[0].vmids == [] and "moves nothing" in str(plan.phases[0].note)
    assert "HA_DISARMED" in {f.code for f in plan.findings}
    assert "shut the node's HA guests" in str(plan.readiness and plan.readiness.ha_policy_note)
    from pve_steward.analysis.planner.guest_move import plan_guest_move

    assert any("never carried out" in n for n in plan_guest_move(d, 101).notes)


def test_nodes_whose_lrm_is_in_doubt_are_no_targets() -> None:
    """HA_LRM_DEAD and friends: our policy keeps guests off them; the CRM still counts them online, so an HA guest
    HA may send there is flagged."""
    status = [
        lrm("a", "a (old timestamp - dead?, watchdog standby, Tue Dec  1 10:00:00 2026)"),
        lrm("b", "b (detected time drift!, watchdog standby, Tue Dec  1 10:00:00 2026)"),
        lrm("c", "c (unable to read lrm status)"),
        lrm("d", "d (active, watchdog active, Tue Dec  1 10:00:00 2026)"),
        service("vm:200", "src", "started", "started"),
    ]
    nodes = dict.fromkeys(("src", "a", "b", "c", "d"), (64, 0, AMD))
    d = cluster([vm(100, 4), vm(200, 4)], nodes, ha_resources=[ha("vm:200")], ha_status=status)
    plan = plan_evacuation(d, "src", options=BASIC)
    assert sorted(plan.excluded_targets) == ["a", "b", "c"]
    assert "not answering" in plan.excluded_targets["a"] and "time drift" in plan.excluded_targets["b"]
    assert "cannot be read" in plan.excluded_targets["c"] and "our policy" in plan.excluded_targets["a"]
    assert [(s.vmid, s.target) for s in plan.steps] == [(100, "d")]
    # HA's basic scheduler picks 'a' (fewest services, first by name): the plan says why that is a problem
    assert [(b.vmid, b.code) for b in plan.blockers] == [(200, "HA_LRM_DEAD")]
    assert "counts a node online by cluster membership" in plan.blockers[0].detail
