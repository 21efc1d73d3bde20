"""Each migration rule of issue 15 against PVE's code, positive and negative, on fixtures shaped like PVE's answers."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.pverules import all_rules
from tests.unit.pve_fixtures import cluster_status, data, guest_row, lxc_config, node_row, qemu_config, storage_cfg

AMD = {"cpuinfo": {"model": "AMD EPYC 7302P", "cpus": 32}, "pveversion": "pve-manager/9.1.2/abc"}
STORAGES = [
    storage_cfg("ceph-vm", "rbd"),
    storage_cfg("local-lvm", "lvmthin"),
    storage_cfg("local", "dir", "iso,vztmpl,backup"),
    storage_cfg("local-zfs", "zfspool"),
    storage_cfg("isos", "nfs", "iso"),
    storage_cfg("vmonly", "nfs", "images"),
    storage_cfg("local-dir", "dir"),
]


def _data(guests: list[tuple[dict[str, Any], dict[str, Any]]], **kw: Any):  # type: ignore[no-untyped-def]
    nodes = ("pve1", "pve2", "pve3")
    base: dict[str, Any] = {
        "cluster_status": cluster_status(dict.fromkeys(nodes, True)),
        "resources": [node_row(n) for n in nodes] + [g for g, _ in guests],
        "storage_config": STORAGES,
        "configs": {g["vmid"]: c for g, c in guests},
        "node_status": dict.fromkeys(nodes, AMD),
    }
    base.update(kw)
    return data(**base)


def one(config: dict[str, Any], status: str = "running", vmid: int = 100, **kw: Any):  # type: ignore[no-untyped-def]
    return assess(_data([(guest_row(vmid, "pve1", status=status), config)], **kw), vmid, allow_downtime=False)


def codes(m) -> set[str]:  # type: ignore[no-untyped-def]
    return {r.code for r in m.reasons if r.blocking} | {r.code for t in m.targets for r in t.reasons if r.blocking}


def pre(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "running": 1,
        "allowed_nodes": ["pve2", "pve3"],
        "not_allowed_nodes": {},
        "local_disks": [],
        "local_resources": [],
        "mapped-resources": [],
        "mapped-resource-info": {},
    }
    body.update(kw)
    return body


# ---------------------------------------------------------------- item 2: cloud-init


def test_cloudinit_drive_on_local_storage_is_generated_not_media() -> None:
    cfg = qemu_config("ci", ide2="local-lvm:vm-100-cloudinit,media=cdrom")
    m = one(cfg)
    assert m.verdict == "live" and "MIGRATE_LOCAL_CDROM" not in codes(m)
    disk = {"volid": "local-lvm:vm-100-cloudinit", "cdrom": 1, "is_cloudinit": 1, "drivename": "ide2", "size": 4 << 20}
    checked = one(cfg, preconditions={100: pre(local_disks=[disk])})
    assert checked.verdict == "live" and checked.basis == "config+pve"
    assert not [r for r in checked.reasons if r.code == "MIGRATE_PVE_DISAGREES"]
    iso = one(qemu_config("iso", ide2="local:iso/debian.iso,media=cdrom"))
    assert iso.verdict == "blocked" and "MIGRATE_LOCAL_CDROM" in codes(iso)


# ---------------------------------------------------------------- item 15: snapshots on running VMs


def test_running_vm_with_local_snapshot_is_not_live() -> None:
    cfg = qemu_config("snap", scsi0="local-zfs:vm-100-disk-0,size=8G", parent="before-upgrade")
    m = one(cfg)
    assert m.verdict == "blocked" and {"MIGRATE_RESTART_REQUIRED"} <= codes(m)
    assert any(r.code == "MIGRATE_NOT_PROVABLE" and r.live_only for r in m.reasons)
    stopped = one(cfg, status="stopped")
    assert stopped.verdict == "offline"  # zfspool snapshots move offline
    referenced = {"volid": "local-zfs:vm-100-disk-0", "drivename": "scsi0", "referenced_in_snapshot": {"s": 1}}
    told = one(cfg, preconditions={100: pre(local_disks=[referenced])})
    assert any(r.code == "MIGRATE_LIVE_UNSUPPORTED" for r in told.reasons) and told.verdict == "blocked"
    downtime = assess(_data([(guest_row(100, "pve1"), cfg)]), 100, allow_downtime=True)
    assert downtime.verdict == "offline"  # stop, move, start
    not_referenced = {"volid": "local-zfs:vm-100-disk-0", "drivename": "scsi0"}
    assert one(cfg, preconditions={100: pre(local_disks=[not_referenced])}).verdict == "live"
    job = {"id": "100-0", "guest": 100, "target": "pve3", "type": "local", "schedule": "*/15"}
    replicated = one(cfg, replication_jobs=[job])
    assert replicated.verdict == "live" and replicated.movable_to() == ["pve3"]
    # a disabled job still makes its target's volumes replicated (find_local_replication_job does not look)
    paused = one(cfg, replication_jobs=[{**job, "disable": 1}])
    assert paused.verdict == "live" and paused.movable_to() == ["pve3"]
    # replicate=0 leaves the disk out of the job (get_replicatable_volumes): no live move with its snapshot
    excluded = {**cfg, "scsi0": cfg["scsi0"] + ",replicate=0"}
    kept_out = one(excluded, replication_jobs=[job])
    assert kept_out.verdict == "blocked" and any(
        r.code == "MIGRATE_NOT_PROVABLE" and r.live_only for r in kept_out.reasons
    )


# ---------------------------------------------------------------- item 16: linked clones


def test_linked_clone_and_used_base_on_local_storage_block() -> None:
    clone = one(qemu_config("c", scsi0="local-zfs:base-133-disk-0/vm-100-disk-0,size=8G"), status="stopped")
    assert clone.verdict == "blocked" and "MIGRATE_LINKED_CLONE" in codes(clone)
    shared_clone = one(qemu_config("c", scsi0="ceph-vm:base-133-disk-0/vm-100-disk-0,size=8G"), status="stopped")
    assert shared_clone.verdict == "offline"
    tpl = (
        guest_row(133, "pve1", status="stopped", template=True),
        qemu_config("t", template=1, scsi0="local-zfs:base-133-disk-0"),
    )
    user = (guest_row(134, "pve1", status="stopped"), qemu_config("u", scsi0="local-zfs:base-133-disk-0/vm-134-disk-0"))
    used = assess(_data([tpl, user]), 133)
    assert used.verdict == "blocked" and "MIGRATE_LINKED_CLONE" in codes(used)
    assert assess(_data([tpl]), 133).verdict == "offline"
    dir_clone = one(
        qemu_config("d", scsi0="local-dir:133/base-133-disk-0.qcow2/100/vm-100-disk-0.qcow2"), status="stopped"
    )
    assert "MIGRATE_LINKED_CLONE" in codes(dir_clone)


def test_volume_owned_by_another_guest_blocks() -> None:
    m = one(qemu_config("o", scsi1="local-lvm:vm-999-disk-0,size=8G"), status="stopped")
    assert "MIGRATE_LOCAL_DISK_UNSUPPORTED" in codes(m) and "owned by another guest" in str(m.blocking)
    # an ISO attached as a disk belongs to no guest: PVE dies on it too ('if !$owner || $owner != $vmid')
    iso = one(qemu_config("i", scsi1="local:iso/tools.iso,size=300M"), status="stopped")
    assert iso.verdict == "blocked" and "owned by no guest" in str(iso.blocking)
    # a dir image's owner is its directory's number (DirPlugin parse_volname), whatever the file is called
    named = one(qemu_config("n", scsi1="local-dir:100/data.raw,size=8G"), status="stopped")
    assert named.verdict == "offline" and not codes(named)


def test_a_storage_the_source_node_lacks_blocks() -> None:
    """PVE checks each volume's storage on the source node first (QemuMigrate prepare, storage_check_enabled)."""
    limited = [*STORAGES, storage_cfg("nas", "nfs", nodes="pve2,pve3", shared=1)]
    m = one(qemu_config("s", scsi1="nas:100/vm-100-disk-1.qcow2,size=8G"), status="stopped", storage_config=limited)
    assert m.verdict == "blocked" and "not available on the source node pve1" in str(m.blocking)
    everywhere = [*STORAGES, storage_cfg("nas", "nfs", nodes="pve1,pve2,pve3", shared=1)]
    ok = one(qemu_config("s", scsi1="nas:100/vm-100-disk-1.qcow2,size=8G"), status="stopped", storage_config=everywhere)
    assert ok.verdict == "offline" and not codes(ok)


