"""Node evacuation planning: how to empty a node before maintenance, promising only what is provable.

The procedure an operator follows (docs/design/261202-5-evacuation-planner.md, 261203-4, 261206-53):
1. can anything move at all (source online, quorum);
2. which targets (online, not in HA maintenance, LRM not in doubt, allowed);
3. per guest, the verdict from config + storage (PVE's precondition as a cross-check);
4. in phases: (1) where HA maintenance puts the HA guests, and that room kept (ha_schedule.py); (2) the running
   production guests outside HA; (3) the rest; (4) when room is short, what to stop for the window (phases.py);
5. the execution order: phase by phase, cheap moves first;
6. what else the window touches (readiness.py).
"""

from __future__ import annotations

from collections.abc import Callable

from pve_steward.analysis.capacity import node_room
from pve_steward.analysis.catalog import Code, register_codes
from pve_steward.analysis.data import ClusterData, Missing, Row, guest_subject
from pve_steward.analysis.findings import Finding, Subject, finding, rank_key
from pve_steward.analysis.hastate import Disarm, disarm
from pve_steward.analysis.migration.findings import not_visible
from pve_steward.analysis.migration.model import Migratability
from pve_steward.analysis.migration.targets import eligible_targets, maintenance_nodes
from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.planner.advice import disarm_finding, kept_why, phase_list, recommendation
from pve_steward.analysis.planner.ceph_steps import NodeCeph, ceph_evacuation
from pve_steward.analysis.planner.ha_schedule import HASchedule, schedule
from pve_steward.analysis.planner.handoff import hand_off
from pve_steward.analysis.planner.models import (
    Blocker,
    EvacuationPlan,
    HAGuest,
    ReservedRoom,
    Step,
    TargetCapacity,
    Verdict,
)
from pve_steward.analysis.planner.phases import Window, memory_of, place_phase, stop_for_window
from pve_steward.analysis.planner.placement import Placement
from pve_steward.analysis.planner.production import Overrides, classify
from pve_steward.analysis.planner.readiness import address_clashes, readiness
from pve_steward.analysis.thresholds import Thresholds

GiB = 1024**3


class Ledger:
    """Blockers and findings of a plan, recorded together."""

    def __init__(self, data: ClusterData) -> None:
        self.data = data
        self.blockers: list[Blocker] = []
        self.findings: list[Finding] = []

    def block(self, vmid: int, name: str, code: str, detail: str) -> None:
        self.blockers.append(Blocker(vmid=vmid, name=name, code=code, detail=detail))
        self.findings.append(
            finding(code, guest_subject(self.data, vmid), f"{vmid} ({name}): {detail}", {"vmid": vmid})
        )

    def block_verdict(self, m: Migratability) -> None:
        for r in m.blocking:
            code = "MIGRATE_DOWNTIME_NOT_ALLOWED" if r.code == "MIGRATE_RESTART_REQUIRED" else r.code
            self.block(m.vmid, m.name, code, r.detail)


def gaps_for(data: ClusterData, *, ha: bool, backups: bool = False) -> list[Missing]:
    """The failed reads this answer stands on: migration data always, HA data when HA-managed guests are
    part of it (their targets come from HA rules or groups), backup data when the answer judges backup age
    (the plan's readiness). Optional gaps show in the verdicts they leave not provable, not here."""
    areas = ("migration",) + (("ha",) if ha else ()) + (("backups",) if backups else ())
    return [
        m for m in data.missing if m.leaves_plan_incomplete and (not m.affects or any(a in m.affects for a in areas))
    ]


def data_gaps(data: ClusterData, *, ha: bool, backups: bool = False) -> list[Finding]:
    """What this plan could not read, and what PVE hides from the token (a guest, a storage, HA's lists): either
    leaves the plan incomplete, the latter said as a skipped check naming the privilege (pve/visibility.py)."""
    gaps = gaps_for(data, ha=ha, backups=backups)
    return [
        finding(
            "CHECK_SKIPPED" if gap.hidden else "DATA_INCOMPLETE",
            Subject(kind="data", id=gap.path, node=gap.node),
            f"{'skipped' if gap.hidden else 'could not read'} {gap.what}: {gap.error}",
            {"path": gap.path, "status": gap.status},
        )
        for gap in gaps
    ]


