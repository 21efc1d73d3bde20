"""SDN as the API shows it: zones and vnets (running config plus unapplied edits) and their status per node.

Three reads feed it (and, per vnet, its subnets: ``/cluster/sdn/vnets/{vnet}/subnets?pending=1``, the same
pending view). ``GET /cluster/sdn/zones?pending=1`` and ``/cluster/sdn/vnets?pending=1`` answer
``PVE::Network::SDN::pending_config`` (pve-network src/PVE/Network/SDN.pm): each object with its running
values, and ``state`` (new / changed / deleted) plus ``pending`` (the edits) where the config differs from
what was last applied. ``/cluster/resources`` (already read for everything else) carries each node's zone
status as pvestatd broadcasts it (``PVE::Network::SDN::Zones::status``): ``sdn`` rows up to pve-manager
9.0.11, ``network`` rows (zones and PVE 9 fabrics) from 9.0.12 on, when a node's ``sdn`` rows are hidden.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.pve.guestconfig import parse_property_string
from pve_steward.pve.values import flag

ZONES = "sdn_zones"
VNETS = "sdn_vnets"
CONTROLLERS = "sdn_controllers"
FABRIC_NEIGHBORS = "sdn_fabric_neighbors"  # node -> fabric -> FRR neighbour rows (tools/sdnread.py)
ZONE_CONTENT = "sdn_zone_content"  # node -> zone -> vnet status rows, zones in 'error' only (tools/sdnread.py)
SUBNETS = "sdn_subnets"  # "" -> vnet -> /cluster/sdn/vnets/{vnet}/subnets?pending=1 rows (tools/sdnread.py)
_NET_KEY = re.compile(r"^net\d+$")


@dataclass(frozen=True)
class ZoneStatus:
    """One node's status of one zone or fabric, as a ``/cluster/resources`` row gives it."""

    kind: str  # zone | fabric
    id: str
    node: str
    status: str  # zone: available | pending | error (| ok for localnetwork); fabric: ok | not ok
    detail: str = ""  # zone type or fabric protocol


def network_status(data: ClusterData) -> list[ZoneStatus]:
    """Every SDN status row of ``/cluster/resources`` (both row shapes); the built-in localnetwork left out."""
    memo = data.memo["sdn_status"]
    if "rows" not in memo:
        out = []
        for r in data.resources:
            kind = r.get("type")
            if kind == "sdn":
                ident, what, detail = r.get("sdn"), "zone", r.get("zone-type")
            elif kind == "network" and r.get("network-type") in ("zone", "fabric"):
                ident, what = r.get("network"), str(r["network-type"])
                detail = r.get("zone-type") if what == "zone" else r.get("protocol")
            else:
                continue
            if not ident or ident == "localnetwork" or not r.get("node"):
                continue
            out.append(ZoneStatus(what, str(ident), str(r["node"]), str(r.get("status", "")), str(detail or "")))
        memo["rows"] = out
    return list(memo["rows"])


def zone_status_on(data: ClusterData, zone: str, node: str) -> str | None:
    """The status ``node`` reports for ``zone``; None when it reports none (zone not there, or no SDN row)."""
    memo = data.memo["sdn_status"]
    if "zones" not in memo:
        memo["zones"] = {(s.id, s.node): s.status for s in network_status(data) if s.kind == "zone"}
    status = memo["zones"].get((zone, node))
    return None if status is None else str(status)


def vnet_status_on(data: ClusterData, zone: str, vnet: str, node: str) -> tuple[str, str] | None:
    """The vnet's own (status, statusmsg) on ``node`` from the zone's content (read where the zone is in
    'error'); None when not read or not listed."""
    per_node = data.read_nodes(ZONE_CONTENT).get(node)
    rows = per_node.get(zone) if isinstance(per_node, dict) else None
    for r in rows if isinstance(rows, list) else []:
        if isinstance(r, dict) and r.get("vnet") == vnet:
            return str(r.get("status") or ""), str(r.get("statusmsg") or "")
    return None


@dataclass(frozen=True)
class ZoneConfig:
    id: str
    type: str
    nodes: tuple[str, ...] | None  # the running config's restriction (where its bridges exist); None: every node
    applied: bool  # in the running config (False for a zone created but not applied)
    edited_nodes: tuple[str, ...] | None = None  # the edited (sdn/zones.cfg) restriction tap_plug checks
    deleted: bool = False  # gone from the edited config (state 'deleted'), still running


def _node_list(value: object) -> tuple[str, ...] | None:
    """A ``nodes`` value as the API encodes it (comma list, SDN.pm encode_value); None: no restriction."""
    return tuple(n.strip() for n in str(value or "").split(",") if n.strip()) or None


