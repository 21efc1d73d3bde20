"""Diagnostic tools: thin wrappers that collect, call the pure analysis, and return the report."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio.to_thread
from pydantic import Field, TypeAdapter

from pve_steward.analysis.codes import CODES
from pve_steward.analysis.data import incomplete_findings
from pve_steward.analysis.findings import Report
from pve_steward.analysis.health import AREAS
from pve_steward.analysis.migration.findings import analyze_migratability
from pve_steward.analysis.migration.model import Migratability
from pve_steward.analysis.suppression import with_suppressions
from pve_steward.models import Model
from pve_steward.pve.ids import NodeName, VmId
from pve_steward.pveio.admission import heavy
from pve_steward.security.guard import Refused, guarded
from pve_steward.tools.collect import collect
from pve_steward.tools.context import ToolContext
from pve_steward.tools.runs import run_check, suppressions, thresholds

if TYPE_CHECKING:
    Area = str
else:  # the areas are collected from the checks (analysis/catalog.py), so the schema lists each one
    Area = Literal[tuple(AREAS)]
Limit = Annotated[int, Field(ge=1, le=1000)]
Offset = Annotated[int, Field(ge=0)]


# Findings per detail=true answer, as compact JSON: with the counts, under 100 KB (issue 17, 261203-11).
DETAIL_BUDGET = 80_000


# Arguments that only choose what of a report a caller sees: callers that differ only in them share one
# run (admission.heavy), and each gets its own page of the whole report.
PAGING = ("detail", "limit", "offset")


async def _whole(t: ToolContext, areas: list[str], name: str) -> Report:
    """Every finding of the areas, ranked: one run serves every caller that differs only in PAGING."""
    await t.progress(0, 2, f"reading the cluster for {', '.join(areas)}")
    report = await run_check(t.client, t.settings, t.now(), areas, None, name, t.app.pbs)
    await t.progress(2, 2, report.summary)
    return report


def later_page(arguments: dict[str, Any]) -> bool:
    """A call for a page past the first: answered from the run that served the first (admission.heavy)."""
    return bool(arguments.get("offset"))


def paged(t: ToolContext, report: Report, arguments: dict[str, Any]) -> Report:
    """This caller's answer from a whole report: ``limit`` findings from ``offset``, or (detail) what fits
    (``arguments``: the call's, with the handler's defaults)."""
    return refer(t, page(report, arguments["offset"], None if arguments["detail"] else arguments["limit"]))


def page(report: Report, offset: int, limit: int | None, budget: int = DETAIL_BUDGET) -> Report:
    """The findings from ``offset``: ``limit`` of them, or (detail) as many as fit ``budget`` bytes."""
    ranked = report.findings
    if limit is not None:
        shown = ranked[offset : offset + limit]
    else:
        shown, used = [], 0
        for finding in ranked[offset:]:
            size = len(finding.model_dump_json())
            if shown and used + size > budget:
                break
            shown.append(finding)
            used += size
    following = offset + len(shown)
    return report.model_copy(
        update={
            "findings": shown,
            "omitted": len(ranked) - len(shown),
            "next_offset": following if following < len(ranked) else None,
        }
        # where to start leads the first page; a later one continues the findings
        | ({} if offset == 0 else {"act_first": [], "act_first_more": 0})
    )


def refer(t: ToolContext, report: Report) -> Report:
    """Remediations name operations as the client calls them in this mode (and say when one is missing)."""
    naming = t.app.naming
    findings = [f.model_copy(update={"remediation": naming.text(f.remediation)}) for f in report.findings]
    led = [a.model_copy(update={"fix": [naming.text(x) for x in a.fix]}) for a in report.act_first]
    return report.model_copy(update={"findings": findings, "act_first": led})


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def check_cluster_health(
    t: ToolContext,
    areas: list[Area] | None = None,
    detail: bool = False,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Report:
    """Every diagnostic in one call, findings ranked worst first."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, list(areas) if areas else list(AREAS), "health")


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def diagnose_backups(t: ToolContext, detail: bool = False, limit: Limit = 50, offset: Offset = 0) -> Report:
    """Backup coverage, freshness, failed runs, verification, retention."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, ["backups"], "backups")


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def diagnose_capacity(t: ToolContext, detail: bool = False, limit: Limit = 50, offset: Offset = 0) -> Report:
    """Storage usage and thin overcommit, node memory, swap, vCPU ratio, N+1."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, ["capacity"], "capacity")


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def diagnose_ha(t: ToolContext, detail: bool = False, limit: Limit = 50, offset: Offset = 0) -> Report:
    """Quorum, nodes, HA manager and resource states, maintenance, HA rules and groups."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, ["cluster", "ha"], "cluster_ha")


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def diagnose_replication(t: ToolContext, detail: bool = False, limit: Limit = 50, offset: Offset = 0) -> Report:
    """Failing, lagging, disabled replication jobs."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, ["replication"], "replication")


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def diagnose_guests(t: ToolContext, detail: bool = False, limit: Limit = 50, offset: Offset = 0) -> Report:
    """Stuck locks, old snapshots, silent guest agents, onboot."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, ["guests"], "guests")


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def diagnose_operations(t: ToolContext, detail: bool = False, limit: Limit = 50, offset: Offset = 0) -> Report:
    """Failed tasks, certificates, repositories, pending updates, SMART, ZFS."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, ["operations"], "operations")


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged, continues=later_page)
async def diagnose_pbs(t: ToolContext, detail: bool = False, limit: Limit = 50, offset: Offset = 0) -> Report:
    """Proxmox Backup Server: datastores, GC, verify/prune/sync jobs, verification per group, PVE correlation."""
    del detail, limit, offset  # each caller's page is cut by `paged`
    return await _whole(t, ["pbs"], "pbs")