def stop_reason(data: ClusterData, node: str) -> str | None:
    """Step 1: why nothing can move at all (PVE's migrate checks the source node and quorum first)."""
    cluster = next((r for r in data.cluster_status if r.get("type") == "cluster"), None)
    if node not in data.nodes:
        return f"node {node} is not in this cluster"
    if not data.nodes[node].get("online"):
        return f"node {node} is offline: migrations need the source node online"
    if cluster is not None and not cluster.get("quorate"):
        return "the cluster has no quorum: no migration can run"
    return None


def order_steps(steps: list[Step]) -> list[Step]:
    """Step 5: phase by phase (production first), within one cheap moves first (no disk copy, no downtime);
    deterministic."""
    steps.sort(
        key=lambda s: (s.phase != "keep_running", s.copy_bytes > 0, s.downtime != "none", -s.memory_bytes, s.vmid)
    )
    for i, s in enumerate(steps, start=1):
        s.order = i
    return steps


def _verdict(guests: int, blocked: int, steps: int, ha_moved: int) -> Verdict:
    if not guests or not blocked:
        return "EVACUATION_READY"
    if steps or (ha_moved and blocked < guests):
        return "EVACUATION_PARTIAL"
    return "EVACUATION_BLOCKED"


def plan_evacuation(
    data: ClusterData,
    node: str,
    *,
    allowed: list[str] | None = None,
    denied: list[str] | None = None,
    allow_offline: bool = False,
    headroom_pct: float = 10.0,
    ceph: NodeCeph | None = None,
    options: Row | None = None,
    overrides: Overrides | None = None,
    running_configs: dict[int, Row] | None = None,
    backups_read: bool = False,
    thresholds: Thresholds | None = None,
) -> EvacuationPlan:
    """Plan; with ``ceph`` (the node runs Ceph daemons) the plan also carries Ceph's verdict and steps.

    ``options``: /cluster/options (HA's scheduler and shutdown policy; None: not read); ``overrides``: what the
    request says is production; ``running_configs``: the configs of the cluster's running guests (address
    clashes; None: not read); ``backups_read``: whether ``data`` holds the backup jobs and contents."""
    inputs = _Inputs(options, overrides or Overrides(), running_configs, backups_read, thresholds)
    plan = _plan(data, node, allowed, denied, allow_offline, headroom_pct, inputs)
    if ceph is None:
        return plan
    return with_ceph(plan, ceph)


def with_running_configs(
    plan: EvacuationPlan, data: ClusterData, configs: dict[int, Row], unread: int
) -> EvacuationPlan:
    """The plan's readiness with the address clashes of the guests that start at boot, once the running guests'
    configs were read (the tool reads them only when some guest will start)."""
    r = plan.readiness
    if r is None:
        return plan
    gaps = [g for g in r.not_provable if not g.startswith("address clashes")]
    if unread:
        gaps.append(
            f"address clashes: {unread} running guest config(s) could not be read, so clashes with them are unknown"
        )
    update = {"address_clashes": address_clashes(data, r.onboot_on_return, configs), "not_provable": gaps}
    return plan.model_copy(update={"readiness": r.model_copy(update=update)})


class _Inputs:
    """What a plan reads besides the cluster data."""

    def __init__(
        self,
        options: Row | None,
        overrides: Overrides,
        running_configs: dict[int, Row] | None,
        backups_read: bool,
        thresholds: Thresholds | None,
    ) -> None:
        self.options, self.overrides, self.running_configs = options, overrides, running_configs
        self.backups_read, self.thresholds = backups_read, thresholds


def with_ceph(plan: EvacuationPlan, ceph: NodeCeph) -> EvacuationPlan:
    """Ceph's ok-to-stop blocks the maintenance however well the guests move: the node cannot go down."""
    checks, steps, found = ceph_evacuation(ceph, plan.node)
    unsafe = [c.daemon for c in checks if c.safe is False]
    update: dict[str, object] = {
        "ceph_checks": checks,
        "ceph_steps": steps,
        "findings": sorted(plan.findings + found, key=rank_key),
        "complete": plan.complete and all(c.safe is not None for c in checks),
    }
    if unsafe:
        update["verdict"] = "EVACUATION_BLOCKED"
        update["summary"] = f"EVACUATION_BLOCKED: Ceph says {', '.join(unsafe)} not ok to stop; " + plan.summary
    return plan.model_copy(update=update)


