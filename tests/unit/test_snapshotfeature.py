"""What PVE refuses before it takes a snapshot (analysis/snapshotfeature.py), on configs shaped like
GET .../config answers: pve-guest-common AbstractConfig.pm __snapshot_prepare, the guests' has_feature and
pve-storage's volume_has_feature per plugin."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.snapshotfeature import rollback_refusals, snapshot_refusals, taken_after
from pve_steward.pve.guestconfig import parse_guest_config
from tests.unit.pve_fixtures import lxc_config, qemu_config

TYPES = {
    "local": "dir",
    "local-lvm": "lvmthin",
    "local-zfs": "zfspool",
    "ceph-vm": "rbd",
    "san-lvm": "lvm",
    "nfs-vm": "nfs",
    "pbs": "pbs",
}


def refusals(raw: dict[str, Any], gtype: str = "qemu", with_ram: bool = False) -> list[str]:
    return snapshot_refusals(parse_guest_config(raw, 100, gtype), raw, TYPES, with_ram)  # type: ignore[arg-type]


def test_snapshot_capable_volumes_on_every_plugin_that_has_the_feature() -> None:
    raw = qemu_config(
        "web",
        scsi0="local-lvm:vm-100-disk-0,size=32G",
        scsi1="local-zfs:vm-100-disk-1,size=8G",
        scsi2="ceph-vm:vm-100-disk-2,size=8G",
        scsi3="local:100/vm-100-disk-3.qcow2,size=8G",  # Plugin.pm: qcow2 on a file storage
        scsi4="san-lvm:vm-100-disk-4.qcow2,size=8G",  # LVMPlugin.pm with snapshot-as-volume-chain (PVE 9)
        ide2="local:iso/debian.iso,media=cdrom",  # a CD-ROM is skipped (QemuConfig.pm has_feature)
        unused0="local:100/vm-100-disk-9.raw",  # unused volumes are not walked (foreach_volume)
    )
    assert refusals(raw) == []


def test_raw_on_a_file_storage_thick_lvm_and_a_passthrough_disk_have_no_snapshot_feature() -> None:
    raw = qemu_config(
        "db",
        scsi0="local-lvm:vm-100-disk-0,size=32G",
        scsi1="nfs-vm:100/vm-100-disk-1.raw,size=8G",
        scsi2="san-lvm:vm-100-disk-2,size=8G",
        scsi3="/dev/disk/by-id/ata-WDC_1234,size=1T",  # Storage.pm volume_has_feature: undef for a path
    )
    assert refusals(raw) == [
        "these volumes cannot be snapshotted: scsi1 on nfs-vm (nfs), scsi2 on san-lvm (lvm), scsi3 (a host path)"
    ]


def test_a_containers_bind_mount_blocks_its_snapshot() -> None:
    """pve-container LXC/Config.pm has_feature walks every mount point (backup_only only for vzdump)."""
    raw = lxc_config("files", rootfs="local-zfs:subvol-100-disk-0,size=8G", mp0="/srv/share,mp=/share")
    assert refusals(raw, "lxc") == ["these volumes cannot be snapshotted: mp0 (a host path)"]
    assert refusals(lxc_config("files", rootfs="local-zfs:subvol-100-disk-0,size=8G"), "lxc") == []


def test_a_template_and_ram_that_cannot_be_saved() -> None:
    """__snapshot_prepare: 'you can't take a snapshot if it's a template'; check_non_migratable_resources with the
    state asked refuses amd-sev, intel-tdx and virtiofs, without it nothing."""
    template = qemu_config("tmpl", scsi0="ceph-vm:base-100-disk-0,size=8G", template=1)
    assert refusals(template) == ["it is a template (PVE: you can't take a snapshot if it's a template)"]
    sev = qemu_config("sev", scsi0="ceph-vm:vm-100-disk-0,size=8G", virtiofs0="share1", **{"amd-sev": "type=std"})
    assert refusals(sev, with_ram=True) == ["its RAM cannot be saved with amd-sev, virtiofs"]
    assert refusals(sev) == []


STORAGES = {
    "local-zfs": {"storage": "local-zfs", "type": "zfspool"},
    "ceph-vm": {"storage": "ceph-vm", "type": "rbd"},
    "san-lvm": {"storage": "san-lvm", "type": "lvm", "snapshot-as-volume-chain": 1},
    "nfs-vm": {"storage": "nfs-vm", "type": "nfs", "snapshot-as-volume-chain": 1},
    "local": {"storage": "local", "type": "dir"},
}


def rollback(snap: dict[str, Any], later: dict[str, dict[str, Any]], template: bool = False) -> list[str]:
    parsed = {n: parse_guest_config(c, 100, "qemu") for n, c in later.items()}
    return rollback_refusals(template, parse_guest_config(snap, 100, "qemu"), parsed, STORAGES)


def test_zfs_and_volume_chains_roll_back_only_to_the_most_recent_snapshot() -> None:
    """ZFSPoolPlugin.pm / LVMPlugin.pm / Plugin.pm (snapshot-as-volume-chain) volume_rollback_is_possible: "can't
    rollback, 's1' is not most recent snapshot"; RBD and qcow2 on a plain directory roll back to any."""
    zfs = qemu_config("db", scsi0="local-zfs:vm-100-disk-0,size=32G", ide2="none,media=cdrom")
    assert rollback(zfs, {"s2": zfs, "s3": zfs}) == [
        "scsi0 (local-zfs:vm-100-disk-0) can only go back to its most recent snapshot on zfspool storage local-zfs: "
        "delete the newer snapshot(s) s2, s3 first"
    ]
    assert rollback(zfs, {}) == []
    # a disk added after s1 holds no snapshot s1: s2 holds the new disk only, so s1's disk has no newer snapshot
    added = qemu_config("db", scsi1="local-zfs:vm-100-disk-1,size=8G")
    assert rollback(zfs, {"s2": added}) == []
    chained = qemu_config("db", scsi0="san-lvm:vm-100-disk-0.qcow2,size=8G", scsi1="nfs-vm:100/vm-100-disk-1.qcow2")
    assert len(rollback(chained, {"s2": chained})) == 2
    free = qemu_config("db", scsi0="ceph-vm:vm-100-disk-0,size=8G", scsi1="local:100/vm-100-disk-1.qcow2")
    assert rollback(free, {"s2": free}) == []


def test_a_template_or_a_host_path_is_never_rolled_back() -> None:
    raw = qemu_config("db", scsi0="ceph-vm:vm-100-disk-0,size=8G", scsi1="/dev/disk/by-id/ata-X")
    assert rollback(raw, {}) == [
        "scsi1 is a host path (PVE: snapshot rollback file/device '/dev/disk/by-id/ata-X' is not possible)"
    ]
    assert rollback(raw, {}, template=True) == ["it is a template (PVE: you can't rollback if vm is a template)"]


def test_snapshots_taken_after_follow_the_parent_links_and_the_clock() -> None:
    """Two snapshots taken within one second tie on snaptime; the parent links still order them."""
    rows = [
        {"name": "a", "snaptime": 100},
        {"name": "b", "snaptime": 100, "parent": "a"},
        {"name": "c", "snaptime": 100, "parent": "b"},
        {"name": "other", "snaptime": 200, "parent": "a"},  # another branch, taken later
    ]
    assert taken_after("a", rows) == ["b", "c", "other"]
    assert taken_after("b", rows) == ["c", "other"]
    assert taken_after("c", rows) == ["other"]
    assert taken_after("other", rows) == []
