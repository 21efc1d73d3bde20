"""More guest reads: cloud-init (qemu-server API2/Qemu.pm cloudinit_pending, cloudinit_generated_config_dump;
QemuServer/Cloudinit.pm), features (QemuConfig/LXC::Config has_feature, QemuServer.pm shared_nodes) and one
snapshot's config (get_snapshot_config)."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import Any

from pvesim import pveconfig
from pvesim.api import render
from pvesim.api.guests import _SNAPSHOT_ANY_FORMAT, _snapshot_volids
from pvesim.api.registry import ApiError, Call, route
from pvesim.state import Cluster, Guest

# QemuServer.pm $cloudinitoptions (ipconfig[n] beside them)
_CI_OPTIONS = ("cicustom", "cipassword", "citype", "ciupgrade", "ciuser", "nameserver", "searchdomain", "sshkeys")


@route("GET", "/nodes/{node}/qemu/{vmid}/cloudinit")
def cloudinit_pending(call: Call) -> list[dict[str, Any]]:
    """Qemu.pm cloudinit_pending: the options set since the drive was generated (``added`` of the config's
    [special:cloudinit] section) as pending, each other option that is set with the value the drive has and,
    when it changed since, the new one as pending, then the options removed since (delete); cipassword
    masked."""
    g = call.guest("qemu")
    conf = dict(g.config)
    ci = dict(g.cloudinit)
    for d in (conf, ci):
        if "cipassword" in d:
            d["cipassword"] = "**********"
    added = ci.pop("added", "")
    rows: list[dict[str, Any]] = [{"key": k, "pending": conf.get(k)} for k in re.split(r"[,; ]+", added) if k]
    for key, value in conf.items():
        if not (key in _CI_OPTIONS or (key.startswith("ipconfig") and key[8:].isdecimal())) or not value:
            continue
        if key in added:  # a substring match, as Qemu.pm's "$added =~ m/$opt/"
            continue
        rows.append({"key": key, "value": ci[key], "pending": value} if ci.get(key) else {"key": key, "value": value})
    rows += [{"key": k, "delete": 1} for k in ci if not conf.get(k)]
    return rows


def _hostname(conf: dict[str, str], vmid: int) -> tuple[str, str]:
    """Cloudinit.pm get_hostname_fqdn."""
    name = conf.get("name", f"VM{vmid}")
    if "." in name:
        return name.split(".", 1)[0], name
    if conf.get("searchdomain"):
        return name, f"{name}.{conf['searchdomain']}"
    return name, name


def _userdata(conf: dict[str, str], vmid: int, mask: bool) -> str:
    """Cloudinit.pm cloudinit_userdata."""
    host, fqdn = _hostname(conf, vmid)
    out = f"#cloud-config\nhostname: {host}\nmanage_etc_hosts: true\nfqdn: {fqdn}\n"
    user = conf.get("ciuser")
    if user is not None:
        out += f"user: {user}\n" + ("disable_root: False\n" if user == "root" else "")
    if "cipassword" in conf:
        out += f"password: {'**********' if mask else conf['cipassword']}\n"
    if conf.get("sshkeys"):
        from urllib.parse import unquote

        keys = [k.strip() for k in unquote(conf["sshkeys"]).split("\n") if k.strip()]
        out += "ssh_authorized_keys:\n" + "".join(f"  - {k}\n" for k in keys)
    out += "chpasswd:\n  expire: False\n"
    if user != "root":
        out += "users:\n  - default\n"
    if conf.get("ciupgrade", "1") != "0":
        out += "package_upgrade: true\n"
    return out


def _network(c: Cluster, g: Guest, conf: dict[str, str]) -> str:
    """Cloudinit.pm nocloud_network: each NIC with an ipconfig, then the name servers (the config's, else the
    node's resolv.conf)."""
    out = "version: 1\nconfig:\n"
    i = "    "
    for key in sorted(k for k in conf if k.startswith("net") and k[3:].isdecimal()):
        nid = key[3:]
        ipconf = conf.get(f"ipconfig{nid}")
        if not ipconf:
            continue
        net = pveconfig.parse_property_string(conf[key], "model")
        mac = next((v for k, v in net.items() if k in ("virtio", "e1000", "vmxnet3", "rtl8139", "macaddr")), "")
        ip = pveconfig.parse_property_string(ipconf, "ip")
        out += f"{i}- type: physical\n{i}  name: eth{nid}\n{i}  mac_address: '{mac.lower()}'\n{i}  subnets:\n"
        j = i + "  "
        if ip.get("ip") == "dhcp":
            out += f"{j}- type: dhcp4\n"
        elif ip.get("ip"):
            iface = ipaddress.ip_interface(ip["ip"])
            out += f"{j}- type: static\n{j}  address: '{iface.ip}'\n{j}  netmask: '{iface.netmask}'\n"
            if ip.get("gw"):
                out += f"{j}  gateway: '{ip['gw']}'\n"
        if ip.get("ip6") in ("dhcp", "auto"):
            out += f"{j}- type: {'dhcp6' if ip['ip6'] == 'dhcp' else 'ipv6_slaac'}\n"
        elif ip.get("ip6"):
            out += f"{j}- type: static6\n{j}  address: '{ip['ip6']}'\n"
            if ip.get("gw6"):
                out += f"{j}  gateway: '{ip['gw6']}'\n"
    dns = c.nodes[g.node].health.dns
    servers = conf.get("nameserver", "").split() or [v for k, v in sorted(dns.items()) if k.startswith("dns")]
    search = conf.get("searchdomain", "").split() or dns.get("search", "").split()
    if servers or search:
        out += f"{i}- type: nameserver\n"
        if servers:
            out += f"{i}  address:\n" + "".join(f"{i}  - '{s}'\n" for s in servers)
        if search:
            out += f"{i}  search:\n" + "".join(f"{i}  - '{s}'\n" for s in search)
    return out


@route("GET", "/nodes/{node}/qemu/{vmid}/cloudinit/dump")
def cloudinit_dump(call: Call) -> str:
    """Qemu.pm cloudinit_generated_config_dump (Cloudinit.pm dump_cloudinit_config, NoCloud format): the user
    data (the password masked without VM.Config.Cloudinit), the network config, or the meta data whose
    instance-id is the SHA-1 of the other two."""
    g = call.guest("qemu")
    conf = g.current_config()
    kind = call.params["type"]
    mask = not call.can(f"/vms/{g.vmid}", "VM.Config.Cloudinit")
    if kind == "user":
        return _userdata(conf, g.vmid, mask)
    network = _network(call.cluster, g, conf)
    if kind == "network":
        return network
    digest = hashlib.sha1((_userdata(conf, g.vmid, False) + network).encode(), usedforsecurity=False).hexdigest()
    return f"instance-id: {digest}\n"


# pve-storage volume_has_feature: the storage types that clone a template's base volumes
_LINKED_CLONE = {"lvmthin", "zfspool", "rbd"}


def _has_feature(c: Cluster, g: Guest, conf: dict[str, str], feature: str) -> bool:
    """QemuConfig.pm / LXC/Config.pm has_feature: every volume (a VM's CD-ROMs aside) must have the feature
    on its storage: snapshot (snapshot-capable storages, qcow2 elsewhere), clone (a template's base volumes on
    storages with linked clones, qcow2 files), copy (anything but a host path or iSCSI LUN)."""
    volids = _snapshot_volids(g, conf)
    for volid in volids:
        sid = volid.split(":", 1)[0] if ":" in volid and not volid.startswith("/") else None
        storage = c.storages.get(sid) if sid else None
        if storage is None:
            return False
        qcow2 = volid.endswith(".qcow2")
        if feature == "snapshot" and not (storage.type in _SNAPSHOT_ANY_FORMAT or qcow2):
            return False
        if feature == "clone" and not (g.template and (storage.type in _LINKED_CLONE or qcow2)):
            return False
        if feature == "copy" and storage.type in ("iscsi", "iscsidirect"):
            return False
    return True


def _conf_of(call: Call, g: Guest) -> dict[str, str]:
    snap = call.params.get("snapname")
    if snap:
        if snap not in g.snapshots:
            raise ApiError(500, f"snapshot '{snap}' does not exist")
        return g.snapshots[snap].config
    return g.config


def _shared_nodes(c: Cluster, g: Guest, conf: dict[str, str]) -> list[str]:
    """QemuServer.pm shared_nodes: the nodes every volume's storage is available on (a local storage keeps only
    this node, a disabled one none)."""
    nodes = set(c.nodes)
    for volid in _snapshot_volids(g, conf):
        sid = volid.split(":", 1)[0] if ":" in volid else None
        s = c.storages.get(sid) if sid else None
        if s is None:
            continue
        if s.disable:
            nodes = set()
        elif s.nodes is not None:
            nodes &= set(s.nodes)
        elif not s.shared:
            nodes &= {g.node}
    return sorted(nodes)


@route("GET", "/nodes/{node}/qemu/{vmid}/feature")
def qemu_feature(call: Call) -> dict[str, Any]:
    """Qemu.pm vm_feature: hasFeature and the nodes with all of the VM's storages."""
    c, g = call.cluster, call.guest("qemu")
    conf = _conf_of(call, g)
    return {"hasFeature": int(_has_feature(c, g, conf, call.params["feature"])), "nodes": _shared_nodes(c, g, conf)}


@route("GET", "/nodes/{node}/lxc/{vmid}/feature")
def lxc_feature(call: Call) -> dict[str, Any]:
    """LXC.pm vm_feature: hasFeature only (the node list is commented out there)."""
    c, g = call.cluster, call.guest("lxc")
    return {"hasFeature": int(_has_feature(c, g, _conf_of(call, g), call.params["feature"]))}


def _snapshot_config(call: Call, gtype: str) -> dict[str, Any]:
    """get_snapshot_config: the snapshot's section as parsed, every value a string, snaptime too."""
    g = call.guest(gtype)
    name = call.params["snapname"]
    if name not in g.snapshots:
        raise ApiError(500, f"snapshot '{name}' does not exist")
    return dict(render.snapshot_section(call.cluster, g, name))


@route("GET", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config")
def qemu_snapshot_config(call: Call) -> dict[str, Any]:
    return _snapshot_config(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config")
def lxc_snapshot_config(call: Call) -> dict[str, Any]:
    return _snapshot_config(call, "lxc")
