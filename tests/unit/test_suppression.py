"""Suppressions: by code, by code and object, with reason and expiry; listed, counted, never dropped."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from pve_steward.analysis.data import Missing
from pve_steward.analysis.findings import Finding, Subject, finding
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.suppression import Suppression, apply, check_known, parse_suppressions, with_suppressions
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.config import ConfigError, load_settings
from tests.unit.pve_fixtures import NOW, cluster_status, data, node_row

DAY = 86400
LATER = dt.datetime.fromtimestamp(NOW + 10 * DAY, dt.UTC)
EARLIER = dt.datetime.fromtimestamp(NOW - DAY, dt.UTC)


def rule(**kw: object) -> Suppression:
    return Suppression.model_validate({"reason": "known and accepted", **kw})


def stale(vmid: int, node: str = "pve1") -> Finding:
    return finding("BACKUP_STALE", Subject(kind="guest", id=str(vmid), node=node), f"guest {vmid} stale")


def offline(node: str) -> Finding:
    return finding("NODE_OFFLINE", Subject(kind="node", id=node), f"{node} offline")


FINDINGS = [stale(101), stale(102, "pve2"), offline("pve3")]


@pytest.mark.parametrize(
    ("spec", "silenced"),
    [
        ({"code": "BACKUP_STALE"}, ["101", "102"]),
        ({"code": "BACKUP_STALE", "vmid": 101}, ["101"]),
        ({"code": "BACKUP_STALE", "subject": "102"}, ["102"]),
        ({"code": "BACKUP_STALE", "node": "pve2"}, ["102"]),
        ({"code": "NODE_OFFLINE", "node": "pve3"}, ["pve3"]),
        ({"code": "NODE_OFFLINE", "node": "pve1"}, []),
        ({"code": "BACKUP_STALE", "storage": "101"}, []),  # a guest is not a storage
        ({"code": "NODE_OFFLINE", "vmid": 101}, []),
    ],
)
def test_a_rule_silences_exactly_what_it_names(spec: dict[str, object], silenced: list[str]) -> None:
    out = apply(FINDINGS, [rule(**spec)], NOW)
    assert [f.subject.id for f, _ in out.suppressed] == silenced
    assert len(out.kept) + len(out.suppressed) == len(FINDINGS)


def test_a_report_lists_and_counts_suppressed_findings_apart() -> None:
    rules = [rule(code="BACKUP_STALE", vmid=101, reason="archived VM", expires=LATER)]
    report = with_suppressions("health", list(FINDINGS), ["backups", "cluster"], 50, rules, NOW)
    assert sorted(f.subject.id for f in report.findings) == ["102", "pve3"]
    assert report.counts.warning == 2 and report.by_code == {"BACKUP_STALE": 1, "NODE_OFFLINE": 1}
    assert report.suppressed_counts.warning == 1
    [s] = report.suppressed
    assert (s.code, s.subject.id, s.suppressed_by.reason) == ("BACKUP_STALE", "101", "archived VM")
    assert s.suppressed_by.target == "vmid 101" and s.suppressed_by.expires == LATER.isoformat()
    assert "1 suppressed" in report.summary
    assert report.suppressions_unused == [] and report.suppressions_expired == []


def test_an_expired_suppression_lets_the_finding_back_and_says_so() -> None:
    rules = [rule(code="BACKUP_STALE", vmid=101, expires=EARLIER)]
    report = with_suppressions("health", list(FINDINGS), ["backups"], 50, rules, NOW)
    assert "101" in [f.subject.id for f in report.findings]
    assert report.suppressed == [] and report.suppressed_counts.warning == 0
    assert [r.code for r in report.suppressions_expired] == ["BACKUP_STALE"]
    assert report.suppressions_unused == []  # expired is said as expired, not as unused


def test_a_date_expiry_lasts_to_the_end_of_that_day_utc() -> None:
    today = dt.datetime.fromtimestamp(NOW, dt.UTC).date()
    assert not rule(code="BACKUP_STALE", expires=today).expired(NOW)
    assert rule(code="BACKUP_STALE", expires=today - dt.timedelta(days=1)).expired(NOW)
    assert rule(code="BACKUP_STALE", expires=str(today)).expires == dt.datetime.combine(today, dt.time.max, dt.UTC)


def test_an_unused_suppression_is_named_only_for_the_areas_examined() -> None:
    rules = [rule(code="CERT_EXPIRED"), rule(code="BACKUP_STALE", vmid=999)]
    report = with_suppressions("backups", list(FINDINGS), ["backups"], 50, rules, NOW)
    assert [(r.code, r.target) for r in report.suppressions_unused] == [("BACKUP_STALE", "vmid 999")]


def test_a_silenced_gap_still_makes_the_report_incomplete() -> None:
    d = data(cluster_status=cluster_status({"pve1": True}), resources=[node_row("pve1")])
    d.missing.append(Missing("guest configs", "/nodes/pve1/qemu", "timeout", "pve1", affects=("guests",)))
    report = diagnose(d, Thresholds(), ["guests"], None, suppress=[rule(code="DATA_INCOMPLETE")])
    assert report.findings == [] and report.suppressed_counts.warning == 1
    assert not report.complete and "INCOMPLETE" in report.summary


def test_diagnose_applies_suppressions_at_the_data_clock() -> None:
    d = data(cluster_status=cluster_status({"pve1": True, "pve2": False}), resources=[node_row("pve1")])
    before = diagnose(d, Thresholds(), ["cluster"], None)
    assert "NODE_OFFLINE" in before.by_code
    silenced = diagnose(d, Thresholds(), ["cluster"], None, suppress=[rule(code="NODE_OFFLINE", node="pve2")])
    assert "NODE_OFFLINE" not in silenced.by_code
    assert [s.subject.id for s in silenced.suppressed if s.code == "NODE_OFFLINE"] == ["pve2"]
    expired = diagnose(d, Thresholds(), ["cluster"], None, suppress=[rule(code="NODE_OFFLINE", expires=EARLIER)])
    assert "NODE_OFFLINE" in expired.by_code


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"code": "backup_stale", "reason": "x y z"}, "suppress entry 1 (code backup_stale): field 'code': must be"),
        ({"code": "BACKUP_STALE"}, "suppress entry 1 (code BACKUP_STALE): field 'reason': Field required"),
        ({"code": "BACKUP_STALE", "reason": "ok!", "vm": 1}, "field 'vm': unknown field"),
        ({"code": "BACKUP_STALE", "reason": "ok!", "expires": "next week"}, "field 'expires'"),
        ({"code": "BACKUP_STALE", "reason": "ok!", "vmid": 101, "node": "a"}, "give at most one of"),
        ({"code": "BACKUP_STALE", "reason": "ok!", "vmid": "abc"}, "field 'vmid'"),
        ("BACKUP_STALE", "suppress entry 1: must be a table"),
    ],
)
def test_an_invalid_entry_names_the_entry_and_the_field(entry: object, expected: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_suppressions([entry])
    assert expected in str(err.value)


def test_an_unknown_code_is_refused_at_start_with_a_hint() -> None:
    with pytest.raises(ValueError) as err:
        check_known([rule(code="BACKUP_STALE"), rule(code="BACKUP_STAEL")])
    assert "suppress entry 2 (code BACKUP_STAEL)" in str(err.value) and "did you mean BACKUP_STALE" in str(err.value)


def test_the_config_file_takes_suppress_tables_and_names_a_bad_entry(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        '[[suppress]]\ncode = "BACKUP_STALE"\nvmid = 101\nreason = "archived"\nexpires = 2027-01-31\n\n'
        '[[suppress]]\ncode = "NODE_OFFLINE"\nnode = "pve3"\nreason = "decommissioned"\n',
        encoding="utf-8",
    )
    settings = load_settings(good)
    assert [(s.code, s.target) for s in settings.suppress] == [
        ("BACKUP_STALE", "vmid 101"),
        ("NODE_OFFLINE", "node pve3"),
    ]
    assert settings.suppress[0].expires == dt.datetime(2027, 1, 31, 23, 59, 59, 999999, dt.UTC)
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[[suppress]]\ncode = "NODE_OFFLINE"\nreason = "ok!"\n\n[[suppress]]\ncode = "X_Y"\nreson = "typo"\n'
    )
    with pytest.raises(ConfigError) as err:
        load_settings(bad)
    message = str(err.value)
    assert f"config file {bad}" in message and "suppress entry 2 (code X_Y)" in message and "field 'reson'" in message


def test_suppress_as_json_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PVE_STEWARD_SUPPRESS", '[{"code": "NODE_OFFLINE", "node": "pve3", "reason": "gone"}]')
    assert load_settings().suppress[0].node == "pve3"
    with pytest.raises(ConfigError) as err:
        load_settings(suppress="not json")
    assert "JSON list" in str(err.value)


def test_the_server_refuses_to_start_with_a_suppression_of_an_unknown_code(tmp_path: Path) -> None:
    from pve_steward.server import build_server
    from pve_steward.testing import FakeClient

    settings = load_settings(
        audit_log=tmp_path / "audit.jsonl",
        token_store="memory",
        suppress=[{"code": "NODE_OFFLINE", "reason": "fine"}, {"code": "NODE_OFLINE", "reason": "typo"}],
    )
    with pytest.raises(ValueError) as err:
        build_server(settings, client=FakeClient(), check_version_on_start=False)
    assert "suppress entry 2 (code NODE_OFLINE)" in str(err.value)
