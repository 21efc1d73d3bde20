"""PVE's SDN read API (pve-network src/PVE/API2/Network/SDN.pm, SDN/Zones.pm, SDN/Vnets.pm, SDN/Nodes/*.pm,
SDN/Fabrics/Fabric.pm, SDN/Nodes/Fabric.pm) and the SDN rows of ``/cluster/resources``."""

from __future__ import annotations

import hashlib
from typing import Any

from pvesim.api.registry import ApiError, Call, route
from pvesim.sdn import Controller, Fabric, Sdn, Subnet, Vnet, Zone
from pvesim.state import Cluster

_AUDIT = ("SDN.Audit", "SDN.Allocate")


def _sdn(call: Call) -> Sdn:
    return call.cluster.sdn or Sdn()


def _major(c: Cluster) -> int:
    head = c.version.split(".", 1)[0]
    return int(head) if head.isdecimal() else 9


def _can(call: Call, path: str) -> bool:
    return any(call.can(path, p) for p in _AUDIT)


@route("GET", "/cluster/sdn")
def index(call: Call) -> list[dict[str, Any]]:
    ids = ["vnets", "zones", "controllers", "ipams", "dns"]
    if _major(call.cluster) >= 9:
        ids.append("fabrics")
    return [{"id": i} for i in ids]


def _row(obj: Zone | Vnet | Controller, key: str, mode: str, digest: str | None = None) -> dict[str, Any] | None:
    """One object as the index shows it: ``PVE::Network::SDN::pending_config`` for ``pending``, the running
    config for ``running``, the edited config otherwise. The API adds the file's ``digest``
    ($api_sdn_zones_config): the edited config has one; the pending and running views have none, so the key
    is there with a null value."""
    row = _row_of(obj, key, mode)
    if row is not None:
        row["digest"] = digest if mode == "config" else None
    return row


def section_digest(objects: Any) -> str:
    """The SHA-1 of a section config file (zones.cfg, vnets.cfg, controllers.cfg) as it stands."""
    text = "".join(
        f"{type(o).__name__}:{o.id}:{sorted(o.options.items())}:{sorted(o.pending.items())}\n" for o in objects
    )
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def _row_of(obj: Zone | Vnet | Controller, key: str, mode: str) -> dict[str, Any] | None:
    head: dict[str, Any] = {key: obj.id} if isinstance(obj, Vnet) else {key: obj.id, "type": obj.type}
    own = {"zone": obj.zone} if isinstance(obj, Vnet) else {}  # a vnet's zone is config like any other key
    if mode == "running":
        return None if obj.state == "new" else {**head, **own, **obj.options}
    if mode == "pending":
        if obj.state == "new":  # pending_config: only type and vnet stay outside 'pending'
            return {**head, "state": "new", "pending": {**own, **(obj.pending or obj.options)}}
        row = {**head, **own, **obj.options}
        if obj.state:
            row["state"] = obj.state
            row["pending"] = dict(obj.pending)
        return row
    if obj.state == "deleted":
        return None
    return {**head, **own, **{k: v for k, v in {**obj.options, **obj.pending}.items() if v != "deleted"}}


def _mode(call: Call) -> str:
    return "pending" if call.flag("pending") else "running" if call.flag("running") else "config"


@route("GET", "/cluster/sdn/zones")
def zones(call: Call) -> list[dict[str, Any]]:
    out = []
    for z in sorted(_sdn(call).zones.values(), key=lambda z: z.id):
        if not _can(call, f"/sdn/zones/{z.id}") or (call.params.get("type") and call.params["type"] != z.type):
            continue
        row = _row(z, "zone", _mode(call), section_digest(_sdn(call).zones.values()))
        if row is not None:
            out.append(row)
    return out


