"""Guest configs parsed once, properly: PVE's key/value strings into a typed model.

``scsi0: local-lvm:vm-100-disk-0,size=32G`` becomes a :class:`Volume`; passthrough keys, CPU
type, memory, locks and tags become fields. Secrets (``cipassword`` and anything named like a
password or secret) are redacted here, so no later layer can leak them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field

from pve_steward.models import MarkedDataclass, Untrusted

GuestType = Literal["qemu", "lxc"]
REDACTED = "***redacted***"


def _numbered(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


# Config key families, each in the order PVE walks it (the one stable order there is: the API answers a
# config in Perl hash order, pve-http-server src/PVE/APIServer/Formatter/Standard.pm to_json without
# canonical, so its key order changes from one daemon start to the next).
# qemu-server src/PVE/QemuServer/Drive.pm valid_drive_names: ide, scsi, virtio, sata (MAX_*_DISKS)
QEMU_DRIVES = _numbered("ide", 4) + _numbered("scsi", 31) + _numbered("virtio", 16) + _numbered("sata", 6)
_QEMU_OWN = [*QEMU_DRIVES, "efidisk0", "tpmstate0"]  # qemu-server QemuConfig.pm valid_volume_keys
_UNUSED = _numbered("unused", 256)
# AbstractConfig foreach_volume_full: valid_volume_keys, then unused (pve-container src/PVE/LXC/Config.pm
# valid_volume_keys: rootfs, mp)
_QEMU_VOLUMES = [*_QEMU_OWN, *_UNUSED]
_LXC_VOLUMES = ["rootfs", *_numbered("mp", 256), *_UNUSED]
# qemu-server MAX_NETS / pve-container MAX_LXC_NETWORKS (32 each), MAX_SERIAL_PORTS
NETS = _numbered("net", 32)
SERIALS = _numbered("serial", 4)
_QEMU_DEVICES = [
    *_numbered("hostpci", 16),
    *_numbered("usb", 15),
    *SERIALS,
    *_numbered("parallel", 3),
    *_numbered("virtiofs", 10),
    "ivshmem",
    "hostpci",
    "hostusb",
]
_QEMU_DISK_KEYS = frozenset(_QEMU_VOLUMES)
_LXC_VOLUME_KEYS = frozenset(_LXC_VOLUMES)
_QEMU_DEVICE_KEYS = frozenset(_QEMU_DEVICES)
# one rank for every family: volumes (a VM's, a container's, then unused), networks, devices
_RANK = {key: i for i, key in enumerate([*_QEMU_OWN, *_LXC_VOLUMES, *NETS, *_QEMU_DEVICES])}


def in_pve_order(keys: Iterable[str]) -> list[str]:
    """Config keys (volumes, networks, devices) in the order PVE walks them, whatever order the API sent."""
    return sorted(keys, key=_RANK.__getitem__)


# qemu-server src/PVE/QemuServer/Drive.pm drive_is_cloudinit ($QEMU_FORMAT_RE: raw|qcow|qcow2|qed|vmdk|cloop)
_CLOUDINIT = re.compile(r"[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow|qcow2|qed|vmdk|cloop))?$")
_SECRET_KEY = re.compile(r"(password|secret|passwd|token)", re.IGNORECASE)
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def parse_size(text: str) -> int | None:
    """PVE disk size notation ('32G', '2708862K', '4M') to bytes; None when unparseable."""
    unit = _UNITS.get(text[-1:].upper()) if text else None
    if unit is not None and text[:-1].isdecimal():  # the common form, without the regex
        return int(text[:-1]) * unit
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


# qemu-server src/PVE/QemuServer/Network.pm $nic_model_list: ``model=MAC`` names the model and the address
NIC_MODELS = frozenset(
    [
        "e1000",
        "e1000-82540em",
        "e1000-82544gc",
        "e1000-82545em",
        "e1000e",
        "i82551",
        "i82557b",
        "i82559er",
        "ne2k_isa",
        "ne2k_pci",
        "pcnet",
        "rtl8139",
        "virtio",
        "vmxnet3",
    ]
)


Nic = tuple[str, str | None, str | None]  # (netN, model, MAC)


def nic(value: str, gtype: str) -> tuple[str | None, str | None]:
    """A network device's (model, MAC): ``model=MAC,...`` or ``model=...,macaddr=...`` for VMs (qemu-server
    Network.pm parse_net), ``hwaddr=`` for containers (pve-container parse_lxc_network); the MAC upper case."""
    if gtype == "lxc":
        at = value.find("hwaddr=")
        if at < 0:
            return None, None
        if at and value[at - 1] != ",":  # not the key itself: the general parser decides
            return None, parse_property_string(value).get("hwaddr", "").upper() or None
        return None, value[at + 7 :].split(",", 1)[0].strip().upper() or None
    head = value.split(",", 1)[0]
    model, eq, mac = head.partition("=")
    if eq and model in NIC_MODELS and "macaddr=" not in value and "model=" not in value:  # the common form
        mac = mac.strip()
        return model, mac.upper() if mac and mac != "1" else None
    opts = parse_property_string(value)
    named = opts.get("model") or next((k for k in opts if k in NIC_MODELS), None)
    address = opts.get("macaddr") or next((v for k, v in opts.items() if k in NIC_MODELS and v != "1"), None)
    return named, address.upper() if address else None


def _flag(value: Any) -> bool:
    if value in (1, "1"):
        return True
    if value in (0, "0", None):
        return False
    return str(value).strip().lower() in ("1", "yes", "on", "true")


def _doc(text: str) -> Any:
    return Field(description=text)


@dataclass(slots=True)
class Volume(MarkedDataclass):
    """One volume a guest references (disk, CD-ROM, EFI/TPM state, container rootfs or mount point)."""

    key: Annotated[str, _doc("config key, e.g. scsi0, ide2, rootfs, mp0, unused0")]
    volid: Annotated[Untrusted, _doc("volume id (storage:name), 'none', 'cdrom' or a host path")]
    storage: Annotated[Untrusted | None, _doc("storage id, None for host paths and empty drives")] = None
    size_bytes: int | None = None
    cdrom: bool = False
    unused: bool = False
    host_path: Annotated[bool, _doc("a host path (/dev/..., or a container bind mount)")] = False
    mountpoint: Untrusted | None = None
    shared_flag: Annotated[bool, _doc("marked shared=1 (a host path the admin says exists everywhere)")] = False
    backup: Annotated[
        bool, _doc("included in backups: a VM disk unless backup=0, a container mount point only with backup=1")
    ] = True
    cloudinit: bool = False
    replicate: Annotated[bool, _doc("included in storage replication (replicate=0 excludes it)")] = True

    @property
    def empty_drive(self) -> bool:
        return self.volid == "none"


@dataclass(slots=True)
class GuestConfig:
    """The parts of a guest config that operations decisions depend on (a plain dataclass: parsed in bulk).

    Key lists are tuples: read-only, and the empty ones (nearly all) are one shared object.
    """

    vmid: int
    type: GuestType
    name: str
    memory_mib: Annotated[int, _doc("configured memory (what the HA scheduler and our planner reserve)")]
    cores: int
    vcpus: Annotated[int, _doc("virtual CPUs (cores x sockets, or vcpus if set)")]
    sockets: int = 1
    balloon_mib: int | None = None
    cpu_type: str | None = None
    onboot: bool = False
    agent_enabled: bool = False
    template: bool = False
    lock: str | None = None
    tags: tuple[str, ...] = ()
    description: str | None = None
    volumes: list[Volume] = field(default_factory=list)
    local_devices: Annotated[tuple[str, ...], _doc("passthrough keys that pin the guest")] = ()
    mapped_devices: Annotated[dict[str, str], _doc("key -> resource mapping name")] = field(default_factory=dict)
    ct_devices: Annotated[tuple[str, ...], _doc("container device passthrough (devN)")] = ()
    raw_lxc_keys: tuple[str, ...] = ()
    unprivileged: bool | None = None
    machine: str | None = None
    parent_snapshot: str | None = None
    hibernated: bool = False
    digest: str | None = None
    nets: Annotated[tuple[Nic, ...], _doc("network devices: (netN, model, MAC upper case), in PVE's order")] = ()

    @property
    def cpu_host(self) -> bool:
        return (self.cpu_type or "").lower() == "host"

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 1024**2


def redact(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a raw config with secret values replaced."""
    return {k: (REDACTED if _SECRET_KEY.search(k) else v) for k, v in config.items()}


