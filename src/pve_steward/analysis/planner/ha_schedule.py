"""Phase 1 of an evacuation: where HA maintenance will put the HA guests it moves, and the room kept for them.

The CRM handles the node's started services one after another in sid order (Manager.pm manage, ``sort keys``):
each goes to the best-scored node among the highest-priority HA-online nodes its node-affinity rule (PVE 9)
or group (PVE 8) allows, minus the nodes its negative resource-affinity peers hold, onto the node a positive
peer already went to (select_service_node), and its usage is counted there before the next one is placed
(change_service_state). Replayed here with HA's own scheduler (ha_scores.py), that choice is one node when
the inputs decide it. Where they do not (the 'dynamic' scheduler's live load, an unknown scheduler, an
unknown release counting guests outside HA or not, a near tie of static scores), every node HA may choose
keeps room for the guest: the plan never counts on a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.hastate import lrm_trouble
from pve_steward.analysis.migration.ha_rules import holding_node, holds_node, negative_peers
from pve_steward.analysis.planner.ha_placement import ha_candidates, no_node, together
from pve_steward.analysis.planner.ha_scores import Demand, Usage
from pve_steward.analysis.planner.models import HAGuest
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.values import integer

GiB = 1024**3
_TIE = 1e-9  # static scores this close are a tie a rounding in PVE's inputs could flip: not provable


@dataclass(slots=True)
class HAMove:
    """Where one HA guest goes: ``nodes`` one when provable, every possible one otherwise (empty: none)."""

    sid: str
    vmid: int
    memory: int
    nodes: list[str] = field(default_factory=list)
    provable: bool = False
    problem: tuple[str, str] | None = None


@dataclass(slots=True)
class HASchedule:
    mode: str  # the scheduler: basic, static, dynamic, or unknown (options unread)
    how: str  # our sentence: how HA's choice was found
    moves: dict[int, HAMove] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)  # node -> bytes kept for HA's moves
    reserved_vmids: dict[str, list[int]] = field(default_factory=dict)
    room: dict[str, int] = field(default_factory=dict)  # free memory (after headroom) of each HA-online node


def scheduler_mode(options: dict[str, object] | None) -> str:
    """datacenter.cfg ``crs: ha=`` (basic by default); 'unknown' when /cluster/options was not read."""
    if options is None:
        return "unknown"
    crs = options.get("crs")
    if isinstance(crs, str):
        crs = dict(kv.split("=", 1) for kv in crs.split(",") if "=" in kv)
    mode = str((crs or {}).get("ha") or "basic") if isinstance(crs, dict | None) else "basic"
    return mode if mode in ("basic", "static", "dynamic") else "basic"  # Manager.pm: unknown mode -> basic


def _variants(data: ClusterData) -> list[bool]:
    """Whether HA counts running guests outside HA (pve-ha-manager 5.1.2+): PVE 8 never; a status API with the
    fencing row (5.1.3+) always; another PVE 9 either way."""
    version = str((data.version or {}).get("version") or "")
    if version.split(".", 1)[0] == "8":
        return [False]
    if any(r.get("type") == "fencing" for r in data.ha_status):
        return [True]
    return [False, True]


def demand_of(data: ClusterData, vmid: int) -> Demand:
    """The CPUs and memory HA's static scheduler counts for a guest (PVEVM/PVECT get_static_stats_from_config;
    the /cluster/resources row where the config was not read)."""
    cfg, raw = data.parsed.get(vmid), data.configs.get(vmid) or {}
    if cfg is not None and cfg.type == "qemu":
        return Demand(float(cfg.vcpus or cfg.sockets * max(cfg.cores, 1)), cfg.memory_bytes)
    if cfg is not None:
        cpu = raw.get("cpulimit") or raw.get("cores") or 0
        return Demand(float(str(cpu)) if str(cpu).replace(".", "", 1).isdecimal() else 0.0, cfg.memory_bytes)
    row = data.guests.get(vmid) or {}
    return Demand(float(row.get("maxcpu") or 0), int(row.get("maxmem") or 0))


def _node_stats(data: ClusterData, nodes: list[str]) -> dict[str, tuple[int, int]]:
    out = {}
    for n in nodes:
        row, st = data.nodes.get(n) or {}, (data.node_status.get(n) or {})
        mem = integer((st.get("memory") or {}).get("total")) or integer(row.get("maxmem")) or 0
        cpu = integer((st.get("cpuinfo") or {}).get("cpus")) or integer(row.get("maxcpu")) or 0
        out[n] = (cpu, mem)
    return out


@pve_rule(
    "ha.maintenance-placement",
    rule="In node maintenance the CRM moves the node's started services one at a time in sid order, each to the "
    "best-scored of the highest-priority HA-online nodes its rule or group allows (minus nodes its negative "
    "resource-affinity peers hold; onto the node a positive peer went to), counting it there before the next.",
    pve="pve-ha-manager src/PVE/HA/Manager.pm manage, next_state_started, select_service_node, "
    "recompute_online_node_usage; PVE 8: get_node_priority_groups",
    codes=("MIGRATE_CAPACITY", "MIGRATE_HA_AFFINITY"),
)
def _replay(
    data: ClusterData, online: list[str], moved: list[HAGuest], mode: str, count_others: bool
) -> dict[str, list[str]]:
    """sid -> the node HA picks for it in one run of the CRM ([]: no node left; two or more: static scores tie so
    closely that a rounding of PVE's inputs could decide)."""
    usage = Usage(mode, _node_stats(data, online))
    position: dict[str, str] = {}  # where each service holds a node (online ones only)
    for r in data.ha_status:
        if r.get("type") != "service":
            continue
        sid, node = str(r.get("sid")), str(r.get("node") or "")
        if node in usage.nodes and holds_node(str(r.get("crm_state") or r.get("state") or "")):
            position[sid] = node
            usage.add(sid, node, demand_of(data, _vmid(sid)))
    if count_others:  # running guests outside HA (ignored resources included: the CRM dropped them)
        managed = set(data.ha_by_vmid)
        for vmid, g in sorted(data.guests.items()):
            if vmid not in managed and g.get("status") == "running" and g.get("node") in usage.nodes:
                usage.add(f"{'ct' if g.get('type') == 'lxc' else 'vm'}:{vmid}", str(g["node"]), demand_of(data, vmid))
    kin = together(data)
    out: dict[str, list[str]] = {}
    for h in sorted(moved, key=lambda h: h.sid):
        candidates = set(ha_candidates(data, h.sid, online))
        candidates -= {position[p] for p in _apart(data, h.sid, kin) if p in position}
        peers = [position[p] for p in sorted(kin.get(h.sid, frozenset()) - {h.sid}) if p in position]
        peers = [n for n in peers if n in candidates]
        if peers:  # apply_positive_resource_affinity: the most populated node of the positive peers
            candidates = {max(sorted(set(peers)), key=peers.count)}
        if not candidates:
            out[h.sid] = []
            continue
        demand = demand_of(data, h.vmid)
        scores = usage.scores(demand)
        ranked = sorted(candidates, key=lambda n: (scores.get(n, 0.0), n))
        tied = [n for n in ranked if abs(scores.get(n, 0.0) - scores.get(ranked[0], 0.0)) <= _TIE]
        out[h.sid] = tied if mode == "static" else ranked[:1]  # basic counts are whole: a tie goes by name
        position[h.sid] = ranked[0]
        usage.add(h.sid, ranked[0], demand)
    return out


def _apart(data: ClusterData, sid: str, kin: dict[str, frozenset[str]]) -> set[str]:
    """The resources kept apart from ``sid``: its own negative peers and those of every resource kept together
    with it (Rules/ResourceAffinity.pm create_implicit_negative_resource_affinity_rules)."""
    group = kin.get(sid, frozenset([sid]))
    return {p for member in group for p in negative_peers(data, member)} - group


def _vmid(sid: str) -> int:
    tail = sid.partition(":")[2]
    return int(tail) if tail.isdecimal() else -1


def schedule(
    data: ClusterData,
    source: str,
    ha_guests: list[HAGuest],
    movable: dict[int, set[str]],
    room: dict[str, int],
    options: dict[str, object] | None,
) -> HASchedule:
    """Phase 1: each moved HA guest's node(s), the room kept there, and what stops HA from doing it.

    ``room``: free memory (after headroom) of every HA-online node but the source; ``movable``: where each
    guest's own verdict lets it go. Problems: MIGRATE_HA_AFFINITY (no node), HA_GUEST_NOT_MIGRATABLE (HA may
    choose a node the guest cannot go to), HA_LRM_DEAD / HA_LRM_TIME_DRIFT (HA may choose a node whose LRM is
    in doubt: the CRM counts it online), MIGRATE_CAPACITY (a node HA uses lacks room for its moves).
    """
    moved = [h for h in ha_guests if h.moved_by_ha]
    online = sorted(room)
    mode = scheduler_mode(options)
    plan = HASchedule(mode=mode, how=_how(mode), room=dict(room))
    if not moved:
        return plan
    runs = [_replay(data, online, moved, m, c) for m in _modes(mode) for c in _variants(data)]
    provable = mode in ("basic", "static")
    loads: list[dict[str, int]] = []
    for run in runs:
        load: dict[str, int] = {}
        for h in moved:
            for node in run.get(h.sid, []):  # a tie: either node, so the room is kept on both
                load[node] = load.get(node, 0) + h.memory_bytes
        loads.append(load)
    for h in moved:
        # unprovable: the choice follows live load (or an unread scheduler), so any candidate the rules leave
        nodes = sorted({n for run in runs for n in run.get(h.sid, [])}) if provable else _possible(data, h.sid, online)
        move = HAMove(h.sid, h.vmid, h.memory_bytes, nodes, provable and len(nodes) == 1)
        plan.moves[h.vmid] = move
        if not provable:
            for n in nodes:
                plan.reserved[n] = plan.reserved.get(n, 0) + h.memory_bytes
    if provable:
        for load in loads:
            for n, b in load.items():
                plan.reserved[n] = max(plan.reserved.get(n, 0), b)
    for move in plan.moves.values():
        for n in move.nodes:
            plan.reserved_vmids.setdefault(n, []).append(move.vmid)
    _problems(data, plan, moved, movable, room)
    return plan


def _modes(mode: str) -> list[str]:
    return [mode] if mode in ("basic", "static") else ["basic"]


def _possible(data: ClusterData, sid: str, online: list[str]) -> list[str]:
    """Every node HA may choose: its rule's candidates but those a negative peer holds (positive peers may go
    anywhere among them too, so they narrow nothing here)."""
    held = {holding_node(data, p) for p in _apart(data, sid, together(data))}
    return sorted(n for n in ha_candidates(data, sid, online) if n not in held)


def _problems(
    data: ClusterData, plan: HASchedule, moved: list[HAGuest], movable: dict[int, set[str]], room: dict[str, int]
) -> None:
    troubled = lrm_trouble(data)
    short = {n for n, b in plan.reserved.items() if b > room.get(n, 0)}
    kin = together(data)
    memory = {h.sid: h.memory_bytes for h in moved}
    for h in moved:
        unit = sorted(kin.get(h.sid, frozenset()) & set(memory) | {h.sid})
        kept = f" ({', '.join(unit)}, kept together)" if len(unit) > 1 else ""
        move = plan.moves[h.vmid]
        nodes = move.nodes
        where = ", ".join(nodes)
        verb = "places it on" if move.provable else "may choose"
        if not nodes:
            move.problem = ("MIGRATE_HA_AFFINITY", f"{h.sid}: {no_node(data, h.sid, {})}; HA maintenance would stall")
        elif doubtful := [n for n in nodes if n in troubled]:
            code = (
                "HA_LRM_TIME_DRIFT" if all(troubled[n] == "detected time drift!" for n in doubtful) else "HA_LRM_DEAD"
            )
            move.problem = (
                code,
                f"{h.sid}: HA {verb} {', '.join(doubtful)} ('{troubled[doubtful[0]]}' in the HA status): the CRM "
                "counts a node online by cluster membership, not by its LRM, and a dead LRM neither starts nor "
                "watches the service there. Bring pve-ha-lrm there back first",
            )
        elif unusable := [n for n in nodes if n not in movable.get(h.vmid, set(nodes))]:
            move.problem = (
                "HA_GUEST_NOT_MIGRATABLE",
                f"{h.sid}: HA {verb} {', '.join(unusable)}, where the guest cannot go (see its migration verdict); "
                "the move would fail and HA retry",
            )
        elif full := [n for n in nodes if n in short]:
            n = full[0]
            move.problem = (
                "MIGRATE_CAPACITY",
                f"needs {sum(memory[u] for u in unit) / GiB:.1f} GiB{kept}; HA {verb} {where} ({plan.how}), and "
                f"{', '.join(full)} lack(s) "
                f"room for HA's moves ({plan.reserved[n] / GiB:.1f} GiB there, {max(room.get(n, 0), 0) / GiB:.1f} "
                "GiB free): HA would overload it",
            )


def _how(mode: str) -> str:
    return {
        "basic": "HA's basic scheduler: the allowed node with the fewest services",
        "static": "HA's static scheduler: the allowed node with the best CPU and memory score",
        "dynamic": "HA's dynamic scheduler follows live load, which a plan cannot know: room is kept on every node "
        "it may choose",
        "unknown": "HA's scheduler could not be read (/cluster/options): room is kept on every node it may choose",
    }[mode]
