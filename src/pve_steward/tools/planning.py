"""Planning tools: node evacuation and single-guest moves, read-only (nothing is executed)."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Annotated

import anyio.to_thread
from pydantic import Field

from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.analysis.planner.guest_move import plan_guest_move
from pve_steward.analysis.planner.models import EvacuationPlan, GuestMove
from pve_steward.pve.ids import NodeName, VmId
from pve_steward.pveio.admission import heavy
from pve_steward.security.guard import Refused, guarded
from pve_steward.tools.cephread import read_node_ceph
from pve_steward.tools.collect import collect
from pve_steward.tools.context import ToolContext

Headroom = Annotated[float, Field(ge=0, le=90)]


@guarded(toolset="planning")
@heavy
async def plan_node_evacuation(
    t: ToolContext,
    node: NodeName,
    targets: Annotated[list[NodeName], Field(max_length=64)] | None = None,
    exclude_targets: Annotated[list[NodeName], Field(max_length=64)] | None = None,
    allow_offline: bool = False,
    headroom_percent: Headroom = 10.0,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
) -> EvacuationPlan:
    """Read everything needed in one call (bounded concurrency) and plan; nothing moves.

    The plan is computed whole (deterministic), then listed a page at a time so an answer stays
    bounded on a node with hundreds of guests: ``limit`` steps from ``offset``, the first
    ``limit`` blockers, and counts of everything.
    """
    await t.progress(0, 2, f"reading the cluster, the configs of {node}'s guests and PVE's migrate preconditions")
    data = await collect(t.client, t.now(), ["migration", "ha"], node=node, preconditions=True)
    if node not in data.nodes:
        raise Refused(f"no node '{node}' in this cluster (nodes: {', '.join(sorted(data.nodes))})")
    unknown = sorted((set(targets or []) | set(exclude_targets or [])) - set(data.nodes))
    if unknown:
        raise Refused(f"unknown target node(s) {', '.join(unknown)} (nodes: {', '.join(sorted(data.nodes))})")
    ceph = await read_node_ceph(t.client, node) if data.nodes[node].get("online") else None
    await t.progress(1, 2, "planning")
    plan = await anyio.to_thread.run_sync(
        functools.partial(
            plan_evacuation,
            data,
            node,
            allowed=targets,
            denied=exclude_targets,
            allow_offline=allow_offline,
            headroom_pct=headroom_percent,
            ceph=ceph,
        )
    )  # in a worker thread, so the event loop keeps serving cheap calls
    await t.progress(2, 2, plan.summary)
    return page(plan, offset, limit)


def page(plan: EvacuationPlan, offset: int, limit: int) -> EvacuationPlan:
    """One page of steps, the first blockers, counts of all; findings that repeat a blocker are dropped."""
    blocker_codes = {b.code for b in plan.blockers}
    end = offset + limit
    return plan.model_copy(
        update={
            "steps": plan.steps[offset:end],
            "steps_total": len(plan.steps),
            "next_offset": end if end < len(plan.steps) else None,
            "blockers": plan.blockers[:limit],
            "blockers_total": len(plan.blockers),
            "blocker_counts": dict(sorted(Counter(b.code for b in plan.blockers).items())),
            "findings": [f for f in plan.findings if f.code not in blocker_codes][:limit],
        }
    )


@guarded(toolset="planning")
@heavy
async def check_guest_migration(
    t: ToolContext,
    vmid: VmId,
    target: NodeName | None = None,
    allow_offline: bool = False,
    headroom_percent: Headroom = 10.0,
) -> GuestMove:
    """Can this guest move to that node (or anywhere), and how: the planner's logic for one guest."""
    data = await collect(t.client, t.now(), ["migration", "ha"], vmids=[vmid], preconditions=True)
    if vmid not in data.guests:
        raise Refused(f"no guest {vmid} is visible in this cluster")
    if target is not None and target not in data.nodes:
        raise Refused(f"no node '{target}' in this cluster (nodes: {', '.join(sorted(data.nodes))})")
    return plan_guest_move(data, vmid, target, allow_offline=allow_offline, headroom_pct=headroom_percent)
