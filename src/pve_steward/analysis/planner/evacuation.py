"""Node evacuation planning: how to empty a node before maintenance, promising only what is provable.

The procedure an operator follows (docs/design/261202-5-evacuation-planner.md, 261203-4):
1. can anything move at all (source online, quorum);
2. which targets (online, not in HA maintenance, allowed);
3. per guest, the verdict from config + storage (PVE's precondition as a cross-check);
4. capacity placement of the non-HA guests, running first, largest first;
5. the HA hand-off: what HA maintenance moves, what it leaves behind, whether the rest has room;
6. the execution order: cheap moves first.
"""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, register_codes
from pve_steward.analysis.data import ClusterData, Missing, guest_subject
from pve_steward.analysis.findings import Finding, Subject, finding, rank_key
from pve_steward.analysis.migration.findings import not_visible
from pve_steward.analysis.migration.model import Migratability
from pve_steward.analysis.migration.targets import eligible_targets
from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.planner.ceph_steps import NodeCeph, ceph_evacuation
from pve_steward.analysis.planner.ha_placement import ha_capacity
from pve_steward.analysis.planner.handoff import hand_off
from pve_steward.analysis.planner.models import (
    Blocker,
    Downtime,
    EvacuationPlan,
    HAGuest,
    Step,
    TargetCapacity,
    Verdict,
)
from pve_steward.analysis.planner.placement import Placement

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


def gaps_for(data: ClusterData, *, ha: bool) -> list[Missing]:
    """The failed reads this answer stands on: migration data always, HA data when HA-managed guests are
    part of it (their targets come from HA rules or groups). Optional gaps show in the verdicts they leave
    not provable, not here."""
    areas = ("migration", "ha") if ha else ("migration",)
    return [
        m
        for m in data.missing
        if (not m.optional or m.hidden) and (not m.affects or any(a in m.affects for a in areas))
    ]


def data_gaps(data: ClusterData, *, ha: bool) -> list[Finding]:
    """What this plan could not read, and what PVE hides from the token (a guest, a storage, HA's lists): either
    leaves the plan incomplete, the latter said as a skipped check naming the privilege (pve/visibility.py)."""
    gaps = gaps_for(data, ha=ha)
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


def downtime_of(running: bool, mode: str) -> Downtime:
    if not running or mode == "live":
        return "none"
    return "restart" if mode == "restart" else "full"


def place(m: Migratability, placement: Placement, ledger: Ledger) -> Step | None:
    """Step 4 for one guest: a target with room, or a blocker."""
    if m.verdict == "blocked":
        ledger.block_verdict(m)
        return None
    running = m.status == "running"
    reserve = m.memory_bytes if running else 0
    target, why = placement.choose(m.movable_to(), reserve)
    if target is None:
        unseen = placement.unseen_room(m.movable_to())  # room the token cannot see: not provable, not short
        ledger.block(m.vmid, m.name, "MIGRATE_NOT_PROVABLE" if unseen else "MIGRATE_CAPACITY", unseen or why)
        return None
    tv = m.target(target)
    assert tv is not None and tv.mode is not None
    before = placement.take(target, reserve)
    return Step(
        order=0,
        vmid=m.vmid,
        name=m.name,
        type=m.type,
        target=target,
        mode=tv.mode,
        downtime=downtime_of(running, tv.mode),
        memory_bytes=reserve,
        copy_bytes=m.local_disk_bytes,
        with_local_disks=bool(m.local_disk_bytes) and m.type == "qemu" and running and tv.mode == "live",
        reason=f"{target} has the most free memory after reservation ({before / GiB:.1f} GiB before this guest)",
        basis=m.basis,
    )


def order_steps(steps: list[Step]) -> list[Step]:
    """Step 6: cheap moves first (no disk copy, no downtime), then the rest; deterministic."""
    steps.sort(key=lambda s: (s.copy_bytes > 0, s.downtime != "none", -s.memory_bytes, s.vmid))
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
) -> EvacuationPlan:
    """Plan; with ``ceph`` (the node runs Ceph daemons) the plan also carries Ceph's verdict and steps."""
    plan = _plan(data, node, allowed, denied, allow_offline, headroom_pct)
    if ceph is None:
        return plan
    return with_ceph(plan, ceph)


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


