"""Firewall checks on PVE-shaped answers of /cluster/firewall/options, /cluster/firewall/rules and
/nodes/{node}/firewall/options (options as set in the files, rules with enable 0/1 and pos)."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.checks import firewall
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from tests.unit.pve_fixtures import data

T = Thresholds()


def rule(pos: int, enable: int = 1, **kw: Any) -> dict[str, Any]:
    return {"pos": pos, "type": "in", "action": "ACCEPT", "enable": enable, "ipversion": 4, **kw}


def fw(
    options: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    nodes: dict[str, dict[str, Any]] | None = None,
) -> ClusterData:
    reads: dict[str, dict[str, Any]] = {
        "firewall_options": {"": {"enable": 1, "policy_in": "DROP"} if options is None else options},
        "firewall_rules": {"": [rule(0, macro="SSH", source="10.0.0.0/24", log="info")] if rules is None else rules},
        "firewall_node_options": nodes if nodes is not None else {"pve1": {}, "pve2": {"enable": 1}},
    }
    return data(reads=reads)


def run(d: ClusterData, t: Thresholds = T) -> list[Finding]:
    return [
        f
        for c in (firewall.cluster_enabled, firewall.policies, firewall.nodes_enabled, firewall.rules)
        for f in c(d, t)
    ]


def codes(d: ClusterData, t: Thresholds = T) -> set[tuple[str, str]]:
    return {(f.code, f.subject.id) for f in run(d, t)}


def test_an_enabled_firewall_with_drop_and_a_logged_scoped_rule_has_no_finding() -> None:
    assert codes(fw()) == set()


def test_an_unset_enable_is_off_and_silences_the_rest() -> None:
    found = run(fw(options={"policy_in": "ACCEPT"}, rules=[rule(0, source="0.0.0.0/0")]))
    assert [(f.code, f.evidence) for f in found] == [("FIREWALL_CLUSTER_DISABLED", {"enable": 0})]


def test_accept_as_input_policy_or_explicit_output_policy() -> None:
    found = codes(fw(options={"enable": 1, "policy_in": "ACCEPT", "policy_out": "ACCEPT"}))
    assert found == {("FIREWALL_POLICY_ACCEPT", "policy_in"), ("FIREWALL_POLICY_ACCEPT", "policy_out")}
    assert codes(fw(options={"enable": 1})) == set()  # PVE's defaults: in DROP, out ACCEPT (implicit, not flagged)
    assert codes(fw(options={"enable": 1, "policy_in": "REJECT"})) == set()


def test_a_node_that_opts_out() -> None:
    found = run(fw(nodes={"pve1": {}, "pve2": {"enable": 0}}))
    assert [(f.code, f.subject.id, f.evidence) for f in found] == [("FIREWALL_NODE_DISABLED", "pve2", {"enable": 0})]


def test_an_accept_rule_from_anywhere_but_not_a_drop_or_a_disabled_one() -> None:
    rules = [
        rule(0, source="0.0.0.0/0", dport="8006", proto="tcp", log="info"),
        rule(1, action="DROP", source="0.0.0.0/0"),
        rule(2, enable=0, dest="::/0"),
        rule(3, dest="::/0"),
    ]
    found = {(f.code, f.subject.id): f for f in run(fw(rules=rules))}
    assert set(found) == {("FIREWALL_RULE_ANY_ADDRESS", "cluster/0"), ("FIREWALL_RULE_ANY_ADDRESS", "cluster/3")}
    assert found[("FIREWALL_RULE_ANY_ADDRESS", "cluster/0")].evidence["dport"] == "8006"


def test_an_address_list_holding_anywhere_is_anywhere() -> None:
    """Firewall.pm parse_address_list: source/dest may be a comma list; one 0.0.0.0/0 element opens the rule."""
    rules = [
        rule(0, source="10.0.0.0/24,0.0.0.0/0", dport="8006", proto="tcp", log="info"),
        rule(1, source="fd00::/64, ::/0", log="info"),
        rule(2, source="10.0.0.0/24,10.1.0.0/16", log="info"),
        rule(3, source="+management", log="info"),
        rule(4, source="dc/mgmt", log="info"),
    ]
    found = codes(fw(rules=rules))
    assert found == {("FIREWALL_RULE_ANY_ADDRESS", "cluster/0"), ("FIREWALL_RULE_ANY_ADDRESS", "cluster/1")}


def test_an_enabled_rule_with_errors_is_not_applied() -> None:
    """Firewall.pm verify_rule records errors; enable_host_firewall skips the rule ('next if !$rule->{enable}
    || $rule->{errors}'): it is named, and neither opens anything nor counts for logging."""
    broken = rule(0, source="0.0.0.0/0", dest="mgmt", log="nolog", errors={"dest": "no such alias 'mgmt'"})
    found = {(f.code, f.subject.id): f for f in run(fw(rules=[broken, rule(1, source="10.0.0.0/8", log="info")]))}
    assert set(found) == {("FIREWALL_RULE_INVALID", "cluster/0")}
    invalid = found[("FIREWALL_RULE_INVALID", "cluster/0")]
    assert invalid.severity == "warning" and invalid.evidence["errors"] == {"dest": "no such alias 'mgmt'"}
    disabled = rule(0, enable=0, errors={"dest": "no such alias 'mgmt'"})
    assert codes(fw(rules=[disabled, rule(1, source="10.0.0.0/8", log="info")])) == set()


def test_security_group_references_are_not_judged_for_logging() -> None:
    """parse_fw_rule stops after -i for a 'group' rule: it has no log option; its group's rules may log."""
    rules = [rule(0, type="group", action="mgmt"), rule(1, source="10.0.0.0/8")]
    assert codes(fw(rules=rules)) == set()


def test_no_enabled_rule_logs() -> None:
    found = run(fw(rules=[rule(0, source="10.0.0.0/8"), rule(1, source="10.1.0.0/16", log="nolog")]))
    assert [(f.code, f.evidence) for f in found] == [("FIREWALL_NO_LOGGING", {"enabled_rules": 2})]


def test_many_disabled_rules_against_the_threshold() -> None:
    rules = [rule(0, source="10.0.0.0/8", log="info")] + [rule(i, enable=0, source="10.9.0.0/16") for i in range(1, 11)]
    assert ("FIREWALL_STALE_RULES", "cluster") in codes(fw(rules=rules))
    assert codes(fw(rules=rules), thresholds_from({"firewall_disabled_rules_max": 11})) == set()
    assert codes(fw(rules=rules[:10])) == set()


def test_unread_options_yield_no_verdict() -> None:
    assert run(data(reads={})) == []
