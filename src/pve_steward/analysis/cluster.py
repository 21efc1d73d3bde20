"""Cluster and HA: quorum, node membership and versions, HA manager health, resource states,
maintenance, and HA rules or groups that leave a resource nowhere to go."""

from __future__ import annotations

import re

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import CLUSTER, Finding, Severity, Subject, finding
from pve_steward.analysis.hastate import status_state
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

# CRM states on the way somewhere (pve-ha-manager HA/Manager.pm $valid_service_states) and the verbose ones the
# status API derives while a request is being carried out (HA/Tools.pm get_verbose_service_state).
_TRANSITIONAL = {
    "starting",
    "migrate",
    "relocate",
    "request_stop",
    "stopping",
    "queued",
    "freeze",
    "request_start",
    "request_start_balance",
}


@check(
    "cluster",
    codes=[
        Code(
            "CLUSTER_NOT_QUORATE",
            "critical",
            "Cluster has no quorum",
            "/cluster/status reports quorate=0: pmxcfs is read-only, no migration, config change or HA recovery works.",
            "Restore corosync connectivity to a majority of nodes (pvecm status).",
        ),
        Code(
            "CLUSTER_STANDALONE",
            "info",
            "Single node without a cluster",
            "No cluster entry in /cluster/status.",
            "Nothing to fix; migration, HA and replication need a cluster (pvecm create).",
        ),
        Code(
            "NODE_OFFLINE",
            "warning",
            "Node offline",
            "A configured node reports online=0. Critical when online nodes are half or fewer.",
            "Check the node's power, network and corosync links; its guests are unreachable or being recovered.",
        ),
        Code(
            "NODE_VERSION_MISMATCH",
            "warning",
            "Nodes run different PVE versions",
            "Online nodes report different pve-manager versions; migration targets must run the same or newer.",
            "Finish the rolling upgrade on every node.",
        ),
    ],
    anchors=[
        "cv4pve-diag:CC0001=CLUSTER_NOT_QUORATE",
        "cv4pve-diag:IC0017=CLUSTER_STANDALONE",
        "cv4pve-diag:WC0011=NODE_VERSION_MISMATCH",
        "cv4pve-diag:WN0002=NODE_OFFLINE",
        "cv4pve-diag:CN0001=NODE_VERSION_MISMATCH",
        "check_pve:cluster=CLUSTER_NOT_QUORATE/NODE_OFFLINE",
        "pve8to9:quorate=CLUSTER_NOT_QUORATE",
        "pve8to9:nodes-offline=NODE_OFFLINE",
    ],
    pve="pve-manager PVE/API2/Cluster.pm get_status (quorate, online per node; nodes' pve-manager versions)",
)
def analyze_cluster(data: ClusterData, t: Thresholds | None = None) -> list[Finding]:
    out: list[Finding] = []
    cluster = next((r for r in data.cluster_status if r.get("type") == "cluster"), None)
    if data.cluster_status and cluster is None:
        out.append(finding("CLUSTER_STANDALONE", CLUSTER, "single node, not part of a cluster"))
    elif cluster is not None and not cluster.get("quorate"):
        out.append(
            finding(
                "CLUSTER_NOT_QUORATE",
                Subject(kind="cluster", id=str(cluster.get("name"))),
                f"cluster {cluster.get('name')} has lost quorum",
                {"nodes": cluster.get("nodes")},
            )
        )
    total = len(data.nodes)
    offline = sorted(n for n, r in data.nodes.items() if not r.get("online"))
    for node in offline:
        sev = Severity.CRITICAL if total - len(offline) <= total / 2 else Severity.WARNING
        out.append(
            finding(
                "NODE_OFFLINE",
                Subject(kind="node", id=node),
                f"node {node} is offline",
                {"online_nodes": total - len(offline), "nodes": total},
                severity=sev,
            )
        )
    versions = {
        n: str(st.get("pveversion")).split("/")[1]
        for n, st in data.node_status.items()
        if st.get("pveversion") and "/" in str(st.get("pveversion"))
    }
    if len(set(versions.values())) > 1:
        out.append(
            finding(
                "NODE_VERSION_MISMATCH",
                CLUSTER,
                "nodes run different pve-manager versions: "
                + ", ".join(f"{n} {v}" for n, v in sorted(versions.items())),
                {"versions": versions},
            )
        )
    return out


