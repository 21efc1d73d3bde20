"""Guest-agent reads (read-only): a VM's IP addresses, OS and filesystems as its QEMU guest agent reports them,
and a container's interfaces from its network namespace. No exec, no file access.

Privileges (qemu-server src/PVE/API2/Qemu/Agent.pm ``$guest_agent_commands``): PVE 9 needs
VM.GuestAgent.Audit (or VM.GuestAgent.Unrestricted) on /vms/<vmid>; PVE 8 needs VM.Monitor. Containers:
VM.Audit (pve-container src/PVE/API2/LXC.pm ip). Everything the guest reports is guest-controlled text.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pve_steward.errors import PveError, PvePermissionError
from pve_steward.models import Model, Untrusted
from pve_steward.pve.ids import VmId
from pve_steward.pveio.client import gather
from pve_steward.security.guard import Refused, guarded
from pve_steward.tools.context import ToolContext
from pve_steward.tools.fetch import guest_path, resolve_guest

AgentState = Literal["answering", "not_configured", "not_running", "guest_stopped", "no_agent_for_containers"]
Part = Literal["interfaces", "os", "filesystems"]
PRIVILEGE = "VM.GuestAgent.Audit (PVE 9) or VM.Monitor (PVE 8)"


class GuestInterface(Model):
    name: Untrusted
    mac: Untrusted | None = None
    addresses: list[Untrusted] = Field(default_factory=list, description="address/prefix, IPv4 and IPv6")


class GuestOs(Model):
    id: Untrusted | None = None
    pretty_name: Untrusted | None = None
    version: Untrusted | None = None
    kernel_release: Untrusted | None = None
    machine: Untrusted | None = None


class GuestFilesystem(Model):
    mountpoint: Untrusted
    type: Untrusted | None = None
    devices: list[Untrusted] = Field(default_factory=list)
    total_bytes: int | None = None
    used_bytes: int | None = None
    used_percent: float | None = Field(None, description="used-bytes / total-bytes as the agent reports them")


class GuestAgentInfo(Model):
    vmid: int
    name: Untrusted
    type: Literal["qemu", "lxc"]
    node: Untrusted
    agent: AgentState = Field(description="whether the guest agent answered (containers need none)")
    message: Untrusted | None = Field(None, description="why there is nothing to show, in PVE's words or ours")
    interfaces: list[GuestInterface] | None = None
    os: GuestOs | None = None
    filesystems: list[GuestFilesystem] | None = None
    unread: list[Untrusted] = Field(default_factory=list, description="parts that could not be read, and why")


def interfaces_of(rows: Any) -> list[GuestInterface]:
    """QGA network-get-interfaces and pve-container's ``ip --json a`` rows share these keys."""
    out = []
    for r in rows if isinstance(rows, list) else []:
        if not isinstance(r, dict):
            continue
        addrs = [
            f"{a.get('ip-address')}/{a.get('prefix')}" if a.get("prefix") is not None else str(a.get("ip-address"))
            for a in r.get("ip-addresses") or []
            if isinstance(a, dict) and a.get("ip-address")
        ]
        mac = r.get("hardware-address") or r.get("hwaddr")
        out.append(GuestInterface(name=str(r.get("name", "")), mac=None if mac is None else str(mac), addresses=addrs))
    return out


def os_of(result: Any) -> GuestOs:
    r = result if isinstance(result, dict) else {}

    def text(key: str) -> str | None:
        return None if r.get(key) is None else str(r[key])

    return GuestOs(
        id=text("id"),
        pretty_name=text("pretty-name") or text("name"),
        version=text("version"),
        kernel_release=text("kernel-release"),
        machine=text("machine"),
    )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def filesystems_of(result: Any) -> list[GuestFilesystem]:
    """QGA guest-get-fsinfo entries; one per mountpoint (the agent lists a filesystem once per mount)."""
    out = []
    for r in result if isinstance(result, list) else []:
        if not isinstance(r, dict) or not r.get("mountpoint"):
            continue
        total, used = _int(r.get("total-bytes")), _int(r.get("used-bytes"))
        pct = round(100.0 * used / total, 1) if total and used is not None else None
        devices = [str(d["dev"]) for d in r.get("disk") or [] if isinstance(d, dict) and d.get("dev")]
        out.append(
            GuestFilesystem(
                mountpoint=str(r["mountpoint"]),
                type=None if r.get("type") is None else str(r["type"]),
                devices=devices,
                total_bytes=total,
                used_bytes=used,
                used_percent=pct,
            )
        )
    return out


