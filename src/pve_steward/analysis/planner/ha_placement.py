"""Where HA maintenance may put the HA guests it moves, and whether every such node has room for them.

The CRM picks a service's node itself (pve-ha-manager Manager.pm select_service_node): among the
highest-priority online nodes its node-affinity rule (PVE 9) or group (PVE 8) allows, minus nodes its
negative resource-affinity peers hold, the one its scheduler scores best: in the default 'basic'
mode the node with the fewest services, memory unseen. That choice cannot be proven from outside,
so a plan counts on HA only when every node it may choose has room; the operator's allowed and
denied nodes do not steer HA and are not applied here.
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.migration.ha_rules import (
    ha_blocked_nodes,
    holding_node,
    node_priorities,
    rule_active,
    rule_members,
)
from pve_steward.analysis.planner.models import HAGuest
from pve_steward.analysis.pverules import pve_rule

GiB = 1024**3


def together(data: ClusterData) -> dict[str, frozenset[str]]:
    """sid -> the HA resources kept on one node with it: active positive resource-affinity rules, connected ones
    merged (ResourceAffinity.pm merge_connected_positive_resource_affinity_rules)."""
    groups: list[set[str]] = []
    for rule in data.ha_rules:
        if rule.get("type") == "resource-affinity" and rule.get("affinity") == "positive" and rule_active(rule):
            members = set(rule_members(rule))
            touching = [g for g in groups if g & members]
            for g in touching:
                members |= g
                groups.remove(g)
            groups.append(members)
    return {sid: frozenset(g) for g in groups if len(g) > 1 for sid in g}


def _affinity(data: ClusterData, sid: str) -> tuple[dict[str, int], bool] | None:
    """The node priorities of the sid's node-affinity rule (PVE 9, groups migrated; a positive resource-affinity
    peer's rule binds it too: Rules.pm create_implicit_positive_resource_affinity_node_affinity_rules) or group
    (PVE 8), and whether they are strict (restricted); None when nothing restricts it."""
    kin = together(data).get(sid, frozenset([sid]))
    for rule in data.ha_rules:
        if rule.get("type") == "node-affinity" and set(rule_members(rule)) & kin and rule_active(rule):
            return node_priorities(rule.get("nodes")), bool(int(rule.get("strict", 0) or 0))
    res = data.ha_by_sid.get(sid) or {}
    group = next((g for g in data.ha_groups if g.get("group") == res.get("group")), None)
    if group is not None:
        return node_priorities(group.get("nodes")), bool(int(group.get("restricted", 0) or 0))
    return None


@pve_rule(
    "ha.candidate-nodes",
    rule="HA places a service only on the highest-priority online nodes of its node-affinity rule or group (a "
    "non-strict rule or unrestricted group adds every other node at priority -1), minus nodes its negative "
    "resource-affinity peers hold; among those its scheduler picks by service count or load, not by free memory.",
    pve="pve-ha-manager src/PVE/HA/Rules/NodeAffinity.pm plugin_compile, get_node_affinity; src/PVE/HA/Manager.pm "
    "select_service_node (PVE 8: get_node_priority_groups); src/PVE/HA/Usage/Basic.pm score_nodes_to_start_service",
    codes=("MIGRATE_HA_AFFINITY", "MIGRATE_CAPACITY"),
)
def ha_candidates(data: ClusterData, sid: str, online: list[str]) -> list[str]:
    """The nodes among ``online`` (HA-online targets) that HA's scheduler chooses from for ``sid``."""
    found = _affinity(data, sid)
    if found is None:
        return sorted(online)
    nodes, strict = found
    present = {n: p for n, p in nodes.items() if n in online}
    if not strict:
        present |= {n: -1 for n in online if n not in nodes}
    if not present:
        return []
    top = max(present.values())
    return sorted(n for n, p in present.items() if p == top)


