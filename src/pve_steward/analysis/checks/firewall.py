"""The cluster firewall: on or off, its default policies, nodes that opt out, and the cluster rule set.

pve-firewall applies nothing while cluster.fw's ``enable`` is unset or 0 (Firewall.pm ``compile``), so the
other checks only speak when it is on, as cv4pve-diag does. A node's host.fw ``enable`` defaults to on.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import CLUSTER, Finding, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

OPTIONS = Need("firewall_options", "/cluster/firewall/options", privilege="Sys.Audit on /")
RULES = Need("firewall_rules", "/cluster/firewall/rules", privilege="Sys.Audit on /")
NODE_OPTIONS = Need("firewall_node_options", "/nodes/{node}/firewall/options", per="node")


def _on(value: Any, default: bool) -> bool:
    if value is None or value == "":
        return default
    try:
        return bool(int(value))
    except (TypeError, ValueError):
        return default


@pve_rule(
    "firewall.address-list",
    rule="A rule's source or dest is an IPSet (+name), an alias, or a comma list of addresses/CIDRs (one "
    "element of prefix length 0 opens it to anywhere)",
    pve="pve-firewall src/PVE/Firewall.pm parse_address_list",
    codes=("FIREWALL_RULE_ANY_ADDRESS",),
)
def _any_address(value: Any) -> bool:
    """Whether an address list holds 0.0.0.0/0 or ::/0 (IPSets and aliases are not resolved)."""
    if not isinstance(value, str):
        return False
    for elem in value.split(","):
        try:
            if ipaddress.ip_network(elem.strip(), strict=False).prefixlen == 0:
                return True
        except ValueError:
            continue
    return False


@pve_rule(
    "firewall.rule-enforced",
    rule="pve-firewall applies a rule only when it is enabled and verify_rule found no errors in it (a missing "
    "alias or IPSet, a bad port...); get_rules returns those errors",
    pve="pve-firewall src/PVE/Firewall.pm enable_host_firewall, generate_group_rules "
    "('next if !$rule->{enable} || $rule->{errors}'), verify_rule",
    codes=("FIREWALL_RULE_INVALID", "FIREWALL_RULE_ANY_ADDRESS", "FIREWALL_NO_LOGGING"),
)
def _enforced(rule: Row) -> bool:
    return _on(rule.get("enable"), False) and not rule.get("errors")


@pve_rule(
    "firewall.cluster-enable",
    rule="The firewall applies nothing while cluster.fw enable is unset or 0; a node's host.fw enable defaults to on",
    pve="pve-firewall src/PVE/Firewall.pm compile, is_enabled_and_not_nftables",
    codes=(
        "FIREWALL_CLUSTER_DISABLED",
        "FIREWALL_NODE_DISABLED",
    ),
)
def _enabled_options(data: ClusterData) -> Row | None:
    """cluster.fw's options when the firewall is on (None when off or unread)."""
    opts = data.read("firewall_options")
    return opts if isinstance(opts, dict) and _on(opts.get("enable"), False) else None


@check(
    "firewall",
    codes=[
        Code(
            "FIREWALL_CLUSTER_DISABLED",
            "warning",
            "Cluster firewall is off",
            "cluster.fw has `enable` unset or 0, so pve-firewall filters nothing on any node or guest, whatever "
            "the host, guest and security-group rules say.",
            "Add rules that keep SSH (22) and the GUI (8006) reachable from your management network, then enable "
            "it: GUI Datacenter > Firewall > Options > Firewall, or `pvesh set /cluster/firewall/options --enable 1`.",
        )
    ],
    needs=[OPTIONS],
    anchors=["cv4pve-diag:WC0003"],
    pve="pve-firewall src/PVE/Firewall.pm compile, is_enabled_and_not_nftables",
)
def cluster_enabled(data: ClusterData, t: Thresholds) -> list[Finding]:
    """The datacenter-wide firewall switch."""
    opts = data.read("firewall_options")
    if not isinstance(opts, dict) or _on(opts.get("enable"), False):
        return []
    return [
        finding("FIREWALL_CLUSTER_DISABLED", CLUSTER, "the cluster firewall is off", {"enable": opts.get("enable", 0)})
    ]


