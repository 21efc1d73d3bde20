"""Ceph diagnostics on payloads shaped like PVE's Ceph API answers: each finding, and its absence."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pve_steward.analysis.ceph import CephData, analyze_ceph, osds
from pve_steward.analysis.cephexplain import CHECKS, explain
from pve_steward.analysis.codes import CODES
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.thresholds import Thresholds

TiB = 1024**4


def osd(ident: int, host: str, used: float = 0.4, *, up: bool = True, inn: int = 1, lat: int = 2) -> dict[str, Any]:
    """A leaf of GET /nodes/{node}/ceph/osd (pve-manager PVE/API2/Ceph/OSD.pm index)."""
    return {
        "id": ident,
        "name": f"osd.{ident}",
        "type": "osd",
        "host": host,
        "status": "up" if up else "down",
        "in": inn,
        "total_space": 2 * TiB,
        "bytes_used": int(2 * TiB * used),
        "percent_used": used * 100,
        "commit_latency_ms": lat,
        "apply_latency_ms": lat,
        "ceph_version_short": "19.2.3",
        "leaf": 1,
    }


def tree(*leaves: dict[str, Any]) -> dict[str, Any]:
    hosts: dict[str, list[dict[str, Any]]] = {}
    for leaf in leaves:
        hosts.setdefault(leaf["host"], []).append(leaf)
    children = [
        {"id": -2 - i, "name": h, "type": "host", "children": rows, "leaf": 0}
        for i, (h, rows) in enumerate(hosts.items())
    ]
    return {"root": {"leaf": 0, "children": [{"id": -1, "name": "default", "type": "root", "children": children}]}}


def pool(name: str = "vm-pool", **over: Any) -> dict[str, Any]:
    row = {
        "pool": 1,
        "pool_name": name,
        "type": "replicated",
        "size": 3,
        "min_size": 2,
        "pg_num": 128,
        "pg_autoscale_mode": "on",
        "bytes_used": 3 * TiB,
        "percent_used": 0.4,
        "crush_rule": 0,
        "crush_rule_name": "replicated_rule",
    }
    return {**row, **over}


def mon(name: str, quorum: bool = True, host: str | None = None) -> dict[str, Any]:
    """A row of GET /nodes/{node}/ceph/mon (MON.pm listmon): ``host`` is the PVE node, as a string on the wire."""
    row: dict[str, Any] = {
        "name": name,
        "rank": int(name[-1]) if name[-1].isdecimal() else ord(name[-1]) - ord("a"),
        "host": host or name,
        "ceph_version_short": "19.2.3",
    }
    if quorum:
        row.update(quorum=1, state="running")
    else:
        row["state"] = "stopped"
    return row


def healthy() -> CephData:
    return CephData(
        status={"fsid": "x", "health": {"status": "HEALTH_OK", "checks": {}, "mutes": []}},
        flags=[
            {"name": "noout", "description": "...", "value": 0},
            {"name": "pause", "description": "...", "value": 0},
        ],
        metadata={
            "mon": {"pve1": {"name": "pve1", "ceph_version_short": "19.2.3"}},
            "osd": [{"id": 0, "ceph_version_short": "19.2.3"}, {"id": 1, "ceph_version_short": "19.2.3"}],
            "mds": {},
        },
        osd_tree=tree(osd(0, "pve1"), osd(1, "pve2"), osd(2, "pve3")),
        pools=[pool()],
        mons=[mon("pve1"), mon("pve2"), mon("pve3")],
    )


def codes(c: CephData) -> set[tuple[str, str]]:
    return {(f.code, f.subject.id) for f in analyze_ceph(c)}


def test_healthy_ceph_has_no_finding() -> None:
    assert analyze_ceph(healthy()) == []


def test_no_ceph_no_finding() -> None:
    assert analyze_ceph(CephData(status=None)) == []
    assert diagnose(ClusterData(now=0), Thresholds(), ["ceph"]).findings == []


def test_every_health_check_is_explained() -> None:
    c = healthy()
    c.status = {
        "health": {
            "status": "HEALTH_ERR",
            "checks": {
                "OSD_DOWN": {"severity": "HEALTH_WARN", "summary": {"message": "1 osds down", "count": 1}},
                "PG_AVAILABILITY": {"severity": "HEALTH_WARN", "summary": {"message": "4 pgs inactive", "count": 4}},
                "PG_DAMAGED": {"severity": "HEALTH_ERR", "summary": {"message": "1 pg inconsistent", "count": 1}},
                "SOMETHING_NEW": {"severity": "HEALTH_WARN", "summary": {"message": "new", "count": 1}, "muted": True},
            },
        }
    }
    found = {f.subject.id: f for f in analyze_ceph(c)}
    assert found["health/OSD_DOWN"].severity == "warning"
    assert found["health/PG_DAMAGED"].severity == "critical"
    # Ceph's severity is kept (PGMap.cc: HEALTH_WARN; PVE's map_ceph_health), the message says what it means
    availability = found["health/PG_AVAILABILITY"]
    assert availability.severity == "warning" and "I/O to those PGs is blocked" in availability.message
    assert found["health/SOMETHING_NEW"].severity == "info"  # muted by the operator
    assert found["health/OSD_DOWN"].evidence["meaning"] == CHECKS["OSD_DOWN"].meaning
    assert "docs.ceph.com" in found["health/SOMETHING_NEW"].remediation
    for name in ("OSD_NEARFULL", "PG_DEGRADED", "MON_DISK_LOW", "MON_DOWN", "OSDMAP_FLAGS", "POOL_NEAR_FULL"):
        info = explain(name)
        assert name in CHECKS and info.meaning and info.cause and info.action


def test_osd_down_in_is_critical_down_out_is_warning_up_out_is_out() -> None:
    c = healthy()
    c.osd_tree = tree(osd(0, "a", up=False), osd(1, "b", up=False, inn=0), osd(2, "c", inn=0), osd(3, "c"))
    found = {f.subject.id: f for f in analyze_ceph(c)}
    assert found["osd.0"].code == "CEPH_OSD_DOWN" and found["osd.0"].severity == "critical"
    assert found["osd.1"].code == "CEPH_OSD_DOWN" and found["osd.1"].severity == "warning"
    assert found["osd.2"].code == "CEPH_OSD_OUT" and "osd.3" not in found


def test_latency_outlier_needs_floor_and_factor() -> None:
    c = healthy()
    c.osd_tree = tree(osd(0, "a", lat=3), osd(1, "b", lat=4), osd(2, "c", lat=180), osd(3, "c", lat=40))
    assert ("CEPH_OSD_LATENCY_HIGH", "osd.2") in codes(c)
    assert ("CEPH_OSD_LATENCY_HIGH", "osd.3") not in codes(c)  # 10x the median but under the floor
    c.osd_tree = tree(osd(0, "a", lat=60), osd(1, "b", lat=70), osd(2, "c", lat=80))
    assert not any(code == "CEPH_OSD_LATENCY_HIGH" for code, _ in codes(c))  # all slow: no outlier


@pytest.mark.parametrize(("used", "severity"), [(0.79, None), (0.80, "warning"), (0.90, "critical")])
def test_pool_near_full_boundaries(used: float, severity: str | None) -> None:
    c = healthy()
    c.pools = [pool(percent_used=used)]
    hits = [f for f in analyze_ceph(c) if f.code == "CEPH_POOL_NEAR_FULL"]
    assert [f.severity for f in hits] == ([severity] if severity else [])


@pytest.mark.parametrize(
    ("size", "min_size", "severity"),
    [(3, 2, None), (2, 2, None), (4, 2, None), (2, 1, "critical"), (3, 1, "critical"), (5, 2, "warning")],
)
def test_pool_redundancy(size: int, min_size: int, severity: str | None) -> None:
    """PVE's Pool.js warns on min_size 1 and on min_size < size/2 (min_size != size); size 2/2 is not flagged."""
    c = healthy()
    c.pools = [pool(size=size, min_size=min_size), pool(".mgr", size=1, min_size=1)]  # Ceph's own: not judged
    hits = [f for f in analyze_ceph(c) if f.code == "CEPH_POOL_LOW_REDUNDANCY"]
    assert [(f.subject.id, f.severity) for f in hits] == ([("pool/vm-pool", severity)] if severity else [])


