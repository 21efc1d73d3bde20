"""What PVE checks before and during a guest migration (qemu-server / pve-container rules).

Used by the precondition endpoint (``GET .../migrate``) and by the migration task itself, so the
two agree the way they do in PVE: the precondition reports, the task enforces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pvesim import pveconfig
from pvesim.state import Cluster, Guest

_LOCAL_RES = re.compile(r"^(usb|hostpci|serial|parallel|virtiofs)\d+$")
_MIGRATABLE_LOCAL_TYPES = {"dir", "btrfs", "zfspool", "lvmthin", "lvm"}
_SNAPSHOT_SAFE_TYPES = {"zfspool", "btrfs"}


def local_resources(g: Guest) -> list[str]:
    """Config keys that pin a VM to its node (PVE's ``check_local_resources``)."""
    out = []
    for key, value in g.config.items():
        if key == "ivshmem":
            out.append(key)
            continue
        if not _LOCAL_RES.match(key):
            continue
        if key.startswith("serial") and value == "socket":
            continue
        if key.startswith("usb") and "spice" in value:
            continue
        if "mapping=" in value and key.startswith("hostpci"):
            continue  # mapped PCI: reported in mapped-resources instead
        out.append(key)
    return sorted(out)


def mapped_resources(g: Guest) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, value in g.config.items():
        if _LOCAL_RES.match(key) and "mapping=" in value:
            opts = pveconfig.parse_property_string(value)
            info: dict[str, Any] = {"name": opts.get("mapping", "")}
            if key.startswith("hostpci") and opts.get("live-migration") == "1":
                info["live-migration"] = 1
            out[key] = info
    return out


@dataclass
class LocalDisk:
    key: str
    volid: str
    storage: str | None
    cdrom: bool
    size: int
    unused: bool
    in_snapshot: list[str] = field(default_factory=list)

    def as_api(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "volid": self.volid,
            "cdrom": int(self.cdrom),
            "is_unused": int(self.unused),
            "is_attached": int(not self.unused),
            "size": self.size,
            "drivename": self.key,
            "shared": 0,
            "replicate": 1,
            "is_cloudinit": int("cloudinit" in self.volid),
            "is_vmstate": 0,
            "is_tpmstate": int(self.key.startswith("tpmstate")),
        }
        if self.in_snapshot:
            row["referenced_in_snapshot"] = dict.fromkeys(self.in_snapshot, 1)
        return row


def local_disks(c: Cluster, g: Guest) -> list[LocalDisk]:
    """Volumes not on shared storage (PVE's ``foreach_volid`` walk); host cdrom drives included."""
    out = []
    for key, volid, opts in g.volumes():
        if volid == "none":
            continue
        cdrom = opts.get("media") == "cdrom"
        sid = pveconfig.storage_of(volid)
        if sid is not None:
            storage = c.storages.get(sid)
            if storage is not None and storage.shared:
                continue
        elif volid.startswith("/") and opts.get("shared") == "1":
            continue
        snaps = [name for name, snap in g.snapshots.items() if any(volid in v for v in snap.config.values())]
        size = pveconfig.parse_size(opts["size"]) if "size" in opts else 0
        out.append(LocalDisk(key, volid, sid, cdrom, size, key.startswith("unused"), snaps))
    return out


def unavailable_storages(c: Cluster, g: Guest, target: str) -> list[str]:
    missing = set()
    for _key, volid, _opts in g.volumes():
        sid = pveconfig.storage_of(volid)
        if sid is None:
            continue
        storage = c.storages.get(sid)
        if storage is None or not storage.available_on(target):
            missing.add(sid)
    return sorted(missing)


def unavailable_mappings(c: Cluster, g: Guest, target: str) -> list[str]:
    mappings: dict[str, list[str]] = c.options.get("mappings", {})
    return sorted(
        info["name"]
        for info in mapped_resources(g).values()
        if info["name"] in mappings and target not in mappings[info["name"]]
    )


def precondition(c: Cluster, g: Guest) -> dict[str, Any]:
    """The body of ``GET /nodes/{node}/qemu/{vmid}/migrate``."""
    allowed: list[str] = []
    not_allowed: dict[str, dict[str, Any]] = {}
    for node in c.nodes:
        if node == g.node:
            continue
        entry: dict[str, Any] = {}
        storages = unavailable_storages(c, g, node)
        if storages:
            entry["unavailable_storages"] = storages
        mappings = unavailable_mappings(c, g, node)
        if mappings:
            entry["unavailable-resources"] = mappings
        not_allowed[node] = entry
        if not entry:
            allowed.append(node)
    mapped = mapped_resources(g)
    body: dict[str, Any] = {
        "running": int(g.status == "running"),
        "allowed_nodes": allowed,
        "not_allowed_nodes": not_allowed,
        "local_disks": [d.as_api() for d in local_disks(c, g)],
        "local_resources": local_resources(g),
        "mapped-resources": sorted(mapped),
        "mapped-resource-info": mapped,
        "has-dbus-vmstate": 1,
    }
    res = c.ha_resource_for(g)
    if res is not None and res.state != "ignored":
        body["dependent-ha-resources"] = dependent_ha_resources(c, g.sid)
    return body


def dependent_ha_resources(c: Cluster, sid: str) -> list[str]:
    out: set[str] = set()
    for rule in c.ha_rules.values():
        if rule.get("type") == "resource-affinity" and rule.get("affinity") == "positive" and not rule.get("disable"):
            members = [r.strip() for r in str(rule.get("resources", "")).split(",")]
            if sid in members:
                out.update(m for m in members if m != sid)
    return sorted(out)


def task_blocker(
    c: Cluster, g: Guest, target: str, online: bool, with_local_disks: bool, force_local: bool = False
) -> str | None:
    """The error a qmigrate task would die with, or None when it would succeed."""
    if not c.nodes[target].online:
        return "migration aborted (duration 00:00:01): Can't connect to destination address using public key"
    running = g.status == "running"
    res = local_resources(g)
    if res and (running or not force_local):
        return f"can't migrate VM which uses local devices: {', '.join(res)}"
    missing = unavailable_mappings(c, g, target)
    if missing:
        return f"can't migrate VM which uses mapped devices not available on '{target}': {', '.join(missing)}"
    if running:
        non_live = [k for k, info in mapped_resources(g).items() if "live-migration" not in info]
        if non_live:
            return f"can't live migrate VM with mapped devices: {', '.join(non_live)}"
    for sid in unavailable_storages(c, g, target):
        return f"storage '{sid}' is not available on node '{target}'"
    for disk in local_disks(c, g):
        if disk.cdrom:
            return f"can't migrate local cdrom drive ({disk.volid})"
        if disk.storage is None:
            return f"can't migrate local disk '{disk.volid}': not a storage volume"
        storage = c.storages[disk.storage]
        if storage.type not in _MIGRATABLE_LOCAL_TYPES:
            return f"can't migrate local disk '{disk.volid}': storage type '{storage.type}' not supported"
        if disk.in_snapshot and storage.type not in _SNAPSHOT_SAFE_TYPES and not disk.volid.endswith(".qcow2"):
            return f"can't migrate local disk '{disk.volid}': non-migratable snapshot exists"
        if running and not disk.unused and not with_local_disks:
            return "can't live migrate attached local disks without with-local-disks option"
    if running and online and _cpu_host(g) and c.nodes[target].cpu_model != c.nodes[g.node].cpu_model:
        return (
            "migration problems: VM qmp command 'migrate' failed - target host CPU "
            f"'{c.nodes[target].cpu_model}' lacks features of the source host CPU (cpu: host)"
        )
    return None


def _cpu_host(g: Guest) -> bool:
    cpu = g.config.get("cpu", "")
    return cpu == "host" or "cputype=host" in cpu or cpu.startswith("host,")


def ct_task_blocker(c: Cluster, g: Guest, target: str, restart: bool, online: bool) -> str | None:
    if not c.nodes[target].online:
        return "migration aborted (duration 00:00:01): Can't connect to destination address using public key"
    if online and g.status == "running":
        return "lxc live migration is currently not implemented"
    for sid in unavailable_storages(c, g, target):
        return f"storage '{sid}' is not available on node '{target}'"
    for key, value in g.config.items():
        if key.startswith("mp") and value.startswith("/") and "shared=1" not in value:
            return f"cannot migrate local bind mount point '{key}'"
    return None


def migration_seconds(c: Cluster, g: Guest, with_local_disks: bool) -> float:
    """Simulated duration: RAM transfer plus any local disk copy (1 GiB/s)."""
    seconds = 5 + g.maxmem / 1024**3 * 2
    if with_local_disks or g.status != "running":
        seconds += sum(d.size for d in local_disks(c, g) if not d.cdrom) / 1024**3
    return seconds
