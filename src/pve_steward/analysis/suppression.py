"""Suppressions: a user silences a finding by code, or by code and object, with a reason and an expiry.

A suppressed finding is never dropped: every report counts and lists it apart from the findings, with
the reason and expiry that silenced it. An expired suppression no longer matches (its findings come
back, and the report names it as expired); a suppression that matched nothing in the areas examined is
named as unused. Pure: ``now`` is injected (design record 261203-19).
"""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

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

CODE_PATTERN = r"^[A-Z][A-Z0-9_]{2,63}$"
OBJECT_KEYS = ("subject", "node", "vmid", "storage")


class Suppression(BaseModel):
    """One ``[[suppress]]`` entry of the config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: Annotated[str, Field(pattern=CODE_PATTERN, description="the finding code to silence, e.g. BACKUP_STALE")]
    reason: Annotated[str, Field(min_length=3, max_length=500, description="why it is silenced (shown in reports)")]
    subject: str | None = Field(None, description="only the finding about this subject id (any kind: vmid, node...)")
    node: str | None = Field(None, description="only findings about this node or about objects on it")
    vmid: int | None = Field(None, ge=100, le=999_999_999, description="only findings about this guest")
    storage: str | None = Field(None, description="only findings about this storage")
    expires: dt.datetime | None = Field(
        None, description="when the suppression stops (a date: at the end of that day, UTC); then the finding returns"
    )

    @field_validator("expires", mode="before")
    @classmethod
    def _date(cls, v: Any) -> Any:
        if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
            return dt.datetime.combine(v, dt.time.max, dt.UTC)
        if isinstance(v, str) and len(v.strip()) == 10:
            return dt.datetime.combine(dt.date.fromisoformat(v.strip()), dt.time.max, dt.UTC)
        return v

    @field_validator("expires")
    @classmethod
    def _utc(cls, v: dt.datetime | None) -> dt.datetime | None:
        return v.replace(tzinfo=dt.UTC) if v is not None and v.tzinfo is None else v

    @model_validator(mode="after")
    def _one_object(self) -> Suppression:
        given = [k for k in OBJECT_KEYS if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of {', '.join(OBJECT_KEYS)} (got {', '.join(given)})")
        return self

    @property
    def target(self) -> str | None:
        """The object it is limited to, as reports show it (None: every finding of the code)."""
        for key in OBJECT_KEYS:
            value = getattr(self, key)
            if value is not None:
                return f"{key} {value}"
        return None

    def expired(self, now: float) -> bool:
        return self.expires is not None and self.expires.timestamp() <= now

    def matches(self, f: Finding) -> bool:
        if f.code != self.code:
            return False
        s = f.subject
        if self.subject is not None:
            return s.id == self.subject
        if self.vmid is not None:
            return s.kind == "guest" and s.id == str(self.vmid)
        if self.storage is not None:
            return s.kind == "storage" and s.id == self.storage
        if self.node is not None:
            return (s.kind == "node" and s.id == self.node) or s.node == self.node
        return True


def parse_suppressions(entries: Any) -> list[Suppression]:
    """The config's ``suppress`` list; an invalid entry names its number, its code and the field."""
    if not isinstance(entries, list):
        raise ValueError("suppress must be a list of entries ([[suppress]] tables in the config file)")
    out = []
    for i, entry in enumerate(entries, start=1):
        code = entry.get("code") if isinstance(entry, dict) else None
        label = f"suppress entry {i}" + (f" (code {code})" if code else "")
        if isinstance(entry, Suppression):
            out.append(entry)
            continue
        if not isinstance(entry, dict):
            raise ValueError(
                f"{label}: must be a table with code, reason and optionally subject/node/vmid/storage, expires"
            )
        try:
            out.append(Suppression.model_validate(entry))
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                where = ".".join(str(p) for p in e["loc"])
                msg = str(e["msg"]).removeprefix("Value error, ")
                if e["type"] == "extra_forbidden":
                    msg = f"unknown field; fields are code, reason, {', '.join(OBJECT_KEYS)}, expires"
                elif e["type"] == "string_pattern_mismatch":
                    msg = "must be a finding code like BACKUP_STALE (upper case, digits, underscores)"
                problems.append(f"field '{where}': {msg}" if where else msg)
            raise ValueError(f"{label}: " + "; ".join(problems)) from None
    return out


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