def test_autoscale_warn_only_when_pg_num_differs() -> None:
    c = healthy()
    c.pools = [pool(pg_autoscale_mode="warn", pg_num=32, pg_num_final=128)]
    assert ("CEPH_POOL_AUTOSCALE_WARN", "pool/vm-pool") in codes(c)
    c.pools = [pool(pg_autoscale_mode="warn", pg_num=128, pg_num_final=128)]
    c.pools.append(pool("other", pg_autoscale_mode="on", pg_num=32, pg_num_final=128))
    assert not any(code == "CEPH_POOL_AUTOSCALE_WARN" for code, _ in codes(c))


def test_flags_left_set() -> None:
    c = healthy()
    c.flags = [{"name": "noout", "value": 1}, {"name": "pause", "value": 1}, {"name": "noscrub", "value": 0}]
    found = {f.subject.id: f for f in analyze_ceph(c) if f.code == "CEPH_FLAG_SET"}
    assert set(found) == {"flag/noout", "flag/pause"}
    assert found["flag/pause"].severity == "critical" and found["flag/noout"].severity == "warning"
    assert "ceph osd unset noout" in found["flag/noout"].remediation


def test_mon_out_of_quorum_critical_when_no_spare() -> None:
    c = healthy()
    c.mons = [mon("m1"), mon("m2"), mon("m3", quorum=False)]
    (f,) = [f for f in analyze_ceph(c) if f.code == "CEPH_MON_OUT_OF_QUORUM"]
    assert f.subject.id == "mon.m3" and f.severity == "critical"
    c.mons = [mon("m1"), mon("m2"), mon("m3"), mon("m4"), mon("m5", quorum=False)]
    (f,) = [f for f in analyze_ceph(c) if f.code == "CEPH_MON_OUT_OF_QUORUM"]
    assert f.severity == "warning"


