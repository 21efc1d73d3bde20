"""Issue 41 item 5: single verdicts where we disagreed with PVE, each as PVE's source decides it."""

from __future__ import annotations

from pve_steward.analysis.checks.sdn import pending_config
from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import storage_cfg
from tests.unit.test_planner import cluster, vm
from tests.unit.test_sdn import _data

T = Thresholds()


def test_aliased_volumes_block_the_move_as_qemu_migrate_does() -> None:
    """Two zfspool storages on one pool: the config references one zvol through both (an unused0 a rescan added),
    so QemuMigrate scan_local_volumes dies 'detected not supported aliased volumes', offline as well as live."""
    d = cluster([vm(100, 4, scsi0="local-zfs:vm-100-disk-0,size=8G", unused0="zfs-copy:vm-100-disk-0")])
    d.storage_config += [
        storage_cfg("local-zfs", "zfspool", pool="rpool/data"),
        storage_cfg("zfs-copy", "zfspool", pool="rpool/data/"),
    ]
    m = assess(d, 100, allow_downtime=True)
    assert m.verdict == "blocked" and [r.code for r in m.blocking] == ["MIGRATE_ALIASED_VOLUME"]
    assert "local-zfs:vm-100-disk-0 and zfs-copy:vm-100-disk-0" in m.blocking[0].detail
    plan = plan_evacuation(d, "src", allow_offline=True)
    assert [(b.vmid, b.code) for b in plan.blockers] == [(100, "MIGRATE_ALIASED_VOLUME")] and plan.steps == []


def test_two_storages_on_different_paths_or_the_same_volid_twice_are_no_alias() -> None:
    d = cluster(
        [
            vm(100, 4, scsi0="dir-a:100/vm-100-disk-0.qcow2,size=8G", unused0="dir-b:100/vm-100-disk-0.qcow2"),
            vm(101, 4, scsi0="dir-a:101/vm-101-disk-0.qcow2,size=8G", scsi1="dir-a:101/vm-101-disk-0.qcow2,size=8G"),
            vm(102, 4, scsi0="dir-a:102/vm-102-disk-0.qcow2,size=8G", unused0="dir-c:102/vm-102-disk-0.qcow2"),
        ]
    )
    d.storage_config += [
        storage_cfg("dir-a", "dir", path="/srv/a"),
        storage_cfg("dir-b", "dir", path="/srv/b"),
        storage_cfg("dir-c", "dir", path="/srv/a/"),  # the same directory, written another way
    ]
    assert assess(d, 100).verdict == "live" and assess(d, 101).verdict == "live"
    assert [r.code for r in assess(d, 102).blocking] == ["MIGRATE_ALIASED_VOLUME"]


def test_unapplied_subnets_are_pending_changes() -> None:
    """pve-network SDN.pm has_pending_changes compares subnets like zones and vnets; Subnets.pm index with
    pending=1 answers pending_config per vnet."""
    subnets = {
        "vnet1": [
            {"type": "subnet", "vnet": "vnet1", "subnet": "zone1-10.0.0.0-24", "cidr": "10.0.0.0/24", "zone": "zone1"},
            {
                "type": "subnet",
                "vnet": "vnet1",
                "subnet": "zone1-10.0.1.0-24",
                "state": "new",
                "pending": {"gateway": "10.0.1.1"},
            },
        ],
        "vnet2": [
            {
                "type": "subnet",
                "vnet": "vnet2",
                "subnet": "zone1-10.0.2.0-24",
                "gateway": "10.0.2.1",
                "state": "changed",
                "pending": {"gateway": "10.0.2.254", "snat": 1},
            }
        ],
    }
    d = _data([], sdn_subnets=subnets, sdn_zones=[], sdn_vnets=[])
    found = [
        (f.subject.kind, f.subject.id, f.evidence["state"], f.evidence["pending_keys"]) for f in pending_config(d, T)
    ]
    assert found == [
        ("sdn_subnet", "zone1-10.0.1.0-24", "new", ["gateway"]),
        ("sdn_subnet", "zone1-10.0.2.0-24", "changed", ["gateway", "snat"]),
    ]
