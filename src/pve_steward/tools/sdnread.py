"""PVE 9 fabric neighbours: ``GET /nodes/{node}/sdn/fabrics/{fabric}/neighbors`` for each fabric a node
reports in ``/cluster/resources`` (pve-network src/PVE/API2/Network/SDN/Nodes/Fabric.pm neighbors: FRR's
adjacencies). Per fabric, so not a ``Need``; a handful of reads (fabrics x nodes). Stored as the
``sdn_fabric_neighbors`` read: node -> fabric -> rows. A 403 (SDN.Audit on /sdn/fabrics/<fabric>) is a
skipped check; any other failure a gap of the ``sdn`` area.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.analysis.sdn import FABRIC_NEIGHBORS, network_status
from pve_steward.client import ApiPath, ProxmoxClient, api_path, gather, sdn_fabric
from pve_steward.client import node as node_seg
from pve_steward.errors import PveError, PvePermissionError
from pve_steward.pve.ids import InvalidIdentifier

PATH = "/nodes/{node}/sdn/fabrics/{fabric}/neighbors"


async def read_fabric_neighbors(client: ProxmoxClient, data: ClusterData) -> list[Missing]:
    online = set(data.online_nodes)
    reads: list[tuple[str, ApiPath, dict[str, Any]]] = []
    for s in network_status(data):
        if s.kind != "fabric" or s.node not in online:
            continue
        try:
            path = api_path("nodes", node_seg(s.node), "sdn", "fabrics", sdn_fabric(s.id), "neighbors")
        except InvalidIdentifier:
            continue  # not a fabric id PVE accepts: nothing PVE could answer about
        reads.append((f"{s.node}\n{s.id}", path, {}))
    got = await gather(client, reads)
    missing = []
    for key, value in sorted(got.items()):
        node, fabric = key.split("\n", 1)
        if not isinstance(value, PveError):
            data.reads.setdefault(FABRIC_NEIGHBORS, {}).setdefault(node, {})[fabric] = value
            continue
        denied = isinstance(value, PvePermissionError)
        missing.append(
            Missing(
                what=f"neighbours of SDN fabric {fabric} on {node}"
                + (f" (skipped: needs SDN.Audit on /sdn/fabrics/{fabric})" if denied else ""),
                path=value.path or PATH,
                error=value.message[:200],
                node=node,
                status=value.status,
                affects=("sdn",),
                optional=denied,
            )
        )
    return missing