_BACKUP_FLAG_KEYS = ("scsi", "virtio", "sata", "ide")  # VM drives: backed up unless backup is off
_TRUE = frozenset(["1", "yes", "on", "true"])
_FALSE = frozenset(["0", "no", "off", "false"])


# what a volume's options say: size in bytes, CD-ROM media, mount point, shared=1, the backup flag (None when
# unset), replicate=0
_Facts = tuple[int | None, bool, str | None, bool, bool | None, bool]
_NO_OPTIONS: _Facts = (None, False, None, False, None, False)


def _facts(opts: dict[str, str]) -> _Facts:
    size = opts.get("size")
    shared = opts.get("shared")
    replicate = opts.get("replicate")
    backup = opts.get("backup")
    return (
        parse_size(size) if size is not None else None,
        opts.get("media") == "cdrom",
        opts.get("mp"),
        shared is not None and shared.lower() in _TRUE,
        None if backup is None else backup.lower() in _TRUE,
        replicate is not None and replicate.lower() in _FALSE,
    )


@lru_cache(maxsize=8192)
def _option_facts(options: str) -> _Facts | None:
    """The facts of an options string such as ``iothread=1,size=32G``; guests repeat these a lot.

    None when the options name the volume again (``file=``/``volume=``): the general path decides.
    """
    opts = parse_property_string(options)
    return None if "file" in opts or "volume" in opts else _facts(opts)