def _plan(
    data: ClusterData,
    node: str,
    allowed: list[str] | None,
    denied: list[str] | None,
    allow_offline: bool,
    headroom_pct: float,
) -> EvacuationPlan:
    params: dict[str, object] = {
        "allowed": allowed,
        "denied": denied,
        "allow_offline": allow_offline,
        "headroom_percent": headroom_pct,
    }
    ledger = Ledger(data)
    guests = sorted((g for g in data.guests.values() if g.get("node") == node), key=lambda g: int(g["vmid"]))
    gaps = data_gaps(data, ha=any(data.ha_managed(int(str(g["vmid"]))) is not None for g in guests))
    ledger.findings += gaps
    stop = stop_reason(data, node)
    if stop:
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
            complete=not gaps,
            parameters=params,
        )
    targets_ok, excluded = eligible_targets(data, node, allowed, denied)
    placement = Placement(data, targets_ok, headroom_pct)
    ha_guests, ha_verdicts, schedulable = _split(data, guests, ledger, allowed, denied, allow_offline)
    running_first = sorted(schedulable, key=lambda m: (m.status != "running", -m.memory_bytes, m.vmid))
    steps = order_steps([s for m in running_first if (s := place(m, placement, ledger)) is not None])
    # HA chooses among every HA-online node, whatever the operator allowed: the others keep their room as it is
    everywhere, _out = eligible_targets(data, node)
    room = Placement(data, [t for t in everywhere if t not in placement.free], headroom_pct).free | placement.free
    movable = {m.vmid: _movable_for_ha(m) for m in ha_verdicts}
    unseen = Placement(data, everywhere, headroom_pct).unseen_room(everywhere)
    for vmid, (found, why) in ha_capacity(data, ha_guests, room, movable).items():
        short = found == "MIGRATE_CAPACITY" and unseen  # a node HA may choose has room the token cannot see
        code, problem = ("MIGRATE_NOT_PROVABLE", f"{why}; but {unseen}") if short else (found, why)
        h = next(h for h in ha_guests if h.vmid == vmid)
        h.problems.append(problem)
        ledger.block(h.vmid, h.name, code, problem)
    moved = [h for h in ha_guests if h.moved_by_ha]
    blocked = len({b.vmid for b in ledger.blockers})
    verdict = _verdict(len(guests), blocked, len(steps), len(moved))
    summary = (
        f"{verdict}: {len(steps)} migration(s) planned, {len(moved)} HA-managed guest(s) left to HA "
        f"maintenance, {len(ha_guests) - len(moved)} HA guest(s) HA leaves behind, {blocked} guest(s) blocked"
        + ("; some data could not be read" if gaps else "")
    )
    ledger.findings.sort(key=rank_key)
    return EvacuationPlan(
        node=node,
        verdict=verdict,
        summary=summary,
        steps=steps,
        blockers=ledger.blockers,
        ha_guests=ha_guests,
        ha_recommendation=_recommendation(node, moved),
        targets=[_capacity(placement, t) for t in targets_ok],
        excluded_targets=excluded,
        findings=ledger.findings,
        complete=not gaps,
        parameters=params,
    )


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
            schedulable.append(assess(data, vmid, allowed=allowed, denied=denied, allow_downtime=allow_offline))
            continue
        m = assess(data, vmid, allow_downtime=True)
        h = hand_off(data, m, res, g.get("status") == "running")
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
    affinity counts (the precondition is the migrate command's view; ha_capacity applies the scheduler's). A
    verdict that stands on what the token cannot see says nothing of where: every target stays a candidate."""
    if not_visible(m):
        return {n for t in m.targets for n in t.nodes}
    return {
        n
        for t in m.targets
        if t.mode or (t.reasons and all(r.code == "MIGRATE_HA_AFFINITY" for r in t.reasons if r.blocking))
        for n in t.nodes
    }


def _recommendation(node: str, moved: list[HAGuest]) -> str | None:
    if not moved:
        return None
    return (
        f"Put {node} into HA maintenance mode so the HA manager moves its {len(moved)} HA-managed guest(s): "
        f"ha-manager crm-command node-maintenance enable {node} (disable it after the maintenance). The PVE API "
        "has no endpoint for this."
    )


def _capacity(placement: Placement, node: str) -> TargetCapacity:
    room = placement.rooms[node]
    return TargetCapacity(
        node=node,
        total_bytes=room.total,
        committed_before_bytes=room.committed,
        headroom_bytes=room.headroom,
        planned_bytes=placement.planned[node],
        free_after_bytes=placement.free[node],
        guests_added=placement.added[node],
    )