def _params(
    allowed: list[str] | None, denied: list[str] | None, allow_offline: bool, headroom_pct: float, ov: Overrides
) -> dict[str, object]:
    params: dict[str, object] = {
        "allowed": allowed,
        "denied": denied,
        "allow_offline": allow_offline,
        "headroom_percent": headroom_pct,
    }
    for key, value in (
        ("keep_running_vmids", ov.keep_vmids),
        ("keep_running_tags", ov.keep_tags),
        ("may_stop_vmids", ov.stop_vmids),
        ("may_stop_tags", ov.stop_tags),
    ):
        if value:
            params[key] = sorted(value)
    return params


def _plan(
    data: ClusterData,
    node: str,
    allowed: list[str] | None,
    denied: list[str] | None,
    allow_offline: bool,
    headroom_pct: float,
    inputs: _Inputs,
) -> EvacuationPlan:
    params = _params(allowed, denied, allow_offline, headroom_pct, inputs.overrides)
    ledger = Ledger(data)
    guests = sorted((g for g in data.guests.values() if g.get("node") == node), key=lambda g: int(g["vmid"]))
    ha = any(data.ha_managed(int(str(g["vmid"]))) is not None for g in guests)
    gaps = data_gaps(data, ha=ha, backups=inputs.backups_read)
    ledger.findings += gaps
    stop = stop_reason(data, node)
    if stop:
        return _nothing_moves(data, node, guests, stop, ledger, params, complete=not gaps)
    targets_ok, excluded = eligible_targets(data, node, allowed, denied)
    placement = Placement(data, targets_ok, headroom_pct)
    halted = disarm(data)
    ha_guests, ha_verdicts, schedulable = _split(data, guests, ledger, allowed, denied, allow_offline, halted)
    sched = _phase_ha(data, node, ha_guests, ha_verdicts, placement, headroom_pct, inputs.options)
    steps, window = _outside_ha(data, node, schedulable, placement, sched, inputs.overrides, ledger)
    _ha_problems(ha_guests, sched, window, ledger, Placement(data, list(sched.room), headroom_pct).unseen_room)
    if halted is not None:
        ledger.findings.append(disarm_finding(halted, node))
    moved = [h for h in ha_guests if h.moved_by_ha]
    blocked = len({b.vmid for b in ledger.blockers})
    verdict = _verdict(len(guests), blocked, len(steps), len(moved))
    summary = _summary(verdict, len(steps), len(ha_guests), len(moved), blocked, window, node, bool(gaps))
    ledger.findings.sort(key=rank_key)
    return EvacuationPlan(
        node=node,
        verdict=verdict,
        summary=summary,
        steps=steps,
        blockers=ledger.blockers,
        ha_guests=ha_guests,
        ha_recommendation=recommendation(node, moved, halted),
        targets=[_capacity(placement, t) for t in targets_ok],
        excluded_targets=excluded,
        findings=ledger.findings,
        complete=not gaps,
        parameters=params,
        phases=phase_list(moved, steps, window, sched, halted),
        reserved=[
            ReservedRoom(node=n, vmids=sorted(sched.reserved_vmids.get(n, [])), memory_bytes=b, why=kept_why(sched, n))
            for n, b in sorted(sched.reserved.items())
            if b
        ],
        stop_for_window=window.stops,
        stop_sufficient=window.sufficient,
        readiness=readiness(
            data,
            node,
            steps,
            window.stops,
            options=inputs.options,
            disarm=halted,
            ha_moved=len(moved),
            ha_left=len(ha_guests) - len(moved),
            running_configs=inputs.running_configs,
            backups_read=inputs.backups_read,
            t=inputs.thresholds,
        ),
    )


