"""The firewall's configuration as pve-firewall keeps it: cluster.fw, each node's host.fw, each guest's <vmid>.fw.

Only what the API shows: options are returned as set in the file (an unset ``enable`` is off in
cluster.fw and on in host.fw, pve-firewall Firewall.pm ``compile``), rules carry ``enable`` 0/1 and their
position (API2/Firewall/Rules.pm ``get_rules``), ``ipversion`` and ``errors`` as ``verify_rule`` sets them.
Aliases keep their ``ipversion`` (``parse_alias``), IPSets their members and comments, security groups
(cluster.fw only) their rules. Also the firewall log (logs.py reads it) and the cluster log.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FwConf:
    """One .fw file: [OPTIONS], [RULES], [ALIASES], [IPSET <name>] (and, in cluster.fw, [group <name>])."""

    options: dict[str, Any] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)
    aliases: dict[str, dict[str, Any]] = field(default_factory=dict)  # lower-cased name -> name, cidr, ipversion
    ipsets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # name -> cidr, nomatch?, comment?
    ipset_comments: dict[str, str] = field(default_factory=dict)


@dataclass
class Firewall:
    cluster: FwConf = field(default_factory=FwConf)
    hosts: dict[str, FwConf] = field(default_factory=dict)  # node -> host.fw
    guests: dict[int, FwConf] = field(default_factory=dict)  # vmid -> <vmid>.fw (absent: no file)
    groups: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # cluster.fw [group <name>]
    group_comments: dict[str, str] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)  # events in /var/log/pve-firewall.log (logs.py)

    @property
    def options(self) -> dict[str, Any]:
        return self.cluster.options

    @property
    def rules(self) -> list[dict[str, Any]]:
        return self.cluster.rules

    def host(self, node: str) -> FwConf:
        return self.hosts.get(node) or FwConf()

    def guest(self, vmid: int) -> FwConf:
        return self.guests.get(vmid) or FwConf()


_NAME = r"[A-Za-z][A-Za-z0-9\-\_]+"  # Firewall.pm $ipset_name_pattern, $ip_alias_pattern
_IPSET_REF = re.compile(rf"^\+(?:guest/|dc/|sdn/)?({_NAME})$")
_ALIAS_REF = re.compile(rf"^(guest/|dc/)?({_NAME})$")


def address_version(text: str) -> int | None:
    """Firewall.pm parse_address_list: the IP version of an address list (None for an alias or ipset)."""
    if text.startswith("+") or _ALIAS_REF.match(text):
        return None
    try:
        first = text.split(",", maxsplit=1)[0].split("-", maxsplit=1)[0]
        return ipaddress.ip_network(first, strict=False).version
    except ValueError:
        return None


def rule_errors(rule: dict[str, Any], fw: Firewall, local: FwConf | None = None) -> dict[str, str]:
    """What Firewall.pm ``verify_rule`` (``check_ipset_or_alias_property``) records for a rule whose source or
    dest names an IPSet or alias neither cluster.fw nor the rule's own file has; pve-firewall then skips it."""
    errors: dict[str, str] = {}
    for name in ("source", "dest"):
        value = rule.get(name)
        if not isinstance(value, str) or not value:
            continue
        if value.startswith("+"):
            m = _IPSET_REF.match(value)
            if m is None:
                errors[name] = f"invalid ipset name '{value}'"
            elif m.group(1) not in fw.cluster.ipsets and not (local and m.group(1) in local.ipsets):
                errors[name] = f"no such ipset '{m.group(1)}'"
        elif (m := _ALIAS_REF.match(value)) is not None:
            alias = m.group(2).lower()
            if alias not in fw.cluster.aliases and not (local and alias in local.aliases):
                errors[name] = f"no such alias '{value}'"
    return errors