# ---------------------------------------------------------------- item 17: mapped resources


MAPPINGS = {
    "pci": [{"id": "gpu", "map": ["node=pve1,path=0000:41:00.0", "node=pve3,path=0000:41:00.0"]}],
    "usb": [{"id": "dongle", "map": ["node=pve1,id=1234:5678", "node=pve2,id=1234:5678", "node=pve3,id=1234:5678"]}],
    "dir": [{"id": "share", "map": ["node=pve1,path=/srv", "node=pve2,path=/srv", "node=pve3,path=/srv"]}],
}


def test_mapped_devices_move_offline_where_the_mapping_exists() -> None:
    stopped = one(qemu_config("m", hostpci0="mapping=gpu,pcie=1"), status="stopped", mappings=MAPPINGS)
    assert stopped.verdict == "offline" and stopped.movable_to() == ["pve3"]
    assert "MIGRATE_MAPPED_DEVICE" in {r.code for t in stopped.targets for r in t.reasons}
    usb = one(qemu_config("u", usb0="mapping=dongle"), mappings=MAPPINGS)
    assert usb.verdict == "blocked" and "MIGRATE_RESTART_REQUIRED" in codes(usb)  # USB mappings are never live
    capable = {**MAPPINGS, "pci": [{**MAPPINGS["pci"][0], "live-migration-capable": 1}]}
    assert one(qemu_config("l", hostpci0="mapping=gpu"), mappings=capable).movable_to() == ["pve3"]
    virtiofs = one(qemu_config("v", virtiofs0="dirid=share"), status="stopped", mappings=MAPPINGS)
    assert virtiofs.verdict == "offline"
    assert one(qemu_config("v", virtiofs0="share"), mappings=MAPPINGS).verdict == "blocked"  # no live virtiofs