def test_mon_quorum_counts_the_monmap_only() -> None:
    """listmon adds ceph.conf/mon-dir monitors without a rank (MON.pm listmon): they are not in the monmap."""
    c = healthy()
    stale = {"name": "pve4", "host": "pve4", "service": 1, "direxists": "1", "state": "stopped"}
    c.mons = [mon("pve1"), mon("pve2"), mon("pve3"), stale]
    found = [f for f in analyze_ceph(c) if f.code.startswith("CEPH_MON_")]
    assert [(f.code, f.subject.id, f.severity) for f in found] == [("CEPH_MON_NOT_IN_MONMAP", "mon.pve4", "info")]
    c.mons = [mon("pve1"), mon("pve2"), mon("pve3", quorum=False), stale]
    (out,) = [f for f in analyze_ceph(c) if f.code == "CEPH_MON_OUT_OF_QUORUM"]
    assert out.subject.id == "mon.pve3" and "2 of 3" in out.message and out.severity == "critical"
    c.mons = [{"name": "a", "state": "unknown"}, {"name": "b", "state": "unknown"}, {"name": "c", "quorum": 1}]
    assert {f.code for f in analyze_ceph(c) if f.code.startswith("CEPH_MON_")} == {"CEPH_MON_OUT_OF_QUORUM"}


def test_mixed_versions() -> None:
    c = healthy()
    c.metadata = copy.deepcopy(c.metadata)
    c.metadata["osd"][1]["ceph_version_short"] = "18.2.4"
    (f,) = [f for f in analyze_ceph(c) if f.code == "CEPH_VERSION_MIXED"]
    assert f.evidence["newest"] == "19.2.3" and f.evidence["older"] == {"18.2.4": ["osd.1"]}