@route("GET", "/cluster/sdn/vnets")
def vnets(call: Call) -> list[dict[str, Any]]:
    out = []
    for v in sorted(_sdn(call).vnets.values(), key=lambda v: v.id):
        if not _can(call, f"/sdn/zones/{v.zone}/{v.id}"):
            continue
        row = _row(v, "vnet", _mode(call), section_digest(_sdn(call).vnets.values()))
        if row is not None:
            row["type"] = "vnet"
            out.append(row)
    return out


def subnet_row(sub: Subnet, zone: str, mode: str) -> dict[str, Any] | None:
    """Subnets.pm index: the subnet as pending_config (``pending``), the running or the edited config shows it,
    completed by sdn_subnets_config (id, cidr, zone, network, mask) and api_sdn_subnets_config (subnet)."""
    _zone, network, mask = sub.id.split("-", 2)
    derived = {"subnet": sub.id, "id": sub.id, "cidr": f"{network}/{mask}", "zone": zone, "network": network}
    derived["mask"] = mask
    head = {"type": "subnet", "vnet": sub.vnet}
    if mode == "running":
        return None if sub.state == "new" else {**head, **sub.options, **derived}
    if mode == "pending":
        if sub.state == "new":
            return {**head, "state": "new", "pending": dict(sub.pending or sub.options), **derived}
        row = {**head, **sub.options, **derived}
        if sub.state:
            row.update(state=sub.state, pending=dict(sub.pending))
        return row
    if sub.state == "deleted":
        return None
    return {**head, **{k: v for k, v in {**sub.options, **sub.pending}.items() if v != "deleted"}, **derived}


@route("GET", "/cluster/sdn/vnets/{vnet}/subnets")
def subnets(call: Call) -> list[dict[str, Any]]:
    """pve-network API2/Network/SDN/Subnets.pm index: the vnet must be in the edited config (500 otherwise), and the
    caller needs SDN.Audit or SDN.Allocate on its zone path (check_any: 403)."""
    sdn = _sdn(call)
    name = str(call.params["vnet"])
    vnet = sdn.vnets.get(name)
    if vnet is None or vnet.state == "deleted":
        raise ApiError(500, f"sdn vnet '{name}' does not exist\n")
    path = f"/sdn/zones/{vnet.zone}/{name}"
    if not _can(call, path):
        raise ApiError(403, f"Permission check failed ({path}, SDN.Audit|SDN.Allocate)")
    mode = _mode(call)
    rows = [subnet_row(s, vnet.zone, mode) for s in sorted(sdn.subnets.values(), key=lambda s: s.id)]
    return [r for r in rows if r is not None and r["vnet"] == name]


@route("GET", "/cluster/sdn/controllers")
def controllers(call: Call) -> list[dict[str, Any]]:
    """SDN/Controllers.pm index: like the zones' (pending_config for ``pending``), per /sdn/controllers/<id>."""
    out = []
    for ctl in sorted(_sdn(call).controllers.values(), key=lambda x: x.id):
        if not _can(call, f"/sdn/controllers/{ctl.id}") or (call.params.get("type") not in (None, ctl.type)):
            continue
        row = _row(ctl, "controller", _mode(call), section_digest(_sdn(call).controllers.values()))
        if row is not None:
            out.append(row)
    return out


@route("GET", "/nodes/{node}/sdn/zones")
def node_zones(call: Call) -> list[dict[str, Any]]:
    """SDN/Nodes/Zones.pm index: this node's zone status (``PVE::Network::SDN::status``)."""
    status = _sdn(call).zone_status(call.params["node"])
    return [
        {"zone": z, "status": s["status"]}
        for z, s in sorted(status.items())
        if call.can(f"/sdn/zones/{z}", "SDN.Audit")
    ]


@route("GET", "/nodes/{node}/sdn/zones/{zone}/content")
def zone_content(call: Call) -> list[dict[str, Any]]:
    """SDN/Nodes/Zone.pm content: the zone's vnets on this node with their status; it filters Zones.pm status
    by zone, so a zone unknown there (or not on this node) lists nothing rather than failing."""
    return _sdn(call).vnet_status(call.params["node"], call.params["zone"])


