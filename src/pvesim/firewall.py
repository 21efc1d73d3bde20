"""The firewall's configuration as pve-firewall keeps it: cluster.fw (options and rules) and each host.fw.

Only what the API shows: options are returned as set in the file (an unset ``enable`` is off in
cluster.fw and on in host.fw, pve-firewall Firewall.pm ``compile``), rules carry ``enable`` 0/1 and their
position (API2/Firewall/Rules.pm ``get_rules``). Also the cluster log, which a scenario can fill.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Firewall:
    options: dict[str, Any] = field(default_factory=dict)  # cluster.fw [OPTIONS]
    rules: list[dict[str, Any]] = field(default_factory=list)  # cluster.fw [RULES], in order
    host_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> host.fw [OPTIONS]


def firewall_from(spec: dict[str, Any] | None, nodes: list[str]) -> Firewall:
    """Scenario key ``firewall``: ``options`` (cluster.fw), ``rules`` (each a rule as the API returns it,
    ``enable`` defaulting to 1) and ``hosts`` (node -> host.fw options). Without the key the cluster
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
