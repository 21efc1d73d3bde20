"""The firewall's configuration as pve-firewall keeps it: cluster.fw (options and rules) and each host.fw.

Only what the API shows: options are returned as set in the file (an unset ``enable`` is off in
cluster.fw and on in host.fw, pve-firewall Firewall.pm ``compile``), rules carry ``enable`` 0/1 and their
position (API2/Firewall/Rules.pm ``get_rules``). Also the cluster log, which a scenario can fill.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Firewall:
    options: dict[str, Any] = field(default_factory=dict)  # cluster.fw [OPTIONS]
    rules: list[dict[str, Any]] = field(default_factory=list)  # cluster.fw [RULES], in order
    host_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> host.fw [OPTIONS]
    aliases: dict[str, str] = field(default_factory=dict)  # cluster.fw [ALIASES]: lower-cased name -> cidr
    ipsets: dict[str, list[str]] = field(default_factory=dict)  # cluster.fw [IPSET <name>] -> cidrs


_NAME = r"[A-Za-z][A-Za-z0-9\-\_]+"  # Firewall.pm $ipset_name_pattern, $ip_alias_pattern
_IPSET_REF = re.compile(rf"^\+(?:guest/|dc/|sdn/)?({_NAME})$")
_ALIAS_REF = re.compile(rf"^(?:guest/|dc/)?({_NAME})$")


def rule_errors(rule: dict[str, Any], fw: Firewall) -> dict[str, str]:
    """What Firewall.pm ``verify_rule`` (``check_ipset_or_alias_property``) records for a cluster rule whose
    source or dest names an IPSet or alias cluster.fw lacks; pve-firewall then skips the rule."""
    errors: dict[str, str] = {}
    for name in ("source", "dest"):
        value = rule.get(name)
        if not isinstance(value, str) or not value:
            continue
        if value.startswith("+"):
            m = _IPSET_REF.match(value)
            if m is None:
                errors[name] = f"invalid ipset name '{value}'"
            elif m.group(1) not in fw.ipsets:
                errors[name] = f"no such ipset '{m.group(1)}'"
        elif (m := _ALIAS_REF.match(value)) is not None and m.group(1).lower() not in fw.aliases:
            errors[name] = f"no such alias '{value}'"
    return errors


def firewall_from(spec: dict[str, Any] | None, nodes: list[str]) -> Firewall:
    """Scenario key ``firewall``: ``options`` (cluster.fw), ``rules`` (each a rule as the API returns it,
    ``enable`` defaulting to 1), ``hosts`` (node -> host.fw options), ``aliases`` (name -> cidr) and
    ``ipsets`` (name -> cidrs) that rules may reference. Without the key the cluster
    firewall is on with PVE's default policies and an SSH/GUI rule from the management net."""
    if spec is None:
        spec = {
            "options": {"enable": 1, "policy_in": "DROP"},
            "rules": [
                {"type": "in", "action": "ACCEPT", "macro": "SSH", "source": "10.0.0.0/24", "log": "info"},
                {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "8006", "source": "10.0.0.0/24"},
            ],
        }
    fw = Firewall(options=dict(spec.get("options") or {}))
    for rd in spec.get("rules") or []:
        rule = {"enable": 1, **rd}
        rule["enable"] = int(rule["enable"])
        fw.rules.append(rule)
    hosts = spec.get("hosts") or {}
    fw.host_options = {n: dict(hosts.get(n) or {}) for n in nodes}
    fw.aliases = {str(k).lower(): str(v) for k, v in (spec.get("aliases") or {}).items()}
    fw.ipsets = {str(k): [str(c) for c in v or []] for k, v in (spec.get("ipsets") or {}).items()}
    return fw


def cluster_log_from(entries: list[dict[str, Any]], tasks: list[Any], now: float) -> list[dict[str, Any]]:
    """Cluster log rows like pmxcfs' clog (``uid``, ``time``, ``pri``, ``tag``, ``pid``, ``node``, ``user``,
    ``msg``): a start and an end line per scenario task (priority 6, info), plus the scenario's
    ``cluster_log`` entries (``age``, ``node``, ``pri``, ``tag``, ``msg``, ``count``)."""
    from pvesim.scenario import parse_age  # scenario imports this module

    rows: list[dict[str, Any]] = []
    for t in tasks:
        rows.append(
            {
                "time": int(t.starttime),
                "node": t.node,
                "pri": 6,
                "tag": "pvedaemon",
                "pid": t.pid,
                "user": t.user,
                "msg": f"<{t.user}> starting task {t.upid}:",
            }
        )
        if t.endtime:
            rows.append(
                {
                    "time": int(t.endtime),
                    "node": t.node,
                    "pri": 6,
                    "tag": "pvedaemon",
                    "pid": t.pid,
                    "user": t.user,
                    "msg": f"<{t.user}> end task {t.upid} {t.status}",
                }
            )
    for e in entries:
        for i in range(int(e.get("count", 1))):
            rows.append(
                {
                    "time": int(now - parse_age(e.get("age", "1h"))) + i,
                    "node": e["node"],
                    "pri": int(e.get("pri", 3)),
                    "tag": str(e.get("tag", "pvedaemon")),
                    "pid": 1000 + i,
                    "user": str(e.get("user", "root@pam")),
                    "msg": str(e["msg"]),
                }
            )
    rows.sort(key=lambda r: r["time"])
    for uid, row in enumerate(rows, start=1):
        row["uid"] = uid
    return rows
