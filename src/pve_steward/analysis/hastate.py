"""The HA stack's state as ``/cluster/ha/status/current`` shows it: each LRM's health and HA disarm.

Shared by the HA checks (analysis/cluster.py), the migration targets and the evacuation planner, so a
node the health check calls "LRM not answering" is the node the planner leaves out, for the same reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.pverules import pve_rule

_STATUS_STATE = re.compile(r"^\S+ \(([^,)]+)")

# the LRM states of the status API that say its status file is stale, missing or from a clock ahead of ours
LRM_TROUBLE = {
    "old timestamp - dead?": "its HA LRM is not answering (status older than 30 s)",
    "unable to read lrm status": "its HA LRM status cannot be read (no status file)",
    "detected time drift!": "its HA LRM status is stamped ahead of the cluster's clock (time drift)",
}


def status_state(text: str) -> str:
    """The state in an HA status row's text, ``<node> (<state>, ...)``: matched apart from the node's name, which
    may contain 'dead' or 'active' itself (pve-ha-manager src/PVE/API2/HA/Status.pm status)."""
    m = _STATUS_STATE.match(text)
    return m.group(1).strip() if m else text


@pve_rule(
    "ha.lrm-health",
    rule="The HA status API shows an LRM whose status file is older than 30 s as 'old timestamp - dead?', one "
    "stamped more than 2 s ahead of the answering node's clock as 'detected time drift!', and one without a status "
    "file as 'unable to read lrm status'. The CRM still counts such a node online (its node state follows cluster "
    "membership), so HA may place services there; our planner does not send guests to it.",
    pve="pve-ha-manager src/PVE/API2/HA/Status.pm status ($timestamp_to_status), src/PVE/HA/Config.pm "
    "read_lrm_status, src/PVE/HA/NodeStatus.pm update",
    codes=("HA_LRM_DEAD", "HA_LRM_TIME_DRIFT"),
)
def lrm_trouble(data: ClusterData) -> dict[str, str]:
    """Online node -> the status text's state, for each node whose LRM is dead, unreadable or time-drifted."""
    memo = data.memo["hastate"]
    if "lrm" not in memo:
        online = set(data.online_nodes)
        memo["lrm"] = {
            str(r.get("node")): state
            for r in data.ha_status
            if r.get("type") == "lrm"
            and str(r.get("node")) in online
            and (state := status_state(str(r.get("status", "")))) in LRM_TROUBLE
        }
    return dict(memo["lrm"])


@dataclass(frozen=True)
class Disarm:
    """HA disarmed (or on its way): ``state`` disarming/disarmed, ``mode`` freeze/ignore."""

    state: str
    mode: str

    @property
    def ignore(self) -> bool:
        return self.mode == "ignore"


@pve_rule(
    "ha.disarm",
    rule="While HA is disarmed or disarming (pve-ha-manager 5.1.3+), the CRM ignores node-maintenance requests; in "
    "'freeze' mode it applies no command or state change to its services (they stay where they are), in 'ignore' "
    "mode its services are managed as if not in HA (a migrate is a plain one).",
    pve="pve-ha-manager src/PVE/HA/Manager.pm update_crm_commands ('ignoring maintenance command for node ... - HA "
    "stack is disarmed'), handle_disarm; src/PVE/API2/HA/Status.pm status (fencing row); src/PVE/HA/Config.pm "
    "$service_check_ha_state",
    codes=("HA_DISARMED",),
)
def disarm(data: ClusterData) -> Disarm | None:
    """The disarm the status API's fencing row shows, or None while HA is armed (or on standby)."""
    for r in data.ha_status:
        if r.get("type") == "fencing" and r.get("armed-state") in ("disarming", "disarmed"):
            return Disarm(str(r["armed-state"]), str(r.get("resource_mode") or "freeze"))
    return None