def _split(spec: str | None) -> list[str]:
    return [part.strip() for part in str(spec or "").split(",") if part.strip()]


def _rule_nodes(spec: str | None) -> list[str]:
    """'pve1:2,pve2' -> ['pve1', 'pve2'] (priorities dropped)."""
    return [re.sub(r":\d+$", "", part) for part in _split(spec)]


@pve_rule(
    "ha.status-texts",
    rule="The HA status API marks an LRM or CRM whose status is older than 30 s 'old timestamp - dead?', one stamped "
    "more than 2 s ahead 'detected time drift!', an LRM that never wrote one 'unable to read lrm status', an LRM in "
    "maintenance '<mode> mode'; the master row says 'active' only while the CRM works.",
    pve="pve-ha-manager src/PVE/API2/HA/Status.pm status ($timestamp_to_status)",
    codes=("HA_LRM_DEAD", "HA_LRM_TIME_DRIFT", "HA_NODE_MAINTENANCE"),
)
def _lrm_finding(node: str, status: str, online: set[str]) -> Finding | None:
    state = status_state(status)
    if state in ("old timestamp - dead?", "unable to read lrm status", "detected time drift!"):
        if node not in online:
            return None  # an offline node's LRM is expected to be silent: NODE_OFFLINE says it
        if state == "detected time drift!":
            return finding(
                "HA_LRM_TIME_DRIFT",
                Subject(kind="node", id=node),
                f"HA LRM status of {node} is stamped ahead of the cluster's clock (time drift)",
                {"status": status},
            )
        return finding(
            "HA_LRM_DEAD", Subject(kind="node", id=node), f"HA LRM on {node} is not answering", {"status": status}
        )
    if state == "maintenance mode":
        return finding(
            "HA_NODE_MAINTENANCE",
            Subject(kind="node", id=node),
            f"{node} is in HA maintenance mode",
            {"status": status},
        )
    return None


@pve_rule(
    "ha.service-states",
    rule="A service's CRM state is one of stopped, request_stop, request_start(_balance), started, fence, recovery, "
    "migrate, relocate, freeze, error; the status API shows 'starting'/'stopping'/'queued' while a request is "
    "carried out and 'ignore' while HA is disarmed in ignore mode.",
    pve="pve-ha-manager src/PVE/HA/Manager.pm $valid_service_states; src/PVE/HA/Tools.pm get_verbose_service_state",
    codes=("HA_RESOURCE_ERROR", "HA_RESOURCE_FENCING", "HA_RESOURCE_STATE_MISMATCH"),
)
def _service_finding(row: dict[str, object], node: str) -> Finding | None:
    sid = str(row.get("sid"))
    state = str(row.get("crm_state") or row.get("state") or "")
    verbose = str(row.get("state") or "")
    subject = Subject(kind="ha_resource", id=sid, node=node)
    requested = str(row.get("request_state") or "")
    if state == "error":
        return finding(
            "HA_RESOURCE_ERROR",
            subject,
            f"HA resource {sid} is in error state on {node}",
            {"state": state, "request_state": requested},
        )
    if state in ("fence", "recovery"):
        return finding(
            "HA_RESOURCE_FENCING", subject, f"HA resource {sid} is in state {state} ({node})", {"state": state}
        )
    settled = state in ("started", *_TRANSITIONAL, "ignored") or verbose in (*_TRANSITIONAL, "ignore", "ignored")
    if requested in ("started", "enabled") and not settled:
        return finding(
            "HA_RESOURCE_STATE_MISMATCH",
            subject,
            f"HA resource {sid} is {state}, requested {requested}",
            {"state": state, "request_state": requested},
        )
    return None


