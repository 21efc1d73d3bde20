"""The HA hand-off: which HA guests the HA manager moves in node maintenance, where it may put them,
and which it leaves behind (error state, or requested stopped/disabled), with what to do about those."""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.hastate import Disarm
from pve_steward.analysis.migration.findings import ha_problems
from pve_steward.analysis.migration.ha_rules import (
    rule_active,
    rule_members,
    service_row,
)
from pve_steward.analysis.migration.model import Migratability
from pve_steward.analysis.planner.models import HAGuest
from pve_steward.analysis.pverules import pve_rule

GiB = 1024**3


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
    "ha.maintenance-leaves",
    rule="In node maintenance the CRM moves services it runs (started); a service in error state is left alone, "
    "one requested stopped or disabled stays stopped on its node, and a frozen one stays until its LRM is active "
    "again (maintenance is not). While HA is disarmed in freeze mode nothing moves: maintenance requests are ignored "
    "and migrate requests never carried out.",
    pve="pve-ha-manager src/PVE/HA/Manager.pm next_state_started, next_state_stopped, next_state_error, "
    "manage (freeze: 'unfreeze if active again'), update_crm_commands and handle_disarm (disarmed: no maintenance, "
    "no command applied)",
    codes=("HA_GUEST_LEFT_BEHIND",),
)
def left_behind(sid: str, node: str, requested: str, crm: str, disarm: Disarm | None = None) -> str | None:
    """What to do about an HA guest maintenance will not move; None when HA moves it."""
    if disarm is not None and not disarm.ignore:
        return (
            f"HA is {disarm.state} (resource mode freeze): the CRM ignores node maintenance and carries out no migrate "
            f"request, so {sid} stays on {node}. Re-arm HA first (ha-manager crm-command arm-ha, or POST "
            "/cluster/ha/status/arm-ha), then enable maintenance; or disarm in ignore mode to migrate it directly; "
            "or shut it down for the window (while disarmed, HA neither recovers nor restarts it)"
        )
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


def hand_off(data: ClusterData, m: Migratability, res: Row, running: bool, disarm: Disarm | None = None) -> HAGuest:
    """The HA guest as the plan lists it: moved by HA maintenance (checked) or left behind (with an action)."""
    sid = str(res["sid"])
    row = service_row(data, sid)
    requested = str(row.get("request_state") or res.get("state") or "started")
    requested = "started" if requested == "enabled" else requested
    crm = str(row.get("crm_state") or row.get("state") or "")
    action = left_behind(sid, m.node, requested, crm, disarm)
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
