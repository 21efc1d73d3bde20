"""Firewall reads (pve-firewall API2/Firewall/Cluster.pm and Host.pm ``get_options``, Rules.pm ``get_rules``);
the schema's permission checks (Sys.Audit on / or /nodes/{node}) are enforced by the request pipeline."""

from __future__ import annotations

from typing import Any

from pvesim.api.registry import Call, route


@route("GET", "/cluster/firewall/options")
def cluster_options(call: Call) -> dict[str, Any]:
    return dict(call.cluster.firewall.options)


@route("GET", "/cluster/firewall/rules")
def cluster_rules(call: Call) -> list[dict[str, Any]]:
    return [{**rule, "pos": pos} for pos, rule in enumerate(call.cluster.firewall.rules)]


@route("GET", "/nodes/{node}/firewall/options")
def node_options(call: Call) -> dict[str, Any]:
    return dict(call.cluster.firewall.host_options.get(call.params["node"], {}))
