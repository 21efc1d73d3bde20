"""Can guest X move to node Y (or anywhere), and how: the planner's steps for one guest."""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.hastate import disarm
from pve_steward.analysis.migration.ha_rules import ha_allowed_nodes, ha_blocked_nodes
from pve_steward.analysis.migration.model import Migratability
from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.planner.evacuation import Ledger, gaps_for
from pve_steward.analysis.planner.ha_placement import together
from pve_steward.analysis.planner.models import GuestMove
from pve_steward.analysis.planner.phases import downtime_of
from pve_steward.analysis.planner.placement import Placement


def ha_targets(data: ClusterData, m: Migratability, ledger: Ledger) -> list[str] | None:
    """An HA guest's movable targets within its HA rules; None (and a blocker) when the rules leave none."""
    movable = m.movable_to()
    res = data.ha_managed(m.vmid)
    if res is None:
        return movable
    sid = str(res["sid"])
    allowed = ha_allowed_nodes(data, sid)
    blocked = ha_blocked_nodes(data, sid)
    ok = [n for n in movable if (allowed is None or n in allowed) and n not in blocked]
    if movable and not ok:
        why = []
        if allowed is not None:
            why.append(f"strict node affinity allows only {', '.join(allowed)}")
        if blocked:
            why.append(
                "negative resource affinity blocks "
                + ", ".join(f"{n} ({', '.join(s)})" for n, s in sorted(blocked.items()))
            )
        ledger.block(m.vmid, m.name, "MIGRATE_HA_AFFINITY", f"{sid}: " + "; ".join(why))
        return None
    return ok


def _partners(data: ClusterData, m: Migratability) -> list[tuple[str, int]]:
    """An HA guest's positive resource-affinity partners the HA manager moves along, with the memory a running
    one needs on the target (pve-ha-manager Manager.pm queue_resource_motion; ignored ones stay)."""
    res = data.ha_managed(m.vmid)
    if res is None:
        return []
    sid = str(res["sid"])
    out = []
    for other in sorted(together(data).get(sid, frozenset()) - {sid}):
        if (data.ha_by_sid.get(other) or {}).get("state") == "ignored":
            continue
        vmid = int(other.split(":", 1)[1]) if other.split(":", 1)[-1].isdecimal() else None
        row = data.guests.get(vmid) if vmid is not None else None
        cfg = data.parsed.get(vmid) if vmid is not None else None
        running = row is not None and row.get("status") == "running"
        out.append((other, cfg.memory_bytes if running and cfg is not None else 0))
    return out


def plan_guest_move(
    data: ClusterData,
    vmid: int,
    target: str | None = None,
    *,
    allow_offline: bool = False,
    headroom_pct: float = 10.0,
) -> GuestMove:
    row = data.guests.get(vmid) or {}
    node = str(row.get("node", ""))
    m = assess(data, vmid, allowed=[target] if target else None, allow_downtime=allow_offline)
    ledger = Ledger(data)
    notes = [r.detail for r in m.reasons if not r.blocking]
    complete = not gaps_for(data, ha=m.ha_managed)
    unread = [f"{g.what}: {g.error}" for g in data.missing]
    base = {
        "vmid": vmid,
        "name": m.name,
        "node": node,
        "ha_managed": m.ha_managed,
        "migratability": m,
        "complete": complete,
        "unread": unread,
    }
    halted = disarm(data)
    if m.ha_managed and halted is not None:  # freeze: ignore mode makes the guest unmanaged (not ha_managed)
        notes.append(
            f"HA is {halted.state} (freeze): an HA migrate request is never carried out and node maintenance is "
            "ignored until HA is re-armed (ha-manager crm-command arm-ha)"
        )
    elif m.ha_managed:
        notes.append("use the HA migrate operation or node maintenance mode")
    if target is not None and target == node:
        ledger.block(vmid, m.name, "MIGRATE_NO_TARGET", f"{vmid} already runs on {node}")
    elif m.verdict == "blocked":
        ledger.block_verdict(m)
    running = m.status == "running"
    if ledger.blockers:  # what the move would reserve, as for a movable guest: not 0 beside the configured memory
        return GuestMove(
            **base,
            can_move=False,
            target=target,
            blockers=ledger.blockers,
            notes=notes,
            memory_bytes=m.memory_bytes if running else 0,
        )
    partners = _partners(data, m)
    if partners:
        notes.append(
            "the HA manager moves its positive resource-affinity partners "
            f"{', '.join(sid for sid, _ in partners)} to the same node (Manager.pm queue_resource_motion)"
        )
    reserve = (m.memory_bytes if running else 0) + sum(mem for _, mem in partners)
    candidates = ha_targets(data, m, ledger)
    placement = Placement(data, candidates or [], headroom_pct)
    chosen, why = placement.choose(candidates or [], reserve)
    if chosen is None:
        if candidates is not None:
            ledger.block(vmid, m.name, "MIGRATE_CAPACITY", why)
        best = max(placement.free.values(), default=None)
        return GuestMove(
            **base,
            can_move=False,
            target=target,
            blockers=ledger.blockers,
            notes=notes,
            memory_bytes=reserve,
            target_free_before_bytes=best,
        )
    tv = m.target(chosen)
    assert tv is not None and tv.mode is not None
    free_before = placement.take(chosen, reserve)
    return GuestMove(
        **base,
        can_move=True,
        target=chosen,
        mode=tv.mode,
        downtime=downtime_of(running, tv.mode),
        with_local_disks=bool(m.local_disk_bytes) and m.type == "qemu" and running and tv.mode == "live",
        memory_bytes=reserve,
        copy_bytes=m.local_disk_bytes,
        target_free_before_bytes=free_before,
        target_free_after_bytes=free_before - reserve,
        blockers=ledger.blockers,
        notes=notes,
    )
