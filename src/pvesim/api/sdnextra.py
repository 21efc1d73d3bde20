"""More of the SDN API (pve-network src/PVE/API2/Network/SDN/*.pm and Nodes/*.pm, pve-firewall
API2/Firewall/Vnet.pm): one zone, vnet or controller; subnets, IPAMs and DNS plugins; the vnet firewall;
PVE 9's fabrics views and dry run; a node's bridges, routes and EVPN tables."""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

from pvesim.api.firewall import _rule_at, _rules, with_digest
from pvesim.api.registry import ApiError, Call, route
from pvesim.api.sdn import _can, _fabric, _mode, _row, _sdn, section_digest, subnet_row
from pvesim.firewall import FwConf, _conf
from pvesim.sdn import Fabric, Sdn, Vnet


def _one(call: Call, kind: str, key: str, store: dict[str, Any]) -> dict[str, Any]:
    """Zones.pm / Vnets.pm / Controllers.pm read: the object in the asked view; 'sdn <kind> object ID '<id>' does
    not exist' when it is not there (sdn_zones_config and its kin)."""
    ident = call.params[key]
    obj = store.get(ident)
    row = _row(obj, key, _mode(call), section_digest(store.values())) if obj is not None else None
    if row is None:
        raise ApiError(500, f"sdn {kind} object ID '{ident}' does not exist")
    if isinstance(obj, Vnet):
        row["type"] = "vnet"
    return row


@route("GET", "/cluster/sdn/zones/{zone}")
def read_zone(call: Call) -> dict[str, Any]:
    return _one(call, "zone", "zone", _sdn(call).zones)


@route("GET", "/cluster/sdn/vnets/{vnet}")
def read_vnet(call: Call) -> dict[str, Any]:
    _vnet(call)
    return _one(call, "vnet", "vnet", _sdn(call).vnets)


@route("GET", "/cluster/sdn/controllers/{controller}")
def read_controller(call: Call) -> dict[str, Any]:
    return _one(call, "controller", "controller", _sdn(call).controllers)


def _vnet(call: Call) -> Vnet:
    """Vnets.pm check_vnet_access: the vnet's zone path with SDN.Audit or SDN.Allocate."""
    vnet = _sdn(call).vnets.get(call.params["vnet"])
    if vnet is None:
        raise ApiError(500, f"sdn vnet object ID '{call.params['vnet']}' does not exist")
    path = f"/sdn/zones/{vnet.zone}/{vnet.id}"
    if not _can(call, path):
        raise ApiError(403, f"Permission check failed ({path}, SDN.Audit|SDN.Allocate)")
    return vnet


@route("GET", "/cluster/sdn/vnets/{vnet}/subnets/{subnet}")
def read_subnet(call: Call) -> dict[str, Any]:
    """Subnets.pm read: the subnet as the edited config shows it (the index is in api/sdn.py)."""
    vnet = _vnet(call)
    sid = call.params["subnet"]
    sub = _sdn(call).subnets.get(sid)
    row = None if sub is None or sub.vnet != vnet.id else subnet_row(sub, vnet.zone, _mode(call))
    if row is None:
        raise ApiError(500, f"sdn subnet object ID '{sid}' does not exist")
    return row


def _plugins(call: Call, store: dict[str, dict[str, Any]], key: str, base: str) -> list[dict[str, Any]]:
    kind = call.params.get("type")
    return [
        {key: ident, **{k: v for k, v in cfg.items() if k != "token"}}
        for ident, cfg in sorted(store.items())
        if _can(call, f"{base}/{ident}") and kind in (None, cfg.get("type"))
    ]


@route("GET", "/cluster/sdn/ipams")
def ipams(call: Call) -> list[dict[str, Any]]:
    """Ipams.pm index: the IPAM plugins (the built-in 'pve' always), their secrets left out."""
    return _plugins(call, _sdn(call).ipams, "ipam", "/sdn/ipams")


@route("GET", "/cluster/sdn/ipams/{ipam}")
def read_ipam(call: Call) -> dict[str, Any]:
    cfg = _sdn(call).ipams.get(call.params["ipam"])
    if cfg is None:
        raise ApiError(500, f"sdn ipam object ID '{call.params['ipam']}' does not exist")
    return {"ipam": call.params["ipam"], **cfg}