def test_mapped_devices_with_pve_precondition_agree() -> None:
    body = pre(
        running=0,
        local_resources=["usb0"],  # PVE lists mapped USB as a local resource, then drops it from the blockers
        **{
            "mapped-resources": ["usb0"],
            "mapped-resource-info": {"usb0": {"name": "dongle"}},
            "not_allowed_nodes": {"pve2": {"unavailable-resources": ["usb0"]}},
            "allowed_nodes": ["pve3"],
        },
    )
    m = one(qemu_config("u", usb0="mapping=dongle"), status="stopped", preconditions={100: body})
    assert m.verdict == "offline" and m.movable_to() == ["pve3"]
    assert not [r for r in m.reasons if r.code == "MIGRATE_PVE_DISAGREES"]


# ---------------------------------------------------------------- item 18: amd-sev / intel-tdx


def test_confidential_guests_cannot_move_live() -> None:
    for feature in ("amd-sev", "intel-tdx"):
        cfg = qemu_config("c", **{feature: "type=std"})
        m = one(cfg)
        assert m.verdict == "blocked" and any(r.code == "MIGRATE_LIVE_UNSUPPORTED" for r in m.reasons)
        assert one(cfg, status="stopped").verdict == "offline"


def test_clipboard_vnc_by_pve_version() -> None:
    cfg = qemu_config("c", vga="std,clipboard=vnc")
    pve8 = {"cpuinfo": AMD["cpuinfo"], "pveversion": "pve-manager/8.4.1/abc"}
    old = one(cfg, node_status=dict.fromkeys(("pve1", "pve2", "pve3"), pve8))
    assert any(r.code == "MIGRATE_LIVE_UNSUPPORTED" for r in old.reasons)
    new = one(cfg)
    assert any(r.code == "MIGRATE_NOT_PROVABLE" for r in new.reasons) and new.verdict == "blocked"
    assert one(cfg, preconditions={100: pre()}).verdict == "live"  # PVE says the machine is new enough
    assert one(cfg, status="stopped").verdict == "offline"


# ---------------------------------------------------------------- item 19: storage content types


def test_storage_must_carry_the_content_type() -> None:
    vm_on_iso = one(qemu_config("v", scsi0="isos:vm-100-disk-0,size=8G"))
    assert "MIGRATE_STORAGE_CONTENT" in codes(vm_on_iso)
    assert one(qemu_config("v", scsi0="vmonly:vm-100-disk-0,size=8G")).verdict == "live"
    ct = assess(
        _data([(guest_row(200, "pve1", "lxc", status="stopped"), lxc_config("c", rootfs="vmonly:vm-200-disk-0"))]), 200
    )
    assert "MIGRATE_STORAGE_CONTENT" in codes(ct)
    ok = assess(_data([(guest_row(200, "pve1", "lxc", status="stopped"), lxc_config("c"))]), 200)
    assert ok.verdict == "offline"


