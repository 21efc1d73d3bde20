"""The aggregate health check: every diagnostic over one snapshot of the cluster, ranked together."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pve_steward.analysis.backups import analyze_backups
from pve_steward.analysis.capacity import analyze_nodes, analyze_storage
from pve_steward.analysis.catalog import checks_in, load_checks
from pve_steward.analysis.ceph import analyze_ceph
from pve_steward.analysis.cluster import analyze_cluster, analyze_ha
from pve_steward.analysis.data import ClusterData, incomplete_findings
from pve_steward.analysis.findings import Finding, Report, Subject, finding
from pve_steward.analysis.guests import analyze_guests
from pve_steward.analysis.migration import analyze_migratability
from pve_steward.analysis.operations import (
    analyze_certificates,
    analyze_hardware,
    analyze_repositories,
    analyze_tasks,
    analyze_updates,
)
from pve_steward.analysis.replication import analyze_replication
from pve_steward.analysis.suppression import Suppression, with_suppressions
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.errors import MALFORMED_VALUE_ERRORS

Analyzer = Callable[[ClusterData, Thresholds], list[Finding]]
log = logging.getLogger(__name__)

_LEGACY: dict[str, Analyzer] = {
    "cluster": lambda d, t: analyze_cluster(d),
    "ha": lambda d, t: analyze_ha(d),
    "backups": analyze_backups,
    "migration": lambda d, t: analyze_migratability(d, verdicts=False)[0],
    "capacity": lambda d, t: analyze_storage(d, t) + analyze_nodes(d, t),
    "replication": analyze_replication,
    "guests": analyze_guests,
    "operations": lambda d, t: (
        analyze_tasks(d, t)
        + analyze_certificates(d, t)
        + analyze_repositories(d)
        + analyze_updates(d)
        + analyze_hardware(d, t)
    ),
    "ceph": lambda d, t: analyze_ceph(d.ceph) if d.ceph else [],
}


def _area_analyzer(area: str) -> Analyzer:
    """The area's checks: those written before checks became units, then every ``@check`` of the area."""
    legacy = _LEGACY.get(area)

    def run(d: ClusterData, t: Thresholds) -> list[Finding]:
        found = legacy(d, t) if legacy else []
        for c in checks_in([area]):
            found += c.func(d, t)
        return found

    return run


# Areas run only when asked for by name (their own operation), never by the health check: "upgrade" is
# about a planned upgrade, not about the cluster's health today (design record 261203-18).
ON_DEMAND = ("upgrade",)
AREAS: dict[str, Analyzer] = {
    area: _area_analyzer(area)
    for area in dict.fromkeys([*_LEGACY, *(c.area for c in load_checks().values())])
    if area not in ON_DEMAND
}
EXTRA_AREAS: dict[str, Analyzer] = {area: _area_analyzer(area) for area in ON_DEMAND}


def diagnose(
    data: ClusterData,
    t: Thresholds,
    areas: list[str] | None = None,
    limit: int | None = 50,
    name: str = "health",
    suppress: Sequence[Suppression] = (),
) -> Report:
    """Run the chosen areas (default: all); every failed read is reported once; ``suppress`` silences
    findings as configured (listed apart in the report, at ``data.now``)."""
    chosen = areas or list(AREAS)
    findings: list[Finding] = []
    for area in chosen:
        try:
            findings += (AREAS.get(area) or EXTRA_AREAS[area])(data, t)
        except MALFORMED_VALUE_ERRORS as exc:  # one area's bad data must not cost the whole report, nor pass silently
            log.warning("analysis of %s failed on cluster data", area, exc_info=True)
            findings.append(_failed(area, exc))
    seen: set[str] = set()
    for area in chosen:
        for f in incomplete_findings(data, area):
            if f.subject.id not in seen:
                seen.add(f.subject.id)
                findings.append(f)
    return with_suppressions(name, findings, chosen, limit, suppress, data.now)


def _failed(area: str, exc: Exception) -> Finding:
    detail = str(exc)[:200]  # cluster text may be in it: evidence, not the message
    return finding(
        "ANALYSIS_FAILED",
        Subject(kind="data", id=f"analysis/{area}"),
        f"the {area} checks stopped on a value of unexpected type or form ({type(exc).__name__})",
        {"area": area, "error_type": type(exc).__name__, "error": detail},
    )
