"""Cluster reads a client calls before it creates or joins anything: the next free VMID (pve-manager
PVE/API2/Cluster.pm ``nextid``), the join information and the join API version (pve-cluster
src/PVE/API2/ClusterConfig.pm ``join_info``, ``join_api_version``)."""

from __future__ import annotations

import hashlib
from typing import Any

from pvesim.api import system
from pvesim.api.registry import ApiError, Call, route
from pvesim.pveconfig import parse_property_string


@route("GET", "/cluster/nextid")
def nextid(call: Call) -> str:
    """Cluster.pm nextid: a given ``vmid`` comes back when no guest has it, else 400 'VM <vmid> already exists';
    otherwise the lowest free id in datacenter.cfg's ``next-id`` range [lower, upper) (default [100, 1000000)).
    The answer is a JSON string: the id was last used as a hash key (``$idlist->{$i}``), and JSON::XS writes
    such a scalar as a string, though the schema says integer."""
    c = call.cluster
    taken = set(c.guests)
    if "vmid" in call.params:
        vmid = int(call.params["vmid"])
        if vmid not in taken:
            return str(vmid)
        raise ApiError(400, "Parameter verification failed.", {"vmid": f"VM {vmid} already exists"})
    spec = c.options.get("next-id")
    bounds = parse_property_string(spec, "") if isinstance(spec, str) else dict(spec or {})
    lower, upper = int(bounds.get("lower", 100)), int(bounds.get("upper", 1000 * 1000))
    for vmid in range(lower, upper):
        if vmid not in taken:
            return str(vmid)
    raise ApiError(500, f"unable to get any free VMID in range [{lower}, {upper}]")


def standalone(c: Any) -> bool:
    """A node without a cluster: no corosync.conf (pvesim: a single node, as services.py has corosync off)."""
    return len(c.nodes) == 1


@route("GET", "/cluster/config/join")
def join_info(call: Call) -> dict[str, Any]:
    """ClusterConfig.pm join_info: corosync.conf's nodelist, each node with its pveproxy certificate's
    fingerprint and its address, the totem section and the file's digest; 424 on a node in no cluster, 500 for
    a node the nodelist lacks."""
    c = call.cluster
    if standalone(c):  # PVE::Exception::raise without a newline
        raise ApiError(424, "node is not in a cluster, no join info available!", newline=False)
    name = call.params.get("node") or next(iter(c.nodes))
    rows = system.corosync_nodes(call)
    if not any(r["name"] == name for r in rows):
        raise ApiError(500, f"unknown node '{name}'")
    nodelist = []
    for row in rows:
        node = c.nodes.get(row["name"])
        entry = {k: v for k, v in row.items() if k != "node"}
        certs = node.certificates if node else []
        entry["pve_fp"] = next((x["fingerprint"] for x in certs if x["filename"] == "pve-ssl.pem"), "")
        entry["pve_addr"] = node.ip if node else row.get("ring0_addr", "")
        nodelist.append(entry)
    totem = system.corosync_totem(call)
    digest = hashlib.sha1(repr((rows, totem)).encode(), usedforsecurity=False).hexdigest()
    return {"nodelist": nodelist, "preferred_node": name, "totem": totem, "config_digest": digest}


@route("GET", "/cluster/config/apiversion")
def join_api_version(_call: Call) -> int:
    """ClusterConfig.pm join_api_version: PVE::Cluster::Setup JOIN_API_VERSION (1 in PVE 8 and 9)."""
    return 1
