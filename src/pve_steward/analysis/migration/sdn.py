"""Targets for a guest with a NIC on an SDN vnet: only nodes where the vnet's zone exists and works.

Neither migrate API checks bridges for a move inside the cluster; the guest's NICs are plugged on the
target when it starts there (the live move's start, or the next start after an offline move), through
pve-network's ``tap_plug``/``veth_create``, which refuse a vnet whose zone leaves the node out and need
the vnet's bridge to exist, which it does only where the zone's config is applied and healthy.
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.migration.model import Reason, reason
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.sdn import guest_bridges, running_vnets, vnet_zones, zone_status_on, zones


def guest_vnets(data: ClusterData, vmid: int) -> tuple[str, ...]:
    """The running SDN vnets the guest's NICs are on (none when the SDN config is absent or unreadable)."""
    vnets = running_vnets(data)
    if not vnets:  # nearly every cluster: no SDN, or no running vnet
        return ()
    memo = data.memo["guest_vnets"]
    found = memo.get(vmid)
    if found is None:
        found = memo[vmid] = tuple(b for b in guest_bridges(data.configs.get(vmid) or {}) if b in vnets)
    return found  # type: ignore[no-any-return]


@pve_rule(
    "migrate.sdn-vnet-on-target",
    rule="A NIC on an SDN vnet is plugged only on a node the vnet's zone includes ('vnet X is not allowed on this "
    "node' otherwise) and where the vnet's bridge exists: a zone 'pending' (not applied) or in 'error' on the "
    "target leaves the guest without that network there.",
    pve="pve-network src/PVE/Network/SDN/Zones.pm tap_plug, veth_create, status; qemu-server src/usr/pve-bridge; "
    "pve-container src/PVE/LXC.pm update_net/net_tap_plug",
    codes=("MIGRATE_SDN_VNET_UNAVAILABLE",),
)
def sdn_reasons(data: ClusterData, vnets: tuple[str, ...], node: str) -> list[Reason]:
    """Why ``node`` cannot take a guest on ``vnets``: the zone leaves it out, or reports pending/error there."""
    zone_of = vnet_zones(data) or {}
    configs = zones(data) or {}
    out = []
    for vnet in vnets:
        zid = zone_of.get(vnet)
        zone = configs.get(zid) if zid else None
        if zid is None:
            continue
        if zone is not None and zone.nodes is not None and node not in zone.nodes:
            why = f"zone {zid} is limited to {', '.join(zone.nodes)}"
        else:
            status = zone_status_on(data, zid, node)
            if status not in ("pending", "error"):
                continue
            why = f"zone {zid} is '{status}' on {node}"
        out.append(
            reason("MIGRATE_SDN_VNET_UNAVAILABLE", True, f"NIC on SDN vnet {vnet} cannot be plugged on {node}: {why}")
        )
    return out