# ---------------------------------------------------------------- items 14, 20: HA


def test_ha_managed_reason_and_blocking_ha_resources() -> None:
    ha = {"ha_resources": [{"sid": "vm:100", "state": "started", "type": "vm"}]}
    m = one(qemu_config("h"), **ha)
    assert "MIGRATE_HA_MANAGED" in {r.code for r in m.reasons}
    assert "MIGRATE_HA_MANAGED" not in {r.code for r in one(qemu_config("n")).reasons}
    blocking = {"pve2": {"blocking-ha-resources": [{"sid": "vm:101", "cause": "resource-affinity"}]}}
    b = one(qemu_config("h"), preconditions={100: pre(not_allowed_nodes=blocking, allowed_nodes=["pve3"])}, **ha)
    assert b.movable_to() == ["pve3"]
    assert "MIGRATE_HA_AFFINITY" in {r.code for t in b.targets for r in t.reasons}


def test_ha_moves_a_vm_with_local_devices_by_force() -> None:
    """The LRM migrates with force (pve-ha-manager PVEVM.pm migrate, bug #2241), and QemuMigrate prepare lets
    forced local devices through, running or not (AbstractMigrate sets running only after prepare); QEMU still
    refuses PCI passthrough live. Without HA the devices pin the VM, as before."""
    from pve_steward.analysis.migration.findings import ha_problems

    ha = {"ha_resources": [{"sid": "vm:100", "state": "started", "type": "vm"}]}
    d_serial = _data([(guest_row(100, "pve1", status="stopped"), qemu_config("s", serial0="/dev/ttyS0"))], **ha)
    serial = assess(d_serial, 100)
    assert serial.verdict == "offline" and not codes(serial)
    assert [r.code for r in serial.reasons if not r.blocking][:1] == ["MIGRATE_PASSTHROUGH"]
    assert ha_problems(d_serial, serial, failover=False) == []
    assert "serial0" in " ".join(ha_problems(d_serial, serial))  # recovery starts it where the device may be missing
    usb = one(qemu_config("u", usb0="host=046d:c52b"), **ha)
    assert usb.verdict == "live"
    d_pci = _data([(guest_row(100, "pve1"), qemu_config("p", hostpci0="0000:41:00.0"))], **ha)
    pci = assess(d_pci, 100, allow_downtime=False)
    assert pci.verdict == "blocked" and any(r.code == "MIGRATE_LIVE_UNSUPPORTED" and r.live_only for r in pci.reasons)
    assert any("cannot move live" in p for p in ha_problems(d_pci, pci, failover=False))
    assert one(qemu_config("n", serial0="/dev/ttyS0"), status="stopped").verdict == "blocked"  # not HA: pinned


def test_an_ha_guests_verdict_follows_its_ha_rules_without_pves_precondition() -> None:
    """A migrate of an HA guest is an HA request: a strict node rule confines it and a negative partner's node is
    refused (Manager.pm queue_resource_motion). Containers and tokens without VM.Migrate get no precondition to
    say so, so the verdict applies the rules itself; a guest with such rules shares no verdict."""
    pin = {"rule": "pin", "type": "node-affinity", "resources": "ct:200", "nodes": "pve1,pve3", "strict": 1}
    apart = {"rule": "apart", "type": "resource-affinity", "affinity": "negative", "resources": "vm:100,vm:300"}
    ha = [
        {"sid": "vm:100", "state": "started"},
        {"sid": "ct:200", "state": "started"},
        {"sid": "vm:300", "state": "started"},
    ]
    status = [{"type": "service", "sid": "vm:300", "node": "pve2", "crm_state": "started", "state": "started"}]
    ct = lxc_config("c", rootfs="ceph-vm:vm-200-disk-0,size=8G")
    guests = [
        (guest_row(100, "pve1"), qemu_config("v")),
        (guest_row(101, "pve1"), qemu_config("twin")),  # alike, but not HA: every target
        (guest_row(200, "pve1", status="stopped", gtype="lxc"), ct),
    ]
    d = _data(guests, ha_resources=ha, ha_rules=[pin, apart], ha_status=status)
    assert assess(d, 100).movable_to() == ["pve3"]
    assert assess(d, 101).movable_to() == ["pve2", "pve3"]
    container = assess(d, 200)
    assert container.movable_to() == ["pve3"]
    assert "strict node affinity allows only pve1, pve3" in str(
        [r.detail for t in container.targets for r in t.reasons]
    )