def test_mixed_versions_ignore_down_osds() -> None:
    """`osd metadata` keeps a down OSD's last version; Ceph counts running (up) OSDs only (count_metadata)."""
    c = healthy()
    c.metadata = copy.deepcopy(c.metadata)
    c.metadata["osd"].append({"id": 2, "ceph_version_short": "18.2.4"})
    c.osd_tree = tree(osd(0, "pve1"), osd(1, "pve2"), osd(2, "pve3", up=False))
    assert not [f for f in analyze_ceph(c) if f.code == "CEPH_VERSION_MIXED"]
    c.osd_tree = tree(osd(0, "pve1"), osd(1, "pve2"), osd(2, "pve3"))
    assert [f.evidence["older"] for f in analyze_ceph(c) if f.code == "CEPH_VERSION_MIXED"] == [{"18.2.4": ["osd.2"]}]


def test_versions_are_compared_with_the_newest_installed() -> None:
    """PVE's Ceph panel (Services.js updateAll): a daemon below the newest installed version is 'please restart'
    when its node has that version installed, else 'please upgrade and restart'."""
    c = healthy()
    c.metadata = copy.deepcopy(c.metadata)
    c.metadata["mon"] = {"pve1@pve1": {"name": "pve1", "hostname": "pve1", "ceph_version_short": "18.2.4"}}
    c.metadata["osd"] = [
        {"id": 0, "hostname": "pve1", "ceph_version_short": "18.2.4"},
        {"id": 1, "hostname": "pve2", "ceph_version_short": "18.2.4"},
    ]
    c.metadata["node"] = {
        "pve1": {"version": {"str": "19.2.3", "parts": ["19", "2", "3"]}},
        "pve2": {"version": {"str": "18.2.4", "parts": ["18", "2", "4"]}},
    }
    (f,) = [f for f in analyze_ceph(c) if f.code == "CEPH_VERSION_MIXED"]  # one running version, still behind
    assert f.evidence["newest"] == "19.2.3" and f.evidence["restart"] == ["mon.pve1", "osd.0"]
    assert f.evidence["upgrade_nodes"] == {"pve2": "18.2.4"} and "pve2 need the 19.2.3 packages" in f.message
    c.metadata["node"]["pve1"]["version"]["str"] = "18.2.4"
    assert not [f for f in analyze_ceph(c) if f.code == "CEPH_VERSION_MIXED"]  # all run what is installed


@pytest.mark.parametrize(("used", "expected"), [(0.55, None), (0.58, "warning"), (0.65, "critical")])
def test_node_loss_capacity(used: float, expected: str | None) -> None:
    c = healthy()
    c.osd_tree = tree(osd(0, "a", used), osd(1, "b", used), osd(2, "c", used))  # 3 equal hosts: x 1.5 after loss
    hits = [f for f in analyze_ceph(c) if f.code == "CEPH_NODE_LOSS_NEARFULL"]
    assert [f.severity for f in hits] == ([expected] if expected else [])


def test_osd_tree_walk_keeps_host() -> None:
    rows = osds(tree(osd(0, "a"), osd(1, "b")))
    assert [(r["name"], r["host"]) for r in rows] == [("osd.0", "a"), ("osd.1", "b")]


def test_ceph_codes_are_registered() -> None:
    for code in ("CEPH_HEALTH_CHECK", "CEPH_OSD_DOWN", "CEPH_NODE_LOSS_NEARFULL", "CEPH_FLAG_SET"):
        assert CODES[code].area == "ceph"


def test_flag_values_read_as_pve_sends_them() -> None:
    """PVE sends 0/1; a client decoding JSON true must read set, odd values must not raise."""
    c = healthy()
    c.flags = [{"name": "noout", "value": True}, {"name": "pause", "value": "odd"}, "junk"]  # type: ignore[list-item]
    assert {f.subject.id for f in analyze_ceph(c) if f.code == "CEPH_FLAG_SET"} == {"flag/noout"}