@check(
    "ha",
    codes=[
        Code(
            "HA_NO_MASTER",
            "critical",
            "No active HA manager",
            "HA resources exist but no active CRM master is reported.",
            "Check pve-ha-crm on all nodes (ha-manager status).",
        ),
        Code(
            "HA_LRM_DEAD",
            "critical",
            "HA local resource manager not answering",
            "An LRM status has an old timestamp ('old timestamp - dead?') or cannot be read ('unable to read lrm "
            "status') on a node that is online. The evacuation planner sends no guest there.",
            "Check pve-ha-lrm on the node; a node whose LRM is gone cannot run or receive HA services.",
        ),
        Code(
            "HA_LRM_TIME_DRIFT",
            "warning",
            "HA local resource manager's clock ahead",
            "The HA status shows 'detected time drift!' for an LRM: its status is stamped more than 2 s ahead of the "
            "answering node's clock, so one of the two clocks is wrong (HA's timeouts and fencing rest on them). The "
            "evacuation planner sends no guest there.",
            "Check time synchronisation (chronyc tracking) on both nodes and fix the clock that is off.",
        ),
        Code(
            "HA_RESOURCE_ERROR",
            "critical",
            "HA resource in error state",
            "CRM state 'error': HA no longer manages it.",
            "ha-manager set <sid> --state disabled, fix the cause, then --state started.",
        ),
        Code(
            "HA_RESOURCE_FENCING",
            "critical",
            "HA resource waiting for fencing or recovery",
            "CRM state 'fence' or 'recovery': its node failed and the resource is not running anywhere.",
            "Bring the failed node back or make sure it is fenced; check that another node can take the resource.",
        ),
        Code(
            "HA_RESOURCE_STATE_MISMATCH",
            "warning",
            "HA resource not in its requested state",
            "The CRM state differs from the requested state (e.g. requested started, stopped) and is not a transition.",
            "Check the resource's HA log (journalctl -u pve-ha-lrm) on its node.",
        ),
        Code(
            "HA_NODE_MAINTENANCE",
            "info",
            "Node in HA maintenance mode",
            "The LRM reports maintenance mode; HA moved or will move its services away.",
            "ha-manager crm-command node-maintenance disable <node> when the work is done.",
        ),
        Code(
            "HA_RULE_NO_TARGET",
            "warning",
            "HA constraints leave a resource nowhere to go",
            "A strict node-affinity rule or restricted group allows no online node other than the current one. "
            "Critical when none of its allowed nodes is online.",
            "Widen the rule/group or bring the allowed nodes back.",
        ),
        Code(
            "HA_RULE_ERRORS",
            "warning",
            "HA rule disabled or infeasible",
            "PVE reports errors for an HA rule (an infeasible rule is not applied); a rule disabled on purpose "
            "(disable=1) is listed at info, since PVE skips it alike.",
            "Fix the rule (ha-manager rules config) so it can be applied.",
        ),
        Code(
            "HA_DISARMED",
            "warning",
            "HA disarmed",
            "The HA stack is disarmed: no fencing, failover or recovery.",
            "Re-arm HA (POST /cluster/ha/status/arm-ha).",
        ),
    ],
    anchors=[
        "cv4pve-diag:CC0005=HA_RESOURCE_ERROR",
    ],
    pve="pve-ha-manager src/PVE/API2/HA/Status.pm status; src/PVE/API2/HA/Rules.pm index",
)
@pve_rule(
    "ha.crm-master",
    rule="The master row of the HA status says 'active' only while the CRM's status is at most 30 s old "
    "(else 'old timestamp - dead?', or 'idle' without services); without an active CRM nothing is recovered.",
    pve="pve-ha-manager src/PVE/API2/HA/Status.pm status",
    codes=("HA_NO_MASTER",),
)
def analyze_ha(data: ClusterData, t: Thresholds | None = None) -> list[Finding]:
    out: list[Finding] = []
    if not data.ha_resources and not any(r.get("type") == "service" for r in data.ha_status):
        return out
    online = set(data.online_nodes)
    master = next((r for r in data.ha_status if r.get("type") == "master"), None)
    if data.ha_status and (master is None or status_state(str(master.get("status", ""))) != "active"):
        out.append(
            finding(
                "HA_NO_MASTER",
                CLUSTER,
                "HA resources exist but no CRM master is active",
                {"master": master.get("status") if master else None},
            )
        )
    service_node: dict[str, str] = {}
    for row in data.ha_status:
        kind, status = row.get("type"), str(row.get("status", ""))
        node = str(row.get("node", ""))
        if kind == "lrm":
            lrm = _lrm_finding(node, status, online)
            if lrm is not None:
                out.append(lrm)
        elif kind == "fencing" and row.get("armed-state") in ("disarmed", "disarming"):
            out.append(
                finding(
                    "HA_DISARMED",
                    CLUSTER,
                    f"HA is {row.get('armed-state')}",
                    {"resource_mode": row.get("resource_mode")},
                )
            )
        elif kind == "service":
            service_node[str(row.get("sid"))] = node
            service = _service_finding(row, node)
            if service is not None:
                out.append(service)
    maintenance = {
        str(r.get("node"))
        for r in data.ha_status
        if r.get("type") == "lrm" and status_state(str(r.get("status"))) == "maintenance mode"
    }
    out += _constraints(data, online - maintenance, service_node, maintenance)
    return out