def _fabric(call: Call) -> Fabric:
    f = _sdn(call).fabrics.get(call.params["fabric"])
    if f is None:
        raise ApiError(500, f"fabric '{call.params['fabric']}' does not exist")
    return f


@route("GET", "/cluster/sdn/fabrics/fabric")
def fabrics(call: Call) -> list[dict[str, Any]]:
    """Fabrics/Fabric.pm list_fabrics: each fabric with the file's digest (none for the running view)."""
    from pvesim.api.sdnextra import _fabric_digest

    sdn = _sdn(call)
    digest = None if call.flag("running") else _fabric_digest(sdn)
    return [
        {"id": f.id, "protocol": f.protocol, **f.options, **({"digest": digest} if digest else {})}
        for f in sorted(sdn.fabrics.values(), key=lambda f: f.id)
        if _can(call, f"/sdn/fabrics/{f.id}")
    ]


@route("GET", "/nodes/{node}/sdn/fabrics/{fabric}/neighbors")
def fabric_neighbors(call: Call) -> list[dict[str, str]]:
    """SDN/Nodes/Fabric.pm neighbors: FRR's adjacencies of this node in the fabric."""
    return [dict(r) for r in _fabric(call).neighbors.get(call.params["node"], [])]


def resource_rows(call: Call) -> list[dict[str, Any]]:
    """``/cluster/resources`` SDN rows (pve-manager PVE/API2/Cluster.pm resources): pve-manager 9.0.12 on
    broadcasts ``network`` rows (zones and fabrics, pvestatd update_network_status) and hides the node's old
    ``sdn`` rows; before that, ``sdn`` rows per zone plus ``localnetwork`` on every node."""
    c: Cluster = call.cluster
    sdn = _sdn(call)
    rows: list[dict[str, Any]] = []
    major = _major(c)
    network = major > 9 or (major == 9 and c.release != "9.0")
    for n in c.nodes.values():
        local = call.can("/sdn/zones/localnetwork", "SDN.Audit")
        if local and (network or n.online):
            if network:  # Cluster.pm resources adds it for every node of the nodelist, up or down
                rows.append(
                    {
                        "id": f"network/{n.name}/zone/localnetwork",
                        "type": "network",
                        "network-type": "zone",
                        "network": "localnetwork",
                        "node": n.name,
                        "status": "ok",
                    }
                )
            else:
                rows.append(
                    {"id": f"sdn/{n.name}/localnetwork", "sdn": "localnetwork", "node": n.name, "type": "sdn"}
                    | {"status": "ok"}
                )
        if not n.online:
            continue  # a node that is down broadcasts nothing new; PVE keeps its last state, we drop it
        for zid, st in sorted(sdn.zone_status(n.name).items()):
            if not call.can(f"/sdn/zones/{zid}", "SDN.Audit"):
                continue
            if network:
                rows.append(
                    {
                        "id": f"network/{n.name}/zone/{zid}",
                        "type": "network",
                        "network-type": "zone",
                        "network": zid,
                        "node": n.name,
                        "status": st["status"],
                        "zone-type": st["zone-type"],
                    }
                )
            else:
                # no zone-type: Zones.pm status has it from pve-network 1.2.0 (PVE 9.1), which shows network rows
                rows.append(
                    {"id": f"sdn/{n.name}/{zid}", "sdn": zid, "node": n.name, "type": "sdn", "status": st["status"]}
                )
        if network:
            for f in sorted(sdn.fabrics.values(), key=lambda f: f.id):
                if _can(call, f"/sdn/fabrics/{f.id}") and n.name in f.nodes:
                    rows.append(
                        {
                            "id": f"network/{n.name}/fabric/{f.id}",
                            "type": "network",
                            "network-type": "fabric",
                            "network": f.id,
                            "node": n.name,
                            "protocol": f.protocol,
                            "status": "not ok" if n.name in f.not_ok else "ok",
                        }
                    )
    return rows
