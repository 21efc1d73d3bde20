"""Targets for a guest with a NIC on an SDN vnet: only nodes where the vnet's zone exists and works.

Neither migrate API checks bridges for a move inside the cluster; the guest's NICs are plugged on the
target when it starts there (the live move's start, or the next start after an offline move), through
pve-network's ``tap_create``/``veth_create`` then ``tap_plug``. The first two need the vnet's bridge,
which exists only where the *running* zone config generated it (and the node applied it); ``tap_plug``
then refuses a node the zone's *edited* config (sdn/zones.cfg, applied or not) leaves out, and a zone
deleted from the edited config fails both on every node (its plugin config is gone).
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.migration.model import Reason, reason
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.sdnstate import (
    ZoneConfig,
    guest_bridges,
    guest_vlan_bridges,
    running_vnets,
    unapplied_vnets,
    vlan_aware_vnets,
    vnet_status_on,
    vnet_zones,
    zone_status_on,
    zones,
)


def guest_vnets(data: ClusterData, vmid: int) -> tuple[str, ...]:
    """The SDN vnets the guest's NICs are on, running or created but not applied (none when the SDN config is
    absent or unreadable)."""
    vnets = running_vnets(data)
    new = unapplied_vnets(data) if vnets is not None else frozenset()
    if not vnets and not new:  # nearly every cluster: no SDN, or no vnet
        return ()
    memo = data.memo["guest_vnets"]
    found = memo.get(vmid)
    if found is None:
        bridges = guest_bridges(data.configs.get(vmid) or {})
        found = memo[vmid] = tuple(b for b in bridges if b in (vnets or {}) or b in new)
    return found  # type: ignore[no-any-return]


@pve_rule(
    "migrate.sdn-vnet-on-target",
    rule="A NIC on an SDN vnet needs the vnet's bridge on the node, generated only where the running zone config "
    "includes the node ('bridge X does not exist' otherwise), applied and healthy there (zone not 'pending' or "
    "'error'; in an 'error' zone the vnet's own status decides); tap_plug then reads the zone from the edited "
    "config, applied or not: a node its nodes leave out refuses the NIC ('vnet X is not allowed on this node'), "
    "and a zone deleted there fails on every node; a vnet created but not applied has no bridge anywhere. A NIC "
    "with a VLAN tag or trunks needs a VLAN-aware vnet (Zones/Plugin.pm tap_plug: 'vm vlans are not allowed').",
    pve="pve-network src/PVE/Network/SDN/Zones.pm tap_create, veth_create, tap_plug, get_plugin_config, status, "
    "generate_etc_network_config; src/PVE/Network/SDN/Zones/Plugin.pm tap_plug; "
    "src/PVE/API2/Network/SDN/Nodes/Zone.pm index (content); pve-common src/PVE/Network.pm read_bridge_mtu; "
    "qemu-server src/usr/pve-bridge; pve-container src/PVE/LXC.pm update_net/net_tap_plug",
    codes=("MIGRATE_SDN_VNET_UNAVAILABLE",),
)
def sdn_reasons(data: ClusterData, vnets: tuple[str, ...], node: str, vmid: int | None = None) -> list[Reason]:
    """Why ``node`` cannot take a guest on ``vnets``: no bridge there, the edited zone refuses it, the zone
    reports pending/error there, or a NIC (of guest ``vmid``) sets a VLAN on a vnet that is not VLAN-aware."""
    zone_of = vnet_zones(data) or {}
    configs = zones(data) or {}
    tagged = guest_vlan_bridges(data.configs.get(vmid) or {}) if vmid is not None else ()
    out = []
    for vnet in vnets:
        zid = zone_of.get(vnet)
        if zid is None and vnet in unapplied_vnets(data):  # Zones.pm tap_create: no running vnet, so the
            # classic-bridge fallback, and PVE::Network read_bridge_mtu finds no such bridge
            why: str | None = f"vnet {vnet} is created but not applied, so {node} has no such bridge"
        elif zid is None:
            continue
        else:
            why = _unavailable(data, zid, vnet, configs.get(zid), node)
        if why is None and vnet in tagged and vnet not in vlan_aware_vnets(data):  # Zones/Plugin.pm tap_plug
            why = f"the NIC sets a VLAN tag or trunks but vnet {vnet} is not VLAN-aware ('vm vlans are not allowed')"
        if why:
            out.append(
                reason(
                    "MIGRATE_SDN_VNET_UNAVAILABLE", True, f"NIC on SDN vnet {vnet} cannot be plugged on {node}: {why}"
                )
            )
    return out


def _unavailable(data: ClusterData, zid: str, vnet: str, zone: ZoneConfig | None, node: str) -> str | None:
    """The first of pve-bridge's failures for ``vnet`` of zone ``zid`` on ``node``, in PVE's order."""
    if zone is not None and zone.deleted:  # Zones.pm get_plugin_config: undef -> Plugin->lookup croaks
        return f"zone {zid} is deleted in the SDN config (not applied yet)"
    if zone is not None and zone.nodes is not None and node not in zone.nodes:  # no bridge generated there
        return f"zone {zid} is limited to {', '.join(zone.nodes)}"
    status = zone_status_on(data, zid, node)
    if status == "error":  # Zones.pm status: the zone is 'error' when any one of its vnets fails its check
        own = vnet_status_on(data, zid, vnet, node)
        if own is not None and own[0] != "error":
            return None
        if own is not None:
            return f"vnet {vnet} is 'error' on {node}" + (f" ({own[1][:200]})" if own[1] else "")
    if status in ("pending", "error"):
        return f"zone {zid} is '{status}' on {node}"
    if zone is not None and zone.edited_nodes is not None and node not in zone.edited_nodes:  # Zones.pm tap_plug
        return f"zone {zid}'s edited nodes ({', '.join(zone.edited_nodes)}, not applied yet) leave {node} out"
    return None
