"""Whether PVE will take a snapshot of a guest: what __snapshot_prepare refuses before it takes one.

snapshot_create's preview states these as checks, so a confirmed snapshot does not fail in its task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import GuestConfig, Volume
from pve_steward.pve.values import flag, integer

# pve-storage plugins' volume_has_feature('snapshot') of a current volume: any format on these types; qcow2 alone
# on file storages (Plugin.pm: dir, nfs, cifs, ...) and on LVM with snapshot-as-volume-chain (LVMPlugin.pm, PVE 9)
_ANY_FORMAT = frozenset({"zfspool", "zfs", "rbd", "lvmthin", "btrfs"})
# QemuMigrate/Helpers.pm check_non_migratable_resources($conf, $state): what a saved RAM state cannot hold
_RAM_BLOCKERS = ("amd-sev", "intel-tdx")


@pve_rule(
    "snapshots.prepare",
    rule="PVE refuses a snapshot of a template, one with RAM of a VM using amd-sev, intel-tdx or virtiofs, and "
    "one where a volume (a VM's: not CD-ROMs; a container's: every mount point) lacks the snapshot feature: any "
    "format on ZFS, RBD, LVM-thin, Btrfs, ZFS over iSCSI; qcow2 on file storages and LVM volume chains; never a "
    "host path.",
    pve="pve-guest-common src/PVE/AbstractConfig.pm __snapshot_prepare; qemu-server src/PVE/QemuConfig.pm "
    "has_feature + src/PVE/QemuMigrate/Helpers.pm check_non_migratable_resources; pve-container "
    "src/PVE/LXC/Config.pm has_feature; pve-storage src/PVE/Storage.pm volume_has_feature + plugins",
)
def snapshot_refusals(
    cfg: GuestConfig, raw: Mapping[str, Any], storage_types: Mapping[str, str], with_ram: bool
) -> list[str]:
    """Why PVE would refuse this snapshot, in the order it checks; empty when it would take it."""
    out = []
    if cfg.template:
        out.append("it is a template (PVE: you can't take a snapshot if it's a template)")
    if with_ram and cfg.type == "qemu":
        blockers = [k for k in _RAM_BLOCKERS if raw.get(k)]
        blockers += ["virtiofs"] if any(k.startswith("virtiofs") for k in cfg.local_devices) else []
        if blockers:
            out.append(f"its RAM cannot be saved with {', '.join(blockers)}")
    lacking = [
        f"{v.key} on {v.storage} ({storage_types.get(v.storage, 'unknown')})" if v.storage else f"{v.key} (a host path)"
        for v in _walked(cfg)
        if not _has_snapshot(v, storage_types)
    ]
    if lacking:
        out.append(f"these volumes cannot be snapshotted: {', '.join(lacking)}")
    return out


def _walked(cfg: GuestConfig) -> list[Volume]:
    """The volumes has_feature and __snapshot_rollback_vol_possible walk: no unused ones (foreach_volume), a VM's
    CD-ROMs left out (QemuConfig.pm drive_is_cdrom)."""
    return [v for v in cfg.volumes if not v.unused and not (cfg.type == "qemu" and v.cdrom)]


def _has_snapshot(v: Volume, storage_types: Mapping[str, str]) -> bool:
    if v.storage is None:  # a host path (passthrough disk, bind or device mount): volume_has_feature returns undef
        return False
    return storage_types.get(v.storage) in _ANY_FORMAT or v.volid.endswith(".qcow2")


# pve-storage volume_rollback_is_possible: these plugins roll a volume back only to its most recent snapshot
_LINEAR = frozenset({"zfspool", "zfs", "lvm"})


@pve_rule(
    "snapshots.rollback",
    rule="PVE refuses a rollback of a template, of a snapshot holding a host path, and on ZFS, thick LVM and "
    "storages with snapshot-as-volume-chain to any but a volume's most recent snapshot (CD-ROMs aside; "
    "replication snapshots are removed first).",
    pve="pve-guest-common src/PVE/AbstractConfig.pm snapshot_rollback; qemu-server src/PVE/QemuConfig.pm / "
    "pve-container src/PVE/LXC/Config.pm __snapshot_rollback_vol_possible; pve-storage src/PVE/Storage.pm "
    "volume_rollback_is_possible + ZFSPoolPlugin.pm, LVMPlugin.pm, Plugin.pm",
)
def rollback_refusals(
    template: bool, snap: GuestConfig, later: Mapping[str, GuestConfig], storages: Mapping[str, Any]
) -> list[str]:
    """Why PVE would refuse to roll back to a snapshot (its config ``snap``), given the snapshots taken
    after it (``later``: name -> config) and the storage definitions by id; empty when it would roll back."""
    if template:
        return ["it is a template (PVE: you can't rollback if vm is a template)"]
    out = []
    for v in _walked(snap):
        if v.storage is None:
            out.append(f"{v.key} is a host path (PVE: snapshot rollback file/device '{v.volid}' is not possible)")
            continue
        scfg = storages.get(v.storage) or {}
        if scfg.get("type") not in _LINEAR and not flag(scfg.get("snapshot-as-volume-chain")):
            continue
        newer = sorted(n for n, c in later.items() if any(w.volid == v.volid and not w.unused for w in c.volumes))
        if newer:
            out.append(
                f"{v.key} ({v.volid}) can only go back to its most recent snapshot on {scfg.get('type')} storage "
                f"{v.storage}: delete the newer snapshot(s) {', '.join(newer)} first"
            )
    return out


def taken_after(name: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The snapshots of a ``GET .../snapshot`` list taken after ``name``: its descendants by ``parent``, and any with
    a later ``snaptime`` (whole seconds: two snapshots taken within one second tie)."""
    parent = {str(r.get("name")): str(r.get("parent") or "") for r in rows}
    when = {str(r.get("name")): integer(r.get("snaptime")) or 0 for r in rows}

    def descends(n: str) -> bool:
        seen = set()
        while n and n not in seen:
            seen.add(n)
            n = parent.get(n, "")
            if n == name:
                return True
        return False

    return sorted(n for n in parent if n != name and (when[n] > when.get(name, 0) or descends(n)))
