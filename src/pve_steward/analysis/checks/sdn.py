"""SDN (pve-network): zone status per node, unapplied configuration, PVE 9 fabrics (design record 261203-21).

Zone status per node comes from ``/cluster/resources`` (read for every check anyway; see
``analysis/sdnstate.py`` for its two row shapes); the zones and vnets are read with ``?pending=1`` so one read
gives both the running config and what is not applied yet. A token without ``SDN.Audit`` sees no SDN
objects at all (PVE filters the lists), so SDN then reads as absent, as PVE shows it.
"""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, Need, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Subject, finding
from pve_steward.analysis.sdnstate import (
    CONTROLLERS,
    FABRIC_NEIGHBORS,
    VNETS,
    ZONES,
    neighbor_down,
    network_status,
    pending_objects,
    vnet_subnets,
)
from pve_steward.analysis.thresholds import Thresholds

_AUDIT = "SDN.Audit on /sdn/zones"
SDN_ZONES = Need(ZONES, "/cluster/sdn/zones", params=(("pending", 1),), privilege=_AUDIT, absent_ok=True)
SDN_VNETS = Need(VNETS, "/cluster/sdn/vnets", params=(("pending", 1),), privilege=_AUDIT, absent_ok=True)
SDN_CONTROLLERS = Need(
    CONTROLLERS,
    "/cluster/sdn/controllers",
    params=(("pending", 1),),
    privilege="SDN.Audit on /sdn/controllers",
    absent_ok=True,
)