@pve_rule(
    "ha.placement-constraints",
    rule="PVE 9 places HA resources by rules (its rules index also shows groups not yet migrated, as node-affinity "
    "rules 'ha-group-<name>', strict = restricted) and answers 500 on the groups index once they are migrated; "
    "PVE 8 has only groups. Rules with feasibility errors or disable=1 are not applied. The CRM places services "
    "only on nodes whose HA state is online (a node in maintenance is not).",
    pve="pve-ha-manager src/PVE/API2/HA/Rules.pm index, src/PVE/HA/Groups.pm migrate_groups_to_rules, "
    "src/PVE/API2/HA/Groups.pm index + HA/Config.pm have_groups_been_migrated; HA/Manager.pm "
    "recompute_online_node_usage (NodeStatus list_online_nodes)",
    codes=("HA_RULE_NO_TARGET", "HA_RULE_ERRORS"),
)
def _constraints(
    data: ClusterData, online: set[str], service_node: dict[str, str], maintenance: set[str]
) -> list[Finding]:
    """``online``: nodes the CRM may place on (online and not in HA maintenance)."""
    out: list[Finding] = []
    strict: dict[str, tuple[str, list[str]]] = {}
    for rule in data.ha_rules:
        name = str(rule.get("rule"))
        disabled = bool(int(rule.get("disable", 0) or 0))
        if disabled or rule.get("errors"):
            out.append(
                finding(
                    "HA_RULE_ERRORS",
                    Subject(kind="ha_rule", id=name),
                    f"HA rule {name} is " + ("not applied (errors)" if rule.get("errors") else "disabled"),
                    {"errors": rule.get("errors"), "disable": rule.get("disable")},
                    severity=None if rule.get("errors") else Severity.INFO,  # disabled on purpose: Rules.pm skips it
                )
            )
            continue
        if rule.get("type") == "node-affinity" and int(rule.get("strict", 0) or 0):
            for sid in _split(rule.get("resources")):
                strict[sid] = (f"rule {name}", _rule_nodes(rule.get("nodes")))
    groups = {str(g.get("group")): g for g in data.ha_groups}
    for res in data.ha_resources:
        group = groups.get(str(res.get("group")))
        if group is not None and int(group.get("restricted", 0) or 0):
            strict.setdefault(str(res["sid"]), (f"group {group['group']}", _rule_nodes(group.get("nodes"))))
    for sid, (source, nodes) in sorted(strict.items()):
        current = service_node.get(sid)
        usable = [n for n in nodes if n in online]
        elsewhere = [n for n in usable if n != current]
        if not elsewhere:
            sev = Severity.CRITICAL if not usable else Severity.WARNING
            out.append(
                finding(
                    "HA_RULE_NO_TARGET",
                    Subject(kind="ha_resource", id=sid, node=current),
                    f"{sid} may only run on {', '.join(nodes)} ({source}); "
                    + ("none is online and out of maintenance" if not usable else f"no online node besides {current}")
                    + (
                        f" (in HA maintenance: {', '.join(sorted(set(nodes) & maintenance))})"
                        if set(nodes) & maintenance
                        else ""
                    ),
                    {
                        "allowed": nodes,
                        "online_allowed": usable,
                        "current": current,
                        "in_maintenance": sorted(set(nodes) & maintenance),
                    },
                    severity=sev,
                )
            )
    return out