def _nothing_moves(
    data: ClusterData,
    node: str,
    guests: list[Row],
    stop: str,
    ledger: Ledger,
    params: dict[str, object],
    complete: bool,
) -> EvacuationPlan:
    """Step 1 failed: every guest is blocked for the one reason."""
    for g in guests:
        ledger.block(int(g["vmid"]), str(g.get("name") or g["vmid"]), "MIGRATE_NO_TARGET", stop)
    return EvacuationPlan(
        node=node,
        verdict="EVACUATION_BLOCKED",
        summary=stop,
        steps=[],
        blockers=ledger.blockers,
        ha_guests=[],
        targets=[],
        findings=ledger.findings,
        complete=complete,
        parameters=params,
    )


def _outside_ha(
    data: ClusterData,
    node: str,
    schedulable: list[Migratability],
    placement: Placement,
    sched: HASchedule,
    ov: Overrides,
    ledger: Ledger,
) -> tuple[list[Step], Window]:
    """Phases 2 to 4: production guests, the rest, and what to stop when room is short; the ordered steps."""
    movable = [m for m in schedulable if m.verdict != "blocked"]
    for m in schedulable:
        if m.verdict == "blocked":
            ledger.block_verdict(m)
    keep = [m for m in movable if m.status == "running" and classify(data, m.vmid, ov).production]
    kept = {m.vmid for m in keep}
    phase2 = place_phase(keep, placement, "keep_running")
    phase3 = place_phase([m for m in movable if m.vmid not in kept], placement, "rest")
    planned, unplaced = phase2.steps + phase3.steps, phase2.unplaced + phase3.unplaced
    short = {n: b - r for n, b in sched.reserved.items() if b > (r := sched.room.get(n, 0))}
    window = stop_for_window(data, node, placement, planned, [u for u in unplaced if memory_of(u[0])], short, ov)
    for m, why in window.unplaced + [u for u in unplaced if not memory_of(u[0])]:
        unseen = placement.unseen_room(m.movable_to())  # room the token cannot see: not provable, not short
        ledger.block(m.vmid, m.name, "MIGRATE_NOT_PROVABLE" if unseen else "MIGRATE_CAPACITY", unseen or why)
    return order_steps([s for s in planned if s.vmid not in window.dropped] + window.steps), window


def _summary(
    verdict: Verdict, steps: int, ha: int, moved: int, blocked: int, window: Window, node: str, gaps: bool
) -> str:
    stopping = len([s for s in window.stops if s.vmid in window.dropped or s.node != node])
    return (
        f"{verdict}: {steps} migration(s) planned, {moved} HA-managed guest(s) left to HA "
        f"maintenance, {ha - moved} HA guest(s) HA leaves behind, {blocked} guest(s) blocked"
        + (f", {len(window.stops)} guest(s) to stop for the window" if window.stops else "")
        + (f" ({stopping} of them to make room)" if stopping else "")
        + ("; some data could not be read" if gaps else "")
    )


def _phase_ha(
    data: ClusterData,
    node: str,
    ha_guests: list[HAGuest],
    verdicts: list[Migratability],
    placement: Placement,
    headroom_pct: float,
    options: Row | None,
) -> HASchedule:
    """Phase 1: HA chooses among every HA-online node, whatever the operator allowed; its room is kept there."""
    away = maintenance_nodes(data)
    room = {n: node_room(data, n, headroom_pct).free for n in data.online_nodes if n != node and n not in away}
    movable = {m.vmid: _movable_for_ha(m) for m in verdicts}
    sched = schedule(data, node, ha_guests, movable, room, options)
    for n, b in sched.reserved.items():
        placement.reserve(n, b)
    for h in ha_guests:
        move = sched.moves.get(h.vmid)
        if move is not None:
            h.ha_targets, h.ha_target_provable = list(move.nodes), move.provable
    return sched


def _ha_problems(
    ha_guests: list[HAGuest],
    sched: HASchedule,
    window: Window,
    ledger: Ledger,
    unseen_room: Callable[[list[str]], str | None],
) -> None:
    """HA's moves that stay in doubt; a lack of room the listed stops make up for is no longer one, and one on a
    node whose figures the token cannot see is not provable (pve/visibility.py)."""
    for h in ha_guests:
        move = sched.moves.get(h.vmid)
        if move is None or move.problem is None:
            continue
        code, problem = move.problem
        if code == "MIGRATE_CAPACITY" and not any(n in window.ha_short for n in move.nodes):
            continue
        unseen = unseen_room(list(move.nodes)) if code == "MIGRATE_CAPACITY" else None
        if unseen:
            code, problem = "MIGRATE_NOT_PROVABLE", f"{problem}; but {unseen}"
        h.problems.append(problem)
        ledger.block(h.vmid, h.name, code, problem)


