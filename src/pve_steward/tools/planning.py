"""Planning tools: node evacuation and single-guest moves, read-only (nothing is executed)."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Annotated

import anyio.to_thread
from pydantic import Field

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.planner.evacuation import plan_evacuation, with_running_configs
from pve_steward.analysis.planner.guest_move import plan_guest_move
from pve_steward.analysis.planner.models import EvacuationPlan, GuestMove
from pve_steward.analysis.planner.production import Overrides
from pve_steward.errors import PveError
from pve_steward.pve.ids import NodeName, VmId
from pve_steward.pve.visibility import HA
from pve_steward.pveio.admission import heavy
from pve_steward.pveio.client import ProxmoxClient, api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import vmid as vmid_seg
from pve_steward.security.guard import Refused, guarded
from pve_steward.tools.cephread import read_node_ceph
from pve_steward.tools.collect import BACKUP_AGE, collect
from pve_steward.tools.context import ToolContext

Headroom = Annotated[float, Field(ge=0, le=90)]
Tag = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_][a-zA-Z0-9_\-+.]{0,63}$")]
Vmids = Annotated[list[VmId], Field(max_length=1000)]
Tags = Annotated[list[Tag], Field(max_length=64)]


@guarded(toolset="planning")
@heavy
async def plan_node_evacuation(
    t: ToolContext,
    node: NodeName,
    targets: Annotated[list[NodeName], Field(max_length=64)] | None = None,
    exclude_targets: Annotated[list[NodeName], Field(max_length=64)] | None = None,
    allow_offline: bool = False,
    headroom_percent: Headroom = 10.0,
    keep_running: Vmids | None = None,
    keep_running_tags: Tags | None = None,
    may_stop: Vmids | None = None,
    may_stop_tags: Tags | None = None,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
) -> EvacuationPlan:
    """Read everything needed in one call (bounded concurrency) and plan; nothing moves.

    The plan is computed whole (deterministic), then listed a page at a time so an answer stays
    bounded on a node with hundreds of guests: ``limit`` steps from ``offset``, the first
    ``limit`` blockers, and counts of everything.
    """
    both = sorted(set(keep_running or []) & set(may_stop or []))
    if both:
        raise Refused(f"vmid(s) {', '.join(map(str, both))} in both keep_running and may_stop: name each in one")
    await t.progress(0, 3, f"reading the cluster, the configs of {node}'s guests and PVE's migrate preconditions")
    data = await collect(t.client, t.now(), ["migration", "ha", BACKUP_AGE], node=node, preconditions=True)
    if node not in data.nodes:
        raise Refused(f"no node '{node}' in this cluster (nodes: {', '.join(sorted(data.nodes))})")
    unknown = sorted((set(targets or []) | set(exclude_targets or [])) - set(data.nodes))
    if unknown:
        raise Refused(f"unknown target node(s) {', '.join(unknown)} (nodes: {', '.join(sorted(data.nodes))})")
    ceph = await read_node_ceph(t.client, node) if data.nodes[node].get("online") else None
    options = await _options(t.client, data)
    await t.progress(1, 3, "planning")
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
            options=options,
            overrides=Overrides.of(keep_running or [], keep_running_tags or [], may_stop or [], may_stop_tags or []),
            backups_read=True,
        )
    )  # in a worker thread, so the event loop keeps serving cheap calls
    if plan.readiness is not None and plan.readiness.onboot_on_return:
        await t.progress(2, 3, "reading the running guests' configs: do the guests that start at boot clash?")
        configs, unread = await _running_configs(t.client, data)
        plan = with_running_configs(plan, data, configs, unread)
    await t.progress(3, 3, plan.summary)
    return page(plan, offset, limit)


async def _options(client: ProxmoxClient, data: ClusterData) -> Row | None:
    """/cluster/options (HA's scheduler, its shutdown policy); None when it cannot be read whole (the plan says
    what that leaves unproven). Without Sys.Audit on / PVE answers only console and tag-style (pve-manager
    API2/Cluster.pm get_options), which reads like a cluster with defaults: unless the token provably holds
    Sys.Audit on / (pve/visibility.py), or an HA status it could not read says it does not, the options are not
    provable."""
    if data.sees(HA) is not True or any(m.status == 403 and "ha/status" in m.path for m in data.missing):
        return None
    try:
        opts = await client.get(api_path("cluster", "options"))
    except PveError:
        return None
    return opts if isinstance(opts, dict) else None


async def _running_configs(client: ProxmoxClient, data: ClusterData) -> tuple[dict[int, Row], int]:
    """The configs of every running guest (as it runs: without pending changes), and how many could not be read.
    The node's own were read by the collector."""
    have = {v: c for v, c in data.configs.items() if (data.guests.get(v) or {}).get("status") == "running"}
    reads = [
        (str(v), api_path("nodes", node_seg(g["node"]), g["type"], vmid_seg(v), "config"), {"current": 1})
        for v, g in sorted(data.guests.items())
        if g.get("status") == "running" and v not in have and g.get("node") in data.online_nodes
    ]
    got = await gather(client, reads, read_only=True)
    unread = 0
    for key, value in got.items():
        if isinstance(value, PveError) or not isinstance(value, dict):
            unread += 1
        else:
            have[int(key)] = value
    return have, unread


def page(plan: EvacuationPlan, offset: int, limit: int) -> EvacuationPlan:
    """One page of steps, the first blockers, stops and readiness entries, counts of all; findings that repeat a
    blocker are dropped."""
    blocker_codes = {b.code for b in plan.blockers}
    end = offset + limit
    ready = plan.readiness
    if ready is not None:
        lists = ("onboot_on_return", "address_clashes", "stale_backups")
        ready = ready.model_copy(
            update={name: getattr(ready, name)[:limit] for name in lists}
            | {"counts": {name: len(getattr(ready, name)) for name in lists}}
        )
    return plan.model_copy(
        update={
            "steps": plan.steps[offset:end],
            "steps_total": len(plan.steps),
            "next_offset": end if end < len(plan.steps) else None,
            "blockers": plan.blockers[:limit],
            "blockers_total": len(plan.blockers),
            "blocker_counts": dict(sorted(Counter(b.code for b in plan.blockers).items())),
            "findings": [f for f in plan.findings if f.code not in blocker_codes][:limit],
            "stop_for_window": plan.stop_for_window[:limit],
            "stop_for_window_total": len(plan.stop_for_window),
            "readiness": ready,
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
