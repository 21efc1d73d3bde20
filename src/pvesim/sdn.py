"""SDN as pve-network keeps it: zones, vnets (running and pending config), their status per node, PVE 9 fabrics.

The config the API edits and the running config (``/etc/pve/sdn/.running-config``, written by
``PUT /cluster/sdn``) differ until the operator applies: ``?pending=1`` shows the difference the way
``PVE::Network::SDN::pending_config`` computes it. Each node reports the status of the zones and vnets
its running config places there (``PVE::Network::SDN::Zones::status``): a zone whose ``nodes`` leaves the
node out is not listed there; a node whose generated ``/etc/network/interfaces.d/sdn`` is older than the
running config reports everything ``pending``; a vnet whose interfaces fail the zone plugin's check is
``error`` and marks its zone ``error``. PVE 9 fabrics report ``ok``/``not ok`` per node (pve-rs
``sdn/status.rs`` FabricStatus: whether FRR distributes a route) and their neighbours (FRR adjacency).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RELOAD_MSG = "local sdn network configuration is too old, please reload"


@dataclass
class Zone:
    id: str
    type: str = "simple"  # simple | vlan | qinq | vxlan | evpn
    options: dict[str, Any] = field(default_factory=dict)  # running config: nodes, mtu, bridge, peers ...
    pending: dict[str, Any] = field(default_factory=dict)  # unapplied edits: key -> new value or "deleted"
    state: str | None = None  # None (applied) | new | changed | deleted

    def nodes(self) -> list[str] | None:
        """The running config's node restriction (None: every node)."""
        raw = self.options.get("nodes")
        return [n for n in str(raw).split(",") if n] if raw else None

    def on(self, node: str) -> bool:
        """Whether the running config creates the zone on ``node`` (Zones.pm status, get_local_vnets)."""
        if self.state == "new":  # not in the running config yet
            return False
        restricted = self.nodes()
        return restricted is None or node in restricted

    def allows(self, node: str) -> bool:
        """Whether the edited config (sdn/zones.cfg, what Zones.pm tap_plug reads) lets ``node`` plug a vnet."""
        raw = self.pending.get("nodes", self.options.get("nodes"))
        if not raw or raw == "deleted":
            return True
        return node in [n for n in str(raw).split(",") if n]


@dataclass
class Vnet:
    id: str
    zone: str
    options: dict[str, Any] = field(default_factory=dict)  # alias, tag, vlanaware ...
    pending: dict[str, Any] = field(default_factory=dict)
    state: str | None = None
    errors: dict[str, str] = field(default_factory=dict)  # node -> the plugin's status message


@dataclass
class Subnet:
    """A vnet's subnet (sdn/subnets.cfg): ``id`` is ``<zone>-<network>-<mask>`` as pve-network names it."""

    id: str
    vnet: str
    options: dict[str, Any] = field(default_factory=dict)  # gateway, snat, dhcp-range ...
    pending: dict[str, Any] = field(default_factory=dict)
    state: str | None = None


@dataclass
class Controller:
    """An SDN controller (evpn, bgp, isis, faucet): config only here; its running/pending state as zones'."""

    id: str
    type: str = "evpn"
    options: dict[str, Any] = field(default_factory=dict)  # asn, peers, node ...
    pending: dict[str, Any] = field(default_factory=dict)
    state: str | None = None


@dataclass
class Fabric:
    id: str
    protocol: str = "openfabric"  # openfabric | ospf
    options: dict[str, Any] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)  # the fabric's member nodes
    not_ok: list[str] = field(default_factory=list)  # nodes where FRR distributes no route of the fabric
    neighbors: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # node -> FRR neighbours


