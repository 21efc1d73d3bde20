"""Storage facts a migration depends on, read from the storage config as pve-storage reads it.

Shared or local, enabled on a node, which content types a storage carries, and what a volume
name says: its content type, its owner, its format, and whether it is a linked clone of a base
image (``parse_volname`` of the storage plugins).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.storagecfg import enabled_on, is_shared

_DIR_CLONE = re.compile(r"^(\d+)/([^/\s]+)/(\d+)/([^/\s]+)$")
_DIR_IMAGE = re.compile(r"^(\d+)/([^/\s]+)$")
_ZFS_RBD = re.compile(r"^(?:((?:base|basevol)-(\d+)-\S+)/)?((base|basevol|vm|subvol)-(\d+)-\S+)$")
_LVM = re.compile(r"^((vm|base)-(\d+)-\S+)$")
_ANY_OWNER = re.compile(r"(?:^|/)(?:vm|base|subvol|basevol)-(\d+)-")
_TYPED_DIRS = {"iso": "iso", "vztmpl": "vztmpl", "backup": "backup", "snippets": "snippets", "import": "import"}
_CLOUDINIT = re.compile(r"vm-\d+-cloudinit")


@dataclass(frozen=True, slots=True)
class VolName:
    """What ``parse_volname`` returns for a volume: content type, owner, base image, format."""

    vtype: str
    owner: int | None
    base: str | None  # the base image of a linked clone
    is_base: bool
    format: str


def parse_volname(stype: str | None, volname: str) -> VolName:
    """The storage plugin's reading of a volume name (pve-storage ``*Plugin.pm parse_volname``)."""
    fmt = "qcow2" if volname.endswith(".qcow2") else "vmdk" if volname.endswith(".vmdk") else "raw"
    head = volname.split("/", 1)[0]
    if head in _TYPED_DIRS and "/" in volname:
        return VolName(_TYPED_DIRS[head], None, None, False, "raw")
    if stype in ("zfspool", "rbd", "zfs"):
        m = _ZFS_RBD.match(volname)
        if m:
            kind = m.group(4)
            fmt = "subvol" if kind in ("subvol", "basevol") else "raw"
            return VolName("images", int(m.group(5)), m.group(1), kind in ("base", "basevol"), fmt)
    elif stype in ("lvm", "lvmthin"):
        m = _LVM.match(volname)
        if m:  # LVM names never carry the base: clones cannot be told from their name
            return VolName("images", int(m.group(3)), None, m.group(2) == "base", fmt)
    else:
        m = _DIR_CLONE.match(volname)
        if m:
            return VolName("images", int(m.group(3)), m.group(2), False, fmt)
        m = _DIR_IMAGE.match(volname)
        if m:
            return VolName("images", int(m.group(1)), None, m.group(2).startswith("base-"), fmt)
    owner = _ANY_OWNER.search(volname)
    return VolName("images", int(owner.group(1)) if owner else None, None, False, fmt)


def is_generated_cloudinit(volid: str) -> bool:
    """QemuMigrate ``scan_local_volumes``: a ``vm-N-cloudinit`` CD-ROM is a generated disk, not media."""
    return _CLOUDINIT.search(volid) is not None


def storage_type(data: ClusterData, storage: str) -> str | None:
    cfg = data.storage_defs.get(storage)
    return None if cfg is None else str(cfg.get("type") or "") or None


@pve_rule(
    "storage.shared",
    rule=(
        "A storage is shared when its config says shared=1, which parse_config sets for every type of"
        " @SHARED_STORAGE (iscsi, nfs, cifs, rbd, cephfs, iscsidirect, glusterfs, zfs, drbd, pbs) and an admin"
        " may set on any other (an LVM on a SAN LUN)."
    ),
    pve="pve-storage src/PVE/Storage/Plugin.pm @SHARED_STORAGE, parse_config",
    codes=("STORAGE_USAGE_HIGH", "STORAGE_SHARED_SINGLE_NODE", "UPGRADE_CONTENT_NONE"),
)
def storage_shared(data: ClusterData, storage: str) -> bool:
    memo = data.memo["shared"]
    if storage not in memo:
        cfg = data.storage_defs.get(storage)
        memo[storage] = cfg is not None and is_shared(cfg)
    return bool(memo[storage])


def shared_flags(data: ClusterData) -> dict[str, bool]:
    """:func:`storage_shared` of every configured storage, for loops over every volume of every guest.

    A storage the config lacks is not shared: ``shared_flags(data).get(storage, False)``.
    """
    memo = data.memo["storage_flags"]
    if "shared" not in memo:
        memo["shared"] = {s: storage_shared(data, s) for s in data.storage_defs}
    return memo["shared"]  # type: ignore[no-any-return]


def storage_on(data: ClusterData, storage: str, node: str) -> bool:
    """``storage_check_enabled``: the storage exists, is not disabled and lists the node (or all nodes)."""
    memo = data.memo["storage_on"]
    key = (storage, node)
    if key not in memo:
        cfg = data.storage_defs.get(storage)
        memo[key] = cfg is not None and enabled_on(cfg, node)
    return bool(memo[key])


def storage_content(data: ClusterData, storage: str) -> frozenset[str] | None:
    """The content types a storage carries; None when the storage config does not say."""
    cfg = data.storage_defs.get(storage)
    if cfg is None or cfg.get("content") is None:
        return None
    return frozenset(c.strip() for c in str(cfg["content"]).split(",") if c.strip())
