"""Read-only guest-agent calls (qemu-server src/PVE/API2/Qemu/Agent.pm, QemuServer/Agent.pm) and container
interfaces (pve-container src/PVE/API2/LXC.pm ip, PVE/LXC.pm get_interfaces), answered from scenario data.

A guest's ``agent_data`` (``interfaces``, ``osinfo``, ``fsinfo``) is what its agent reports; without it the
answers are derived from the config (a NIC per ``netN`` with a made-up address, one root filesystem the size
of the first disk, 40 % used) so every running guest with an agent answers something plausible.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from pvesim import pveconfig
from pvesim.api.registry import ApiError, Call, route
from pvesim.state import Guest

_WINDOWS = ("win", "w2k", "wxp", "wvista")


def agent_enabled(g: Guest) -> bool:
    """QemuServer/Agent.pm parse_guest_agent: the ``enabled`` flag of the ``agent`` property string."""
    return pveconfig.parse_property_string(g.config.get("agent", "0"), "enabled").get("enabled") == "1"


def _agent(call: Call) -> Guest:
    """QemuServer/Agent.pm assert_agent_available: an ``agent`` key in the config (any value: ``agent: 0`` passes
    this test and then fails guest-ping, the VM having no agent channel), the VM running, guest-ping answered."""
    g = call.guest("qemu")
    if "agent" not in g.config:
        raise ApiError(500, "No QEMU guest agent configured")
    if g.status != "running" or not call.cluster.nodes[g.node].online:
        raise ApiError(500, f"VM {g.vmid} is not running")
    if not g.agent_responding or not agent_enabled(g):
        raise ApiError(500, "QEMU guest agent is not running")
    return g


def _macs(g: Guest) -> list[tuple[str, str]]:
    out = []
    for key in sorted(k for k in g.config if k.startswith("net") and k[3:].isdecimal()):
        opts = pveconfig.parse_property_string(g.config[key], "model")
        mac = next((v for k, v in opts.items() if k in ("virtio", "e1000", "vmxnet3", "rtl8139", "hwaddr")), "")
        out.append((key, mac or f"BC:24:11:00:{g.vmid % 256:02X}:{int(key[3:]):02X}"))
    return out


def _address(g: Guest, index: int, static: object) -> tuple[str, int]:
    """The IPv4 address the guest's OS holds on a NIC: the static ``ip=`` of its config (a VM's cloud-init
    ipconfigN, which cloud-init writes into the guest; a container's netN) where it sets one, else one a DHCP
    server would have leased (unique per guest)."""
    address, _, prefix = str(static or "").partition("/")
    if address.count(".") == 3 and prefix.isdecimal():
        return address, int(prefix)
    return f"10.{10 + index}.{g.vmid // 256 % 256}.{g.vmid % 256 or 1}", 24


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
    for i, (key, mac) in enumerate(_macs(g)):
        ipconfig = pveconfig.parse_property_string(str(g.config.get(f"ipconfig{key[3:]}", "")))
        address, prefix = _address(g, i, ipconfig.get("ip"))
        rows.append(
            {
                "name": f"Ethernet {i}" if windows else f"eth{i}",
                "hardware-address": mac.lower(),
                "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": address, "prefix": prefix}],
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


# the commands qemu-ga answers (guest-info's supported_commands), as QEMU 9/10's agent lists them
_QGA_COMMANDS = (
    "guest-exec", "guest-exec-status", "guest-file-close", "guest-file-flush", "guest-file-open", "guest-file-read",
    "guest-file-seek", "guest-file-write", "guest-fsfreeze-freeze", "guest-fsfreeze-freeze-list",
    "guest-fsfreeze-status", "guest-fsfreeze-thaw", "guest-fstrim", "guest-get-cpustats", "guest-get-devices",
    "guest-get-diskstats", "guest-get-disks", "guest-get-fsinfo", "guest-get-host-name",
    "guest-get-memory-block-info", "guest-get-memory-blocks", "guest-get-osinfo", "guest-get-time",
    "guest-get-timezone", "guest-get-users", "guest-get-vcpus", "guest-info", "guest-network-get-interfaces",
    "guest-ping", "guest-set-memory-blocks", "guest-set-time", "guest-set-user-password", "guest-set-vcpus",
    "guest-shutdown", "guest-suspend-disk", "guest-suspend-hybrid", "guest-suspend-ram", "guest-sync",
    "guest-sync-delimited",
)  # fmt: skip
# what qemu-ga answers without success-response (they end the guest's run or never reply)
_NO_RESPONSE = {"guest-shutdown", "guest-suspend-disk", "guest-suspend-hybrid", "guest-suspend-ram"}


def _info(g: Guest) -> dict[str, Any]:
    """guest-info: the agent's version and its commands (disabled ones from the guest's ``agent_data``)."""
    disabled = set(g.agent_data.get("disabled_commands", ()))
    windows = str(g.config.get("ostype", "")).startswith(_WINDOWS)
    return {
        "version": str(g.agent_data.get("version", "107.0.1" if windows else "9.2.0")),
        "supported_commands": [
            {"name": c, "enabled": c not in disabled, "success-response": c not in _NO_RESPONSE} for c in _QGA_COMMANDS
        ],
    }


def _users(call: Call, g: Guest) -> list[dict[str, Any]]:
    if "users" in g.agent_data:
        return [dict(u) for u in g.agent_data["users"]]
    since = float(g.started_at or call.cluster.clock.now()) + 120.5
    if str(g.config.get("ostype", "")).startswith(_WINDOWS):
        return [{"user": "Administrator", "domain": "WINSRV", "login-time": since}]
    return [{"user": "root", "login-time": since}]


def _timezone(g: Guest) -> dict[str, Any]:
    return dict(g.agent_data.get("timezone") or {"zone": "CET", "offset": 3600})


def _vcpus(g: Guest) -> list[dict[str, Any]]:
    return [{"online": True, "can-offline": i > 0, "logical-id": i} for i in range(g.maxcpu)]


def _memory_blocks(g: Guest) -> list[dict[str, Any]]:
    block = 128 * 1024**2
    return [{"online": True, "phys-index": i, "can-offline": i > 0} for i in range(max(g.maxmem // block, 1))]


def _host_name(g: Guest) -> dict[str, Any]:
    return {"host-name": str(g.agent_data.get("host-name", g.name))}


_READS: dict[str, Callable[[Call, Guest], Any]] = {
    "info": lambda call, g: _info(g),
    "get-time": lambda call, g: int(call.cluster.clock.now() * 1_000_000_000),
    "get-timezone": lambda call, g: _timezone(g),
    "get-host-name": lambda call, g: _host_name(g),
    "get-users": _users,
    "get-vcpus": lambda call, g: _vcpus(g),
    "get-memory-blocks": lambda call, g: _memory_blocks(g),
    "get-memory-block-info": lambda call, g: {"size": 128 * 1024**2},
    "get-osinfo": lambda call, g: _osinfo(g),
    "get-fsinfo": lambda call, g: _fsinfo(g),
    "network-get-interfaces": lambda call, g: _interfaces(g),
}


def _read_route(command: str) -> None:
    def handler(call: Call) -> dict[str, Any]:
        """API2/Qemu/Agent.pm register_command: load_config, assert_agent_available, ``guest-<cmd>``, the
        agent's answer wrapped in ``result``."""
        g = _agent(call)
        disabled = set(g.agent_data.get("disabled_commands", ()))
        if f"guest-{command}" in disabled:  # qemu-ga's QMP error, passed through unchanged by mon_cmd
            raise ApiError(500, f"The command guest-{command} has been disabled for this instance")
        return {"result": _READS[command](call, g)}

    route("GET", f"/nodes/{{node}}/qemu/{{vmid}}/agent/{command}")(handler)


