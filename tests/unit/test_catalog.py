"""The check framework (analysis/catalog.py): declarations are refused when they clash, reads are made once,
thresholds come from the checks, anchors name real anchor checks, and the catalogue's order is fixed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pve_steward.analysis.anchors import anchors, coverage, unknown_anchors
from pve_steward.analysis.catalog import AREAS, CHECKS, CODES, Code, Need, Threshold, check, load_checks, needs_of
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Subject, finding
from pve_steward.analysis.health import AREAS as HEALTH_AREAS
from pve_steward.analysis.health import ON_DEMAND, diagnose
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from tests.checkscratch import scratch_catalog


@pytest.fixture(autouse=True)
def scratch() -> Iterator[None]:
    with scratch_catalog():
        yield


def _code(code: str) -> Code:
    return Code(code, "info", f"{code} title", f"{code} rule", f"{code} fix")


def test_a_code_declared_twice_is_refused_and_leaves_nothing_behind() -> None:
    with pytest.raises(ValueError, match=r"NODE_OFFLINE.* registered twice"):

        @check("cluster", codes=[_code("TEST_FRESH"), _code("NODE_OFFLINE")])
        def clashing(data: Any, t: Any) -> list[Finding]:
            return []

    assert "TEST_FRESH" not in CODES and "test_catalog.clashing" not in CHECKS
    with pytest.raises(ValueError, match="TEST_TWICE"):
        check("cluster", codes=[_code("TEST_TWICE"), _code("TEST_TWICE")])(lambda d, t: [])


def test_a_check_declared_twice_is_refused() -> None:
    def twin(data: Any, t: Any) -> list[Finding]:
        return []

    check("cluster", codes=[_code("TEST_TWIN_A")])(twin)
    with pytest.raises(ValueError, match=r"check 'test_catalog.twin' registered twice"):
        check("cluster", codes=[_code("TEST_TWIN_B")])(twin)
    assert "TEST_TWIN_B" not in CODES


def test_a_check_must_take_data_and_thresholds() -> None:
    with pytest.raises(ValueError, match="must take"):

        @check("cluster", codes=[_code("TEST_ONE_ARG")])
        def one_arg(data: Any) -> list[Finding]:
            return []


def test_an_anchor_naming_a_code_the_check_does_not_declare_is_refused() -> None:
    with pytest.raises(ValueError, match="NODE_OFFLINE"):

        @check("cluster", codes=[_code("TEST_ANCHORED")], anchors=["cv4pve-diag:WN0002=NODE_OFFLINE"])
        def anchored(data: Any, t: Any) -> list[Finding]:
            return []


def test_a_threshold_declared_twice_is_refused() -> None:
    @check("cluster", codes=[_code("TEST_TH_A")], thresholds=[Threshold("test_limit", 5, "a limit")])
    def first(data: Any, t: Any) -> list[Finding]:
        return []

    @check("cluster", codes=[_code("TEST_TH_B")], thresholds=[Threshold("test_limit", 6, "the same name")])
    def second(data: Any, t: Any) -> list[Finding]:
        return []

    with pytest.raises(ValueError, match=r"threshold 'test_limit' declared twice \(check test_catalog.second\)"):
        thresholds_from({})


def test_a_threshold_may_not_shadow_a_setting() -> None:
    @check("cluster", codes=[_code("TEST_TH_C")], thresholds=[Threshold("agent_probe_limit", 5, "clash")])
    def shadowing(data: Any, t: Any) -> list[Finding]:
        return []

    with pytest.raises(ValueError, match="agent_probe_limit"):
        thresholds_from({})


def test_a_check_threshold_is_in_the_schema_with_its_default_and_bounds() -> None:
    @check(
        "cluster",
        codes=[_code("TEST_TH_D")],
        thresholds=[
            Threshold("test_ratio", 1.5, "a ratio", minimum=None, above=0),
            Threshold("test_count", 3, "a count", minimum=1, integer=True),
        ],
    )
    def limited(data: Any, t: Thresholds) -> list[Finding]:
        return []

    assert thresholds_from({}).get("test_ratio") == 1.5
    assert Thresholds().get("test_count") == 3  # a plain Thresholds answers the declared default
    custom = thresholds_from({"test_ratio": 2.5, "test_count": 7})
    assert (custom.get("test_ratio"), custom.get("test_count")) == (2.5, 7)
    assert isinstance(custom.get("test_count"), int)
    assert custom.get("storage_warning_pct") == 80  # the legacy checks' thresholds are declared the same way
    with pytest.raises(ValueError, match="test_ratio"):
        thresholds_from({"test_ratio": 0})  # above=0: strictly positive
    with pytest.raises(ValueError, match="test_count"):
        thresholds_from({"test_count": 2.5})


def test_an_unknown_threshold_names_the_known_ones() -> None:
    @check("cluster", codes=[_code("TEST_TH_E")], thresholds=[Threshold("test_window", 9, "a window")])
    def windowed(data: Any, t: Any) -> list[Finding]:
        return []

    with pytest.raises(ValueError) as err:
        thresholds_from({"no_such_limit": 1})
    text = str(err.value)
    assert "unknown threshold(s) no_such_limit" in text
    assert "test_window" in text and "storage_warning_pct" in text and "agent_probe_limit" in text
    with pytest.raises(KeyError, match="test_window"):
        Thresholds().get("no_such_limit")


def test_needs_of_reads_a_shared_key_once_for_every_area_that_stands_on_it() -> None:
    zfs = Need("test_zfs", "/nodes/{node}/disks/zfs", per="node", privilege="Sys.Audit on /")
    status = Need("test_status", "/cluster/status")

    @check("cluster", codes=[_code("TEST_NEED_A")], needs=[zfs, status])
    def one(data: Any, t: Any) -> list[Finding]:
        return []

    @check("ha", codes=[_code("TEST_NEED_B")], needs=[zfs])
    def two(data: Any, t: Any) -> list[Finding]:
        return []

    both = needs_of(["cluster", "ha"])
    assert both["test_zfs"] == (zfs, ("cluster", "ha"))
    assert both["test_status"] == (status, ("cluster",))
    assert needs_of(["ha"]) == {"test_zfs": (zfs, ("ha",))}
    assert needs_of(["backups"]) == {}


def test_needs_of_refuses_one_key_declared_two_ways() -> None:
    @check("cluster", codes=[_code("TEST_NEED_C")], needs=[Need("test_disks", "/nodes/{node}/disks/list", per="node")])
    def one(data: Any, t: Any) -> list[Finding]:
        return []

    @check("ha", codes=[_code("TEST_NEED_D")], needs=[Need("test_disks", "/nodes/{node}/disks/zfs", per="node")])
    def two(data: Any, t: Any) -> list[Finding]:
        return []

    with pytest.raises(ValueError, match="'test_disks' declared differently"):
        needs_of(["cluster", "ha"])


def test_a_registered_check_runs_in_its_area_and_reads_its_declared_answers() -> None:
    @check("replication", codes=[_code("TEST_SEEN")], needs=[Need("test_seen", "/nodes/{node}/disks/zfs", per="node")])
    def seen(data: ClusterData, t: Any) -> list[Finding]:
        return [
            finding("TEST_SEEN", Subject(kind="node", id=node), f"{node}: {len(rows)} pool(s)", {"pools": len(rows)})
            for node, rows in sorted(data.read_nodes("test_seen").items())
        ]

    data = ClusterData(now=0, reads={"test_seen": {"pve1": [{"name": "rpool"}], "pve2": []}})
    report = diagnose(data, Thresholds(), ["replication"])
    assert [(f.code, f.subject.id, f.evidence) for f in report.findings] == [
        ("TEST_SEEN", "pve1", {"pools": 1}),
        ("TEST_SEEN", "pve2", {"pools": 0}),
    ]
    assert data.read("test_seen", "pve1") == [{"name": "rpool"}] and data.read("test_seen", "pve3") is None


def test_every_anchor_a_check_names_is_in_anchors_yaml() -> None:
    assert unknown_anchors() == []

    @check("cluster", codes=[_code("TEST_ANCHOR")], anchors=["cv4pve-diag:XX9999", "check_pve:cluster"])
    def claims(data: Any, t: Any) -> list[Finding]:
        return []

    assert unknown_anchors() == ["test_catalog.claims: cv4pve-diag:XX9999"]


def test_anchors_yaml_is_the_anchor_map_and_coverage_comes_from_checks() -> None:
    rows = anchors()
    assert len(rows) == 257 and sum(a.api for a in rows) == 239
    assert all(a.why.startswith("needs a shell") for a in rows if not a.api)
    covered = coverage()
    assert {c.name for c, _codes in covered["cv4pve-diag:WG0020"]} == {"backups.analyze_backups"}
    assert covered["cv4pve-diag:WG0020"][0][1] == ("BACKUP_STALE", "BACKUP_NONE")
    assert "cv4pve-diag:CC0002" not in covered  # corosync expected votes: neither API schema reports them
    assert next(a for a in rows if a.id == "cv4pve-diag:CC0003").why


def test_every_legacy_code_is_declared_beside_its_check_and_the_catalogue_has_a_fixed_order() -> None:
    load_checks()
    declared = {c.code for chk in CHECKS.values() for c in chk.codes}
    machinery = {"DATA_INCOMPLETE", "CHECK_SKIPPED", "ANALYSIS_FAILED"}
    planners = {"HA_GUEST_NOT_MIGRATABLE", "HA_GUEST_LEFT_BEHIND", "MIGRATE_CAPACITY"}
    planners |= {"CEPH_OSD_NOT_OK_TO_STOP", "CEPH_MON_QUORUM_AT_RISK", "CEPH_MDS_NOT_OK_TO_STOP", "CEPH_MGR_NO_STANDBY"}
    assert set(CODES) == declared | machinery | planners
    assert list(HEALTH_AREAS) == [a for a in AREAS if a != "data" and a not in ON_DEMAND]
    ranks = [AREAS.index(info.area) for info in CODES.values()]
    assert ranks == sorted(ranks), "codes are grouped by area in report order"
    assert AREAS[:3] == ["data", "cluster", "ha"]


def test_no_two_keys_read_the_same_endpoint() -> None:
    """Checks that read one endpoint share one declared read (one key): two keys would read it twice per node."""
    from pve_steward.analysis.health import EXTRA_AREAS

    needs = needs_of(set(HEALTH_AREAS) | set(EXTRA_AREAS))
    by_endpoint: dict[tuple[str, tuple[tuple[str, Any], ...]], list[str]] = {}
    for key, (need, _areas) in needs.items():
        by_endpoint.setdefault((need.path, need.params), []).append(key)
    assert {e: keys for e, keys in by_endpoint.items() if len(keys) > 1} == {}
