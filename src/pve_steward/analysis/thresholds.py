"""Named, documented thresholds for every diagnostic; overridable through configuration."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from pve_steward.analysis.catalog import load_checks


class Thresholds(BaseModel):
    """Settings read before any check runs; every check's own thresholds are declared on the check
    (``Threshold`` in analysis/catalog.py) and read with ``t.get(name)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_probe_limit: int = Field(200, ge=0, description="most guest-agent probes per check")

    def get(self, name: str) -> float:
        """A threshold declared by a check (``analysis/catalog.py Threshold``), by name; a plain
        ``Thresholds()`` (tests) answers the declared default."""
        value: float = getattr(self, name) if name in type(self).model_fields else _default(name)
        return value


def _default(name: str) -> float:
    field = thresholds_model().model_fields.get(name)
    if field is None:
        raise KeyError(f"no threshold {name!r} is declared; known: {', '.join(thresholds_model().model_fields)}")
    value: float = field.default
    return value


@cache
def thresholds_model() -> type[Thresholds]:
    """The thresholds schema: the fields above plus every threshold the checks declare, with their defaults."""
    fields: dict[str, Any] = {}
    for c in load_checks().values():
        for th in c.thresholds:
            if th.name in Thresholds.model_fields or th.name in fields:
                raise ValueError(f"threshold {th.name!r} declared twice (check {c.name})")
            bound = {"gt": th.above} if th.above is not None else {"ge": th.minimum}
            fields[th.name] = (
                int if th.integer else float,
                Field(th.default, le=th.maximum, description=f"{th.description} ({c.name})", **bound),
            )
    return create_model("Thresholds", __base__=Thresholds, **fields)


def thresholds_from(overrides: dict[str, float]) -> Thresholds:
    """Defaults with overrides; an unknown name is an error that lists the known ones."""
    model = thresholds_model()
    unknown = sorted(set(overrides) - set(model.model_fields))
    if unknown:
        raise ValueError(f"unknown threshold(s) {', '.join(unknown)}; known: {', '.join(model.model_fields)}")
    return model(**overrides)