def _edited_nodes(row: Row, running: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The edited config's ``nodes``: pending_config lists a changed value under ``pending`` ('deleted' when
    removed), an unchanged one only as the running value."""
    pending = row.get("pending")
    if not isinstance(pending, dict) or "nodes" not in pending:
        return running
    return None if pending["nodes"] == "deleted" else _node_list(pending["nodes"])


def zones(data: ClusterData) -> dict[str, ZoneConfig] | None:
    """The running zones by id; None when the zones could not be read."""
    rows = data.read(ZONES)
    if rows is None:
        return None
    memo = data.memo["sdn_zones"]
    if "zones" not in memo:
        out = {}
        for r in rows:
            if not isinstance(r, dict):
                continue
            nodes = _node_list(r.get("nodes"))
            out[str(r.get("zone"))] = ZoneConfig(
                id=str(r.get("zone")),
                type=str(r.get("type", "")),
                nodes=nodes,
                applied=r.get("state") != "new",
                edited_nodes=_edited_nodes(r, nodes),
                deleted=r.get("state") == "deleted",
            )
        memo["zones"] = out
    return dict(memo["zones"])


def vnet_zones(data: ClusterData) -> dict[str, str] | None:
    """Running vnet -> zone; None when the vnets could not be read. A vnet not yet applied has no bridge."""
    shared = running_vnets(data)
    return None if shared is None else dict(shared)


def running_vnets(data: ClusterData) -> dict[str, str] | None:
    """:func:`vnet_zones` itself, shared by the snapshot's callers (read-only): asked once per guest."""
    memo = data.memo["sdn_zones"]
    if "vnets" not in memo:
        rows = data.read(VNETS)
        memo["vnets"] = (
            None
            if rows is None
            else {
                str(r["vnet"]): str(r["zone"])
                for r in rows
                if r.get("vnet") and r.get("zone") and r.get("state") != "new"
            }
        )
    return memo["vnets"]  # type: ignore[no-any-return]


def unapplied_vnets(data: ClusterData) -> frozenset[str]:
    """Vnets created but not applied (``state: new``): no node has their bridge yet."""
    return _vnets_where(data, "unapplied", lambda r: r.get("state") == "new")


def vlan_aware_vnets(data: ClusterData) -> frozenset[str]:
    """Running vnets with ``vlanaware``: only their bridges filter VLANs (the zone plugins' generate_sdn_config
    add ``bridge-vlan-aware yes`` for them alone)."""
    return _vnets_where(data, "vlan_aware", lambda r: r.get("state") != "new" and flag(r.get("vlanaware")))


def _vnets_where(data: ClusterData, key: str, keep: Callable[[Row], bool]) -> frozenset[str]:
    """The vnets of ``/cluster/sdn/vnets?pending=1`` whose row ``keep`` accepts, once per snapshot."""
    memo = data.memo["sdn_zones"]
    if key not in memo:
        rows = data.read(VNETS)
        listed = rows if isinstance(rows, list) else []
        memo[key] = frozenset(str(r["vnet"]) for r in listed if isinstance(r, dict) and r.get("vnet") and keep(r))
    return memo[key]  # type: ignore[no-any-return]


def vnet_subnets(data: ClusterData) -> dict[str, list[Row]]:
    """Each vnet's subnets as the pending view shows them (only the vnets whose subnets were read)."""
    per_vnet = data.read(SUBNETS)
    if not isinstance(per_vnet, dict):
        return {}
    return {str(v): [r for r in rows if isinstance(r, dict)] for v, rows in per_vnet.items() if isinstance(rows, list)}


def pending_objects(rows: list[Row]) -> list[Row]:
    """Objects whose config differs from the running config (``state`` set by pending_config)."""
    return [r for r in rows if r.get("state") in ("new", "changed", "deleted")]


def neighbor_down(protocol: str, status: str) -> bool:
    """Whether FRR's neighbour state means the adjacency is down: OpenFabric reports Up/Down/Initializing
    (proxmox-frr de::openfabric::AdjacencyState), OSPF its state machine ("Full/-", "2-Way/DROther", "Init/..."),
    where Full and 2-Way (neighbours that are not DR/BDR on a broadcast link) are healthy."""
    state = status.strip().lower()
    if protocol == "ospf":
        return not state.startswith(("full", "2-way"))
    return state != "up"


def guest_vlan_bridges(raw: Row) -> tuple[str, ...]:
    """The bridges a guest's NICs use with a VLAN ``tag`` or ``trunks`` (what Zones/Plugin.pm tap_plug refuses
    on a vnet that is not VLAN-aware)."""
    out = []
    for key, value in raw.items():
        if _NET_KEY.match(str(key)):
            opts = parse_property_string(str(value))
            if opts.get("bridge") and (opts.get("tag") or opts.get("trunks")):
                out.append(opts["bridge"])
    return tuple(sorted(set(out)))


def guest_bridges(raw: Row) -> tuple[str, ...]:
    """The bridges a guest config's NICs use (``netN: ...,bridge=<name>``, VMs and containers alike)."""
    out = []
    for key, value in raw.items():
        if _NET_KEY.match(str(key)):
            bridge = parse_property_string(str(value)).get("bridge")
            if bridge:
                out.append(bridge)
    return tuple(sorted(set(out)))