@check(
    "sdn",
    codes=[
        Code(
            "SDN_ZONE_ERROR",
            "critical",
            "SDN zone in error on a node",
            "A node reports an SDN zone 'error': a vnet of the zone failed the zone plugin's status check there "
            "(its bridge or VXLAN/VLAN interfaces are missing or down), so guests on that vnet have no network "
            "on that node.",
            "Look at the vnets' status messages (GET /nodes/<node>/sdn/zones/<zone>/content), fix the interface "
            "the message names (e.g. the zone's bridge), then reload the node's network (ifreload -a).",
        ),
        Code(
            "SDN_ZONE_PENDING",
            "warning",
            "SDN zone not applied on a node",
            "A node reports an SDN zone 'pending': its generated /etc/network/interfaces.d/sdn is missing or "
            "older than the cluster's running SDN config, so the last applied change is not active there.",
            "Apply SDN again (Datacenter > SDN > Apply, or PUT /cluster/sdn), or reload the node's network; check "
            "the node's reloadnetworkall task log if it keeps failing.",
        ),
    ],
    needs=[],
    pve="pve-network src/PVE/Network/SDN/Zones.pm status; pve-manager PVE/Service/pvestatd.pm update_sdn_status, "
    "update_network_status; PVE/API2/Cluster.pm resources",
)
def zone_status(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Zones in error or pending per node, as each node broadcasts them into /cluster/resources."""
    out = []
    for s in network_status(data):
        if s.kind != "zone" or s.status not in ("error", "pending"):
            continue
        code = "SDN_ZONE_ERROR" if s.status == "error" else "SDN_ZONE_PENDING"
        out.append(
            finding(
                code,
                Subject(kind="sdn_zone", id=s.id, node=s.node),
                f"SDN zone {s.id} is '{s.status}' on {s.node}",
                {"zone": s.id, "node": s.node, "status": s.status, "zone_type": s.detail},
            )
        )
    return out


@check(
    "sdn",
    codes=[
        Code(
            "SDN_CONFIG_PENDING",
            "warning",
            "SDN changes not applied",
            "SDN zones, vnets, subnets or controllers were created, changed or deleted but not applied: the running "
            "config "
            "(what nodes build their networks from) still differs, and the change takes effect at the next apply, "
            "possibly unreviewed.",
            "Review the pending changes (Datacenter > SDN, or GET /cluster/sdn/dry-run on PVE 9) and apply them "
            "(PUT /cluster/sdn) or roll them back (POST /cluster/sdn/rollback on PVE 9).",
        )
    ],
    needs=[SDN_ZONES, SDN_VNETS, SDN_CONTROLLERS],
    pve="pve-network src/PVE/Network/SDN.pm pending_config, has_pending_changes (zones, vnets, subnets, "
    "controllers); src/PVE/API2/Network/SDN/Zones.pm, Vnets.pm, Subnets.pm, Controllers.pm index (pending)",
)
def pending_config(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Zones, vnets, their subnets and controllers whose configuration is not applied yet."""
    out = []
    kinds = ((ZONES, "zone", "sdn_zone"), (VNETS, "vnet", "sdn_vnet"), (CONTROLLERS, "controller", "sdn_controller"))
    subnets = [r for _vnet, rows in sorted(vnet_subnets(data).items()) for r in rows]
    for key, kind, subject in (*kinds, ("", "subnet", "sdn_subnet")):
        rows = data.read(key) if key else subnets
        for r in pending_objects(rows or []):
            ident = str(r.get(kind))
            changes = sorted((r.get("pending") or {}).keys()) if isinstance(r.get("pending"), dict) else []
            out.append(
                finding(
                    "SDN_CONFIG_PENDING",
                    Subject(kind=subject, id=ident),
                    f"SDN {kind} {ident} is {r.get('state')} but not applied",
                    {kind: ident, "state": r.get("state"), "pending_keys": changes},
                )
            )
    return out


@check(
    "sdn",
    codes=[
        Code(
            "SDN_FABRIC_NOT_OK",
            "critical",
            "SDN fabric distributes no route on a node",
            "PVE 9: a node reports a fabric 'not ok': FRR installs no route of the fabric there, so the node has "
            "lost its fabric neighbours (or the fabric is not running), and whatever rides on it (EVPN/VXLAN "
            "underlay, Ceph or migration networks) is cut off on that node.",
            "Check the node's fabric neighbours and interfaces (GET /nodes/<node>/sdn/fabrics/<fabric>/neighbors, "
            "/interfaces), the cabling and FRR (systemctl status frr).",
        )
    ],
    needs=[],
    pve="proxmox-perl-rs pve-rs/src/bindings/sdn/fabrics.rs status, pve-rs/src/sdn/status.rs FabricStatus; "
    "pve-manager PVE/Service/pvestatd.pm update_network_status",
)
def fabric_status(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Fabrics a node reports 'not ok' (PVE 9.1's network rows; earlier releases show no fabric status)."""
    return [
        finding(
            "SDN_FABRIC_NOT_OK",
            Subject(kind="sdn_fabric", id=s.id, node=s.node),
            f"SDN fabric {s.id} ({s.detail or 'unknown protocol'}) is '{s.status}' on {s.node}",
            {"fabric": s.id, "node": s.node, "status": s.status, "protocol": s.detail},
        )
        for s in network_status(data)
        if s.kind == "fabric" and s.status != "ok"
    ]


@check(
    "sdn",
    codes=[
        Code(
            "SDN_FABRIC_NEIGHBOR_DOWN",
            "warning",
            "SDN fabric neighbour down",
            "PVE 9: FRR on a node reports a fabric neighbour whose adjacency is not up (OpenFabric: not 'Up'; "
            "OSPF: not Full or 2-Way): the link to that node is lost, so the fabric runs without that path, or "
            "not at all when it was the only one.",
            "Check the link between the two nodes (cabling, the interfaces in the fabric, MTU) and FRR on both "
            "(vtysh -c 'show openfabric neighbor' / 'show ip ospf neighbor').",
        )
    ],
    needs=[],
    pve="pve-network src/PVE/API2/Network/SDN/Nodes/Fabric.pm neighbors; proxmox-perl-rs pve-rs/src/sdn/status.rs "
    "NeighborStatus",
)
def fabric_neighbors(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Fabric neighbours not up, as each node's FRR reports them (read by tools/sdnread.py)."""
    protocols = {(s.id, s.node): s.detail for s in network_status(data) if s.kind == "fabric"}
    out = []
    for node, fabrics in sorted(data.read_nodes(FABRIC_NEIGHBORS).items()):
        for fabric, rows in sorted(fabrics.items()):
            protocol = protocols.get((fabric, node), "")
            for r in rows if isinstance(rows, list) else []:
                status = str(r.get("status", "")) if isinstance(r, dict) else ""
                if not isinstance(r, dict) or not neighbor_down(protocol, status):
                    continue
                neighbor = str(r.get("neighbor", "?"))
                out.append(
                    finding(
                        "SDN_FABRIC_NEIGHBOR_DOWN",
                        Subject(kind="sdn_fabric", id=fabric, node=node),
                        f"SDN fabric {fabric}: {node} sees neighbour {neighbor} as '{status}'",
                        {"fabric": fabric, "node": node, "neighbor": neighbor, "status": status, "protocol": protocol},
                    )
                )
    return out


@check(
    "migration",
    codes=[
        Code(
            "MIGRATE_SDN_VNET_UNAVAILABLE",
            "warning",
            "Guest's SDN vnet not available on a target",
            "A guest NIC on an SDN vnet can only be plugged where the vnet's zone exists and works: a node the "
            "applied zone leaves out has no such bridge ('bridge ... does not exist'), a node whose zone is "
            "'pending' may not have it yet, one in 'error' has a broken one, and a node the edited zone config "
            "leaves out (applied or not) refuses it ('vnet ... is not allowed on this node'). Everywhere: a zone "
            "deleted but not applied, a vnet created but not applied (no bridge yet), and a NIC with a VLAN tag "
            "or trunks on a vnet that is not VLAN-aware ('vm vlans are not allowed on vnet ...'). Such a node is "
            "no target.",
            "Move the guest to a node where the zone is available, or add the node to the zone (Datacenter > SDN "
            "> Zones > nodes) and apply SDN; review unapplied zone edits before moving guests; drop the NIC's tag "
            "or make the vnet VLAN-aware (and apply).",
        )
    ],
    needs=[SDN_ZONES, SDN_VNETS],
    pve="pve-network src/PVE/Network/SDN/Zones.pm tap_create, tap_plug, get_plugin_config, status; "
    "src/PVE/Network/SDN/Zones/Plugin.pm tap_plug; qemu-server src/usr/pve-bridge",
)
def vnet_targets(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Declares the reads and the code of the migration rule ``migrate.sdn-vnet-on-target``; its findings come
    from the migration verdicts (analysis/migration/sdn.py), so this unit adds none of its own."""
    return []
