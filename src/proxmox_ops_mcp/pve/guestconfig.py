"""Guest configs parsed once, properly: PVE's key/value strings into a typed model.

``scsi0: local-lvm:vm-100-disk-0,size=32G`` becomes a :class:`Volume`; passthrough keys, CPU
type, memory, locks and tags become fields. Secrets (``cipassword`` and anything named like a
password or secret) are redacted here, so no later layer can leak them.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

GuestType = Literal["qemu", "lxc"]
REDACTED = "***redacted***"

_QEMU_DISK = re.compile(r"^(ide[0-3]|sata[0-5]|scsi(?:[12]?[0-9]|30)|virtio(?:1[0-5]|[0-9])|efidisk0|tpmstate0|"
                        r"unused\d+)$")
_LXC_VOLUME = re.compile(r"^(rootfs|mp\d+|unused\d+)$")
_QEMU_DEVICE = re.compile(r"^(hostpci|usb|serial|parallel|virtiofs)\d+$")
_LXC_DEVICE = re.compile(r"^dev\d+$")
_SECRET_KEY = re.compile(r"(password|secret|passwd|token)", re.IGNORECASE)
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def parse_size(text: str) -> int | None:
    """PVE disk size notation ('32G', '2708862K', '4M') to bytes; None when unparseable."""
    m = _SIZE.match(text.strip())
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()]) if m else None


def parse_property_string(value: str, default_key: str | None = None) -> dict[str, str]:
    """'a,b=c' -> {default_key: 'a', 'b': 'c'}; bare flags after the first item become '1'."""
    out: dict[str, str] = {}
    for i, raw in enumerate(str(value).split(",")):
        part = raw.strip()
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
        elif i == 0 and default_key:
            out[default_key] = part
        else:
            out[part] = "1"
    return out


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "yes", "on", "true")


class Volume(BaseModel):
    """One volume a guest references (disk, CD-ROM, EFI/TPM state, container rootfs or mount point)."""

    key: str = Field(description="config key, e.g. scsi0, ide2, rootfs, mp0, unused0")
    volid: str = Field(description="volume id (storage:name), 'none', 'cdrom' or a host path")
    storage: str | None = Field(None, description="storage id, None for host paths and empty drives")
    size_bytes: int | None = None
    cdrom: bool = False
    unused: bool = False
    host_path: bool = Field(False, description="a host path (/dev/..., or a container bind mount)")
    mountpoint: str | None = None
    shared_flag: bool = Field(False, description="marked shared=1 (a host path the admin says exists everywhere)")
    backup: bool = Field(True, description="included in backups (backup=0 excludes it)")
    cloudinit: bool = False

    @property
    def empty_drive(self) -> bool:
        return self.volid == "none"


class GuestConfig(BaseModel):
    """The parts of a guest config that operations decisions depend on."""

    vmid: int
    type: GuestType
    name: str
    memory_mib: int = Field(description="configured memory (what the HA scheduler and our planner reserve)")
    balloon_mib: int | None = None
    cores: int
    sockets: int = 1
    vcpus: int = Field(description="virtual CPUs (cores x sockets, or vcpus if set)")
    cpu_type: str | None = None
    onboot: bool = False
    agent_enabled: bool = False
    template: bool = False
    lock: str | None = None
    tags: list[str] = Field(default_factory=list)
    description: str | None = None
    volumes: list[Volume] = Field(default_factory=list)
    local_devices: list[str] = Field(default_factory=list, description="passthrough keys that pin the guest")
    mapped_devices: dict[str, str] = Field(default_factory=dict, description="key -> resource mapping name")
    ct_devices: list[str] = Field(default_factory=list, description="container device passthrough (devN)")
    raw_lxc_keys: list[str] = Field(default_factory=list)
    unprivileged: bool | None = None
    machine: str | None = None
    parent_snapshot: str | None = None
    hibernated: bool = False
    digest: str | None = None

    @property
    def cpu_host(self) -> bool:
        return (self.cpu_type or "").lower() == "host"

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 1024**2


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a raw config with secret values replaced."""
    return {k: (REDACTED if _SECRET_KEY.search(k) else v) for k, v in config.items()}


