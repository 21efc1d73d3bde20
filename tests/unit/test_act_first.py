"""A report leads with what to do first: its worst findings grouped by subject, with their fix (issue 41, item 7)."""

from __future__ import annotations

from pve_steward.analysis.findings import ACT_FIRST_LIMIT, Severity, Subject, finding, make_report
from pve_steward.tools.diagnostics import page


def guest(vmid: int, node: str = "pve1") -> Subject:
    return Subject(kind="guest", id=str(vmid), name=f"g{vmid}", node=node)


def disk(node: str, dev: str) -> Subject:
    return Subject(kind="disk", id=f"{node}:{dev}", node=node)


def test_criticals_are_grouped_by_subject_with_each_distinct_fix_once() -> None:
    sdb = disk("pve3", "/dev/sdb")
    report = make_report(
        "health",
        [
            finding("BACKUP_NONE", guest(114), "114 has no backup"),
            finding("DISK_SMART_FAILED", sdb, "SMART FAILED"),
            finding("NODE_DISK_PENDING_SECTORS", sdb, "16 pending sectors"),
            finding("BACKUP_STALE", guest(104), "old backup", severity=Severity.CRITICAL),
            finding("GUEST_AGENT_NOT_CONFIGURED", guest(114), "no agent"),  # a warning: not led with
        ],
        ["backups", "operations"],
    )
    led = report.act_first
    # the disk (node-wide: every guest on its pool) before the guests; within a scope, more findings first,
    # then the findings' own order
    assert [(a.subject.kind, a.subject.id) for a in led] == [
        ("disk", "pve3:/dev/sdb"),
        ("guest", "114"),
        ("guest", "104"),
    ]
    assert led[0].codes == ["DISK_SMART_FAILED", "NODE_DISK_PENDING_SECTORS"]
    assert len(led[0].fix) == 2 and all(led[0].fix)  # each code's remediation, said once
    assert led[1].codes == ["BACKUP_NONE"]  # the warning of the same subject is in findings, not here
    assert report.act_first_more == 0
    assert [f.code for f in report.findings][:4] == [
        "BACKUP_NONE", "BACKUP_STALE", "DISK_SMART_FAILED", "NODE_DISK_PENDING_SECTORS",
    ]  # fmt: skip  # the findings keep their order and all their detail


def test_the_same_fix_for_a_subject_is_said_once() -> None:
    pool = Subject(kind="zfs_pool", id="pve3:tank", node="pve3")
    report = make_report(
        "health",
        [finding("ZFS_POOL_DEGRADED", pool, "degraded"), finding("ZFS_POOL_DEGRADED", pool, "degraded again")],
        ["operations"],
    )
    (only,) = report.act_first
    assert only.codes == ["ZFS_POOL_DEGRADED"] and len(only.fix) == 1


POOL = Subject(kind="pool", id="p")


def test_without_criticals_the_warnings_lead_and_info_never_does() -> None:
    warned = make_report(
        "health",
        [finding("GUEST_AGENT_NOT_CONFIGURED", guest(110), "no agent"), finding("POOL_EMPTY", POOL, "empty")],
        ["guests", "access"],
    )
    assert warned.status == "warning" and [a.codes for a in warned.act_first] == [["GUEST_AGENT_NOT_CONFIGURED"]]
    quiet = make_report("health", [finding("POOL_EMPTY", POOL, "empty")], ["access"])
    assert quiet.status == "info" and quiet.act_first == [] and quiet.act_first_more == 0
    assert make_report("health", [], ["access"]).act_first == []


def test_a_large_cluster_leads_with_a_bounded_list_and_says_how_many_more() -> None:
    findings = [finding("BACKUP_NONE", guest(100 + i), f"{100 + i} has no backup") for i in range(300)]
    report = make_report("health", findings, ["backups"], limit=50)
    assert len(report.act_first) == ACT_FIRST_LIMIT and report.act_first_more == 300 - ACT_FIRST_LIMIT


def test_later_pages_continue_the_findings_without_repeating_the_lead() -> None:
    findings = [finding("BACKUP_NONE", guest(100 + i), f"{100 + i} has no backup") for i in range(120)]
    whole = make_report("health", findings, ["backups"], limit=None)
    first, second = page(whole, 0, 50), page(whole, 50, 50)
    assert first.act_first == whole.act_first and first.act_first_more == whole.act_first_more
    assert second.act_first == [] and second.act_first_more == 0 and second.findings[0].subject.id == "150"
