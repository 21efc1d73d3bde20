"""The IP and MAC addresses a guest's config gives it, on which network, as PVE reads them.

A VM's addresses come from cloud-init ``ipconfigN`` (``ip=``/``ip6=``, on the device ``netN``); a container's
from ``netN`` itself (``ip=``/``ip6=``, ``hwaddr``). ``dhcp``, ``auto`` (SLAAC) and ``manual`` configure no
address of their own; loopback, link-local, multicast and unspecified addresses never clash across guests.
The network is the device's bridge and VLAN tag: the same address on two different VLANs is no clash.

Asked of every guest of a cluster, so the addresses are found with one pattern per value and the network is
parsed only for an address two guests share (:func:`segment`).
"""

from __future__ import annotations

import ipaddress
import re
from typing import NamedTuple

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import NET_KEYS, nic, parse_property_string

Segment = tuple[str, str] | None  # (bridge, VLAN tag or ""); None: the device is not known

_IPCONFIG_KEYS = frozenset(f"ipconfig{i}" for i in range(32))
_IP = re.compile(r"(?:^|,)\s*ip6?=([^,\s]+)")
_NEVER_V4 = frozenset(["0", "127"])


class Address(NamedTuple):
    kind: str  # ip | mac
    value: str  # normalised: the IP without prefix, the MAC upper case
    device: str  # netN (an ipconfigN's netN)


def _ip(text: str) -> str | None:
    """The address of ``10.0.0.5/24`` (None for dhcp/auto/manual and addresses that never clash). PVE validated
    the CIDR when the config was written (pve-ipv4-config, pve-ipv6-config): an IPv4 address is taken as
    written, an IPv6 one is normalised (one address has many spellings)."""
    address = text.partition("/")[0]
    if ":" not in address:
        head = address.partition(".")[0]
        if not head.isdecimal() or head in _NEVER_V4 or int(head) >= 224 or address.startswith("169.254."):
            return None  # dhcp, manual; this network, loopback, multicast and above, link-local
        return address
    try:
        ip = ipaddress.ip_interface(text).ip
    except ValueError:
        return None
    if ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified:
        return None
    return str(ip)


@pve_rule(
    "guests.configured-addresses",
    rule="A VM's static addresses are cloud-init ipconfigN ip=/ip6= (for the device netN), a container's are netN "
    "ip=/ip6=; dhcp, auto and manual set none. A NIC's MAC is its model=MAC or macaddr (VM), hwaddr (container).",
    pve="qemu-server src/PVE/QemuServer/Cloudinit.pm (ipconfigN), src/PVE/QemuServer/Network.pm parse_net; "
    "pve-container src/PVE/LXC/Config.pm parse_lxc_network (ip, ip6, hwaddr)",
    codes=("GUEST_IP_DUPLICATE", "GUEST_ONBOOT_ADDRESS_CLASH"),
)
def addresses(data: ClusterData, vmid: int, raw: Row | None = None) -> list[Address]:
    """The guest's configured static IPs and its MACs (of ``raw`` when given, else of its config, once)."""
    own = raw is None
    if own:
        memo = data.memo["guestaddr"]
        if vmid in memo:
            return memo[vmid]  # type: ignore[no-any-return]
    cfg = data.parsed.get(vmid) if own else None
    source = (data.configs.get(vmid) or {}) if raw is None else raw
    if cfg is not None:  # the MACs the config parser already found
        out = [Address("mac", mac, key) for key, _model, mac in cfg.nets if mac]
        lxc = cfg.type == "lxc"
    else:
        lxc = "hostname" in source or "rootfs" in source
        gtype = "lxc" if lxc else "qemu"
        out = [Address("mac", mac, k) for k in NET_KEYS.intersection(source) if (mac := nic(str(source[k]), gtype)[1])]
    out += static_ips(source, lxc)
    out.sort()
    if own:
        data.memo["guestaddr"][vmid] = out
    return out


def static_ips(raw: Row, lxc: bool) -> list[Address]:
    """The static IPs of a config: a container's netN ip=/ip6=, a VM's ipconfigN (most VMs have none)."""
    out: list[Address] = []
    if lxc:
        for key in NET_KEYS.intersection(raw):
            value = str(raw[key])
            if "ip" in value:
                out += [Address("ip", ip, key) for text in _IP.findall(value) if (ip := _ip(text))]
        return out
    for key in _IPCONFIG_KEYS.intersection(raw):
        out += [Address("ip", ip, f"net{key[8:]}") for text in _IP.findall(str(raw[key])) if (ip := _ip(text))]
    return out


@pve_rule(
    "guests.agent-addresses",
    rule="A running VM's guest agent reports the addresses its OS holds per interface (QGA "
    "guest-network-get-interfaces: name, hardware-address, ip-addresses); an interface whose MAC is one of the "
    "VM's netN devices is on that device's network, any other (a bridge or tunnel inside the guest) is not.",
    pve="qemu-server src/PVE/API2/Qemu/Agent.pm (network-get-interfaces); QEMU qga/qapi-schema.json "
    "GuestNetworkInterface",
    codes=("GUEST_IP_DUPLICATE", "GUEST_ONBOOT_ADDRESS_CLASH"),
)
def agent_ips(data: ClusterData, vmid: int) -> list[Address]:
    """The addresses a running VM's agent reports on the interfaces PVE gave it (matched by MAC to netN)."""
    rows = data.agent_interfaces.get(vmid)  # most guests: none, asked of every guest
    if not isinstance(rows, list) or (data.guests.get(vmid) or {}).get("status") != "running":
        return []
    cfg = data.parsed.get(vmid)
    if cfg is None:
        return []
    devices = {mac.upper(): key for key, _model, mac in cfg.nets if mac}
    out: set[Address] = set()
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("ip-addresses"), list):
            continue
        device = devices.get(str(row.get("hardware-address") or "").upper())
        if device is None:
            continue
        for a in row["ip-addresses"]:
            text = a.get("ip-address") if isinstance(a, dict) else None
            if isinstance(text, str) and (ip := _ip(text.partition("%")[0])):  # fe80::1%eth0: a zone, never clashes
                out.add(Address("ip", ip, device))
    return sorted(out)


def segment(raw: Row, device: str) -> Segment:
    """The network of a device: its bridge and VLAN tag."""
    spec = raw.get(device)
    if spec is None:
        return None
    opts = parse_property_string(str(spec))
    return (opts.get("bridge", ""), opts.get("tag", ""))


def same_network(a: Segment, b: Segment) -> bool:
    """Two devices may share a network unless both are known and differ in bridge or VLAN tag."""
    return a is None or b is None or a == b