@route("GET", "/cluster/sdn/ipams/{ipam}/status")
def ipam_status(call: Call) -> list[dict[str, Any]]:
    """Ipams.pm ipamindex (the pve IPAM's db, pve-network Ipams/PVEPlugin.pm): each subnet's gateway and the
    guests' addresses in the vnets of zones that use this IPAM."""
    sdn = _sdn(call)
    ipam = call.params["ipam"]
    if ipam not in sdn.ipams:
        raise ApiError(500, f"sdn ipam object ID '{ipam}' does not exist")
    if sdn.ipams[ipam].get("type") != "pve":
        raise ApiError(500, "ipam plugin doesn't support status")
    rows: list[dict[str, Any]] = []
    for sub in sorted(sdn.subnets.values(), key=lambda s: (s.vnet, s.id)):
        vnet = sdn.vnets.get(sub.vnet)
        zone = sdn.zones.get(vnet.zone) if vnet else None
        if vnet is None or zone is None or zone.options.get("ipam") != ipam or sub.state == "new":
            continue
        _zone, network, mask = sub.id.split("-", 2)
        base = {"subnet": f"{network}/{mask}", "vnet": sub.vnet, "zone": vnet.zone}
        if sub.options.get("gateway"):
            rows.append({**base, "ip": str(sub.options["gateway"]), "gateway": 1})
        rows += _guest_ips(call, sub.vnet, base, ipaddress.ip_network(f"{network}/{mask}", strict=False))
    return rows


def _guest_ips(call: Call, vnet: str, base: dict[str, Any], net: Any) -> list[dict[str, Any]]:
    out = []
    for g in sorted(call.cluster.guests.values(), key=lambda g: g.vmid):
        for key, value in g.config.items():
            if not (key.startswith("net") and key[3:].isdecimal()) or f"bridge={vnet}" not in value:
                continue
            host = net.network_address + (g.vmid % 200) + 10
            mac = next((p.split("=", 1)[1] for p in value.split(",") if p.split("=", 1)[0] in ("virtio", "hwaddr")), "")
            out.append({**base, "ip": str(host), "mac": mac, "vmid": g.vmid, "hostname": g.name})
    return out


@route("GET", "/cluster/sdn/dns")
def dns(call: Call) -> list[dict[str, Any]]:
    """Dns.pm index: the DNS plugins (powerdns), their keys left out."""
    return [{k: v for k, v in row.items() if k != "key"} for row in _plugins(call, _sdn(call).dns, "dns", "/sdn/dns")]


@route("GET", "/cluster/sdn/dns/{dns}")
def read_dns(call: Call) -> dict[str, Any]:
    cfg = _sdn(call).dns.get(call.params["dns"])
    if cfg is None:
        raise ApiError(500, f"sdn dns object ID '{call.params['dns']}' does not exist")
    return {"dns": call.params["dns"], **{k: v for k, v in cfg.items() if k != "key"}}


@route("GET", "/cluster/sdn/dry-run")
def dry_run(call: Call) -> dict[str, Any]:
    """SDN.pm dry_run (PVE 9.1): the diff of /etc/network/interfaces.d/sdn and frr.conf an apply would write;
    nothing to apply, nothing to show."""
    sdn = _sdn(call)
    pending = [z.id for z in sdn.zones.values() if z.state] + [v.id for v in sdn.vnets.values() if v.state]
    if not pending:
        return {}
    diff = "".join(f"+auto {vid}\n+iface {vid}\n" for vid in pending if vid in sdn.vnets)
    head = "--- /etc/network/interfaces.d/sdn\n+++ /etc/network/interfaces.d/sdn.new\n"
    return {"interfaces-diff": head + diff}


# ------------------------------------------------ the vnet firewall (pve-firewall API2/Firewall/Vnet.pm)


def _vnet_fw(call: Call) -> FwConf:
    vnet = _vnet(call)
    return _conf(_sdn(call).vnet_firewall.get(vnet.id))


@route("GET", "/cluster/sdn/vnets/{vnet}/firewall/options")
def vnet_fw_options(call: Call) -> dict[str, Any]:
    return with_digest(_vnet_fw(call).options)


