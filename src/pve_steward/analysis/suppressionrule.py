"""A ``[[suppress]]`` rule and its parsing, apart from applying rules (suppression.py), so the settings
can be read at start without importing the report models (issue 17)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

if TYPE_CHECKING:
    from pve_steward.analysis.findings import Finding

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
