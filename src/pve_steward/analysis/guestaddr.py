"""The IP and MAC addresses a guest's config gives it, on which network, as PVE reads them.

A VM's addresses come from cloud-init ``ipconfigN`` (``ip=``/``ip6=``, on the device ``netN``); a container's
from ``netN`` itself (``ip=``/``ip6=``, ``hwaddr``). ``dhcp``, ``auto`` (SLAAC) and ``manual`` configure no
address of their own; loopback, link-local, multicast and unspecified addresses never clash across guests.
The network is the device's bridge and VLAN tag: the same address on two different VLANs is no clash.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import NET_KEYS, NIC_MODELS, parse_property_string

Segment = tuple[str, str] | None  # (bridge, VLAN tag or ""); None: the device is not known


@dataclass(frozen=True, slots=True)
class Address:
    kind: str  # ip | mac
    value: str  # normalised: the IP without prefix, the MAC upper case
    device: str  # netN (or ipconfigN's netN)
    segment: Segment


def _segment(raw: Row, key: str) -> Segment:
    spec = raw.get(key)
    if spec is None:
        return None
    opts = parse_property_string(str(spec))
    return (opts.get("bridge", ""), opts.get("tag", ""))


def _ip(text: str) -> str | None:
    """The address of ``ip=10.0.0.5/24`` (None for dhcp/auto/manual and addresses that never clash)."""
    try:
        ip = ipaddress.ip_interface(text.strip()).ip
    except ValueError:
        return None
    if ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified:
        return None
    return str(ip)


@pve_rule(
    "guests.configured-addresses",
    rule="A VM's static addresses are cloud-init ipconfigN ip=/ip6= (for the device netN), a container's are netN "
    "ip=/ip6=; dhcp, auto and manual set none. A NIC's MAC is its model=MAC (VM) or hwaddr (container).",
    pve="qemu-server src/PVE/QemuServer/Cloudinit.pm (ipconfigN), src/PVE/QemuServer/Network.pm parse_net; "
    "pve-container src/PVE/LXC/Config.pm parse_lxc_network (ip, ip6, hwaddr)",
    codes=("GUEST_IP_DUPLICATE", "GUEST_ONBOOT_ADDRESS_CLASH"),
)
def addresses(data: ClusterData, vmid: int, raw: Row | None = None) -> list[Address]:
    """The guest's configured static IPs and its MACs, once per snapshot."""
    memo = data.memo["guestaddr"]
    if raw is None and vmid in memo:
        return memo[vmid]  # type: ignore[no-any-return]
    raw = raw if raw is not None else data.configs.get(vmid) or {}
    cfg = data.parsed.get(vmid)
    lxc = cfg.type == "lxc" if cfg is not None else ("hostname" in raw or "rootfs" in raw)
    out: list[Address] = []
    for key in sorted(NET_KEYS.intersection(raw)):
        opts = parse_property_string(str(raw[key]))
        seg = (opts.get("bridge", ""), opts.get("tag", ""))
        mac = (
            opts.get("hwaddr")
            if lxc
            else opts.get("macaddr") or next((v for k, v in opts.items() if k in NIC_MODELS), None)
        )
        if mac:
            out.append(Address("mac", mac.upper(), key, seg))
        if lxc:
            out += [Address("ip", ip, key, seg) for f in ("ip", "ip6") if (ip := _ip(opts.get(f, "")))]
    if not lxc:
        for key in sorted(k for k in raw if str(k).startswith("ipconfig") and str(k)[8:].isdecimal()):
            opts = parse_property_string(str(raw[key]))
            net = f"net{str(key)[8:]}"
            out += [Address("ip", ip, net, _segment(raw, net)) for f in ("ip", "ip6") if (ip := _ip(opts.get(f, "")))]
    if cfg is not None and raw is data.configs.get(vmid):
        memo[vmid] = out
    return out


def same_network(a: Segment, b: Segment) -> bool:
    """Two devices may share a network unless both are known and differ in bridge or VLAN tag."""
    return a is None or b is None or a == b