def _volume(key: str, value: str, gtype: GuestType) -> Volume | None:
    default = "file" if gtype == "qemu" else "volume"
    opts = parse_property_string(value, default)
    volid = opts.pop(default, opts.pop("file", None))
    if volid is None:
        return None
    host = volid.startswith("/")
    storage = None if host or ":" not in volid else volid.split(":", 1)[0]
    size = parse_size(opts["size"]) if "size" in opts else None
    return Volume(
        key=key, volid=volid, storage=storage, size_bytes=size,
        cdrom=opts.get("media") == "cdrom" or volid == "cdrom", unused=key.startswith("unused"),
        host_path=host, mountpoint=opts.get("mp"), shared_flag=_flag(opts.get("shared", "0")),
        backup=not (key.startswith(("scsi", "virtio", "sata", "ide", "mp")) and opts.get("backup") == "0"),
        cloudinit="cloudinit" in volid,
    )


def _memory(raw: Any, default: int) -> int:
    if raw is None:
        return default
    text = str(raw)
    opts = parse_property_string(text, "current")
    try:
        return int(opts.get("current", text))
    except ValueError:
        return default


def parse_guest_config(raw: dict[str, Any], vmid: int, gtype: GuestType) -> GuestConfig:
    """Parse a ``GET .../config`` answer (secrets are never copied)."""
    volumes: list[Volume] = []
    local: list[str] = []
    mapped: dict[str, str] = {}
    ct_devices: list[str] = []
    raw_lxc: list[str] = []
    pattern = _QEMU_DISK if gtype == "qemu" else _LXC_VOLUME
    for key, value in raw.items():
        text = str(value)
        if pattern.match(key):
            vol = _volume(key, text, gtype)
            if vol is not None:
                volumes.append(vol)
        elif gtype == "qemu" and (_QEMU_DEVICE.match(key) or key == "ivshmem"):
            if key.startswith("serial") and text == "socket":
                continue
            if key.startswith("usb") and "spice" in text:
                continue
            opts = parse_property_string(text, "host")
            if "mapping" in opts:
                mapped[key] = opts["mapping"]
            else:
                local.append(key)
        elif gtype == "lxc" and _LXC_DEVICE.match(key):
            ct_devices.append(key)
        elif gtype == "lxc" and (key.startswith("lxc.") or key == "lxc"):
            raw_lxc.append(key)
    cpu_opts = parse_property_string(str(raw.get("cpu", "")), "cputype") if raw.get("cpu") else {}
    cores = int(raw.get("cores", 1))
    sockets = int(raw.get("sockets", 1)) if gtype == "qemu" else 1
    vcpus = int(raw["vcpus"]) if gtype == "qemu" and raw.get("vcpus") else cores * sockets
    name_key = "name" if gtype == "qemu" else "hostname"
    tags = [t for t in re.split(r"[;, ]+", str(raw.get("tags", ""))) if t]
    agent = parse_property_string(str(raw.get("agent", "0")), "enabled")
    return GuestConfig(
        vmid=vmid, type=gtype, name=str(raw.get(name_key) or f"{'VM' if gtype == 'qemu' else 'CT'} {vmid}"),
        memory_mib=_memory(raw.get("memory"), 512), balloon_mib=int(raw["balloon"]) if "balloon" in raw else None,
        cores=cores, sockets=sockets, vcpus=vcpus, cpu_type=cpu_opts.get("cputype") or None,
        onboot=_flag(raw.get("onboot", 0)), agent_enabled=_flag(agent.get("enabled", "0")),
        template=_flag(raw.get("template", 0)), lock=str(raw["lock"]) if raw.get("lock") else None, tags=tags,
        description=str(raw["description"]) if raw.get("description") else None, volumes=volumes,
        local_devices=sorted(local), mapped_devices=mapped, ct_devices=sorted(ct_devices), raw_lxc_keys=raw_lxc,
        unprivileged=_flag(raw["unprivileged"]) if "unprivileged" in raw else None,
        machine=str(raw["machine"]) if raw.get("machine") else None,
        parent_snapshot=str(raw["parent"]) if raw.get("parent") else None,
        hibernated=bool(raw.get("vmstate")) or raw.get("lock") == "suspended",
        digest=str(raw["digest"]) if raw.get("digest") else None,
    )