def rule_ipversion(rule: dict[str, Any], fw: Firewall, local: FwConf | None = None) -> int | None:
    """Firewall.pm verify_rule ``$rule->{ipversion}``: from the protocol (icmp 4, icmpv6 6), the source and dest
    addresses, and the aliases they name (the rule's own file first unless ``dc/``)."""
    version: int | None = None
    proto = str(rule.get("proto") or "")
    if proto == "icmp":
        version = 4
    elif proto in ("icmpv6", "ipv6-icmp"):
        version = 6
    for name in ("source", "dest"):
        value = rule.get(name)
        if not isinstance(value, str) or not value or value.startswith("+"):
            continue
        m = _ALIAS_REF.match(value)
        if m is not None:
            scope, alias = m.group(1) or "", m.group(2).lower()
            entry = local.aliases.get(alias) if local and scope != "dc/" else None
            if entry is None and scope != "guest/":
                entry = fw.cluster.aliases.get(alias)
            version = (entry or {}).get("ipversion") or version
        else:
            version = address_version(value) or version
    return version


def _conf(spec: dict[str, Any] | None) -> FwConf:
    """One .fw file from a scenario mapping: ``options``, ``rules`` (as the API returns them, ``enable``
    defaulting to 1), ``aliases`` (name -> cidr, or {cidr, comment}), ``ipsets`` (name -> members, each a cidr
    or {cidr, nomatch, comment}; or {comment, members})."""
    spec = spec or {}
    conf = FwConf(options=dict(spec.get("options") or {}))
    for rd in spec.get("rules") or []:
        rule = {"enable": 1, **rd}
        rule["enable"] = int(rule["enable"])
        conf.rules.append(rule)
    for name, value in (spec.get("aliases") or {}).items():
        entry = value if isinstance(value, dict) else {"cidr": value}
        cidr = str(entry["cidr"])
        alias: dict[str, Any] = {"name": str(name), "cidr": cidr, "ipversion": address_version(cidr) or 4}
        if entry.get("comment"):
            alias["comment"] = str(entry["comment"])
        conf.aliases[str(name).lower()] = alias
    for name, value in (spec.get("ipsets") or {}).items():
        members = value.get("members", []) if isinstance(value, dict) else value
        if isinstance(value, dict) and value.get("comment"):
            conf.ipset_comments[str(name)] = str(value["comment"])
        conf.ipsets[str(name)] = [_member(m) for m in members or []]
    return conf


def _member(m: Any) -> dict[str, Any]:
    entry = m if isinstance(m, dict) else {"cidr": m}
    out: dict[str, Any] = {"cidr": str(entry["cidr"])}
    if entry.get("nomatch"):
        out["nomatch"] = 1
    if entry.get("comment"):
        out["comment"] = str(entry["comment"])
    return out


def firewall_from(spec: dict[str, Any] | None, nodes: list[str]) -> Firewall:
    """Scenario key ``firewall``: cluster.fw's ``options``, ``rules``, ``aliases``, ``ipsets`` and security
    ``groups`` (name -> rules, or {comment, rules}); ``hosts`` (node -> host.fw options, or {options, rules});
    ``guests`` (vmid -> a .fw file's mapping); ``log`` (firewall log events, logs.py). Without the key the
    cluster firewall is on with PVE's default policies and an SSH/GUI rule from the management net."""
    if spec is None:
        spec = {
            "options": {"enable": 1, "policy_in": "DROP"},
            "rules": [
                {"type": "in", "action": "ACCEPT", "macro": "SSH", "source": "10.0.0.0/24", "log": "info"},
                {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "8006", "source": "10.0.0.0/24"},
            ],
        }
    fw = Firewall(cluster=_conf(spec))
    hosts = spec.get("hosts") or {}
    for n in nodes:
        host = hosts.get(n) or {}
        fw.hosts[n] = _conf(host if "options" in host or "rules" in host else {"options": host})
    fw.guests = {int(k): _conf(v) for k, v in (spec.get("guests") or {}).items()}
    for name, value in (spec.get("groups") or {}).items():
        rules = value.get("rules", []) if isinstance(value, dict) else value
        if isinstance(value, dict) and value.get("comment"):
            fw.group_comments[str(name)] = str(value["comment"])
        fw.groups[str(name)] = _conf({"rules": rules}).rules
    fw.log = [dict(e) for e in spec.get("log") or []]
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
