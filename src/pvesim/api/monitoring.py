"""The cluster log and the external metric servers (pve-manager API2/Cluster.pm ``log``,
API2/Cluster/MetricServer.pm ``server_index``)."""

from __future__ import annotations

from typing import Any

from pvesim.api.registry import Call, route


@route("GET", "/cluster/log")
def cluster_log(call: Call) -> list[dict[str, Any]]:
    """Newest first, at most ``max`` (default 50); without Sys.Syslog on / only the caller's own entries."""
    admin = call.can("/", "Sys.Syslog")
    rows = [r for r in reversed(call.cluster.cluster_log) if admin or r["user"] == call.user]
    limit = int(call.params.get("max") or 50)
    return [{**r, "id": f"{r['uid']}:{r['node']}"} for r in rows[:limit]]


@route("GET", "/cluster/metrics/server")
def metric_servers(call: Call) -> list[dict[str, Any]]:
    return [
        {
            "id": m["id"],
            "type": m["type"],
            "server": m["server"],
            "port": int(m["port"]),
            "disable": int(m.get("disable", 0)),
        }
        for m in call.cluster.metric_servers
    ]
