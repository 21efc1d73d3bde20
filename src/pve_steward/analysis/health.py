"""The aggregate health check: every diagnostic over one snapshot of the cluster, ranked together."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pve_steward.analysis.catalog import AREAS as ALL_AREAS
from pve_steward.analysis.catalog import Code, checks_in, load_checks, register_codes
from pve_steward.analysis.data import ClusterData, incomplete_findings
from pve_steward.analysis.findings import Finding, Report, Subject, finding
from pve_steward.analysis.suppression import Suppression, with_suppressions
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.errors import MALFORMED_VALUE_ERRORS

Analyzer = Callable[[ClusterData, Thresholds, Callable[[], None]], list[Finding]]
log = logging.getLogger(__name__)


register_codes(
    "data",
    __name__,
    Code(
        "ANALYSIS_FAILED",
        "warning",
        "An area could not be analysed",
        "The cluster answered with a value of an unexpected type or form (text where a number belongs, a list "
        "where a name belongs), and the area's checks stopped there. Its findings are incomplete; the other areas "
        "are reported as usual.",
        "Look at the value named in the evidence. If PVE returned it, report it with the PVE version.",
    ),
)


def _failed(area: str, exc: Exception) -> Finding:
    detail = str(exc)[:200]  # cluster text may be in it: evidence, not the message
    return finding(
        "ANALYSIS_FAILED",
        Subject(kind="data", id=f"analysis/{area}"),
        f"the {area} checks stopped on a value of unexpected type or form ({type(exc).__name__})",
        {"area": area, "error_type": type(exc).__name__, "error": detail},
    )


def _nothing() -> None:
    return None


def _area_analyzer(area: str) -> Analyzer:
    """Every ``@check`` of the area (analysis/catalog.py), in declaration order."""

    def run(d: ClusterData, t: Thresholds, between: Callable[[], None] = _nothing) -> list[Finding]:
        found: list[Finding] = []
        for c in checks_in([area]):
            found += c.func(d, t)
            between()
        return found

    return run


# The health check's areas in report order: every area some check is declared in, except the areas run
# only when asked for by name (their own operation): "upgrade" is about a planned upgrade, not about the
# cluster's health today (design record 261203-18).
ON_DEMAND = ("upgrade",)
_CHECK_AREAS = {c.area for c in load_checks().values()}
AREAS: dict[str, Analyzer] = {
    area: _area_analyzer(area) for area in ALL_AREAS if area in _CHECK_AREAS and area not in ON_DEMAND
}
EXTRA_AREAS: dict[str, Analyzer] = {area: _area_analyzer(area) for area in ON_DEMAND}


def diagnose(
    data: ClusterData,
    t: Thresholds,
    areas: list[str] | None = None,
    limit: int | None = 50,
    name: str = "health",
    suppress: Sequence[Suppression] = (),
    between: Callable[[], None] = _nothing,
) -> Report:
    """Run the chosen areas (default: all); every failed read is reported once; ``suppress`` silences
    findings as configured (listed apart in the report, at ``data.now``). ``between`` is called after
    each check: the server's analysis thread gives way there to cheap calls (urgency.Urgency)."""
    chosen = areas or list(AREAS)
    findings: list[Finding] = []
    for area in chosen:
        try:
            findings += (AREAS.get(area) or EXTRA_AREAS[area])(data, t, between)
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
