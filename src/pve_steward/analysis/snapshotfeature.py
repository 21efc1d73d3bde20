"""Whether PVE will take a snapshot of a guest: what __snapshot_prepare refuses before it takes one.

snapshot_create's preview states these as checks, so a confirmed snapshot does not fail in its task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import GuestConfig, Volume

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
        for v in cfg.volumes
        if not v.unused and not (cfg.type == "qemu" and v.cdrom) and not _has_snapshot(v, storage_types)
    ]
    if lacking:
        out.append(f"these volumes cannot be snapshotted: {', '.join(lacking)}")
    return out


def _has_snapshot(v: Volume, storage_types: Mapping[str, str]) -> bool:
    if v.storage is None:  # a host path (passthrough disk, bind or device mount): volume_has_feature returns undef
        return False
    return storage_types.get(v.storage) in _ANY_FORMAT or v.volid.endswith(".qcow2")