@route("GET", "/cluster/sdn/vnets/{vnet}/firewall/rules")
def vnet_fw_rules(call: Call) -> list[dict[str, Any]]:
    conf = _vnet_fw(call)
    return _rules(call, conf.rules, conf)


@route("GET", "/cluster/sdn/vnets/{vnet}/firewall/rules/{pos}")
def vnet_fw_rule(call: Call) -> dict[str, Any]:
    return _rule_at(vnet_fw_rules(call), int(call.params.get("pos", 0)))


@route("GET", "/cluster/sdn/vnets/{vnet}/firewall")
def vnet_fw_index(_call: Call) -> list[dict[str, str]]:
    """Vnet.pm index (root only: no permissions in its schema): rules and options."""
    return [{"name": "rules"}, {"name": "options"}]


# ---------------------------------------------------------------- fabrics (PVE 9)


def _fabric_row(f: Fabric, digest: str) -> dict[str, Any]:
    return {"id": f.id, "protocol": f.protocol, **f.options, "digest": digest}


def _fabric_digest(sdn: Sdn) -> str:
    """The SHA-1 of sdn/fabrics.cfg as it stands."""
    text = "".join(f"{f.id}:{f.protocol}:{sorted(f.options.items())}:{f.nodes}\n" for f in sdn.fabrics.values())
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def _node_rows(sdn: Sdn, fabric: str | None) -> list[dict[str, Any]]:
    """Fabrics/Node.pm index: each node of each fabric with its router address and fabric interfaces."""
    rows = []
    for f in sorted(sdn.fabrics.values(), key=lambda f: f.id):
        if fabric is not None and f.id != fabric:
            continue
        prefix = ipaddress.ip_network(str(f.options.get("ip_prefix", "10.99.0.0/24")), strict=False)
        for i, node in enumerate(sorted(f.nodes), start=1):
            row: dict[str, Any] = {
                "fabric_id": f.id,
                "node_id": node,
                "protocol": f.protocol,
                "ip": str(prefix.network_address + i),
                "interfaces": [f"name=ens{19 + k}" for k in range(2)],
                "digest": _fabric_digest(sdn),
            }
            if f.options.get("ip6_prefix"):  # a dual-stack fabric gives each node an IPv6 router address too
                row["ip6"] = str(ipaddress.ip_network(str(f.options["ip6_prefix"]), strict=False).network_address + i)
            rows.append(row)
    return rows


@route("GET", "/cluster/sdn/fabrics/fabric/{id}")
def read_fabric(call: Call) -> dict[str, Any]:
    sdn = _sdn(call)
    f = sdn.fabrics.get(call.params["id"])
    if f is None:
        raise ApiError(500, f"fabric '{call.params['id']}' does not exist")
    return _fabric_row(f, _fabric_digest(sdn))


@route("GET", "/cluster/sdn/fabrics/node")
def fabric_nodes(call: Call) -> list[dict[str, Any]]:
    return _node_rows(_sdn(call), None)


@route("GET", "/cluster/sdn/fabrics/node/{fabric_id}")
def fabric_nodes_of(call: Call) -> list[dict[str, Any]]:
    if call.params["fabric_id"] not in _sdn(call).fabrics:
        raise ApiError(500, f"fabric '{call.params['fabric_id']}' does not exist")
    return _node_rows(_sdn(call), call.params["fabric_id"])


@route("GET", "/cluster/sdn/fabrics/node/{fabric_id}/{node_id}")
def read_fabric_node(call: Call) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [r for r in fabric_nodes_of(call) if r["node_id"] == call.params["node_id"]]
    if not rows:
        raise ApiError(500, f"node '{call.params['node_id']}' does not exist in fabric '{call.params['fabric_id']}'")
    return rows[0]


@route("GET", "/cluster/sdn/fabrics/all")
def fabrics_all(call: Call) -> dict[str, Any]:
    """Fabrics.pm list_all: every fabric and every fabric node."""
    sdn = _sdn(call)
    digest = _fabric_digest(sdn)
    return {
        "fabrics": [_fabric_row(f, digest) for f in sorted(sdn.fabrics.values(), key=lambda f: f.id)],
        "nodes": _node_rows(sdn, None),
    }