for _command in ("info", "get-time", "get-timezone", "get-host-name", "get-users", "get-vcpus"):
    _read_route(_command)
for _command in ("get-memory-blocks", "get-memory-block-info"):
    _read_route(_command)


# qemu-server API2/Qemu/Agent.pm $guest_agent_commands, and the commands registered by hand
_API_COMMANDS = (
    "fsfreeze-freeze", "fsfreeze-status", "fsfreeze-thaw", "fstrim", "get-fsinfo", "get-host-name",
    "get-memory-block-info", "get-memory-blocks", "get-osinfo", "get-time", "get-timezone", "get-users",
    "get-vcpus", "info", "network-get-interfaces", "ping", "shutdown", "suspend-disk", "suspend-hybrid",
    "suspend-ram", "exec", "exec-status", "file-read", "file-write", "set-user-password",
)  # fmt: skip


@route("GET", "/nodes/{node}/qemu/{vmid}/agent")
def index(_call: Call) -> list[dict[str, str]]:
    """Agent.pm index: every command, sorted; it reads no config (any vmid answers)."""
    return [{"name": c} for c in sorted(_API_COMMANDS)]


@route("POST", "/nodes/{node}/qemu/{vmid}/agent/ping")
def ping(call: Call) -> dict[str, Any]:
    """guest-ping answers an empty object."""
    _agent(call)
    return {"result": {}}


