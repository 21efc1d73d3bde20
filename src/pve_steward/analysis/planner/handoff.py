"""The HA hand-off: which HA guests the HA manager moves in node maintenance, where it may put them,
and which it leaves behind (error state, or requested stopped/disabled), with what to do about those."""

from __future__ import annotations

import re

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.migration import Migratability, ha_problems
from pve_steward.analysis.migration.targets import maintenance_nodes
from pve_steward.analysis.planner.models import HAGuest
from pve_steward.analysis.pverules import pve_rule

GiB = 1024**3


def rule_members(rule: Row) -> list[str]:
    """The sids an HA rule names."""
    return [m.strip() for m in str(rule.get("resources", "")).split(",") if m.strip()]


def _nodes(spec: object) -> set[str]:
    return {re.sub(r":\d+$", "", n.strip()) for n in str(spec or "").split(",") if n.strip()}


def rule_active(rule: Row) -> bool:
    """Applied by PVE: not disabled, and without errors (Rules.pm drops those)."""
    return not int(rule.get("disable", 0) or 0) and not rule.get("errors")


def ha_constraints(data: ClusterData, sid: str) -> list[str]:
    out = []
    for rule in data.ha_rules:
        if sid in rule_members(rule) and rule_active(rule):  # a rule with errors is dropped by PVE, as a disabled one
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
            nodes = _nodes(rule.get("nodes"))
            allowed = nodes if allowed is None else allowed & nodes
    res = data.ha_by_sid.get(sid) or {}
    group = next((g for g in data.ha_groups if g.get("group") == res.get("group")), None)
    if group is not None and int(group.get("restricted", 0) or 0):
        nodes = _nodes(group.get("nodes"))
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
    rows = {str(r.get("sid")): r for r in data.ha_status if r.get("type") == "service"}
    online = set(data.online_nodes) - maintenance_nodes(data)
    out: dict[str, list[str]] = {}
    for rule in data.ha_rules:
        members = rule_members(rule)
        if rule.get("type") != "resource-affinity" or rule.get("affinity") != "negative" or sid not in members:
            continue
        if not rule_active(rule):
            continue
        for other in members:
            row = rows.get(other) or {}
            node = str(row.get("node") or "")
            if other == sid or not node or (data.ha_by_sid.get(other) or {}).get("state") == "ignored":
                continue
            if scheduler and (
                str(row.get("crm_state") or row.get("state") or "") not in _HOLDS_NODE or node not in online
            ):
                continue
            out.setdefault(node, []).append(other)
    return out


def holding_node(data: ClusterData, sid: str) -> str | None:
    """The HA-online node a service holds for the scheduler, if any (Usage.pm get_used_service_nodes)."""
    row = _service_row(data, sid)
    node = str(row.get("node") or "")
    state = str(row.get("crm_state") or row.get("state") or "")
    return node if state in _HOLDS_NODE and node in set(data.online_nodes) - maintenance_nodes(data) else None


def _service_row(data: ClusterData, sid: str) -> Row:
    return next((r for r in data.ha_status if r.get("type") == "service" and r.get("sid") == sid), {})


@pve_rule(
    "ha.maintenance-leaves",
    rule="In node maintenance the CRM moves services it runs (started); a service in error state is left alone, "
    "one requested stopped or disabled stays stopped on its node, and a frozen one stays until its LRM is active "
    "again (maintenance is not).",
    pve="pve-ha-manager src/PVE/HA/Manager.pm next_state_started, next_state_stopped, next_state_error, "
    "manage (freeze: 'unfreeze if active again')",
    codes=("HA_GUEST_LEFT_BEHIND",),
)
def left_behind(sid: str, node: str, requested: str, crm: str) -> str | None:
    """What to do about an HA guest maintenance will not move; None when HA moves it."""
    if crm == "error":
        return (
            f"{sid} is in HA error state: the CRM no longer touches it and it stays on {node}. Recover it: "
            f"ha-manager set {sid} --state disabled, fix the cause, migrate it, then ha-manager set {sid} --state "
            "started"
        )
    if crm == "freeze":
        return (
            f"{sid} is frozen (its node's LRM is restarting, or HA is disarmed): the CRM leaves it on {node} until "
            "that LRM is active again, and maintenance mode is not. Wait until the service is started again, then "
            "enable maintenance"
        )
    if requested in ("stopped", "disabled"):
        return (
            f"{sid} is requested {requested}: the CRM keeps it stopped on {node} and does not move it in "
            f"maintenance. Move it with ha-manager migrate {sid} <target> (offline), or leave it there"
        )
    return None


def hand_off(data: ClusterData, m: Migratability, res: Row, running: bool) -> HAGuest:
    """The HA guest as the plan lists it: moved by HA maintenance (checked) or left behind (with an action)."""
    sid = str(res["sid"])
    row = _service_row(data, sid)
    requested = str(row.get("request_state") or res.get("state") or "started")
    requested = "started" if requested == "enabled" else requested
    crm = str(row.get("crm_state") or row.get("state") or "")
    action = left_behind(sid, m.node, requested, crm)
    return HAGuest(
        vmid=m.vmid,
        name=m.name,
        sid=sid,
        state=requested,
        crm_state=crm or None,
        moved_by_ha=action is None,
        memory_bytes=m.memory_bytes if running and action is None else 0,
        constraints=ha_constraints(data, sid),
        problems=ha_problems(data, m, failover=False) if action is None else [],
        action=action,
    )