def test_an_ha_service_in_error_state_cannot_move() -> None:
    """PVE refuses the HA migrate request of a service in error state (pve-ha-manager API2/HA/Resources.pm
    check_service_state); any other CRM state hands the move to HA, and guests alike in every other respect
    do not share the verdict."""
    from pve_steward.analysis.health import diagnose
    from pve_steward.analysis.thresholds import Thresholds

    ha = [{"sid": f"vm:{v}", "state": "started", "type": "vm"} for v in (100, 101)]
    status = [
        {"type": "service", "sid": "vm:100", "state": "error", "crm_state": "error", "node": "pve1"},
        {"type": "service", "sid": "vm:101", "state": "started", "crm_state": "started", "node": "pve1"},
    ]
    guests = [(guest_row(v, "pve1"), qemu_config("h", scsi0=f"ceph-vm:vm-{v}-disk-0,size=8G")) for v in (100, 101)]
    d = _data(guests, ha_resources=ha, ha_status=status)
    broken, fine = assess(d, 100), assess(d, 101)
    assert broken.verdict == "blocked" and "MIGRATE_HA_ERROR" in codes(broken)
    assert "ha-manager set vm:100 --state disabled" in next(r.detail for r in broken.reasons if r.blocking)
    assert fine.verdict == "live" and not codes(fine)
    # the verdicts shared by situation, as the health check takes them: still one verdict per state
    found = diagnose(_data(guests, ha_resources=ha, ha_status=status), Thresholds(), areas=["migration"], limit=None)
    assert not [f for f in found.findings if f.code == "HA_GUEST_NOT_MIGRATABLE"]  # HA_RESOURCE_ERROR says it


def test_every_rule_names_its_pve_source() -> None:
    rules = {r.id: r for r in all_rules()}
    for rule_id in ("migrate.cdrom", "migrate.local-snapshots", "migrate.local-volume", "migrate.mapped-resources"):
        assert rules[rule_id].pve and "src/PVE" in rules[rule_id].pve
    assert rules["capacity.n-plus-1"].ours.endswith("_n_plus_1")


def test_snapshot_sections_settle_which_volumes_are_referenced() -> None:
    """With the snapshot sections read (GET config?snapshot=), the snapshot rule is exact, not 'not provable'."""
    cfg = qemu_config("s", scsi0="local-lvm:vm-100-disk-0,size=8G", scsi1="local-lvm:vm-100-disk-1,size=8G", parent="a")
    section = {"scsi0": "local-lvm:vm-100-disk-0,size=8G", "snaptime": 1}
    m = one(cfg, status="stopped", snapshot_configs={100: {"a": section}})
    assert [(r.code, r.keys) for r in m.reasons if r.blocking] == [("MIGRATE_LOCAL_DISK_UNSUPPORTED", ["scsi0"])]
    later = one(cfg, status="stopped", snapshot_configs={100: {"a": {"snaptime": 1}}})
    assert later.verdict == "offline"  # both disks were added after the snapshot: nothing references them
    zfs = qemu_config("z", scsi0="local-zfs:vm-100-disk-0,size=8G", parent="a")
    live = one(zfs, snapshot_configs={100: {"a": {"scsi0": "local-zfs:vm-100-disk-0,size=8G"}}})
    assert [r.code for r in live.reasons if r.live_only] == ["MIGRATE_LIVE_UNSUPPORTED"]


