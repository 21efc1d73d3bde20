"""What each disk of a node holds, as pve-storage src/PVE/Diskmanage.pm get_disks reports it.

A scenario disk may say what it is used for (``use``); otherwise it is derived: the node's first disk (both, when
the root pool ``rpool`` is a mirror of two) carries the installation, disks of another ZFS pool are that pool's,
each Ceph OSD of the node takes a free disk (a disk is added for an OSD that finds none), the rest are unused.

get_disks' ``used`` follows from that: an installed disk has the BIOS boot partition first, so its first
partition's use, 'BIOS boot', is the disk's; a ZFS pool's whole disk holds a ZFS partition ('ZFS'); a physical
volume is 'LVM' (a BlueStore OSD's disk too, with its ``osdid``); a formatted disk shows its file system.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

USES = ("root", "zfs", "lvm", "ext4", "xfs", "osd", "partitions", "mounted", "unused")
# Diskmanage.pm $determine_usage, per use (None: no 'used' key at all)
_USED = {
    "root": "BIOS boot",
    "zfs": "ZFS",
    "lvm": "LVM",
    "ext4": "ext4",
    "xfs": "xfs",
    "osd": "LVM",
    "partitions": "partitions",
    "mounted": "mounted",
    "unused": None,
}


@dataclass
class DiskUse:
    """A disk with what it holds: ``use`` (one of USES), the ZFS pool, the OSD id, the mount name."""

    disk: dict[str, Any]
    use: str
    pool: str | None = None
    osdid: int = -1
    name: str | None = None  # a directory storage's name (ext4/xfs), /mnt/pve/<name>
    partitions: list[dict[str, Any]] = field(default_factory=list)


def _devpath(taken: set[str], nvme: bool) -> str:
    for i in range(26):
        path = f"/dev/nvme{i}n1" if nvme else f"/dev/sd{chr(ord('a') + i)}"
        if path not in taken:
            return path
    return "/dev/nvme99n1"


def node_disks(cluster: Any, node: Any) -> list[DiskUse]:
    """Every disk of the node with what it holds (see the module's description)."""
    disks = [DiskUse(dict(d), str(d.get("use") or "")) for d in node.disks]
    pools = [str(p["name"]) for p in node.zfs]
    root_mirror = "rpool" in pools and len(disks) > 1
    for i, d in enumerate(disks):
        if d.use:
            d.pool = d.disk.get("pool")
            d.osdid = int(d.disk.get("osd", -1))
            continue
        if i == 0 or (i == 1 and root_mirror):
            d.use, d.pool = "root", "rpool" if "rpool" in pools else None
    others = [p for p in pools if p != "rpool"]
    for d in disks:
        if not d.use and others:
            d.use, d.pool = "zfs", others[0]
    ceph = cluster.ceph
    osds = sorted(o.id for o in ceph.osds.values() if o.host == node.name) if ceph else []
    placed = {d.osdid for d in disks if d.use == "osd"}
    for osd in (i for i in osds if i not in placed):
        free = next((d for d in disks if not d.use), None)
        if free is None:
            taken = {str(d.disk["devpath"]) for d in disks}
            size = next((o.total for o in ceph.osds.values() if o.id == osd), 2 * 1024**4) if ceph else 2 * 1024**4
            path = _devpath(taken, True)
            row = {"devpath": path, "type": "nvme", "size": size, "model": "Micron_7450_MTFDKCC1T9TFR"}
            row["serial"] = "MTFD" + hashlib.md5(f"{node.name}{path}".encode(), usedforsecurity=False).hexdigest()[:8]
            free = DiskUse(row, "")
            disks.append(free)
        free.use, free.osdid = "osd", osd
    for d in disks:
        d.use = d.use or "unused"
        d.partitions = _partitions(d)
    return disks


def _partitions(d: DiskUse) -> list[dict[str, Any]]:
    """The partitions get_disks lists with include-partitions: an installation's BIOS boot, EFI and its
    ZFS or LVM partition; a ZFS pool's data partition and its reserved ninth; a formatted disk's one partition."""
    dev = str(d.disk["devpath"])
    sep = "p" if dev[-1].isdigit() else ""
    size = int(d.disk.get("size", 0))
    if d.use == "root":
        last = "ZFS" if d.pool == "rpool" else "LVM"
        return [
            _part(dev, f"{sep}1", 1024**2, "BIOS boot"),
            _part(dev, f"{sep}2", 1024**3, "EFI"),
            _part(dev, f"{sep}3", size - 1024**3 - 1024**2, last),
        ]
    if d.use == "zfs":
        return [_part(dev, f"{sep}1", size - 8 * 1024**2, "ZFS"), _part(dev, f"{sep}9", 8 * 1024**2, "ZFS reserved")]
    if d.use in ("ext4", "xfs"):
        return [_part(dev, f"{sep}1", size, d.use, mounted=True)]
    return []


def _part(dev: str, suffix: str, size: int, used: str, mounted: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {"devpath": dev + suffix, "parent": dev, "gpt": 1, "type": "partition", "size": size}
    row.update(used=used, osdid=-1, **({"mounted": 1} if mounted else {}))
    row["osdid-list"] = None
    return row


def list_row(d: DiskUse) -> dict[str, Any]:
    """One disk as Diskmanage.pm get_disks writes it (``mounted`` only when set, ``osdid-list`` null without
    an OSD, ``bluestore`` and ``osdencrypted`` only with one)."""
    src = d.disk
    ssd_like = src.get("type", "ssd") in ("ssd", "nvme")
    row: dict[str, Any] = {
        "devpath": src["devpath"],
        "gpt": 1,
        "type": src.get("type", "ssd"),
        "size": int(src.get("size", 0)),
        "model": src.get("model", "SAMSUNG MZQL2960HCJR-00A07"),
        "serial": src.get("serial", "S64FNE0R" + str(src["devpath"]).rsplit("/", 1)[-1][-4:].upper()),
        "vendor": src.get("vendor", "ATA" if not str(src["devpath"]).startswith("/dev/nvme") else "unknown"),
        "wwn": src.get("wwn", "unknown"),
        "health": src.get("health", "PASSED"),
        "wearout": src.get("wearout", 97) if ssd_like else "N/A",
        "rpm": int(src.get("rpm", 0 if ssd_like else 7200)),
        "by_id_link": f"/dev/disk/by-id/{'nvme' if 'nvme' in str(src['devpath']) else 'ata'}-{src.get('serial')}",
        "osdid": d.osdid,
        "osdid-list": [d.osdid] if d.osdid >= 0 else None,
    }
    used = _USED.get(d.use)
    if used:
        row["used"] = used
    if d.use == "mounted":
        row["mounted"] = 1
    if d.osdid >= 0:
        row.update(bluestore=1, osdencrypted=0)
    return row
