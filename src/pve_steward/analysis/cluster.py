"""Cluster and HA: quorum, node membership and versions, HA manager health, resource states,
maintenance, and HA rules or groups that leave a resource nowhere to go."""

from __future__ import annotations

import re

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Severity, Subject, finding

_TRANSITIONAL = {"starting", "migrate", "relocate", "request_stop", "stopping", "queued", "freeze", "request_start"}
CLUSTER = Subject(kind="cluster", id="cluster")


def analyze_cluster(data: ClusterData) -> list[Finding]:
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


def analyze_ha(data: ClusterData) -> list[Finding]:
    out: list[Finding] = []
    if not data.ha_resources and not any(r.get("type") == "service" for r in data.ha_status):
        return out
    online = set(data.online_nodes)
    master = next((r for r in data.ha_status if r.get("type") == "master"), None)
    if data.ha_status and (master is None or "active" not in str(master.get("status", ""))):
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
            if "old timestamp" in status or "dead" in status:
                if node in online:
                    out.append(
                        finding(
                            "HA_LRM_DEAD",
                            Subject(kind="node", id=node),
                            f"HA LRM on {node} is not answering",
                            {"status": status},
                        )
                    )
            elif "maintenance" in status:
                out.append(
                    finding(
                        "HA_NODE_MAINTENANCE",
                        Subject(kind="node", id=node),
                        f"{node} is in HA maintenance mode",
                        {"status": status},
                    )
                )
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
            sid = str(row.get("sid"))
            service_node[sid] = node
            state = str(row.get("crm_state") or row.get("state") or "")
            subject = Subject(kind="ha_resource", id=sid, node=node)
            requested = str(row.get("request_state") or "")
            if state == "error":
                out.append(
                    finding(
                        "HA_RESOURCE_ERROR",
                        subject,
                        f"HA resource {sid} is in error state on {node}",
                        {"state": state, "request_state": requested},
                    )
                )
            elif state in ("fence", "recovery"):
                out.append(
                    finding(
                        "HA_RESOURCE_FENCING",
                        subject,
                        f"HA resource {sid} is in state {state} ({node})",
                        {"state": state},
                    )
                )
            elif requested in ("started", "enabled") and state not in ("started", *_TRANSITIONAL, "ignored"):
                out.append(
                    finding(
                        "HA_RESOURCE_STATE_MISMATCH",
                        subject,
                        f"HA resource {sid} is {state}, requested {requested}",
                        {"state": state, "request_state": requested},
                    )
                )
    out += _constraints(data, online, service_node)
    return out


def _constraints(data: ClusterData, online: set[str], service_node: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []
    strict: dict[str, tuple[str, list[str]]] = {}
    for rule in data.ha_rules:
        name = str(rule.get("rule"))
        if int(rule.get("disable", 0) or 0) or rule.get("errors"):
            out.append(
                finding(
                    "HA_RULE_ERRORS",
                    Subject(kind="ha_rule", id=name),
                    f"HA rule {name} is " + ("disabled" if rule.get("disable") else "not applied (errors)"),
                    {"errors": rule.get("errors"), "disable": rule.get("disable")},
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
                    + ("none is online" if not usable else f"no online node besides {current}"),
                    {"allowed": nodes, "online_allowed": usable, "current": current},
                    severity=sev,
                )
            )
    return out