@dataclass
class Sdn:
    zones: dict[str, Zone] = field(default_factory=dict)
    vnets: dict[str, Vnet] = field(default_factory=dict)
    controllers: dict[str, Controller] = field(default_factory=dict)
    fabrics: dict[str, Fabric] = field(default_factory=dict)
    subnets: dict[str, Subnet] = field(default_factory=dict)
    reload_pending: list[str] = field(default_factory=list)  # nodes not reloaded since the last apply
    # sdn/ipams.cfg (the built-in 'pve' IPAM always) and sdn/dns.cfg: id -> section (type, url, ...)
    ipams: dict[str, dict[str, Any]] = field(default_factory=lambda: {"pve": {"type": "pve"}})
    dns: dict[str, dict[str, Any]] = field(default_factory=dict)
    # sdn/firewall/<vnet>.fw: the vnet's forward-chain firewall (options, rules)
    vnet_firewall: dict[str, dict[str, Any]] = field(default_factory=dict)

    def zone_status(self, node: str) -> dict[str, dict[str, str]]:
        """``PVE::Network::SDN::Zones::status`` zone part for ``node``: zone -> {status, zone-type}."""
        out: dict[str, dict[str, str]] = {}
        for z in self.zones.values():
            if z.on(node):
                status = "pending" if node in self.reload_pending else "available"
                out[z.id] = {"status": status, "zone-type": z.type}
        for v in self.vnets.values():
            if v.state != "new" and node in v.errors and v.zone in out and node not in self.reload_pending:
                out[v.zone]["status"] = "error"
        return out

    def plug_error(self, bridge: str, node: str, vlan: bool = False) -> str | None:
        """Why a NIC on ``bridge`` cannot be plugged on ``node``, or None; a plain bridge is not SDN's concern.

        pve-bridge / LXC update_net call Zones.pm tap_create / veth_create first: the zone's plugin config
        comes from the edited config (get_plugin_config; a zone deleted there croaks in Plugin->lookup) and
        PVE::Network's read_bridge_mtu dies where the running config generated no bridge (or the node did not
        reload). Zones.pm tap_plug then refuses a node the edited zone's nodes leave out, and Zones/Plugin.pm
        tap_plug a NIC with a VLAN ``tag``/``trunks`` (``vlan``) on a vnet whose bridge does not filter VLANs
        (only a ``vlanaware`` vnet's does)."""
        v = self.vnets.get(bridge)
        if v is None:
            return None
        if v.state == "new":  # not running: the classic-bridge fallback finds no such bridge
            return f"bridge '{bridge}' does not exist"
        zone = self.zones.get(v.zone)
        if zone is None or zone.state == "deleted":
            return "cannot lookup undefined type!"
        if not zone.on(node) or node in self.reload_pending:
            return f"bridge '{bridge}' does not exist"
        if not zone.allows(node):
            return f"vnet {bridge} is not allowed on this node"
        if vlan and str(v.options.get("vlanaware", "")).lower() not in ("1", "true", "yes", "on"):
            return f"vm vlans are not allowed on vnet {bridge}"
        return None

    def vnet_status(self, node: str, zone: str) -> list[dict[str, Any]]:
        """The vnets of ``zone`` on ``node`` as ``/nodes/{node}/sdn/zones/{zone}/content`` lists them."""
        z = self.zones.get(zone)
        if z is None or not z.on(node):
            return []
        rows = []
        for v in sorted(self.vnets.values(), key=lambda v: v.id):
            if v.zone != zone or v.state == "new":
                continue
            row: dict[str, Any] = {"vnet": v.id, "status": "available"}
            if node in self.reload_pending:
                row.update(status="pending", statusmsg=RELOAD_MSG)
            elif node in v.errors:
                row.update(status="error", statusmsg=v.errors[node])
            rows.append(row)
        return rows


def _config(kind: str, ident: str, d: dict[str, Any], *skip: str) -> dict[str, Any]:
    opts = {k: v for k, v in d.items() if k not in ("id", "pending", "state", "status", *skip)}
    if isinstance(opts.get("nodes"), list):
        opts["nodes"] = ",".join(opts["nodes"])
    pending = dict(d.get("pending") or {})
    state = d.get("state")
    if state not in (None, "new", "changed", "deleted"):
        raise ValueError(f"sdn {kind} '{ident}': state must be new, changed or deleted")
    if isinstance(pending.get("nodes"), list):
        pending["nodes"] = ",".join(pending["nodes"])
    return {"options": opts, "pending": pending, "state": state or ("changed" if pending else None)}


