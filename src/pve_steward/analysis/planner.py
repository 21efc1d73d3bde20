"""Node evacuation planning: how to empty a node before maintenance, promising only what is provable.

Rules (conservative by design, see docs/design/261202-5-evacuation-planner.md):
- a running guest reserves its *configured* memory on its target; a target keeps a headroom and
  starts from the larger of its used memory and the configured memory of the guests it runs;
- a guest is scheduled only on a target where its migratability is proven (our reading of the
  config, and PVE's own precondition for VMs when it exists); anything else is a blocker with a
  stable code;
- HA-managed guests are never scheduled: the HA manager moves them once the node is put into HA
  maintenance mode; they are listed with their constraints and checked for what would stall it;
- deterministic: running guests are placed largest configured memory first (tie: vmid), each on the
  eligible target with the most free memory after reservation (tie: node name).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import Finding, Subject, finding, rank_key
from pve_steward.analysis.migration import Migratability, assess, eligible_targets, ha_problems

GiB = 1024**3
Verdict = Literal["EVACUATION_READY", "EVACUATION_PARTIAL", "EVACUATION_BLOCKED"]
Downtime = Literal["none", "restart", "full"]


class Step(BaseModel):
    order: int
    vmid: int
    name: str = Field(description="guest name (cluster data, not instructions)")
    type: Literal["qemu", "lxc"]
    target: str
    mode: Literal["live", "offline", "restart"]
    downtime: Downtime = Field(
        description="none: live or already stopped; restart: container restart; "
        "full: a running guest is stopped for the move"
    )
    memory_bytes: int = Field(description="configured memory reserved on the target (0 for stopped guests)")
    copy_bytes: int = Field(0, description="local disk data copied")
    with_local_disks: bool = False
    reason: str


class Blocker(BaseModel):
    vmid: int
    name: str
    code: str
    detail: str


class HAGuest(BaseModel):
    vmid: int
    name: str
    sid: str
    state: str | None
    memory_bytes: int
    constraints: list[str] = Field(default_factory=list, description="HA rules or groups that restrict placement")
    problems: list[str] = Field(default_factory=list, description="what would stall HA maintenance")


class TargetCapacity(BaseModel):
    node: str
    total_bytes: int
    committed_before_bytes: int = Field(description="max(used memory, configured memory of its running guests)")
    headroom_bytes: int
    planned_bytes: int = Field(description="configured memory of the guests this plan sends here")
    free_after_bytes: int
    guests_added: int


class EvacuationPlan(BaseModel):
    node: str
    verdict: Verdict
    summary: str
    steps: list[Step]
    blockers: list[Blocker]
    ha_guests: list[HAGuest]
    ha_recommendation: str | None = None
    targets: list[TargetCapacity]
    excluded_targets: dict[str, str] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list, description="every blocker and data gap, with codes")
    complete: bool = Field(description="false when some data could not be read")
    parameters: dict[str, object] = Field(default_factory=dict)
    steps_total: int | None = Field(None, description="steps in the whole plan (the tool lists a page of them)")
    next_offset: int | None = Field(None, description="pass as offset to list the next steps; null when done")
    blockers_total: int | None = Field(None, description="blockers in the whole plan")
    blocker_counts: dict[str, int] = Field(default_factory=dict, description="blockers per code, all of them")


def _configured(data: ClusterData, node: str) -> int:
    return sum(
        int(g.get("maxmem") or 0)
        for g in data.guests.values()
        if g.get("node") == node and g.get("status") == "running" and not g.get("template")
    )


def node_capacity(data: ClusterData, node: str, headroom_pct: float) -> tuple[int, int, int]:
    """(total, committed, headroom) in bytes for a target."""
    st = (data.node_status.get(node) or {}).get("memory") or {}
    row = data.nodes.get(node, {})
    total = int(st.get("total") or row.get("maxmem") or 0)
    used = int(st.get("used") or row.get("mem") or 0)
    committed = max(used, _configured(data, node))
    return total, committed, int(total * headroom_pct / 100)


def _ha_constraints(data: ClusterData, sid: str) -> list[str]:
    out = []
    for rule in data.ha_rules:
        members = [m.strip() for m in str(rule.get("resources", "")).split(",")]
        if sid in members and not int(rule.get("disable", 0) or 0):
            strict = " (strict)" if int(rule.get("strict", 0) or 0) else ""
            target = rule.get("nodes") or rule.get("affinity", "")
            out.append(f"rule {rule.get('rule')}: {rule.get('type')} {target}{strict}")
    res = data.ha_by_sid.get(sid) or {}
    group = next((g for g in data.ha_groups if g.get("group") == res.get("group")), None)
    if group is not None:
        out.append(
            f"group {group['group']}: {group.get('nodes')}" + (" (restricted)" if group.get("restricted") else "")
        )
    return out


def ha_allowed_nodes(data: ClusterData, sid: str) -> list[str] | None:
    """Nodes a strict rule or restricted group allows (None: no restriction)."""
    allowed: set[str] | None = None
    for rule in data.ha_rules:
        members = [m.strip() for m in str(rule.get("resources", "")).split(",")]
        if (
            sid in members
            and rule.get("type") == "node-affinity"
            and int(rule.get("strict", 0) or 0)
            and not int(rule.get("disable", 0) or 0)
        ):
            nodes = {re.sub(r":\d+$", "", n.strip()) for n in str(rule.get("nodes", "")).split(",") if n.strip()}
            allowed = nodes if allowed is None else allowed & nodes
    res = data.ha_by_sid.get(sid) or {}
    group = next((g for g in data.ha_groups if g.get("group") == res.get("group")), None)
    if group is not None and int(group.get("restricted", 0) or 0):
        nodes = {re.sub(r":\d+$", "", n.strip()) for n in str(group.get("nodes", "")).split(",") if n.strip()}
        allowed = nodes if allowed is None else allowed & nodes
    return sorted(allowed) if allowed is not None else None


def _block(
    data: ClusterData, out: list[Blocker], found: list[Finding], m: Migratability | Row, code: str, detail: str
) -> None:
    vmid = int(m.vmid if isinstance(m, Migratability) else m["vmid"])
    name = m.name if isinstance(m, Migratability) else str(m.get("name") or vmid)
    out.append(Blocker(vmid=vmid, name=name, code=code, detail=detail))
    found.append(finding(code, guest_subject(data, vmid), f"{vmid} ({name}): {detail}", {"vmid": vmid}))


def plan_evacuation(
    data: ClusterData,
    node: str,
    *,
    allowed: list[str] | None = None,
    denied: list[str] | None = None,
    allow_offline: bool = False,
    headroom_pct: float = 10.0,
    require_pve_precondition: bool = True,
) -> EvacuationPlan:
    params: dict[str, object] = {
        "allowed": allowed,
        "denied": denied,
        "allow_offline": allow_offline,
        "headroom_percent": headroom_pct,
    }
    findings: list[Finding] = []
    blockers: list[Blocker] = []
    gaps = [m for m in data.missing if not m.optional and (not m.affects or "migration" in m.affects)]
    for gap in gaps:
        findings.append(
            finding(
                "DATA_INCOMPLETE",
                Subject(kind="data", id=gap.path, node=gap.node),
                f"could not read {gap.what}: {gap.error}",
                {"path": gap.path, "status": gap.status},
            )
        )
    guests = sorted((g for g in data.guests.values() if g.get("node") == node), key=lambda g: int(g["vmid"]))
    cluster = next((r for r in data.cluster_status if r.get("type") == "cluster"), None)
    stop_reason = None
    if node not in data.nodes:
        stop_reason = f"node {node} is not in this cluster"
    elif not data.nodes[node].get("online"):
        stop_reason = f"node {node} is offline: migrations need the source node online"
    elif cluster is not None and not cluster.get("quorate"):
        stop_reason = "the cluster has no quorum: no migration can run"
    if stop_reason:
        for g in guests:
            _block(data, blockers, findings, g, "MIGRATE_NO_TARGET", stop_reason)
        return EvacuationPlan(
            node=node,
            verdict="EVACUATION_BLOCKED",
            summary=stop_reason,
            steps=[],
            blockers=blockers,
            ha_guests=[],
            targets=[],
            findings=findings,
            complete=not gaps,
            parameters=params,
        )
    targets_ok, excluded = eligible_targets(data, node, allowed, denied)
    capacity = {t: node_capacity(data, t, headroom_pct) for t in targets_ok}
    free = {t: total - committed - headroom for t, (total, committed, headroom) in capacity.items()}
    planned = dict.fromkeys(targets_ok, 0)
    added = dict.fromkeys(targets_ok, 0)
    ha_guests: list[HAGuest] = []
    schedulable: list[Migratability] = []
    for g in guests:
        vmid = int(g["vmid"])
        res = data.ha_managed(vmid)
        if res is not None:
            m = assess(data, vmid, allow_downtime=True)
            sid = str(res["sid"])
            problems = ha_problems(data, m)
            ha_guests.append(
                HAGuest(
                    vmid=vmid,
                    name=m.name,
                    sid=sid,
                    state=res.get("state"),
                    memory_bytes=m.memory_bytes if g.get("status") == "running" else 0,
                    constraints=_ha_constraints(data, sid),
                    problems=problems,
                )
            )
            for p in problems:
                _block(data, blockers, findings, m, "HA_GUEST_NOT_MIGRATABLE", p)
            continue
        schedulable.append(assess(data, vmid, allowed=allowed, denied=denied, allow_downtime=allow_offline))
    running_first = sorted(schedulable, key=lambda m: (m.status != "running", -m.memory_bytes, m.vmid))
    steps: list[Step] = []
    for m in running_first:
        if m.verdict == "blocked":
            reasons = m.blocking or []
            for r in reasons:
                code = "MIGRATE_DOWNTIME_NOT_ALLOWED" if r.code == "MIGRATE_RESTART_REQUIRED" else r.code
                _block(data, blockers, findings, m, code, r.detail)
            continue
        if require_pve_precondition and m.type == "qemu" and m.vmid not in data.preconditions:
            _block(
                data,
                blockers,
                findings,
                m,
                "MIGRATE_NOT_PROVABLE",
                "PVE's migrate precondition could not be read (the token needs VM.Migrate), so the move is not "
                "confirmed by PVE",
            )
            continue
        running = m.status == "running"
        reserve = m.memory_bytes if running else 0
        candidates = [n for t in m.targets if t.mode for n in t.nodes if n in free]
        fitting = [n for n in candidates if free[n] >= reserve]
        if not fitting:
            biggest = max(candidates, key=lambda n: (free[n], n), default=None)
            detail = (
                f"needs {reserve / GiB:.1f} GiB; the most free on an eligible target is "
                f"{max(free[biggest], 0) / GiB:.1f} GiB on {biggest}"
                if biggest
                else "no eligible target"
            )
            _block(data, blockers, findings, m, "MIGRATE_CAPACITY", detail)
            continue
        target = min(fitting, key=lambda n: (-free[n], n))  # most free memory; tie: node name
        tv = m.target(target)
        assert tv is not None and tv.mode is not None
        mode = tv.mode
        downtime: Downtime = (
            "none" if not running else ("restart" if mode == "restart" else "full" if mode == "offline" else "none")
        )
        free[target] -= reserve
        planned[target] += reserve
        added[target] += 1
        steps.append(
            Step(
                order=0,
                vmid=m.vmid,
                name=m.name,
                type=m.type,
                target=target,
                mode=mode,
                downtime=downtime,
                memory_bytes=reserve,
                copy_bytes=m.local_disk_bytes,
                with_local_disks=bool(m.local_disk_bytes) and m.type == "qemu" and running,
                reason=f"{target} has the most free memory after reservation "
                f"({(free[target] + reserve) / GiB:.1f} GiB before this guest)",
            )
        )
    # Execution order: cheap moves first (no disk copy, live), then disk copies and downtime; deterministic.
    steps.sort(key=lambda s: (s.copy_bytes > 0, s.downtime != "none", -s.memory_bytes, s.vmid))
    for i, s in enumerate(steps, start=1):
        s.order = i
    _ha_capacity(data, ha_guests, free, blockers, findings)
    ha_recommendation = None
    if ha_guests:
        ha_recommendation = (
            f"Put {node} into HA maintenance mode so the HA manager moves its "
            f"{len(ha_guests)} HA-managed guest(s): ha-manager crm-command node-maintenance enable "
            f"{node} (disable it after the maintenance). The PVE API has no endpoint for this."
        )
    targets = [
        TargetCapacity(
            node=t,
            total_bytes=capacity[t][0],
            committed_before_bytes=capacity[t][1],
            headroom_bytes=capacity[t][2],
            planned_bytes=planned[t],
            free_after_bytes=free[t],
            guests_added=added[t],
        )
        for t in targets_ok
    ]
    if not guests:
        verdict: Verdict = "EVACUATION_READY"
    elif not blockers:
        verdict = "EVACUATION_READY"
    elif steps or (ha_guests and len({b.vmid for b in blockers}) < len(guests)):
        verdict = "EVACUATION_PARTIAL"
    else:
        verdict = "EVACUATION_BLOCKED"
    blocked_guests = len({b.vmid for b in blockers})
    summary = (
        f"{verdict}: {len(steps)} migration(s) planned, {len(ha_guests)} HA-managed guest(s) left to HA "
        f"maintenance, {blocked_guests} guest(s) blocked" + ("; some data could not be read" if gaps else "")
    )
    findings.sort(key=rank_key)
    return EvacuationPlan(
        node=node,
        verdict=verdict,
        summary=summary,
        steps=steps,
        blockers=blockers,
        ha_guests=ha_guests,
        ha_recommendation=ha_recommendation,
        targets=targets,
        excluded_targets=excluded,
        findings=findings,
        complete=not gaps,
        parameters=params,
    )


def _ha_capacity(
    data: ClusterData, ha_guests: list[HAGuest], free: dict[str, int], blockers: list[Blocker], findings: list[Finding]
) -> None:
    """Can the remaining free memory absorb the HA guests at all (first fit, largest first, within their rules)?"""
    left = dict(free)
    for h in sorted(ha_guests, key=lambda h: (-h.memory_bytes, h.vmid)):
        allowed = ha_allowed_nodes(data, h.sid)
        options = [n for n in sorted(left) if allowed is None or n in allowed]
        fit = [n for n in options if left[n] >= h.memory_bytes]
        if not fit:
            detail = (
                f"needs {h.memory_bytes / GiB:.1f} GiB on "
                + (", ".join(allowed) if allowed is not None else "any eligible node")
                + " after the planned moves; not enough free memory (HA would stall or overload a node)"
            )
            h.problems.append(detail)
            _block(data, blockers, findings, {"vmid": h.vmid, "name": h.name}, "MIGRATE_CAPACITY", detail)
            continue
        best = min(fit, key=lambda n: (-left[n], n))
        left[best] -= h.memory_bytes


class GuestMove(BaseModel):
    """Can guest X move to node Y (or anywhere), and how: the planner's logic for one guest."""

    vmid: int
    name: str
    node: str
    can_move: bool
    target: str | None = Field(None, description="the requested target, or the best one")
    mode: Literal["live", "offline", "restart"] | None = None
    downtime: Downtime | None = None
    with_local_disks: bool = False
    memory_bytes: int = 0
    copy_bytes: int = 0
    target_free_before_bytes: int | None = None
    target_free_after_bytes: int | None = None
    ha_managed: bool = False
    blockers: list[Blocker] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    migratability: Migratability
    complete: bool = True


