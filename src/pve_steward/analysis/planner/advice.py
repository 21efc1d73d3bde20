"""What the plan tells the operator besides its steps: the phases in order, why room is kept, what to do about
HA maintenance (or why not to, while HA is disarmed)."""

from __future__ import annotations

from pve_steward.analysis.findings import CLUSTER, Finding, finding
from pve_steward.analysis.hastate import Disarm
from pve_steward.analysis.planner.ha_schedule import HASchedule
from pve_steward.analysis.planner.models import HAGuest, PlanPhase, Step
from pve_steward.analysis.planner.phases import Window


def kept_why(sched: HASchedule, node: str) -> str:
    sids = sorted(m.sid for m in sched.moves.values() if node in m.nodes)
    sure = all(m.provable for m in sched.moves.values() if node in m.nodes)
    verb = "moves" if sure else "may move"
    return f"HA maintenance {verb} {', '.join(sids)} here ({sched.how}); no planned migration takes this room"


def phase_list(
    moved: list[HAGuest], steps: list[Step], window: Window, sched: HASchedule, halted: Disarm | None
) -> list[PlanPhase]:
    keep = [s for s in steps if s.phase == "keep_running"]
    rest = [s for s in steps if s.phase == "rest"]
    if halted is not None and not halted.ignore:
        ha_note = f"HA is {halted.state} (freeze): it moves nothing; see ha_recommendation"
    elif moved:
        ha_note = (
            f"{sched.how}. Enable HA maintenance on the node first and let HA finish before the migrations below: HA's "
            "choice was computed on the cluster as it is now"
        )
    else:
        ha_note = "no HA guest for HA maintenance to move off the node"
    short = window.ha_short
    stop_note = (
        "room is not short: nothing to stop"
        if window.sufficient is None
        else "stop these before the moves that use their room; "
        + (
            "that leaves room for every guest that is not listed"
            if window.sufficient
            else f"even then HA's moves lack room on {len(short)} node(s) (see reserved and the HA guests' problems)"
        )
    )
    return [
        PlanPhase(
            name="ha",
            title="HA maintenance moves the HA-managed guests",
            vmids=sorted(h.vmid for h in moved),
            memory_bytes=sum(h.memory_bytes for h in moved),
            note=ha_note,
        ),
        PlanPhase(
            name="keep_running",
            title="Production guests outside HA, into the room HA's moves leave",
            vmids=[s.vmid for s in keep],
            memory_bytes=sum(s.memory_bytes for s in keep),
            note="production: see the production rules (tags, pools, names, protection; the request's keep_running "
            "and may_stop overrides); in doubt a guest counts as production",
        ),
        PlanPhase(
            name="rest",
            title="The rest: non-production and stopped guests",
            vmids=[s.vmid for s in rest],
            memory_bytes=sum(s.memory_bytes for s in rest),
        ),
        PlanPhase(
            name="stop_for_window",
            title="What to stop for the window (non-production first, HA never)",
            vmids=[s.vmid for s in window.stops],
            memory_bytes=sum(s.memory_bytes for s in window.stops),
            note=stop_note,
        ),
    ]


def disarm_finding(halted: Disarm, node: str) -> Finding:
    return finding(
        "HA_DISARMED",
        CLUSTER,
        f"HA is {halted.state} (resource mode {halted.mode}): the CRM ignores node maintenance for {node}",
        {"armed_state": halted.state, "resource_mode": halted.mode},
    )


def recommendation(node: str, moved: list[HAGuest], halted: Disarm | None) -> str | None:
    if halted is not None and halted.ignore:
        return (
            f"HA is {halted.state} in ignore mode: the CRM ignores node maintenance, and its resources are managed "
            "directly, so they are planned above as plain migrations. Do not enable HA maintenance now; when HA is "
            "re-armed (ha-manager crm-command arm-ha) it takes each resource's new node"
        )
    if halted is not None:
        return (
            f"HA is {halted.state} in freeze mode: the CRM would ignore node-maintenance enable {node} and carries out "
            "no migrate request, so the node's HA guests stay where they are. Re-arm HA (ha-manager crm-command "
            "arm-ha, or POST /cluster/ha/status/arm-ha), wait until the HA status shows it armed, then run ha-manager "
            f"crm-command node-maintenance enable {node}; or disarm in ignore mode instead and plan again to migrate "
            "them directly"
        )
    if not moved:
        return None
    return (
        f"First put {node} into HA maintenance mode so the HA manager moves its {len(moved)} HA-managed guest(s): "
        f"ha-manager crm-command node-maintenance enable {node} (disable it after the maintenance: HA then moves "
        f"them back to {node}). The PVE API has no endpoint for this. Then run the planned migrations."
    )
