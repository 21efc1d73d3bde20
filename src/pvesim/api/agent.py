"""Read-only guest-agent calls (qemu-server src/PVE/API2/Qemu/Agent.pm, QemuServer/Agent.pm) and container
interfaces (pve-container src/PVE/API2/LXC.pm ip, PVE/LXC.pm get_interfaces), answered from scenario data.

A guest's ``agent_data`` (``interfaces``, ``osinfo``, ``fsinfo``) is what its agent reports; without it the
answers are derived from the config (a NIC per ``netN`` with a made-up address, one root filesystem the size
of the first disk, 40 % used) so every running guest with an agent answers something plausible.
"""

from __future__ import annotations

from typing import Any

from pvesim import pveconfig
from pvesim.api.registry import ApiError, Call, route
from pvesim.state import Guest

_WINDOWS = ("win", "w2k", "wxp", "wvista")


def _agent(call: Call) -> Guest:
    """QemuServer/Agent.pm assert_agent_available: configured, VM running, agent answering guest-ping."""
    g = call.guest("qemu")
    if pveconfig.parse_property_string(g.config.get("agent", "0"), "enabled").get("enabled") != "1":
        raise ApiError(500, "No QEMU guest agent configured")
    if g.status != "running":
        raise ApiError(500, f"VM {g.vmid} is not running")
    if not g.agent_responding:
        raise ApiError(500, "QEMU guest agent is not running")
    return g


def _macs(g: Guest) -> list[tuple[str, str]]:
    out = []
    for key in sorted(k for k in g.config if k.startswith("net") and k[3:].isdecimal()):
        opts = pveconfig.parse_property_string(g.config[key], "model")
        mac = next((v for k, v in opts.items() if k in ("virtio", "e1000", "vmxnet3", "rtl8139", "hwaddr")), "")
        out.append((key, mac or f"BC:24:11:00:{g.vmid % 256:02X}:{int(key[3:]):02X}"))
    return out


def _address(g: Guest, index: int) -> str:
    return f"10.{10 + index}.{g.vmid // 256 % 256}.{g.vmid % 256 or 1}"


def _interfaces(g: Guest) -> list[dict[str, Any]]:
    if "interfaces" in g.agent_data:
        return [dict(i) for i in g.agent_data["interfaces"]]
    windows = str(g.config.get("ostype", "")).startswith(_WINDOWS)
    rows: list[dict[str, Any]] = [
        {
            "name": "Loopback Pseudo-Interface 1" if windows else "lo",
            "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}],
        }
    ]
    if not windows:
        rows[0]["hardware-address"] = "00:00:00:00:00:00"
    for i, (_key, mac) in enumerate(_macs(g)):
        rows.append(
            {
                "name": f"Ethernet {i}" if windows else f"eth{i}",
                "hardware-address": mac.lower(),
                "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": _address(g, i), "prefix": 24}],
            }
        )
    return rows


def _osinfo(g: Guest) -> dict[str, Any]:
    if "osinfo" in g.agent_data:
        return dict(g.agent_data["osinfo"])
    if str(g.config.get("ostype", "")).startswith(_WINDOWS):
        return {
            "id": "mswindows",
            "name": "Microsoft Windows",
            "pretty-name": "Windows Server 2022 Standard",
            "version": "Microsoft Windows Server 2022",
            "version-id": "2022",
            "kernel-release": "20348",
            "kernel-version": "10.0",
            "machine": "x86_64",
        }
    return {
        "id": "debian",
        "name": "Debian GNU/Linux",
        "pretty-name": "Debian GNU/Linux 13 (trixie)",
        "version": "13 (trixie)",
        "version-id": "13",
        "kernel-release": "6.12.43+deb13-amd64",
        "kernel-version": "#1 SMP PREEMPT_DYNAMIC Debian 6.12.43-1",
        "machine": "x86_64",
    }


def _fsinfo(g: Guest) -> list[dict[str, Any]]:
    if "fsinfo" in g.agent_data:
        return [dict(f) for f in g.agent_data["fsinfo"]]
    total = g.maxdisk() or 32 * 1024**3
    windows = str(g.config.get("ostype", "")).startswith(_WINDOWS)
    return [
        {
            "name": "\\\\?\\Volume{4c1b02c1-0000-0000-0000-100000000000}\\" if windows else "sda1",
            "mountpoint": "C:\\" if windows else "/",
            "type": "NTFS" if windows else "ext4",
            "total-bytes": total,
            "used-bytes": int(total * 0.4),
            "disk": [{"bus-type": "scsi", "bus": 0, "target": 0, "unit": 0, "dev": "/dev/sda1"}],
        }
    ]


@route("GET", "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces")
def network_get_interfaces(call: Call) -> dict[str, Any]:
    return {"result": _interfaces(_agent(call))}


@route("GET", "/nodes/{node}/qemu/{vmid}/agent/get-osinfo")
def get_osinfo(call: Call) -> dict[str, Any]:
    return {"result": _osinfo(_agent(call))}


@route("GET", "/nodes/{node}/qemu/{vmid}/agent/get-fsinfo")
def get_fsinfo(call: Call) -> dict[str, Any]:
    return {"result": _fsinfo(_agent(call))}


@route("GET", "/nodes/{node}/lxc/{vmid}/interfaces")
def lxc_interfaces(call: Call) -> list[dict[str, Any]] | None:
    """PVE/LXC.pm get_interfaces: ``ip --json a`` in the container's network namespace; a stopped container
    has no namespace, and the call answers null."""
    g = call.guest("lxc")
    if g.status != "running":
        return None
    if "interfaces" in g.agent_data:
        return [dict(i) for i in g.agent_data["interfaces"]]
    rows = [_lxc_row("lo", "00:00:00:00:00:00", "127.0.0.1", 8)]
    for i, (key, mac) in enumerate(_macs(g)):
        opts = pveconfig.parse_property_string(g.config[key], "name")
        ip = str(opts.get("ip", "")).split("/")
        addr, prefix = (ip[0], int(ip[1])) if len(ip) == 2 and ip[1].isdecimal() else (_address(g, i), 24)
        rows.append(_lxc_row(str(opts.get("name", f"eth{i}")), str(opts.get("hwaddr", mac)).lower(), addr, prefix))
    return rows


def _lxc_row(name: str, mac: str, addr: str, prefix: int) -> dict[str, Any]:
    return {
        "name": name,
        "inet": f"{addr}/{prefix}",
        "ip-addresses": [{"ip-address-type": "inet", "ip-address": addr, "prefix": prefix}],
        "hardware-address": mac,
        "hwaddr": mac,
    }