register_codes(
    "ha",
    __name__,
    Code(
        "HA_GUEST_LEFT_BEHIND",
        "warning",
        "HA maintenance leaves this guest on the node",
        "The HA manager moves started services off a node in maintenance; a service in error state, or requested "
        "stopped or disabled, stays on the node (pve-ha-manager Manager.pm).",
        "Error state: ha-manager set <sid> --state disabled, fix, migrate, re-enable. Stopped/disabled: ha-manager "
        "migrate <sid> <target>, or leave it on the node.",
    ),
)


def _split(
    data: ClusterData,
    guests: list[dict[str, object]],
    ledger: Ledger,
    allowed: list[str] | None,
    denied: list[str] | None,
    allow_offline: bool,
    halted: Disarm | None = None,
) -> tuple[list[HAGuest], list[Migratability], list[Migratability]]:
    """Step 3 and the first half of step 5: HA guests are handed off (with their verdicts), the others get a
    verdict to place."""
    ha_guests: list[HAGuest] = []
    ha_verdicts: list[Migratability] = []
    schedulable: list[Migratability] = []
    for g in guests:
        vmid = int(str(g["vmid"]))
        res = data.ha_managed(vmid)
        if res is None:
            # HA hidden from the token: the guest may be HA's to move, with the downtime HA's relocation takes, so
            # only "not provable" stands (the verdict says why), never a downtime the plan would refuse
            unseen = "ha_resources" in data.unread
            downtime = allow_offline or unseen
            schedulable.append(assess(data, vmid, allowed=allowed, denied=denied, allow_downtime=downtime))
            continue
        m = assess(data, vmid, allow_downtime=True)
        h = hand_off(data, m, res, g.get("status") == "running", halted)
        ha_guests.append(h)
        ha_verdicts.append(m)
        ledger.findings.append(
            finding(
                "MIGRATE_HA_MANAGED",
                guest_subject(data, vmid),
                f"{vmid} ({m.name}) is HA-managed ({h.sid}): "
                + ("HA maintenance moves it" if h.moved_by_ha else "HA maintenance leaves it on the node"),
                {"sid": h.sid, "state": h.state, "crm_state": h.crm_state},
            )
        )
        if h.action is not None:
            ledger.block(vmid, m.name, "HA_GUEST_LEFT_BEHIND", h.action)
        for p in h.problems:
            ledger.block(vmid, m.name, "HA_GUEST_NOT_MIGRATABLE", p)
        for p in not_visible(m):  # what the token cannot see: not provable, not "cannot move"
            ledger.block(vmid, m.name, "MIGRATE_NOT_PROVABLE", p)
    return ha_guests, ha_verdicts, schedulable


def _movable_for_ha(m: Migratability) -> set[str]:
    """Where the guest can go as HA's scheduler sees it: a node PVE's precondition blocks only for resource
    affinity counts (the precondition is the migrate command's view; ha_schedule applies the scheduler's). A
    verdict that stands on what the token cannot see says nothing of where: every target stays a candidate."""
    if not_visible(m):
        return {n for t in m.targets for n in t.nodes}
    return {
        n
        for t in m.targets
        if t.mode or (t.reasons and all(r.code == "MIGRATE_HA_AFFINITY" for r in t.reasons if r.blocking))
        for n in t.nodes
    }


def _capacity(placement: Placement, node: str) -> TargetCapacity:
    room = placement.rooms[node]
    return TargetCapacity(
        node=node,
        total_bytes=room.total,
        committed_before_bytes=room.committed,
        headroom_bytes=room.headroom,
        reserved_bytes=placement.reserved[node],
        planned_bytes=placement.planned[node],
        free_after_bytes=placement.free[node],
        guests_added=placement.added[node],
    )
