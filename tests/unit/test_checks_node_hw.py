"""Node network and disk checks (analysis/checks/node_network.py, node_disks.py) on PVE-shaped fixtures."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.checks import node_disks as nd
from pve_steward.analysis.checks import node_network as nn
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import GiB
from tests.unit.test_checks_node import cluster, codes

T = Thresholds()


def iface(name: str, kind: str = "eth", active: int = 1, **extra: Any) -> dict[str, Any]:
    return {"iface": name, "type": kind, "active": active, "exists": 1, "autostart": 1, "families": ["inet"], **extra}


def network(eno2_active: int = 1, mtu: int = 1500, slaves: str = "eno1 eno2") -> list[dict[str, Any]]:
    return [
        iface("eno1", mtu=mtu),
        iface("eno2", active=eno2_active, mtu=mtu),
        iface("eno3", active=0, autostart=0),  # a spare port nothing uses
        iface("bond0", "bond", slaves=slaves, bond_mode="active-backup"),
        iface("vmbr0", "bridge", bridge_ports="bond0", bridge_vlan_aware=1, cidr="10.0.0.11/24"),
    ]


def test_healthy_network_is_no_finding() -> None:
    d = cluster({"node_network": {"pve1": network(), "pve2": network()}})
    assert nn.interfaces(d, T) == [] and nn.mtu_mismatch(d, T) == []


def test_bond_member_down_is_nic_down_and_bond_degraded() -> None:
    found = nn.interfaces(cluster({"node_network": {"pve2": network(eno2_active=0)}}), T)
    assert codes(found) == [("NODE_NIC_DOWN", "pve2", "warning"), ("NODE_BOND_DEGRADED", "pve2", "warning")]
    assert found[1].evidence["active_slaves"] == ["eno1"]


def test_bond_with_one_member_has_no_redundancy() -> None:
    rows = [r for r in network(slaves="eno1") if r["iface"] != "eno2"]
    assert codes(nn.interfaces(cluster({"node_network": {"pve1": rows}}), T)) == [
        ("NODE_BOND_NO_REDUNDANCY", "pve1", "warning")
    ]


def test_bond_without_active_member_and_bridge_down_are_critical() -> None:
    rows = [
        iface("eno1", active=0),
        iface("eno2", active=0),
        iface("bond0", "bond", slaves="eno1 eno2"),
        iface("vmbr1", "bridge", active=0, bridge_ports=""),
    ]
    found = nn.interfaces(cluster({"node_network": {"pve1": rows}}), T)
    assert [(c, s) for c, _, s in codes(found)] == [
        ("NODE_NIC_DOWN", "warning"),
        ("NODE_NIC_DOWN", "warning"),
        ("NODE_NIC_DOWN", "critical"),
        ("NODE_NIC_DOWN", "critical"),
    ]


def test_mtu_differs_on_the_odd_node() -> None:
    d = cluster({"node_network": {"pve1": network(mtu=9000), "pve2": network(), "pve3": network()}})
    found = nn.mtu_mismatch(d, T)
    assert codes(found) == [("NODE_MTU_MISMATCH", "pve1", "warning")] * 2
    assert found[0].evidence["mtu_by_node"] == {"pve1": 9000, "pve2": 1500, "pve3": 1500}


def thinpool(pct: float) -> dict[str, Any]:
    size = 8 * GiB
    return {
        "vg": "pve",
        "lv": "data",
        "lv_size": 800 * GiB,
        "used": 300 * GiB,
        "metadata_size": size,
        "metadata_used": int(size * pct / 100),
    }


def test_lvmthin_metadata_graded_at_90_and_95() -> None:
    d = cluster({"node_lvmthin": {"pve1": [thinpool(40)], "pve2": [thinpool(91)], "pve3": [thinpool(96)]}})
    assert codes(nd.lvmthin_metadata(d, T)) == [
        ("NODE_LVMTHIN_METADATA_HIGH", "pve2:pve/data", "warning"),
        ("NODE_LVMTHIN_METADATA_HIGH", "pve3:pve/data", "critical"),
    ]


def test_lvmthin_metadata_low_is_no_finding() -> None:
    assert nd.lvmthin_metadata(cluster({"node_lvmthin": {"pve1": [thinpool(12)]}}), T) == []


def zpool(alloc: int, size: int = 1000) -> dict[str, Any]:
    return {
        "name": "tank",
        "size": size * GiB,
        "alloc": alloc * GiB,
        "free": (size - alloc) * GiB,
        "frag": 10,
        "dedup": 1.0,
        "health": "ONLINE",
    }


def test_zfs_pool_fill_graded_by_storage_thresholds() -> None:
    d = cluster({"node_zfs_pools": {"pve1": [zpool(300)], "pve2": [zpool(750)], "pve3": [zpool(900)]}})
    assert codes(nd.zfs_pool_full(d, T)) == [
        ("NODE_ZFS_POOL_FULL", "pve2:tank", "warning"),
        ("NODE_ZFS_POOL_FULL", "pve3:tank", "critical"),
    ]


def test_zfs_pool_with_room_is_no_finding() -> None:
    assert nd.zfs_pool_full(cluster({"node_zfs_pools": {"pve1": [zpool(300)]}}), T) == []


def disk(devpath: str, kind: str, wearout: Any) -> dict[str, Any]:
    return {
        "devpath": devpath,
        "type": kind,
        "size": 960 * 10**9,
        "health": "PASSED",
        "wearout": wearout,
        "model": "X",
        "serial": "S1",
        "gpt": 1,
        "used": "ZFS",
    }


def test_ssd_without_wear_data() -> None:
    rows = [disk("/dev/sda", "ssd", "N/A"), disk("/dev/sdb", "hdd", "N/A"), disk("/dev/nvme0n1", "nvme", 97)]
    found = nd.ssd_no_wear_data(cluster({"node_disks": {"pve1": rows}}), T)
    assert codes(found) == [("NODE_SSD_NO_WEAR_DATA", "pve1:/dev/sda", "warning")]


def test_ssds_reporting_wear_is_no_finding() -> None:
    rows = [disk("/dev/sda", "ssd", 88), disk("/dev/sdb", "hdd", "N/A")]
    assert nd.ssd_no_wear_data(cluster({"node_disks": {"pve1": rows}}), T) == []


def test_zfs_fragmentation_above_check_pve_example_thresholds() -> None:
    d = cluster(
        {
            "node_zfs_pools": {
                "pve1": [dict(zpool(300), frag=40)],
                "pve2": [dict(zpool(300), frag=45)],
                "pve3": [dict(zpool(300), frag=71)],
            }
        }
    )
    assert codes(nd.zfs_fragmented(d, T)) == [
        ("NODE_ZFS_FRAGMENTED", "pve2:tank", "warning"),
        ("NODE_ZFS_FRAGMENTED", "pve3:tank", "critical"),
    ]
