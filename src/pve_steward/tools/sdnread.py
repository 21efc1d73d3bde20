"""Per-node SDN reads that depend on ``/cluster/resources``' SDN rows, so not ``Need``s; a handful each.

PVE 9 fabric neighbours: ``GET /nodes/{node}/sdn/fabrics/{fabric}/neighbors`` for each fabric a node
reports (pve-network src/PVE/API2/Network/SDN/Nodes/Fabric.pm neighbors: FRR's adjacencies), stored as
``sdn_fabric_neighbors``: node -> fabric -> rows; a gap of the ``sdn`` area.

The vnets' own status where a zone reports 'error': ``GET /nodes/{node}/sdn/zones/{zone}/content``
(SDN/Nodes/Zone.pm index over Zones.pm status, which marks the zone 'error' when any one vnet fails), so
the migration rule judges a guest's vnet, not its siblings; stored as ``sdn_zone_content``: node -> zone
-> rows; a gap of the ``migration`` area. A 403 (SDN.Audit) is a skipped read in both.

Each vnet's subnets with their unapplied changes: ``GET /cluster/sdn/vnets/{vnet}/subnets?pending=1``
(pve-network src/PVE/API2/Network/SDN/Subnets.pm index over SDN.pm pending_config: subnets are part of what
has_pending_changes compares), for the vnets the edited config still has (the API refuses a vnet it does not
know), at most SUBNET_VNET_LIMIT; stored as ``sdn_subnets``: "" -> vnet -> rows; a gap of the ``sdn`` area.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.analysis.sdnstate import FABRIC_NEIGHBORS, SUBNETS, VNETS, ZONE_CONTENT, network_status
from pve_steward.errors import PveError, PvePermissionError
from pve_steward.pve.ids import InvalidIdentifier
from pve_steward.pveio.client import ApiPath, ProxmoxClient, api_path, gather, sdn_fabric, sdn_vnet, sdn_zone
from pve_steward.pveio.client import node as node_seg

PATH = "/nodes/{node}/sdn/fabrics/{fabric}/neighbors"
CONTENT_PATH = "/nodes/{node}/sdn/zones/{zone}/content"
SUBNETS_PATH = "/cluster/sdn/vnets/{vnet}/subnets"
SUBNET_VNET_LIMIT = 256


async def read_vnet_subnets(client: ProxmoxClient, data: ClusterData) -> list[Missing]:
    """The subnets of every vnet the vnets read listed (not those deleted from the edited config)."""
    rows = data.read(VNETS)
    vnets = sorted(
        {str(r["vnet"]) for r in rows or [] if isinstance(r, dict) and r.get("vnet") and r.get("state") != "deleted"}
    )
    missing: list[Missing] = []
    if len(vnets) > SUBNET_VNET_LIMIT:
        missing.append(
            Missing.capped(
                f"subnets of {len(vnets) - SUBNET_VNET_LIMIT} of {len(vnets)} SDN vnets (at most {SUBNET_VNET_LIMIT})",
                SUBNETS_PATH,
                ("sdn",),
            )
        )
    reads = []
    for v in vnets[:SUBNET_VNET_LIMIT]:
        try:
            reads.append((v, api_path("cluster", "sdn", "vnets", sdn_vnet(v), "subnets"), {"pending": 1}))
        except InvalidIdentifier:
            continue
    got = await gather(client, reads) if reads else {}
    for vnet, value in sorted(got.items()):
        if not isinstance(value, PveError):
            data.reads.setdefault(SUBNETS, {}).setdefault("", {})[vnet] = value
            continue
        denied = isinstance(value, PvePermissionError)
        missing.append(
            Missing(
                what=f"subnets of SDN vnet {vnet}" + (" (skipped: needs SDN.Audit on its zone)" if denied else ""),
                path=value.path or SUBNETS_PATH,
                error=value.message[:200],
                status=value.status,
                affects=("sdn",),
                optional=denied,
            )
        )
    return missing


async def read_fabric_neighbors(client: ProxmoxClient, data: ClusterData) -> list[Missing]:
    reads = _reads(data, "fabric", lambda n, f: ("nodes", node_seg(n), "sdn", "fabrics", sdn_fabric(f), "neighbors"))
    return await _per_node(client, data, reads, FABRIC_NEIGHBORS, ("fabric", "neighbours of SDN fabric", PATH, "sdn"))


async def read_zone_content(client: ProxmoxClient, data: ClusterData) -> list[Missing]:
    reads = _reads(
        data, "zone", lambda n, z: ("nodes", node_seg(n), "sdn", "zones", sdn_zone(z), "content"), status="error"
    )
    return await _per_node(
        client, data, reads, ZONE_CONTENT, ("zone", "vnet status of SDN zone", CONTENT_PATH, "migration")
    )


def _reads(
    data: ClusterData, kind: str, segments: Callable[[str, str], tuple[Any, ...]], status: str | None = None
) -> list[tuple[str, ApiPath, dict[str, Any]]]:
    """One read per (online node, object of ``kind``) the node reports (in ``status`` when given)."""
    online = set(data.online_nodes)
    reads: list[tuple[str, ApiPath, dict[str, Any]]] = []
    for s in network_status(data):
        if s.kind != kind or s.node not in online or (status is not None and s.status != status):
            continue
        try:
            path = api_path(*segments(s.node, s.id))
        except InvalidIdentifier:
            continue  # not an id PVE accepts: nothing PVE could answer about
        reads.append((f"{s.node}\n{s.id}", path, {}))
    return reads


async def _per_node(
    client: ProxmoxClient,
    data: ClusterData,
    reads: list[tuple[str, ApiPath, dict[str, Any]]],
    key: str,
    what: tuple[str, str, str, str],
) -> list[Missing]:
    """Store the answers as ``key``: node -> object -> rows; the failures as gaps of ``area``."""
    kind, label, template, area = what
    got = await gather(client, reads) if reads else {}
    missing = []
    for k, value in sorted(got.items()):
        node, ident = k.split("\n", 1)
        if not isinstance(value, PveError):
            data.reads.setdefault(key, {}).setdefault(node, {})[ident] = value
            continue
        denied = isinstance(value, PvePermissionError)
        privilege = f"/sdn/fabrics/{ident}" if kind == "fabric" else f"/sdn/zones/{ident}"
        missing.append(
            Missing(
                what=f"{label} {ident} on {node}" + (f" (skipped: needs SDN.Audit on {privilege})" if denied else ""),
                path=value.path or template,
                error=value.message[:200],
                node=node,
                status=value.status,
                affects=(area,),
                optional=denied,
            )
        )
    return missing