@check(
    "firewall",
    codes=[
        Code(
            "FIREWALL_POLICY_ACCEPT",
            "warning",
            "Firewall policy lets unmatched traffic through",
            "With the firewall on, the input policy is ACCEPT (PVE's default is DROP), or the output policy is set "
            "to ACCEPT explicitly; unmatched traffic then passes. PVE's implicit outbound ACCEPT, which almost "
            "every cluster runs with, is not flagged (as cv4pve-diag); REJECT and DROP refuse traffic.",
            "GUI Datacenter > Firewall > Options > Input/Output Policy, or "
            "`pvesh set /cluster/firewall/options --policy_in DROP`.",
        )
    ],
    needs=[OPTIONS],
    anchors=["cv4pve-diag:WC0004"],
    pve="pve-firewall src/PVE/Firewall.pm enable_host_firewall (policy_in || 'DROP', policy_out || 'ACCEPT')",
)
@pve_rule(
    "firewall.default-policy",
    rule="The host input policy defaults to DROP and the output policy to ACCEPT when cluster.fw sets none",
    pve="pve-firewall src/PVE/Firewall.pm enable_host_firewall",
    codes=("FIREWALL_POLICY_ACCEPT",),
)
def policies(data: ClusterData, t: Thresholds) -> list[Finding]:
    """ACCEPT as the input policy, or explicitly as the output policy."""
    opts = _enabled_options(data)
    if opts is None:
        return []
    out = []
    for key, direction, default in (("policy_in", "inbound", "DROP"), ("policy_out", "outbound", None)):
        value = str(opts.get(key) or default or "")
        if value.upper() == "ACCEPT":
            out.append(
                finding(
                    "FIREWALL_POLICY_ACCEPT",
                    Subject(kind="cluster", id=key),
                    f"the cluster firewall's {direction} policy is ACCEPT",
                    {key: value, "explicit": key in opts},
                )
            )
    return out