def agent_state(err: PveError, vmid: int) -> AgentState | None:
    """The agent state PVE's error names (QemuServer/Agent.pm assert_agent_available), or None."""
    if "No QEMU guest agent configured" in err.message:
        return "not_configured"
    if f"VM {vmid} is not running" in err.message:
        return "guest_stopped"
    if "guest agent is not running" in err.message.lower():
        return "not_running"
    return None


_WORDS = {
    "not_configured": "the VM has no guest agent configured (agent: 0): nothing to ask",
    "guest_stopped": "the VM is not running: its guest agent cannot answer",
    "not_running": "the QEMU guest agent does not answer inside the VM (not installed, not started, or hung); "
    "PVE's guest-ping failed",
}


@guarded(toolset="guests")
async def guest_agent_info(t: ToolContext, vmid: VmId, parts: list[Part] | None = None) -> GuestAgentInfo:
    """What a guest reports about itself: IP addresses, OS, filesystems (VMs via the guest agent)."""
    ref = await resolve_guest(t.client, vmid)
    want = list(dict.fromkeys(parts or ["interfaces", "os", "filesystems"]))
    base = {"vmid": vmid, "name": ref.name, "type": ref.type, "node": ref.node}
    if ref.type == "lxc":
        return await _container(t, ref, base, want)
    paths = {"interfaces": "network-get-interfaces", "os": "get-osinfo", "filesystems": "get-fsinfo"}
    got = await gather(t.client, [(p, guest_path(ref, "agent", paths[p]), {}) for p in want])
    errors = {p: v for p, v in got.items() if isinstance(v, PveError)}
    if errors and len(errors) == len(got):
        first = next(iter(errors.values()))
        if all(isinstance(e, PvePermissionError) for e in errors.values()):
            raise Refused(f"reading VM {vmid}'s guest agent needs {PRIVILEGE} on /vms/{vmid}; the API token lacks it")
        state = agent_state(first, vmid)
        if state is None:
            raise first
        return GuestAgentInfo(**base, agent=state, message=_WORDS[state])
    results = {p: (v.get("result") if isinstance(v, dict) else None) for p, v in got.items() if p not in errors}
    return GuestAgentInfo(
        **base,
        agent="answering",
        interfaces=interfaces_of(results["interfaces"]) if "interfaces" in results else None,
        os=os_of(results["os"]) if "os" in results else None,
        filesystems=filesystems_of(results["filesystems"]) if "filesystems" in results else None,
        unread=[f"{p}: {_why(e)}" for p, e in sorted(errors.items())],
    )


def _why(err: PveError) -> str:
    if isinstance(err, PvePermissionError):
        return f"needs {PRIVILEGE}"
    return err.message[:300]


async def _container(t: ToolContext, ref: Any, base: dict[str, Any], want: list[str]) -> GuestAgentInfo:
    """pve-container answers interfaces from the container's namespace (VM.Audit); no OS or filesystem reads."""
    rows = await t.client.get(guest_path(ref, "interfaces")) if "interfaces" in want else None
    stopped = "interfaces" in want and rows is None
    skipped = [p for p in want if p != "interfaces"]
    return GuestAgentInfo(
        **base,
        agent="no_agent_for_containers",
        message="the container is not running: it has no network namespace to read" if stopped else None,
        interfaces=None if rows is None else interfaces_of(rows),
        unread=[f"{p}: containers have no guest agent; PVE reads only their interfaces" for p in skipped],
    )