def _volume(key: str, value: str, gtype: GuestType) -> Volume | None:
    head, comma, rest = value.partition(",")
    if head and "=" not in head and " " not in value and value.isprintable():  # ``volid[,options]``
        facts = _option_facts(rest) if comma else _NO_OPTIONS
        if facts is not None:
            return _build(key, head, facts)
    return _volume_general(key, value, gtype)


def parse_volume(key: str, value: str, gtype: GuestType) -> Volume | None:
    """One volume value under its key (``local-lvm:vm-100-state-snap1``, ``local:iso/x.iso,media=cdrom``)."""
    return _volume(key, value, gtype)


def _volume_general(key: str, value: str, gtype: GuestType) -> Volume | None:
    """Any volume form, through the general parser (also the reference the fast path is tested against)."""
    default = "file" if gtype == "qemu" else "volume"
    opts = parse_property_string(value, default)
    volid = opts.pop(default, opts.pop("file", None))
    return None if volid is None else _build(key, volid, _facts(opts))


def _in_backups(key: str, flag: bool | None, host: bool) -> bool:
    """Whether vzdump includes the volume: a VM drive unless backup is off (qemu-server QemuConfig.pm
    get_backup_volumes, '// 1'); a container mount point only with backup on, and never a bind or device mount
    (pve-container LXC/Config.pm mountpoint_backup_enabled); rootfs, EFI and TPM state always."""
    if key[:2] == "mp":
        return flag is True and not host
    return flag is not False or not key.startswith(_BACKUP_FLAG_KEYS)


def _build(key: str, volid: str, facts: _Facts) -> Volume:
    size, media_cdrom, mountpoint, shared, backup, replicate_off = facts
    host = volid[:1] == "/"
    colon = volid.find(":")
    # positional, in field order: this runs for every volume of every guest
    return Volume(
        key,
        volid,
        None if host or colon < 0 else volid[:colon],
        size,
        media_cdrom or volid == "cdrom",
        key[:6] == "unused",
        host,
        mountpoint,
        shared,
        _in_backups(key, backup, host),
        "cloudinit" in volid and _CLOUDINIT.search(volid) is not None,
        not replicate_off,
    )


def _memory(raw: Any, default: int) -> int:
    if raw is None:
        return default
    if isinstance(raw, int):
        return raw
    text = str(raw)
    if text.isdecimal():
        return int(text)
    opts = parse_property_string(text, "current")
    try:
        return int(opts.get("current", text))
    except ValueError:
        return default


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


_VOLUME, _DEVICE, _NET = 1, 2, 3
_QEMU_KIND = dict.fromkeys(_QEMU_DISK_KEYS, _VOLUME) | dict.fromkeys(_QEMU_DEVICE_KEYS, _DEVICE)
_LXC_KIND = dict.fromkeys(_LXC_VOLUME_KEYS, _VOLUME) | dict.fromkeys(NETS, _NET)
_QEMU_KEYS = frozenset(_QEMU_KIND)
NET_KEYS = frozenset(NETS)
_RARE_KEYS = frozenset(["vcpus", "tags", "template", "balloon", "lock", "description", "machine", "parent", "vmstate"])


def _volume_rank(v: Volume) -> int:
    return _RANK[v.key]


def _nic_rank(n: Nic) -> int:
    return _RANK[n[0]]