@check(
    "firewall",
    codes=[
        Code(
            "FIREWALL_NODE_DISABLED",
            "warning",
            "Node opts out of the cluster firewall",
            "The cluster firewall is on but a node's host.fw sets `enable: 0`, so that node's own rules and the "
            "cluster's host rules are not applied there.",
            "GUI Node > Firewall > Options > Firewall, or `pvesh set /nodes/<node>/firewall/options --enable 1`.",
        )
    ],
    needs=[OPTIONS, NODE_OPTIONS],
    anchors=["cv4pve-diag:WN0001"],
    pve="pve-firewall src/PVE/Firewall.pm compile (hostfw_enable: unset means on)",
)
def nodes_enabled(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Nodes with the host firewall off while the cluster's is on."""
    if _enabled_options(data) is None:
        return []
    out = []
    for node, opts in sorted(data.read_nodes("firewall_node_options").items()):
        if isinstance(opts, dict) and not _on(opts.get("enable"), True):
            out.append(
                finding(
                    "FIREWALL_NODE_DISABLED",
                    Subject(kind="node", id=node),
                    f"node {node} has its firewall off while the cluster's is on",
                    {"enable": opts.get("enable")},
                )
            )
    return out


def _rule_subject(rule: Row) -> Subject:
    return Subject(kind="firewall_rule", id=f"cluster/{rule.get('pos')}", name=str(rule.get("comment") or "") or None)


def _invalid(rule: Row) -> Finding:
    errors = rule.get("errors")
    fields = sorted(str(k) for k in errors) if isinstance(errors, dict) else []
    evidence = {k: rule.get(k) for k in ("pos", "type", "action", "source", "dest", "macro")}
    evidence = {k: v for k, v in evidence.items() if v is not None}
    evidence["errors"] = {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else str(errors)
    where = f" ({', '.join(fields)})" if fields else ""
    return finding(
        "FIREWALL_RULE_INVALID",
        _rule_subject(rule),
        f"cluster firewall rule {rule.get('pos')} has errors{where} and is not applied",
        evidence,
    )


@check(
    "firewall",
    codes=[
        Code(
            "FIREWALL_RULE_ANY_ADDRESS",
            "warning",
            "Firewall rule accepts any address",
            "An enabled cluster rule ACCEPTs traffic with source or destination 0.0.0.0/0 (or ::/0, alone or in an "
            "address list), i.e. from or to anywhere. Rules that drop or reject such traffic are fine.",
            "Narrow the rule to the networks that need it (an IPSet or alias), GUI Datacenter > Firewall > Edit "
            "rule, or `pvesh set /cluster/firewall/rules/<pos> --source <net>`.",
        ),
        Code(
            "FIREWALL_NO_LOGGING",
            "info",
            "No cluster firewall rule logs",
            "The cluster firewall is on and has enabled rules, but none sets a log level other than nolog, so "
            "matches leave no audit trail. Not judged when a rule references a security group, whose own rules "
            "may log.",
            "Set a log level on the rules worth auditing (GUI: Datacenter > Firewall > Edit rule > Log level).",
        ),
        Code(
            "FIREWALL_STALE_RULES",
            "info",
            "Many disabled cluster firewall rules",
            "The cluster rule set holds at least `firewall_disabled_rules_max` disabled rules: stale "
            "configuration that hides what is really enforced.",
            "Delete rules that are no longer needed (GUI: Datacenter > Firewall).",
        ),
        Code(
            "FIREWALL_RULE_INVALID",
            "warning",
            "Enabled cluster firewall rule is not applied",
            "An enabled cluster rule has errors (pve-firewall's verify_rule: e.g. a missing alias or IPSet, an "
            "unknown macro, a bad port), so pve-firewall skips it: it neither allows nor blocks what it says.",
            "Fix what the rule's errors name (create the alias or IPSet, correct the field) or delete the rule "
            "(GUI: Datacenter > Firewall, the rule is marked red).",
        ),
    ],
    needs=[OPTIONS, RULES],
    thresholds=[Threshold("firewall_disabled_rules_max", 10, "disabled cluster firewall rules before it is noise")],
    anchors=["cv4pve-diag:WC0008", "cv4pve-diag:IC0013", "cv4pve-diag:IC0014"],
    pve="pve-firewall src/PVE/API2/Firewall/Rules.pm get_rules, src/PVE/Firewall.pm parse_fw_rule, verify_rule",
)
def rules(data: ClusterData, t: Thresholds) -> list[Finding]:
    """The cluster rule set: rules PVE skips, rules open to anywhere, no logging at all, and disabled clutter."""
    rows = data.read("firewall_rules")
    if _enabled_options(data) is None or not isinstance(rows, list):
        return []
    rows = [r for r in rows if isinstance(r, dict)]
    enabled = [r for r in rows if _on(r.get("enable"), False)]
    out = [_invalid(r) for r in enabled if not _enforced(r)]
    enforced = [r for r in enabled if _enforced(r)]
    for r in enforced:
        wide = sorted({str(r.get(k)) for k in ("source", "dest") if _any_address(r.get(k))})
        if wide and str(r.get("action")).upper() == "ACCEPT":
            evidence = {k: r.get(k) for k in ("pos", "type", "action", "source", "dest", "proto", "dport", "macro")}
            out.append(
                finding(
                    "FIREWALL_RULE_ANY_ADDRESS",
                    _rule_subject(r),
                    f"cluster firewall rule {r.get('pos')} accepts {', '.join(wide)}",
                    {k: v for k, v in evidence.items() if v is not None},
                )
            )
    groups = any(str(r.get("type")) == "group" for r in enforced)
    if enforced and not groups and all(str(r.get("log") or "nolog") == "nolog" for r in enforced):
        out.append(
            finding(
                "FIREWALL_NO_LOGGING",
                CLUSTER,
                f"none of {len(enforced)} enabled rules logs",
                {"enabled_rules": len(enforced)},
            )
        )
    disabled = len(rows) - len(enabled)
    if disabled >= t.get("firewall_disabled_rules_max"):
        out.append(
            finding(
                "FIREWALL_STALE_RULES",
                CLUSTER,
                f"{disabled} cluster firewall rules are disabled",
                {"disabled_rules": disabled, "threshold": t.get("firewall_disabled_rules_max")},
            )
        )
    return out
