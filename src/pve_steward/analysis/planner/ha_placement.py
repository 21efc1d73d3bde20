"""The nodes HA may put an HA guest on: its node-affinity rule (PVE 9) or group (PVE 8), with priorities,
and the guests HA keeps together (positive resource affinity). ha_schedule.py replays HA's choice among
them; the operator's allowed and denied nodes do not steer HA and are not applied here.
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.migration.ha_rules import node_priorities, rule_active, rule_members
from pve_steward.analysis.pverules import pve_rule


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


def no_node(data: ClusterData, sid: str, blocked: dict[str, list[str]]) -> str:
    found = _affinity(data, sid)
    why = []
    if found is not None and found[1]:
        why.append(f"strict node affinity allows only {', '.join(sorted(found[0]))}")
    if blocked:
        why.append(f"negative resource affinity blocks {', '.join(sorted(blocked))}")
    return "no eligible node (" + "; ".join(why) + ")" if why else "no eligible node"
