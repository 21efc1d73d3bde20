"""Named, documented thresholds for every diagnostic; overridable through configuration."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from pve_steward.analysis.catalog import load_checks


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    backup_stale_default_hours: float = Field(26, gt=0, description="stale age when no enabled job covers the guest")
    backup_stale_critical_factor: float = Field(2, ge=1, description="critical beyond this multiple of the threshold")
    backup_task_window_hours: float = Field(48, gt=0, description="how far back vzdump runs are examined")
    storage_warning_pct: float = Field(80, gt=0, le=100)
    storage_critical_pct: float = Field(90, gt=0, le=100)
    thin_overcommit_ratio: float = Field(
        1.0, gt=0, description="provisioned/capacity above which thin storage is overcommitted"
    )
    memory_overcommit_warning_pct: float = Field(100, gt=0)
    memory_overcommit_critical_pct: float = Field(150, gt=0)
    memory_pressure_warning_pct: float = Field(85, gt=0, le=100)
    memory_pressure_critical_pct: float = Field(95, gt=0, le=100)
    swap_warning_pct: float = Field(20, ge=0, le=100)
    swap_critical_pct: float = Field(50, ge=0, le=100)
    vcpu_ratio_warning: float = Field(4, gt=0)
    capacity_headroom_pct: float = Field(
        10, ge=0, le=90, description="memory a node keeps free when it takes guests (N+1, like the planner default)"
    )
    replication_lag_factor: float = Field(4, ge=1)
    replication_fail_critical: int = Field(3, ge=1)
    lock_stuck_minutes: float = Field(60, gt=0)
    snapshot_age_days: float = Field(30, gt=0)
    snapshot_count: int = Field(10, ge=1)
    task_window_hours: float = Field(24, gt=0)
    cert_warning_days: float = Field(30, gt=0)
    cert_critical_days: float = Field(7, gt=0)
    wearout_warning_pct: float = Field(30, ge=0, le=100, description="remaining life")
    wearout_critical_pct: float = Field(15, ge=0, le=100, description="remaining life")
    agent_probe_limit: int = Field(200, ge=0, description="most guest-agent probes per check")

    def get(self, name: str) -> float:
        """A threshold declared by a check (``analysis/catalog.py Threshold``), by name; a plain
        ``Thresholds()`` (tests) answers the declared default."""
        if name in type(self).model_fields:
            return float(getattr(self, name))
        return float(thresholds_model().model_fields[name].default)


@cache
def thresholds_model() -> type[Thresholds]:
    """The thresholds schema: the fields above plus every threshold the checks declare, with their defaults."""
    fields: dict[str, Any] = {}
    for c in load_checks().values():
        for th in c.thresholds:
            if th.name in Thresholds.model_fields or th.name in fields:
                raise ValueError(f"threshold {th.name!r} declared twice (check {c.name})")
            fields[th.name] = (
                float,
                Field(th.default, ge=th.minimum, le=th.maximum, description=f"{th.description} ({c.name})"),
            )
    return create_model("Thresholds", __base__=Thresholds, **fields)


def thresholds_from(overrides: dict[str, float]) -> Thresholds:
    """Defaults with overrides; an unknown name is an error that lists the known ones."""
    model = thresholds_model()
    unknown = sorted(set(overrides) - set(model.model_fields))
    if unknown:
        raise ValueError(f"unknown threshold(s) {', '.join(unknown)}; known: {', '.join(model.model_fields)}")
    return model(**overrides)