@route("POST", "/nodes/{node}/qemu/{vmid}/agent/fsfreeze-status")
def fsfreeze_status(call: Call) -> dict[str, Any]:
    """guest-fsfreeze-status: 'thawed', or 'frozen' while a backup holds the filesystems (a ``backup`` lock)."""
    g = _agent(call)
    return {"result": "frozen" if g.lock == "backup" and g.agent_data.get("frozen") else "thawed"}


@route("GET", "/nodes/{node}/qemu/{vmid}/agent/exec-status")
def exec_status(call: Call) -> dict[str, Any]:
    """QemuServer/Agent.pm qemu_exec_status: guest-exec-status of a process the agent started (the guest's
    ``agent_data`` ``exec``: pid -> status), its output base64-decoded and JSON booleans as 1/0; qemu-ga knows no
    other process: its error, passed through check_agent_error."""
    g = _agent(call)
    pid = int(call.params["pid"])
    runs = g.agent_data.get("exec") or {}
    status = runs.get(pid, runs.get(str(pid)))
    if not isinstance(status, dict):
        raise ApiError(500, f"Agent error: Invalid parameter 'pid' value {pid} not found")
    return {k: int(v) if isinstance(v, bool) else v for k, v in status.items()}


# files a guest's agent reads back (Agent.pm file-read: file-open, file-read in chunks, file-close)
def _files(g: Guest) -> dict[str, str]:
    osinfo = _osinfo(g)
    files = {
        "/etc/hostname": f"{g.name}\n",
        "/etc/os-release": f'PRETTY_NAME="{osinfo.get("pretty-name", "")}"\nNAME="{osinfo.get("name", "")}"\n'
        f'VERSION_ID="{osinfo.get("version-id", "")}"\nID={osinfo.get("id", "")}\n',
    }
    files.update({str(k): str(v) for k, v in (g.agent_data.get("files") or {}).items()})
    return files


@route("GET", "/nodes/{node}/qemu/{vmid}/agent/file-read")
def file_read(call: Call) -> dict[str, Any]:
    """Agent.pm file-read: ``content`` (base64 unless decode), ``bytes-read``, ``truncated`` when ``count`` ran
    out before the end of the file; an unknown path is guest-file-open's error."""
    g = _agent(call)
    path = str(call.params["file"])
    text = _files(g).get(path)
    if text is None:
        raise ApiError(500, f"Agent error: Failed to open file '{path}': No such file or directory")
    data = text.encode()
    count = int(call.params.get("count", 16 * 1024 * 1024))
    chunk = data[:count]
    result: dict[str, Any] = {"content": chunk.decode(errors="replace"), "bytes-read": len(chunk)}
    if not call.flag("decode", 1):
        result["content"] = base64.b64encode(chunk).decode()
    if len(chunk) < len(data):
        result["truncated"] = 1
    return result


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
        addr, prefix = _address(g, i, opts.get("ip"))
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
