"""pvesim keeps each guest's /cluster/resources row and its parsed disks (design record 261204-41): whatever
changes, by whichever path, the kept row is the row built afresh."""

from __future__ import annotations

from typing import Any

import pvesim
from pvesim.api import render
from pvesim.state import Cluster, HAResource


def _rows(cluster: Cluster) -> list[dict[str, Any]]:
    return [render.guest_resource(cluster, g) for g in cluster.guests.values()]


def _fresh(cluster: Cluster) -> list[dict[str, Any]]:
    for g in cluster.guests.values():
        g.resource_memo = None
    return _rows(cluster)


def test_kept_rows_follow_every_kind_of_change() -> None:
    cluster = pvesim.build_cluster(pvesim.load_scenario("demo"))
    vm, ct = cluster.guests[103], cluster.guests[124]
    changes = [
        lambda: vm.config.__setitem__("scsi0", "ceph-vm:vm-103-disk-0,size=300G"),  # in place, as handlers do
        lambda: vm.config.__setitem__("lock", "backup"),
        lambda: vm.config.pop("tags"),
        lambda: ct.config.__setitem__("swap", "1024"),
        lambda: setattr(vm, "status", "stopped"),
        lambda: setattr(vm, "qmpstatus", "paused"),
        lambda: setattr(ct, "cpu_usage", 0.75),
        lambda: setattr(ct, "mem_fraction", 0.9),
        lambda: setattr(cluster.nodes[ct.node], "online", False),
        lambda: setattr(vm, "node", "pve2"),  # a migration's end
        lambda: cluster.ha_resources.__setitem__(vm.sid, HAResource(vm.sid, state="started")),
        lambda: setattr(cluster.ha_resources[vm.sid], "crm_state", "fence"),
        lambda: cluster.clock.advance(3600),  # the uptime of every running guest
    ]
    _rows(cluster)
    for change in changes:
        change()
        kept = _rows(cluster)
        assert kept == _fresh(cluster)


def test_disks_follow_in_place_config_edits() -> None:
    cluster = pvesim.build_cluster(pvesim.load_scenario("demo"))
    vm = cluster.guests[103]
    assert [volid for _k, volid, _o in vm.volumes()] == ["ceph-vm:vm-103-disk-0"] and vm.maxdisk() == 200 * 1024**3
    vm.config["scsi1"] = "local-lvm:vm-103-disk-1,size=8G"
    vm.config["scsi0"] = "ceph-vm:vm-103-disk-0,size=1T"
    assert [volid for _k, volid, _o in vm.volumes()] == ["ceph-vm:vm-103-disk-0", "local-lvm:vm-103-disk-1"]
    assert vm.maxdisk() == 1024**4
    del vm.config["scsi0"]
    assert vm.maxdisk() == 0


def test_answers_add_no_attribute_to_a_guest() -> None:
    """An attribute first set by an answer gave every guest a dict of its own, 4x the size, and slowed every
    loop over 10,000 guests by 1.6x (design record 261204-41): the kept values are set at construction."""
    cluster = pvesim.build_cluster(pvesim.load_scenario("demo"))
    before = {vmid: list(vars(g)) for vmid, g in cluster.guests.items()}
    _rows(cluster)
    for g in cluster.guests.values():
        g.volumes()
    assert {vmid: list(vars(g)) for vmid, g in cluster.guests.items()} == before


def test_pve9_vm_rows_carry_host_memory() -> None:
    """PVE 9 adds ``memhost`` to VM rows, 0 when stopped (qemu-server vmstatus; pve-manager API2Tools.pm
    extract_vm_stats for /cluster/resources); containers and PVE 8 have none."""
    for version, expected in (("9.1.2", True), ("8.4.14", False)):
        cluster = pvesim.build_cluster(pvesim.load_scenario("demo"), version=version)
        for g in cluster.guests.values():
            row = render.guest_resource(cluster, g)
            assert ("memhost" in row) is (expected and g.type == "qemu"), (version, g.vmid)
            if "memhost" in row:
                assert row["memhost"] == (row["mem"] if row["status"] == "running" else 0)
                assert render.guest_runtime(cluster, g)["memhost"] == row["memhost"]  # node list, status/current
