"""A check is one unit: its codes and their words, the reads it needs, its thresholds, the privilege it
needs, the anchor checks it covers and the PVE source it follows, declared beside its pure function.

``@check(...)`` registers all of that at import. The code catalogue (``CODES``), ``docs/tools.md``,
``docs/checks.md``, the thresholds schema, the health check's areas and the collector's reads are all
collected from the registrations (design record 261203-14), so adding a check touches one module in
``analysis/checks/`` and its fixture test.

This module imports nothing else of ours: findings, codes and the collector import it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, TypeVar

Severity = Literal["info", "warning", "critical"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class CodeInfo:
    """One finding code: the public contract (never changes meaning, never reused)."""

    code: str
    area: str
    severity: str  # default; the rule says when it escalates
    title: str
    rule: str
    remediation: str = ""


@dataclass(frozen=True)
class Code:
    """A code as a check declares it (the area comes from the check)."""

    code: str
    severity: Severity
    title: str
    rule: str
    remediation: str = ""


@dataclass(frozen=True)
class Need:
    """One API read a check stands on.

    ``path`` is a template: ``{node}`` is filled with each online node (``per="node"``). Reads with
    the same key are made once however many checks need them. A 403 becomes CHECK_SKIPPED naming
    ``privilege``; ``absent_ok`` says a 404/501 means "this release has no such endpoint" (no gap).
    ``each=(key, field)`` makes one read per row of another per-node read (declared by the same check),
    after it: ``{item}`` in the path or a parameter value is that row's ``field`` (a path item must be a
    PVE storage-id-like name), at most ``limit`` per node (the rest is CHECK_SKIPPED); the answers are
    ``data.read(key, node)`` as a dict item -> answer.
    """

    key: str
    path: str
    per: Literal["cluster", "node"] = "cluster"
    params: tuple[tuple[str, Any], ...] = ()
    privilege: str = "Sys.Audit on /nodes/{node}"
    absent_ok: bool = False
    each: tuple[str, str] | None = None
    limit: int = 32


@dataclass(frozen=True)
class Threshold:
    """A named threshold with the anchors' default; it becomes a field of the thresholds schema."""

    name: str
    default: float
    description: str
    minimum: float | None = 0
    maximum: float | None = None


@dataclass(frozen=True)
class Check:
    name: str
    area: str
    codes: tuple[Code, ...]
    needs: tuple[Need, ...]
    thresholds: tuple[Threshold, ...]
    anchors: tuple[str, ...]  # e.g. "cv4pve:NODE-SERVICE-STOPPED", "check_pve:services", "pve8to9:check_kvm..."
    pve: str  # the PVE source the rule follows: repository, file, function
    func: Callable[..., Any] = field(compare=False)
    doc: str = ""


CODES: dict[str, CodeInfo] = {}
CHECKS: dict[str, Check] = {}
# Areas in report order; a check in a new area appends it.
AREAS: list[str] = []


def register_code(area: str, code: Code | CodeInfo) -> None:
    if code.code in CODES:
        raise ValueError(f"finding code {code.code!r} registered twice")
    CODES[code.code] = CodeInfo(code.code, area, code.severity, code.title, code.rule, code.remediation)
    if area not in AREAS:
        AREAS.append(area)


def check(
    area: str,
    *,
    codes: list[Code],
    needs: list[Need] | None = None,
    thresholds: list[Threshold] | None = None,
    anchors: list[str] | None = None,
    pve: str = "",
) -> Callable[[F], F]:
    """Register the decorated ``func(data, thresholds) -> list[Finding]`` as a check of ``area``."""

    def register(func: F) -> F:
        name = f"{func.__module__.rsplit('.', 1)[-1]}.{func.__name__}"
        if name in CHECKS:
            raise ValueError(f"check {name!r} registered twice")
        for c in codes:
            register_code(area, c)
        CHECKS[name] = Check(
            name=name,
            area=area,
            codes=tuple(codes),
            needs=tuple(needs or ()),
            thresholds=tuple(thresholds or ()),
            anchors=tuple(anchors or ()),
            pve=pve,
            func=func,
            doc=(func.__doc__ or "").strip().split("\n\n")[0],
        )
        return func

    return register


@cache
def _import_checks() -> None:
    import pve_steward.analysis.checks as package

    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)


def load_checks() -> dict[str, Check]:
    """Import every module of ``analysis/checks`` (registration happens at import); idempotent."""
    _import_checks()
    return CHECKS


def checks_in(areas: list[str] | set[str]) -> list[Check]:
    return [c for c in load_checks().values() if c.area in areas]


def needs_of(areas: list[str] | set[str]) -> dict[str, tuple[Need, tuple[str, ...]]]:
    """Each read the checks of ``areas`` need, once, with the areas that stand on it."""
    out: dict[str, tuple[Need, tuple[str, ...]]] = {}
    for c in checks_in(areas):
        for need in c.needs:
            have = out.get(need.key)
            if have is not None and have[0] != need:
                raise ValueError(f"read {need.key!r} declared differently by two checks")
            touched = tuple(dict.fromkeys((*(have[1] if have else ()), c.area)))
            out[need.key] = (need, touched)
    return out