def ha_capacity(
    data: ClusterData, ha_guests: list[HAGuest], free: dict[str, int], movable: dict[int, set[str]]
) -> dict[int, tuple[str, str]]:
    """Can every node HA may choose take each HA guest it moves (largest first, after the planned moves)?

    Guests HA keeps together (positive resource affinity) go as one: they end on one node, next to any peer that
    stays where it runs (apply_positive_resource_affinity), and apart from every node one of them must avoid
    (implicit negative rules). ``free``: room per HA-online target after the plan; ``movable``: where each
    guest's own verdict lets it go. Returns (code, problem) per guest that is not provably placed:
    MIGRATE_HA_AFFINITY when no node is left, HA_GUEST_NOT_MIGRATABLE when HA may choose a node the guest cannot
    go to, MIGRATE_CAPACITY when a node it may choose lacks room.
    """
    left = dict(free)
    out: dict[int, tuple[str, str]] = {}
    kin = together(data)
    units: dict[frozenset[str], list[HAGuest]] = {}
    for h in ha_guests:
        if h.moved_by_ha:
            units.setdefault(kin.get(h.sid, frozenset([h.sid])), []).append(h)
    for group, unit in sorted(
        units.items(), key=lambda u: (-sum(h.memory_bytes for h in u[1]), min(h.vmid for h in u[1]))
    ):
        found = _place(data, group, unit, left, movable)
        for h in unit:
            if found is not None:
                out[h.vmid] = found
    return out


def _place(
    data: ClusterData, group: frozenset[str], unit: list[HAGuest], left: dict[str, int], movable: dict[int, set[str]]
) -> tuple[str, str] | None:
    """One unit of HA guests that end on one node: the problem, or None once its room is reserved."""
    names = ", ".join(sorted(h.sid for h in unit))
    blocked: dict[str, list[str]] = {}
    for sid in sorted(group):
        for node, peers in ha_blocked_nodes(data, sid, scheduler=True).items():
            blocked.setdefault(node, []).extend(p for p in peers if p not in group)
    blocked = {n: p for n, p in blocked.items() if p}
    candidates = ha_candidates(data, unit[0].sid, sorted(left))
    moving = {h.sid for h in unit}
    held = [n for sid in sorted(group - moving) if (n := holding_node(data, sid)) in candidates]
    if held:  # a peer that stays pins the unit to its node (the most populated one)
        candidates = [max(sorted(set(held)), key=held.count)]
    options = [n for n in candidates if n not in blocked]
    if not options:
        return ("MIGRATE_HA_AFFINITY", f"{names}: {_no_node(data, unit[0].sid, blocked)}; HA maintenance would stall")
    unusable = [n for n in options if any(n not in movable.get(h.vmid, {n}) for h in unit)]
    if unusable:
        return (
            "HA_GUEST_NOT_MIGRATABLE",
            f"{names}: HA may choose {', '.join(unusable)}, where the guest cannot go (see its migration verdict); "
            "the move would fail and HA retry",
        )
    need = sum(h.memory_bytes for h in unit)
    short = [n for n in options if left[n] < need]
    if short:
        kept = f" ({names}, kept together)" if len(unit) > 1 else ""
        return (
            "MIGRATE_CAPACITY",
            f"needs {need / GiB:.1f} GiB{kept}; HA chooses among {', '.join(options)} by its scheduler's score, not "
            f"by free memory, and {', '.join(short)} lack(s) that room after the planned moves (HA could overload it)",
        )
    left[max(options, key=lambda n: (left[n], n))] -= need
    return None


def _no_node(data: ClusterData, sid: str, blocked: dict[str, list[str]]) -> str:
    found = _affinity(data, sid)
    why = []
    if found is not None and found[1]:
        why.append(f"strict node affinity allows only {', '.join(sorted(found[0]))}")
    if blocked:
        why.append(f"negative resource affinity blocks {', '.join(sorted(blocked))}")
    return "no eligible node (" + "; ".join(why) + ")" if why else "no eligible node"