def sdn_from(data: dict[str, Any] | None, nodes: list[str], major: int) -> Sdn | None:
    """The scenario's ``sdn:`` mapping, or None for a cluster without SDN objects.

    Knobs: a zone's, vnet's, subnet's (a vnet's ``subnets``, each with its ``cidr``) or controller's ``pending``
    (unapplied edits) and ``state`` (``new``: created, not applied),
    a vnet's ``errors`` (node -> status message), ``reload_pending`` (nodes whose local SDN config is
    older than the running config) and ``fabrics`` with ``not_ok`` nodes and ``neighbors`` (dropped on
    PVE 8, which has no fabrics).
    """
    if not data:
        return None
    sdn = Sdn(reload_pending=[str(n) for n in data.get("reload_pending", [])])
    for zd in data.get("zones", []):
        zid = str(zd["id"])
        # PVE checks only the format of a zone's node names, not that the nodes exist
        zone = Zone(id=zid, type=str(zd.get("type", "simple")), **_config("zone", zid, zd, "type"))
        if "ipam" not in zd and zone.type != "simple":  # the GUI's zone editor sets the built-in IPAM
            zone.options["ipam"] = "pve"
        sdn.zones[zid] = zone
    for vd in data.get("vnets", []):
        vid = str(vd["id"])
        if str(vd["zone"]) not in sdn.zones:
            raise ValueError(f"sdn vnet '{vid}' is in unknown zone '{vd['zone']}'")
        cfg = _config("vnet", vid, vd, "zone", "errors", "subnets")
        sdn.vnets[vid] = Vnet(id=vid, zone=str(vd["zone"]), errors=dict(vd.get("errors") or {}), **cfg)
        for sd in vd.get("subnets") or []:  # cidr: "10.0.0.0/24" -> the id pve-network gives it
            network, _, mask = str(sd["cidr"]).partition("/")
            sid = f"{vd['zone']}-{network}-{mask}"
            sdn.subnets[sid] = Subnet(id=sid, vnet=vid, **_config("subnet", sid, sd, "cidr"))
    for sd in data.get("subnets", []):  # sdn/subnets.cfg as a list: vnet, subnet (the cidr), gateway, snat, ...
        vnet = str(sd["vnet"])
        if vnet not in sdn.vnets:
            raise ValueError(f"sdn subnet '{sd.get('subnet')}' is in unknown vnet '{vnet}'")
        network, _, mask = str(sd["subnet"]).partition("/")
        sid = f"{sdn.vnets[vnet].zone}-{network}-{mask}"
        sdn.subnets[sid] = Subnet(id=sid, vnet=vnet, **_config("subnet", sid, sd, "vnet", "subnet"))
    for kind, store in (("ipams", sdn.ipams), ("dns", sdn.dns)):
        for ident, spec in (data.get(kind) or {}).items():
            store[str(ident)] = {"type": str((spec or {}).get("type", "pve")), **dict(spec or {})}
    sdn.vnet_firewall = {str(k): dict(v or {}) for k, v in (data.get("vnet_firewall") or {}).items()}
    for cd in data.get("controllers", []):
        cid = str(cd["id"])
        sdn.controllers[cid] = Controller(
            id=cid, type=str(cd.get("type", "evpn")), **_config("controller", cid, cd, "type")
        )
    for fd in data.get("fabrics", []) if major >= 9 else []:  # fabrics came with PVE 9: a PVE 8 run has none
        fid = str(fd["id"])
        sdn.fabrics[fid] = Fabric(
            id=fid,
            protocol=str(fd.get("protocol", "openfabric")),
            options={k: v for k, v in fd.items() if k in ("ip_prefix", "ip6_prefix", "area")},
            nodes=[str(n) for n in fd.get("nodes", nodes)],
            not_ok=[str(n) for n in fd.get("not_ok", [])],
            neighbors={str(k): [dict(r) for r in v] for k, v in (fd.get("neighbors") or {}).items()},
        )
    return sdn