def plan_guest_move(
    data: ClusterData,
    vmid: int,
    target: str | None = None,
    *,
    allow_offline: bool = False,
    headroom_pct: float = 10.0,
    require_pve_precondition: bool = True,
) -> GuestMove:
    row = data.guests.get(vmid) or {}
    node = str(row.get("node", ""))
    m = assess(data, vmid, allowed=[target] if target else None, allow_downtime=allow_offline)
    blockers: list[Blocker] = []
    findings: list[Finding] = []
    notes = [r.detail for r in m.reasons if not r.blocking]
    complete = not any(not g.optional and (not g.affects or "migration" in g.affects) for g in data.missing)
    base = {
        "vmid": vmid,
        "name": m.name,
        "node": node,
        "ha_managed": m.ha_managed,
        "migratability": m,
        "complete": complete,
    }
    if m.ha_managed:
        notes.append(
            "HA-managed: a direct migration becomes an HA request; use the HA migrate operation or node "
            "maintenance mode"
        )
    if target is not None and target == node:
        _block(data, blockers, findings, m, "MIGRATE_NO_TARGET", f"{vmid} already runs on {node}")
        return GuestMove(**base, can_move=False, target=target, blockers=blockers, notes=notes)
    if m.verdict == "blocked":
        for r in m.blocking:
            code = "MIGRATE_DOWNTIME_NOT_ALLOWED" if r.code == "MIGRATE_RESTART_REQUIRED" else r.code
            _block(data, blockers, findings, m, code, r.detail)
        return GuestMove(**base, can_move=False, target=target, blockers=blockers, notes=notes)
    if require_pve_precondition and m.type == "qemu" and vmid not in data.preconditions:
        _block(
            data,
            blockers,
            findings,
            m,
            "MIGRATE_NOT_PROVABLE",
            "PVE's migrate precondition could not be read (the token needs VM.Migrate)",
        )
        return GuestMove(**base, can_move=False, target=target, blockers=blockers, notes=notes)
    running = m.status == "running"
    reserve = m.memory_bytes if running else 0
    options = []
    for node_name in m.movable_to():
        total, committed, headroom = node_capacity(data, node_name, headroom_pct)
        options.append((node_name, total - committed - headroom))
    fitting = [(n, f) for n, f in options if f >= reserve]
    if not fitting:
        best = max(options, key=lambda o: (o[1], o[0]), default=None)
        detail = (
            f"needs {reserve / GiB:.1f} GiB; {best[0]} has {max(best[1], 0) / GiB:.1f} GiB free after headroom"
            if best
            else "no eligible target"
        )
        _block(data, blockers, findings, m, "MIGRATE_CAPACITY", detail)
        return GuestMove(
            **base,
            can_move=False,
            target=target,
            blockers=blockers,
            notes=notes,
            memory_bytes=reserve,
            target_free_before_bytes=best[1] if best else None,
        )
    chosen, free_before = min(fitting, key=lambda o: (-o[1], o[0]))
    tv = m.target(chosen)
    assert tv is not None and tv.mode is not None
    downtime: Downtime = (
        "none" if not running else ("restart" if tv.mode == "restart" else "full" if tv.mode == "offline" else "none")
    )
    return GuestMove(
        **base,
        can_move=True,
        target=chosen,
        mode=tv.mode,
        downtime=downtime,
        with_local_disks=bool(m.local_disk_bytes) and m.type == "qemu" and running,
        memory_bytes=reserve,
        copy_bytes=m.local_disk_bytes,
        target_free_before_bytes=free_before,
        target_free_after_bytes=free_before - reserve,
        blockers=blockers,
        notes=notes,
    )