def parse_guest_config(raw: dict[str, Any], vmid: int, gtype: GuestType) -> GuestConfig:
    """Parse a ``GET .../config`` answer (secrets are never copied); malformed values fall back to defaults.

    A table lookup per interesting key: it runs for every guest of the cluster.
    """
    volumes: list[Volume] = []
    mapped: dict[str, str] = {}
    local: tuple[str, ...] = ()  # rare: grown by concatenation, so the common case allocates nothing
    ct_devices: tuple[str, ...] = ()
    raw_lxc: tuple[str, ...] = ()
    nets: tuple[Nic, ...] = ()
    qemu = gtype == "qemu"
    get = raw.get
    if qemu:  # only volume and device keys need a look: find them in C, in PVE's order (in_pve_order)
        found = _QEMU_KEYS.intersection(raw)
        keys: Iterable[str] = found if len(found) < 2 else sorted(found, key=_RANK.__getitem__)
        named = NET_KEYS.intersection(raw)  # apart: most VMs have one, so no ordering pass
        for key in named if len(named) < 2 else sorted(named, key=_RANK.__getitem__):
            value = raw[key]
            nets += ((key, *nic(value if type(value) is str else str(value), gtype)),)
    else:  # containers: dev* and lxc.* keys cannot be listed, so every key is looked at
        keys = raw
    for key in keys:
        kind = _QEMU_KIND.get(key) if qemu else _LXC_KIND.get(key)
        if kind == _VOLUME:
            value = raw[key]
            vol = _volume(key, value if type(value) is str else str(value), gtype)
            if vol is not None:
                volumes.append(vol)
        elif kind == _NET:
            value = raw[key]
            nets += ((key, *nic(value if type(value) is str else str(value), gtype)),)
        elif kind == _DEVICE:
            text = str(raw[key])
            if key.startswith("serial") and text == "socket":
                continue
            if key.startswith("usb") and "spice" in text:
                continue
            opts = parse_property_string(text, "host")
            if "mapping" in opts and not key.startswith("virtiofs"):
                mapped[key] = opts["mapping"]
            else:
                local += (key,)
        elif not qemu and kind is None and key[:1] in ("d", "l"):
            if key.startswith("dev") and key[3:].isdigit():
                ct_devices += (key,)
            elif key.startswith("lxc.") or key == "lxc":
                raw_lxc += (key,)
    if not qemu:  # every key was looked at, in the API's order: PVE's instead
        if len(volumes) > 1:
            volumes.sort(key=_volume_rank)
        if len(nets) > 1:
            nets = tuple(sorted(nets, key=_nic_rank))
    # the common forms take a fast path; anything else goes through the general helpers
    cpu = get("cpu")
    if not cpu:
        cpu_type = None
    elif type(cpu) is str and "," not in cpu and "=" not in cpu:
        cpu_type = cpu.strip() or None
    else:
        cpu_type = parse_property_string(str(cpu), "cputype").get("cputype") or None
    cores = get("cores", 1)
    if type(cores) is not int:
        cores = _int(cores, 1)
    sockets = get("sockets", 1) if qemu else 1
    if type(sockets) is not int:
        sockets = _int(sockets, 1)
    tags = None
    vcpus = cores * sockets
    template = hibernated = False
    balloon = lock = description = machine = parent = None
    if not _RARE_KEYS.isdisjoint(raw):  # most configs set none of these: one C-level test instead of ten lookups
        if qemu and get("vcpus"):
            vcpus = _int(raw["vcpus"], vcpus)
        tags = get("tags")
        template = _flag(get("template", 0))
        balloon = _int(raw["balloon"], 0) if "balloon" in raw else None
        lock = get("lock")
        description = str(raw["description"]) if get("description") else None
        machine = str(raw["machine"]) if get("machine") else None
        parent = str(raw["parent"]) if get("parent") else None
        hibernated = bool(get("vmstate"))
    agent_raw = get("agent", 0)
    if agent_raw in (0, 1, "0", "1"):  # the common forms, as _flag reads them
        agent_on = agent_raw in (1, "1")
    else:
        agent_on = _flag(parse_property_string(str(agent_raw), "enabled").get("enabled", "0"))
    onboot = get("onboot", 0)
    memory = get("memory")
    if type(memory) is int:
        memory_mib = memory
    elif type(memory) is str and memory.isdecimal():  # PVE often answers numbers as strings
        memory_mib = int(memory)
    else:
        memory_mib = _memory(memory, 512)
    # positional, in field order (keywords cost twice as much here; the test suite checks the mapping)
    return GuestConfig(
        vmid,
        gtype,
        str(get("name" if qemu else "hostname") or f"{'VM' if qemu else 'CT'} {vmid}"),
        memory_mib,
        cores,
        vcpus,
        sockets,
        balloon,
        cpu_type,
        onboot in (1, "1") or (onboot not in (0, "0", None) and _flag(onboot)),
        agent_on,
        template,
        str(lock) if lock else None,
        tuple(str(tags).replace(";", " ").replace(",", " ").split()) if tags else (),
        description,
        volumes,
        tuple(sorted(local)) if len(local) > 1 else local,
        mapped,
        tuple(sorted(ct_devices)) if len(ct_devices) > 1 else ct_devices,
        raw_lxc,
        _flag(raw["unprivileged"]) if "unprivileged" in raw else None,
        machine,
        parent,
        hibernated or lock == "suspended",
        str(raw["digest"]) if get("digest") else None,
        nets,
    )