@route("GET", "/nodes/{node}/sdn/fabrics/{fabric}/interfaces")
def fabric_interfaces(call: Call) -> list[dict[str, str]]:
    """Nodes/Fabric.pm interfaces: FRR's view of the node's fabric interfaces."""
    f = _fabric(call)
    state = "down" if call.params["node"] in f.not_ok else "up"
    return [{"name": f"ens{19 + k}", "type": "point-to-point", "state": state} for k in range(2)]


@route("GET", "/nodes/{node}/sdn/fabrics/{fabric}/routes")
def fabric_routes(call: Call) -> list[dict[str, Any]]:
    """Nodes/Fabric.pm routes: the routes FRR learned in the fabric (none where it distributes none)."""
    f = _fabric(call)
    node = call.params["node"]
    if node in f.not_ok:
        return []
    rows = _node_rows(_sdn(call), f.id)
    return [{"route": f"{r['ip']}/32", "via": ["ens19"]} for r in rows if r["node_id"] != node]


@route("GET", "/nodes/{node}/sdn/vnets/{vnet}/mac-vrf")
def mac_vrf(call: Call) -> list[dict[str, str]]:
    """Nodes/Vnet.pm mac-vrf: the EVPN MAC table of the vnet; 400 for a vnet of a zone that is not EVPN or not
    on the node."""
    vnet = _vnet(call)
    zone = _sdn(call).zones.get(vnet.zone)
    if zone is None:
        raise ApiError(400, "Parameter verification failed.", {"zone": f"zone {vnet.zone} does not exist"})
    if zone.type != "evpn":
        raise ApiError(400, "Parameter verification failed.", {"zone": f"zone {vnet.zone} is not an EVPN zone."})
    node = call.params["node"]
    if zone.nodes() is not None and node not in (zone.nodes() or []):
        why = f"zone {vnet.zone} of vnet {vnet.id} does not exist on node {node}"
        raise ApiError(400, "Parameter verification failed.", {"zone": why})
    return []


@route("GET", "/nodes/{node}/sdn/zones/{zone}/ip-vrf")
def ip_vrf(call: Call) -> list[dict[str, Any]]:
    """Nodes/Zone.pm ip-vrf: the EVPN zone's routing table on the node; 400 for another zone type."""
    zone = _sdn(call).zones.get(call.params["zone"])
    if zone is None:
        raise ApiError(400, "Parameter verification failed.", {"zone": "zone does not exist"})
    if zone.type != "evpn":
        raise ApiError(400, "Parameter verification failed.", {"zone": f"zone {zone.id} is not an EVPN zone."})
    return []


@route("GET", "/nodes/{node}/sdn/zones/{zone}/bridges")
def bridges(call: Call) -> list[dict[str, Any]]:
    """Nodes/Zone.pm bridges: the zone's vnet bridges on the node (the node's own bridges for 'localnetwork')
    with the guests' ports on them."""
    zone_id = call.params["zone"]
    node = call.params["node"]
    sdn = _sdn(call)
    if zone_id == "localnetwork":
        health = call.cluster.nodes[node].health
        names = sorted(i for i, r in health.network.items() if r.get("type") == "bridge")
    else:
        if zone_id not in sdn.zones:
            raise ApiError(400, "Parameter verification failed.", {"zone": "zone does not exist"})
        names = sorted(v.id for v in sdn.vnets.values() if v.zone == zone_id)
    out = []
    for name in names:
        if not _can(call, f"/sdn/zones/{zone_id}/{name}"):
            continue
        vlan_aware = str(sdn.vnets[name].options.get("vlanaware", "")) in ("1", "true") if name in sdn.vnets else False
        ports: list[dict[str, Any]] = []
        for g in sorted(call.cluster.guests.values(), key=lambda g: g.vmid):
            if g.node != node or g.status != "running":
                continue
            for key, value in sorted(g.config.items()):
                if key.startswith("net") and key[3:].isdecimal() and f"bridge={name}" in value:
                    prefix = "tap" if g.type == "qemu" else "veth"
                    port: dict[str, Any] = {"name": f"{prefix}{g.vmid}i{key[3:]}", "vmid": str(g.vmid), "index": key}
                    if vlan_aware:
                        port.update(primary_vlan=1, vlans=[])
                    ports.append(port)
        out.append({"name": name, "vlan_filtering": "1" if vlan_aware else "0", "ports": ports})
    return out
