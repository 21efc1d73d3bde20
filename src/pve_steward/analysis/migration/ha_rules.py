"""Which nodes an HA resource's rules let it go to, as PVE's CRM and migrate command read them.

Shared by the migration verdicts (a migrate of an HA guest is an HA request) and the evacuation planner
(HA maintenance): strict node affinity (PVE 9 rules, PVE 8 restricted groups) and negative resource affinity,
in the command's view and in the scheduler's.
"""

from __future__ import annotations

import re

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.migration.targets import maintenance_nodes
from pve_steward.analysis.pverules import pve_rule


def rule_members(rule: Row) -> list[str]:
    """The sids an HA rule names."""
    return [m.strip() for m in str(rule.get("resources", "")).split(",") if m.strip()]


def node_priorities(spec: object) -> dict[str, int]:
    """A rule's or group's nodes, 'a:2,b' -> {'a': 2, 'b': 0} (a node without a priority has 0)."""
    out: dict[str, int] = {}
    for part in str(spec or "").split(","):
        m = re.fullmatch(r"\s*(\S+?)(?::(\d+))?\s*", part)
        if m and m.group(1):
            out[m.group(1)] = int(m.group(2) or 0)
    return out


def rule_active(rule: Row) -> bool:
    """Applied by PVE: not disabled, and without errors (Rules.pm drops those)."""
    return not int(rule.get("disable", 0) or 0) and not rule.get("errors")


@pve_rule(
    "ha.node-affinity",
    rule="A strict node-affinity rule (PVE 9) or a restricted group (PVE 8) confines an HA resource to its nodes; "
    "with none of them available the resource stays where it is (or is stopped).",
    pve="pve-ha-manager src/PVE/HA/Rules/NodeAffinity.pm get_node_affinity; src/PVE/HA/Manager.pm select_service_node",
    codes=("MIGRATE_HA_AFFINITY",),
)
def ha_allowed_nodes(data: ClusterData, sid: str) -> list[str] | None:
    """Nodes a strict rule or restricted group allows (None: no restriction)."""
    allowed: set[str] | None = None
    for rule in data.ha_rules:
        if (
            sid in rule_members(rule)
            and rule.get("type") == "node-affinity"
            and int(rule.get("strict", 0) or 0)
            and rule_active(rule)
        ):
            nodes = set(node_priorities(rule.get("nodes")))
            allowed = nodes if allowed is None else allowed & nodes
    res = data.ha_by_sid.get(sid) or {}
    group = next((g for g in data.ha_groups if g.get("group") == res.get("group")), None)
    if group is not None and int(group.get("restricted", 0) or 0):
        nodes = set(node_priorities(group.get("nodes")))
        allowed = nodes if allowed is None else allowed & nodes
    return sorted(allowed) if allowed is not None else None


# the CRM states in which a service holds its node for the scheduler (Usage.pm get_used_service_nodes)
_HOLDS_NODE = frozenset(["started", "request_stop", "fence", "freeze", "error", "recovery", "migrate", "relocate"])


@pve_rule(
    "ha.resource-affinity-blocking",
    rule="A node is blocked for an HA resource when a resource it must be kept apart from (negative resource-affinity) "
    "is there. A migrate command counts every such resource not ignored (PVE's precondition reports these as "
    "blocking-ha-resources); the scheduler placing services in maintenance counts only those that hold their node "
    "(not stopped or about to start) on an HA-online node.",
    pve="pve-ha-manager src/PVE/HA/Config.pm get_resource_motion_info; src/PVE/HA/Rules/ResourceAffinity.pm "
    "get_resource_affinity, src/PVE/HA/Usage.pm get_used_service_nodes",
    codes=("MIGRATE_HA_AFFINITY",),
)
def ha_blocked_nodes(data: ClusterData, sid: str, scheduler: bool = False) -> dict[str, list[str]]:
    """Node -> the HA resources (negative resource-affinity) that block it; ``scheduler``: as the CRM's scheduler
    sees them when it places services (maintenance, recovery), rather than as a migrate command does."""
    rows = _service_rows(data)
    out: dict[str, list[str]] = {}
    for members in _negative(data):  # usually none: asked for every HA guest of the cluster
        if sid not in members:
            continue
        for other in members:
            row = rows.get(other) or {}
            node = str(row.get("node") or "")
            if other == sid or not node or (data.ha_by_sid.get(other) or {}).get("state") == "ignored":
                continue
            if scheduler and holding_node(data, other) is None:
                continue
            out.setdefault(node, []).append(other)
    return out


def negative_peers(data: ClusterData, sid: str) -> set[str]:
    """The HA resources an active negative resource-affinity rule keeps apart from ``sid``."""
    return {other for members in _negative(data) if sid in members for other in members if other != sid}


def holds_node(state: str) -> bool:
    """Whether a service in this CRM state holds its node for the scheduler (Usage.pm get_used_service_nodes)."""
    return state in _HOLDS_NODE


def holding_node(data: ClusterData, sid: str) -> str | None:
    """The HA-online node a service holds for the scheduler, if any (Usage.pm get_used_service_nodes)."""
    row = service_row(data, sid)
    node = str(row.get("node") or "")
    state = str(row.get("crm_state") or row.get("state") or "")
    return node if state in _HOLDS_NODE and node in _ha_online(data) else None


def service_row(data: ClusterData, sid: str) -> Row:
    return _service_rows(data).get(sid, {})


def _service_rows(data: ClusterData) -> dict[str, Row]:
    """The HA status API's service rows by sid (once per snapshot: asked per HA guest)."""
    memo = data.memo["ha_rules"]
    if "rows" not in memo:
        memo["rows"] = {str(r.get("sid")): r for r in data.ha_status if r.get("type") == "service"}
    return memo["rows"]  # type: ignore[no-any-return]


def _ha_online(data: ClusterData) -> set[str]:
    memo = data.memo["ha_rules"]
    if "online" not in memo:
        memo["online"] = set(data.online_nodes) - maintenance_nodes(data)
    return memo["online"]  # type: ignore[no-any-return]


def _negative(data: ClusterData) -> list[list[str]]:
    """The members of each active negative resource-affinity rule."""
    memo = data.memo["ha_rules"]
    if "negative" not in memo:
        memo["negative"] = [
            rule_members(r)
            for r in data.ha_rules
            if r.get("type") == "resource-affinity" and r.get("affinity") == "negative" and rule_active(r)
        ]
    return memo["negative"]  # type: ignore[no-any-return]
