"""Suppressions: a user silences a finding by code, or by code and object, with a reason and an expiry.

A suppressed finding is never dropped: every report counts and lists it apart from the findings, with
the reason and expiry that silenced it. An expired suppression no longer matches (its findings come
back, and the report names it as expired); a suppression that matched nothing in the areas examined is
named as unused. Pure: ``now`` is injected (design record 261203-19).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from pve_steward.analysis.catalog import load_checks
from pve_steward.analysis.codes import CODES
from pve_steward.analysis.findings import (
    Counts,
    Finding,
    Report,
    SuppressedFinding,
    SuppressionRef,
    make_report,
    rank_key,
)
from pve_steward.analysis.suppressionrule import OBJECT_KEYS, Suppression, parse_suppressions

__all__ = [
    "OBJECT_KEYS",
    "Applied",
    "Suppression",
    "apply",
    "check_known",
    "parse_suppressions",
    "ref",
    "with_suppressions",
]


def check_known(rules: Sequence[Suppression]) -> None:
    """Refuse, at start, a suppression of a code no check emits: a typo would silence nothing, silently."""
    load_checks()
    for i, rule in enumerate(rules, start=1):
        if rule.code not in CODES:
            close = difflib.get_close_matches(rule.code, list(CODES), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(
                f"suppress entry {i} (code {rule.code}): field 'code': no finding has this code{hint}; "
                "see docs/tools.md for the codes"
            )


@dataclass
class Applied:
    """The outcome of applying the rules to one report's findings."""

    kept: list[Finding]
    suppressed: list[tuple[Finding, Suppression]]
    matched: set[int] = field(default_factory=set)  # indexes of rules that silenced something
    expired: list[Suppression] = field(default_factory=list)


def apply(findings: Sequence[Finding], rules: Sequence[Suppression], now: float) -> Applied:
    """Split findings into kept and suppressed; expired rules match nothing and are listed."""
    live = [(i, r) for i, r in enumerate(rules) if not r.expired(now)]
    codes = {r.code for _, r in live}
    out = Applied(kept=[], suppressed=[], expired=[r for r in rules if r.expired(now)])
    for f in findings:
        rule = None
        if f.code in codes:
            for i, r in live:
                if r.matches(f):
                    rule = r
                    out.matched.add(i)
                    break
        if rule is None:
            out.kept.append(f)
        else:
            out.suppressed.append((f, rule))
    return out


def ref(rule: Suppression) -> SuppressionRef:
    return SuppressionRef(
        code=rule.code,
        target=rule.target,
        reason=rule.reason,
        expires=rule.expires.isoformat() if rule.expires else None,
    )


SUPPRESSED_LISTED = 100


def with_suppressions(
    area: str,
    findings: list[Finding],
    checked: list[str],
    limit: int | None,
    rules: Sequence[Suppression],
    now: float,
) -> Report:
    """The report of ``findings`` with ``rules`` applied: the one place every diagnostic report is suppressed."""
    if not rules:
        return make_report(area, findings, checked, limit)
    applied = apply(findings, rules, now)
    report = make_report(area, applied.kept, checked, limit)
    counts = Counts()
    listed: list[SuppressedFinding] = []
    for f, rule in sorted(applied.suppressed, key=lambda p: rank_key(p[0])):
        setattr(counts, f.severity.value, getattr(counts, f.severity.value) + 1)
        if len(listed) < SUPPRESSED_LISTED:
            listed.append(
                SuppressedFinding(
                    code=f.code, severity=f.severity, subject=f.subject, message=f.message, suppressed_by=ref(rule)
                )
            )
    gaps = {f.code for f, _ in applied.suppressed} & {"DATA_INCOMPLETE", "ANALYSIS_FAILED"}
    complete = report.complete and not gaps  # a silenced gap is still a gap
    examined = set(checked) | {"data"}
    unused = [
        ref(r)
        for i, r in enumerate(rules)
        if i not in applied.matched and not r.expired(now) and CODES.get(r.code) and CODES[r.code].area in examined
    ]
    total = sum(counts.model_dump().values())
    summary = (
        report.summary
        if complete or not report.complete
        else report.summary + "; INCOMPLETE: some data could not be read or analysed"
    )
    return report.model_copy(
        update={
            "complete": complete,
            "summary": summary + (f"; {total} suppressed" if total else ""),
            "suppressed_counts": counts,
            "suppressed": listed,
            "suppressions_unused": unused,
            "suppressions_expired": [ref(r) for r in applied.expired],
        }
    )