class MigratabilityReport(Model):
    report: Report
    verdicts: dict[str, int] = Field(description="how many guests can move live / offline / restart / not at all")
    guests: list[Migratability] = Field(
        description="per-guest verdicts (non-live first), or the one asked for; in the list view a guest that a "
        "guest-wide reason blocks has no per-target detail (ask for that guest, or detail=true)"
    )
    omitted_guests: int = Field(0, description="guests not listed in this answer (before offset and after it)")
    guests_total: int | None = Field(None, description="guests the verdicts cover")
    next_offset: int | None = Field(None, description="more guests follow: pass this as offset for them")


# Guests per detail=true page, as compact JSON: with the first page's findings, an answer under 100 KB.
GUEST_BUDGET = 60_000
FINDINGS_BUDGET = 16_000  # the report's findings on a detail page (the rest are counted)
_VERDICT_JSON = TypeAdapter(Migratability)
RANK = {"blocked": 0, "restart": 1, "offline": 2, "live": 3}


def migratability_page(t: ToolContext, whole: MigratabilityReport, arguments: dict[str, Any]) -> MigratabilityReport:
    """This caller's page of a whole run: guests from ``offset``, ``limit`` of them in the list view (a guest
    blocked guest-wide without per-target detail) or, with detail, as many full verdicts as fit GUEST_BUDGET."""
    ranked, offset = whole.guests, arguments["offset"]
    if arguments["vmid"] is not None:
        shown, offset = ranked, 0
    elif arguments["detail"]:
        shown, used = [], 0
        for m in ranked[offset:]:
            size = len(_VERDICT_JSON.dump_json(m))
            if shown and used + size > GUEST_BUDGET:
                break
            shown.append(m)
            used += size
    else:
        shown = [_brief(m) for m in ranked[offset : offset + arguments["limit"]]]
    following = offset + len(shown)
    if arguments["detail"]:
        report = page(whole.report, 0, None, FINDINGS_BUDGET) if offset == 0 else page(whole.report, 0, 0)
    else:
        report = page(whole.report, 0, arguments["limit"])
    return whole.model_copy(
        update={
            "report": refer(t, report.model_copy(update={"next_offset": None})),
            "guests": shown,
            "omitted_guests": len(ranked) - len(shown),
            "guests_total": len(ranked),
            "next_offset": following if following < len(ranked) else None,
        }
    )


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=migratability_page, continues=later_page)
async def diagnose_migratability(
    t: ToolContext,
    vmid: VmId | None = None,
    node: NodeName | None = None,
    detail: bool = False,
    limit: Limit = 50,
    offset: Offset = 0,
) -> MigratabilityReport:
    """Per guest: live / offline / restart / blocked with every reason, checked against PVE's precondition."""
    del detail, limit, offset  # each caller's page is cut by `migratability_page`
    await t.progress(0, 2, "reading guest configs and migrate preconditions")
    data = await collect(
        t.client, t.now(), ["migration"], vmids=[vmid] if vmid is not None else None, preconditions=True
    )
    if vmid is not None and vmid not in data.guests:
        raise Refused(f"no guest {vmid} is visible in this cluster")
    if node is not None and node not in data.nodes:
        raise Refused(f"no node '{node}' in this cluster (nodes: {', '.join(sorted(data.nodes))})")
    vmids = (
        [vmid]
        if vmid is not None
        else sorted(v for v, g in data.guests.items() if node is None or g.get("node") == node)
    )
    findings, verdicts = await anyio.to_thread.run_sync(functools.partial(analyze_migratability, data, vmids=vmids))
    report = with_suppressions(
        "migration",
        findings + incomplete_findings(data, "migration"),
        ["migration"],
        None,
        suppressions(t.settings),
        data.now,
    )
    counts: dict[str, int] = {}
    for m in verdicts:
        counts[m.verdict] = counts.get(m.verdict, 0) + 1
    await t.progress(2, 2, report.summary)
    ranked = sorted(verdicts, key=lambda m: (RANK[m.verdict], m.vmid))
    return MigratabilityReport(report=report, verdicts=counts, guests=ranked, guests_total=len(ranked))


def _brief(m: Migratability) -> Migratability:
    """The list view of a verdict: per-target detail adds nothing when a guest-wide reason blocks."""
    if m.verdict == "blocked" and any(r.blocking for r in m.reasons):
        return dataclasses.replace(m, targets=[])
    return m


class CodeDoc(Model):
    code: str
    area: str
    default_severity: str
    title: str
    rule: str
    remediation: str
    thresholds: dict[str, float] = Field(default_factory=dict, description="thresholds in effect for this rule")


@guarded(toolset="diagnostics")
async def explain_finding(t: ToolContext, code: Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]{2,63}$")]) -> CodeDoc:
    """What a finding code means, its rule, default severity and fix (no cluster access)."""
    info = CODES.get(code)
    if info is None:
        raise Refused(f"unknown finding code {code}; see docs/tools.md for the list")
    current = thresholds(t.settings).model_dump()
    used = {k: float(v) for k, v in current.items() if k in info.rule}
    return CodeDoc(
        code=code,
        area=info.area,
        default_severity=info.severity,
        title=info.title,
        rule=info.rule,
        remediation=t.app.naming.text(info.remediation),
        thresholds=used,
    )
