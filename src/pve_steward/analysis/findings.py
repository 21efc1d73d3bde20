"""Findings and reports: the typed answer every diagnostic gives.

A finding names a stable ``code`` (see :mod:`codes`), a severity, the subject it is about, a
one-line message, the evidence it decided on and how to fix it. Reports rank findings worst
first and stay compact: counts for everything, details for the first ``limit``.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from pve_steward.analysis.catalog import code_info
from pve_steward.analysis.codes import CODES
from pve_steward.models import Model, Untrusted, UntrustedValues


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


SubjectKind = Literal[
    "cluster",
    "node",
    "guest",
    "storage",
    "backup_job",
    "replication_job",
    "ha_resource",
    "ha_rule",
    "task",
    "certificate",
    "disk",
    "zfs_pool",
    "ceph",
    "pbs",
    "repository",
    "data",
    "user",
    "token",
    "group",
    "role",
    "acl",
    "realm",
    "pool",
    "firewall_rule",
    "sdn_zone",
    "sdn_vnet",
    "sdn_fabric",
    "sdn_controller",
    "sdn_subnet",
]


# Cluster text in a finding is marked (design records 261203-3, 261206-57): the subject's id, name and node
# are names the cluster chose; the message is our sentence with such names in it, so the whole
# sentence is marked; every string in the evidence is a value read from the cluster.
class Subject(Model):
    kind: SubjectKind
    id: Untrusted = Field(description="vmid, node name, storage id, job id, UPID...")
    name: Untrusted | None = Field(None, description="guest name or another label")
    node: Untrusted | None = None


CLUSTER = Subject(kind="cluster", id="cluster")  # the subject of cluster-wide findings (one shared, read-only)


class Finding(Model):
    code: str = Field(description="stable UPPER_SNAKE code; see docs/tools.md")
    severity: Severity
    subject: Subject
    message: Untrusted  # our sentence quoting cluster names: marked whole
    evidence: UntrustedValues = Field(
        default_factory=dict, description="the values the rule decided on (its strings are cluster text)"
    )
    remediation: str = ""


def finding(
    code: str,
    subject: Subject,
    message: str,
    evidence: dict[str, Any] | None = None,
    remediation: str | None = None,
    severity: Severity | None = None,
) -> Finding:
    """Create a finding for a registered code (an unregistered code is a programming error)."""
    info = CODES.get(code) or code_info(code)
    # validated, straight through pydantic-core (the model's __init__ adds a Python frame and a
    # keyword dict; model_construct is slower still): thousands of findings per report
    return _validate_finding(  # type: ignore[no-any-return]
        {
            "code": code,
            "severity": severity or info.severity,
            "subject": subject,
            "message": message,
            "evidence": evidence or {},
            "remediation": remediation if remediation is not None else info.remediation,
        }
    )


_validate_finding = Finding.__pydantic_validator__.validate_python


def rank_key(f: Finding) -> tuple[int, str, str, str]:
    return (-_SEVERITY_RANK[f.severity], f.code, f.subject.kind, f.subject.id.zfill(12))


class Counts(Model):
    critical: int = 0
    warning: int = 0
    info: int = 0


class Gaps(Model):
    """What leaves an area not fully checked: skipped checks and failed reads that name it (their ``affects``)."""

    skipped: int = 0
    unread: int = 0


class SuppressionRef(Model):
    """A configured suppression as reports name it (design record 261203-19)."""

    code: str
    target: str | None = Field(None, description="the object it is limited to; none: every finding of the code")
    reason: str
    expires: str | None = None


class SuppressedFinding(Model):
    """A finding a configured suppression silenced: listed apart, never dropped."""

    code: str
    severity: Severity
    subject: Subject
    message: Untrusted
    suppressed_by: SuppressionRef


class ActFirst(Model):
    """One subject's findings of the report's worst severity and what fixes them: where to start."""

    subject: Subject
    codes: list[str] = Field(description="the findings' codes, worst first (their messages are in findings)")
    fix: list[str] = Field(description="what fixes them, one line per distinct remediation")


# Where to start: what a problem of the subject's kind takes down with it. A cluster-, Ceph- or node-wide
# problem reaches every guest on it, a storage's every volume on it, a job every guest it covers; a
# guest's problem is its own; an account's or a firewall rule's is an exposure, not an outage. Kinds
# not named here come last, in the findings' order.
KIND_SCOPE: dict[str, int] = {
    kind: rank
    for rank, kinds in enumerate(
        (
            ("cluster", "ceph"),
            ("node", "disk", "zfs_pool", "certificate"),
            ("storage", "pbs"),
            ("ha_resource", "ha_rule", "replication_job", "backup_job", "task"),
            ("sdn_zone", "sdn_vnet", "sdn_fabric", "sdn_controller", "repository"),
            ("guest",),
        )
    )
    for kind in kinds
}
ACT_FIRST_LIMIT = 12  # subjects led with: the rest of them are in findings (a large cluster has hundreds)


def act_first(ranked: list[Finding]) -> tuple[list[ActFirst], int]:
    """The findings of the worst severity present (critical, else warning), grouped by subject, the subjects
    ordered by what their problems reach (KIND_SCOPE), then by how many they have; the first
    ACT_FIRST_LIMIT of them, and how many more there are."""
    worst = next((f.severity for f in ranked if f.severity is not Severity.INFO), None)
    groups: dict[tuple[str, str, str | None], list[Finding]] = {}
    for f in ranked:
        if f.severity == worst:
            groups.setdefault((f.subject.kind, f.subject.id, f.subject.node), []).append(f)
    order = sorted(
        enumerate(groups.values()),
        key=lambda p: (KIND_SCOPE.get(p[1][0].subject.kind, len(KIND_SCOPE)), -len(p[1]), p[0]),
    )
    led = [
        ActFirst(
            subject=found[0].subject,
            codes=list(dict.fromkeys(f.code for f in found)),
            fix=list(dict.fromkeys(f.remediation for f in found if f.remediation)),
        )
        for _, found in order[:ACT_FIRST_LIMIT]
    ]
    return led, max(0, len(groups) - ACT_FIRST_LIMIT)


class Report(Model):
    """Findings ranked worst first; compact by default, led by what to do first."""

    area: str
    status: Literal["ok", "info", "warning", "critical"] = Field(description="worst severity found")
    complete: bool = Field(
        description="false when some data could not be read or analysed (see DATA_INCOMPLETE, ANALYSIS_FAILED)"
    )
    summary: str = ""
    counts: Counts
    act_first: list[ActFirst] = Field(
        default_factory=list,
        description="where to start: the findings of the worst severity (critical, else warning) grouped by "
        "subject with their fix, cluster- and node-wide problems first",
    )
    act_first_more: int = Field(0, description="subjects with such findings not led with (they are in findings)")
    findings: list[Finding]
    omitted: int = Field(0, description="findings not listed (pass detail=true or a higher limit)")
    next_offset: int | None = Field(None, description="more findings follow: pass this as offset for them")
    checked: list[str] = Field(default_factory=list, description="what was examined")
    by_area: dict[str, Counts] = Field(default_factory=dict)
    limited: dict[str, Gaps] = Field(
        default_factory=dict,
        description="areas a skipped check (CHECK_SKIPPED) or failed read (DATA_INCOMPLETE) leaves not fully "
        "checked, over every finding (listed or not): an area examined, absent here and without findings passed",
    )
    by_code: dict[str, int] = Field(default_factory=dict)
    suppressed_counts: Counts = Field(
        default_factory=Counts, description="findings silenced by configured suppressions (not in counts)"
    )
    suppressed: list[SuppressedFinding] = Field(
        default_factory=list, description="the silenced findings (the first 100), with the suppression that did it"
    )
    suppressions_unused: list[SuppressionRef] = Field(
        default_factory=list, description="suppressions for the areas examined that matched no finding"
    )
    suppressions_expired: list[SuppressionRef] = Field(
        default_factory=list, description="suppressions past their expiry: their findings are reported again"
    )


def _limited(findings: list[Finding]) -> dict[str, Gaps]:
    """Per area, the skipped checks and failed reads that name it: a client showing one page of findings can
    still tell a clean area from one whose gaps are on a later page."""
    out: dict[str, Gaps] = {}
    for f in findings:
        if f.code not in ("CHECK_SKIPPED", "DATA_INCOMPLETE"):
            continue
        affects = f.evidence.get("affects") if isinstance(f.evidence, dict) else None
        for a in affects if isinstance(affects, list) else []:
            gaps = out.setdefault(str(a), Gaps())
            if f.code == "CHECK_SKIPPED":
                gaps.skipped += 1
            else:
                gaps.unread += 1
    return dict(sorted(out.items()))


def make_report(area: str, findings: list[Finding], checked: list[str], limit: int | None = 50) -> Report:
    ranked = sorted(findings, key=rank_key)
    # count distinct (code, severity) pairs first: a handful, however many findings there are
    pairs = Counter((f.code, f.severity) for f in ranked)
    counts = dict.fromkeys(Severity, 0)
    by_code: dict[str, int] = {}
    by_area: dict[str, dict[Severity, int]] = {}
    for (code, severity), n in pairs.items():
        counts[severity] += n
        by_code[code] = by_code.get(code, 0) + n
        by_area.setdefault((CODES.get(code) or code_info(code)).area, dict.fromkeys(Severity, 0))[severity] += n
    worst = ranked[0].severity.value if ranked else "ok"
    shown = ranked if limit is None else ranked[:limit]
    complete = "DATA_INCOMPLETE" not in by_code and "ANALYSIS_FAILED" not in by_code
    total = Counts(**{s.value: n for s, n in counts.items()})
    summary = f"{total.critical} critical, {total.warning} warning, {total.info} info" + (
        "" if complete else "; INCOMPLETE: some data could not be read or analysed"
    )
    led, more = act_first(ranked)
    return Report(
        limited=_limited(ranked),
        area=area,
        status=worst,
        complete=complete,
        counts=total,
        act_first=led,
        act_first_more=more,
        by_code=dict(sorted(by_code.items())),
        findings=shown,
        omitted=len(ranked) - len(shown),
        checked=checked,
        by_area={a: Counts(**{s.value: n for s, n in c.items()}) for a, c in sorted(by_area.items())},
        summary=summary,
    )
