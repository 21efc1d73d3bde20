"""The Ceph part of an evacuation plan: ok-to-stop answers, blocking, and the noout steps."""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.planner.ceph_steps import NodeCeph, ceph_evacuation, node_mds, node_mons
from pve_steward.analysis.planner.evacuation import with_ceph
from pve_steward.analysis.planner.models import EvacuationPlan
from tests.unit.test_ceph import mon, osd, tree


def node_ceph(safety: dict[str, Any], noout: int = 0) -> NodeCeph:
    return NodeCeph(
        osd_tree=tree(osd(0, "pve1"), osd(1, "pve1"), osd(2, "pve2")),
        mons=[mon("pve1"), mon("pve2"), mon("pve3")],
        flags=[{"name": "noout", "value": noout}],
        safety=safety,
    )


SAFE = {"safe": 1, "status": "ok to stop"}
UNSAFE = {"safe": 0, "status": "unsafe to stop osd(s) at this time (32 PGs are or would become offline)"}


def plan() -> EvacuationPlan:
    return EvacuationPlan(
        node="pve1",
        verdict="EVACUATION_READY",
        summary="ready",
        steps=[],
        blockers=[],
        ha_guests=[],
        targets=[],
        complete=True,
    )


def test_all_safe_gives_steps_and_no_finding() -> None:
    checks, steps, found = ceph_evacuation(node_ceph({"osd.0": SAFE, "osd.1": SAFE, "mon.pve1": SAFE}), "pve1")
    assert [c.daemon for c in checks] == ["osd.0", "osd.1", "mon.pve1"] and all(c.safe for c in checks)
    assert found == []
    cmds = [(s.when, s.command.split(" (")[0]) for s in steps]
    assert ("before", "ceph osd set noout") in cmds and ("after", "ceph osd unset noout") in cmds
    assert ("before", "ceph osd ok-to-stop 0 1") in cmds and ("before", "ceph mon ok-to-stop pve1") in cmds
    out = with_ceph(plan(), node_ceph({"osd.0": SAFE, "osd.1": SAFE, "mon.pve1": SAFE}))
    assert out.verdict == "EVACUATION_READY" and out.complete and len(out.ceph_steps) == len(steps)


def test_unsafe_osd_blocks_the_plan() -> None:
    out = with_ceph(plan(), node_ceph({"osd.0": UNSAFE, "osd.1": SAFE, "mon.pve1": SAFE}))
    assert out.verdict == "EVACUATION_BLOCKED" and "osd.0" in out.summary
    (f,) = out.findings
    assert f.code == "CEPH_OSD_NOT_OK_TO_STOP" and f.severity == "critical" and "32 PGs" in f.message


def test_monitor_losing_quorum_blocks() -> None:
    _checks, _steps, found = ceph_evacuation(
        node_ceph({"osd.0": SAFE, "osd.1": SAFE, "mon.pve1": {"safe": 0, "status": "not enough monitors"}}), "pve1"
    )
    assert [(f.code, f.subject.id) for f in found] == [("CEPH_MON_QUORUM_AT_RISK", "mon.pve1")]


def test_unanswered_safety_is_incomplete_not_safe() -> None:
    out = with_ceph(plan(), node_ceph({"osd.0": "timeout", "osd.1": SAFE, "mon.pve1": SAFE}))
    assert out.complete is False and out.verdict == "EVACUATION_READY"
    assert [f.code for f in out.findings] == ["DATA_INCOMPLETE"]
    assert out.ceph_checks[0].safe is None


def test_noout_already_set_is_neither_set_nor_unset() -> None:
    """An operator's cluster-wide noout (a rolling upgrade's) stays: PVE Services.pm with_noout undoes only its own."""
    _c, steps, _f = ceph_evacuation(node_ceph({"osd.0": SAFE, "osd.1": SAFE, "mon.pve1": SAFE}, noout=1), "pve1")
    noout = [s for s in steps if "noout" in s.action]
    assert [s.when for s in noout] == ["before"]
    assert "leave noout as the operator set it" in noout[0].action
    assert not any("ceph osd set noout" in s.command or "unset noout" in s.command for s in steps)


def test_monitor_found_by_host_not_by_name() -> None:
    """createmon takes a monid: listmon's ``host`` names the node (Services.pm get_services_info)."""
    c = node_ceph({"osd.0": SAFE, "osd.1": SAFE, "mon.mon-a": {"safe": 0, "status": "no quorum"}})
    c.mons = [mon("mon-a", host="pve1"), mon("mon-b", host="pve2"), {"name": "pve3", "host": 1}]
    _checks, _steps, found = ceph_evacuation(c, "pve1")
    assert [(f.code, f.subject.id) for f in found] == [("CEPH_MON_QUORUM_AT_RISK", "mon.mon-a")]
    assert node_mons(c, "pve3") == ["pve3"]  # a host that is not a string: the default id, the node name
    assert node_mons(c, "pve2") == ["mon-b"]


def test_node_without_ceph_daemons_gets_nothing() -> None:
    checks, steps, found = ceph_evacuation(node_ceph({}), "pve3-not-osd")
    assert (checks, steps, found) == ([], [], [])


def test_active_mds_without_standby_blocks_and_is_asked() -> None:
    """cmd-safety supports mds ok-to-stop (PVE/API2/Ceph.pm cmd_safety); the GUI asks it before stopping an MDS."""
    c = node_ceph({"osd.0": SAFE, "osd.1": SAFE, "mon.pve1": SAFE, "mds.pve1": {"safe": 0, "status": "insufficent"}})
    c.mds = [
        {"name": "pve1", "host": "pve1", "state": "up:active", "rank": 0},
        {"name": "old", "host": "pve1", "state": "stopped"},
        {"name": "pve2", "host": "pve2", "state": "up:standby", "rank": -1},
    ]
    checks, steps, found = ceph_evacuation(c, "pve1")
    assert [ch.daemon for ch in checks][-1] == "mds.pve1" and node_mds(c, "pve2") == ["pve2"]
    assert [(f.code, f.subject.id, f.severity) for f in found] == [("CEPH_MDS_NOT_OK_TO_STOP", "mds.pve1", "critical")]
    assert any(s.command.startswith("ceph mds ok-to-stop pve1") for s in steps)
    out = with_ceph(plan(), c)
    assert out.verdict == "EVACUATION_BLOCKED" and "mds.pve1" in out.summary


@pytest.mark.parametrize(
    ("mgrmap", "expected"),
    [
        ({"active_name": "x", "standbys": []}, ["mgr.x"]),  # x runs on pve1 (its host in /ceph/mgr)
        ({"active_name": "x", "standbys": [{"gid": 2, "name": "pve2"}]}, []),
        ({"active_name": "pve2", "standbys": []}, []),  # the lone manager is elsewhere
        ({"active_name": "x"}, []),  # standbys unknown: no claim
        ({}, []),
    ],
)
def test_active_manager_without_standby_is_warned(mgrmap: dict[str, Any], expected: list[str]) -> None:
    c = node_ceph({"osd.0": SAFE, "osd.1": SAFE, "mon.pve1": SAFE})
    c.mgrs, c.mgrmap = [{"name": "x", "host": "pve1", "state": "active"}], mgrmap
    _checks, _steps, found = ceph_evacuation(c, "pve1")
    assert [f.subject.id for f in found if f.code == "CEPH_MGR_NO_STANDBY"] == expected
    assert all(f.severity == "warning" for f in found)
    assert with_ceph(plan(), c).verdict == "EVACUATION_READY"  # a manager outage does not stop I/O