def test_volumes_only_a_snapshot_holds_are_checked_as_pve_checks_them() -> None:
    """QemuServer.pm foreach_volid hands QemuMigrate scan_local_volumes every volume of every snapshot section
    too: a local ISO a snapshot still holds, or a disk only a snapshot references, decides the move."""
    iso = "local:iso/debian.iso,media=cdrom,size=600M"
    cfg = qemu_config("s", scsi0="ceph-vm:vm-100-disk-0,size=8G", ide2="none,media=cdrom", parent="install")
    m = one(cfg, snapshot_configs={100: {"install": {"ide2": iso, "scsi0": "ceph-vm:vm-100-disk-0,size=8G"}}})
    assert m.verdict == "blocked" and [r.code for r in m.reasons if r.blocking] == ["MIGRATE_LOCAL_CDROM"]
    detail = next(r.detail for r in m.reasons if r.blocking)
    assert "referenced in snapshot - install" in detail and "eject" not in detail
    shared_iso = {"ide2": "isos:iso/debian.iso,media=cdrom", "scsi0": "ceph-vm:vm-100-disk-0,size=8G"}
    assert one(cfg, snapshot_configs={100: {"install": shared_iso}}).verdict == "live"
    # a disk only a snapshot references: lvm-thin refuses snapshots; zfs moves it offline, its bytes counted
    old = {"scsi1": "local-lvm:vm-100-disk-1,size=4G", "scsi0": "ceph-vm:vm-100-disk-0,size=8G"}
    lvm = one(cfg, status="stopped", snapshot_configs={100: {"install": old}})
    assert lvm.verdict == "blocked" and "MIGRATE_LOCAL_DISK_UNSUPPORTED" in codes(lvm)
    zfs = {"scsi1": "local-zfs:vm-100-disk-1,size=4G", "scsi0": "ceph-vm:vm-100-disk-0,size=8G"}
    moved = one(cfg, status="stopped", snapshot_configs={100: {"install": zfs}})
    assert moved.verdict == "offline" and moved.local_disk_bytes == 4 * 1024**3
    # a RAM snapshot's state volume is copied like a disk, without the snapshot rule (QemuMigrate: is_vmstate)
    ram = {"scsi0": "ceph-vm:vm-100-disk-0,size=8G", "vmstate": "local-lvm:vm-100-state-install,size=2G"}
    state = one(cfg, status="stopped", snapshot_configs={100: {"install": ram}})
    assert state.verdict == "offline" and state.local_disk_bytes == 2 * 1024**3
    # a snapshot's storage must exist on the target too (target_storage_check_available)
    limited = [*STORAGES, storage_cfg("nas", "nfs", "iso", nodes="pve1,pve2", shared=1)]
    nas = {"ide2": "nas:iso/x.iso,media=cdrom", "scsi0": "ceph-vm:vm-100-disk-0,size=8G"}
    there = one(cfg, storage_config=limited, snapshot_configs={100: {"install": nas}})
    assert there.movable_to() == ["pve2"]
    # a container's snapshot-only bind mount is ignored (LXC Migrate.pm phase1); its local volume is not
    ct = lxc_config("c", rootfs="ceph-vm:vm-200-disk-0,size=8G", parent="s")
    snap = {"rootfs": "ceph-vm:vm-200-disk-0,size=8G", "mp0": "/srv/x,mp=/x", "mp1": "local-lvm:vm-200-disk-1,mp=/y"}
    row = guest_row(200, "pve1", status="stopped", gtype="lxc")
    got = assess(_data([(row, ct)], snapshot_configs={200: {"s": snap}}), 200)
    assert [r.code for r in got.reasons if r.blocking] == ["MIGRATE_LOCAL_DISK_UNSUPPORTED"]
    assert "mp1" in str(got.blocking) and "mp0" not in str(got.blocking)


def test_volume_names_as_the_storage_plugins_parse_them() -> None:
    from pve_steward.analysis.migration.storage import is_generated_cloudinit, parse_volname

    zfs = parse_volname("zfspool", "base-133-disk-0/vm-134-disk-0")
    assert (zfs.owner, zfs.base, zfs.is_base) == (134, "base-133-disk-0", False)
    assert parse_volname("zfspool", "base-133-disk-0").is_base
    lvm = parse_volname("lvmthin", "vm-134-disk-0")
    assert (lvm.owner, lvm.base) == (134, None)  # LVM names carry no base: PVE cannot tell a clone either
    dir_clone = parse_volname("dir", "133/base-133-disk-0.qcow2/134/vm-134-disk-0.qcow2")
    assert (dir_clone.owner, dir_clone.base, dir_clone.format) == (134, "base-133-disk-0.qcow2", "qcow2")
    assert parse_volname("dir", "iso/debian.iso").vtype == "iso"
    assert is_generated_cloudinit("local-lvm:vm-100-cloudinit") and not is_generated_cloudinit("local:iso/ci.iso")


def test_a_malformed_precondition_is_read_as_saying_nothing() -> None:
    odd = {"running": 1, "local_disks": "x", "local_resources": None, "not_allowed_nodes": []}
    odd["mapped-resource-info"] = 3
    m = one(qemu_config("o"), preconditions={100: odd})
    assert m.verdict == "live" and m.basis == "config+pve"
