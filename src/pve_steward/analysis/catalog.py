"""A check is one unit: its codes and their words, the reads it needs, its thresholds, the privilege it
needs, the anchor checks it covers and the PVE source it follows, declared beside its pure function.

``@check(...)`` registers all of that at import. The code catalogue (``CODES``), ``docs/tools.md``,
``docs/checks.md``, the thresholds schema, the health check's areas and the collector's reads are all
collected from the registrations (design record 261203-14), so adding a check touches one module in
``analysis/checks/`` and its fixture test.

This module imports nothing else of ours but the vocabulary of PVE's filtered lists (pve/visibility.py):
findings, codes and the collector import it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pve_steward.pve.visibility import Filter

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

    ``filters``: the lists PVE filters by the caller's privileges that the check stands on, this read's own
    and any other it counts rows of (e.g. the pools check counts guests of /cluster/resources). Unless each
    shows this token every row (pve/visibility.py ``Visibility.whole``), the read is not made and the check
    is CHECK_SKIPPED naming what is hidden and which privilege would show it: a partial list never passes
    for a clean one. A list that refuses the whole read (a 403) needs no filter: ``privilege`` names it.
    """

    key: str
    path: str
    per: Literal["cluster", "node"] = "cluster"
    params: tuple[tuple[str, Any], ...] = ()
    privilege: str = "Sys.Audit on /nodes/{node}"
    absent_ok: bool = False
    filters: tuple[Filter, ...] = ()
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
    above: float | None = None  # strictly greater than (a ratio or a period that must not be 0)
    integer: bool = False  # a count: the schema takes whole numbers only


@dataclass(frozen=True)
class Check:
    name: str
    area: str
    codes: tuple[Code, ...]
    needs: tuple[Need, ...]
    thresholds: tuple[Threshold, ...]
    # anchor checks covered, e.g. "cv4pve-diag:WN0002", "check_pve:services", "pve8to9:daemons"; an entry may
    # name which of the check's codes answer it: "cv4pve-diag:WG0020=BACKUP_STALE/BACKUP_NONE" (default: all)
    anchors: tuple[str, ...]
    pve: str  # the PVE source the rule follows: repository, file, function
    func: Callable[..., Any] = field(compare=False)
    doc: str = ""

    def anchor_codes(self) -> dict[str, tuple[str, ...]]:
        """Each anchor id this check covers, with the codes that answer it."""
        out: dict[str, tuple[str, ...]] = {}
        for entry in self.anchors:
            ident, _, named = entry.partition("=")
            out[ident] = tuple(named.split("/")) if named else tuple(c.code for c in self.codes)
        return out


CODES: dict[str, CodeInfo] = {}
CHECKS: dict[str, Check] = {}
# The areas of the checks written before checks became units, in report order; any other area follows
# them in alphabetical order, so the order never depends on which module happened to load first.
_FIRST_AREAS = (
    "data",
    "cluster",
    "ha",
    "backups",
    "migration",
    "capacity",
    "replication",
    "guests",
    "operations",
    "ceph",
)
AREAS: list[str] = []
# The modules that declare checks or codes outside ``analysis/checks`` (written before checks became
# units), in report order; ``health`` last, as it reads the areas of every check when it loads.
_MODULES = tuple(
    f"pve_steward.analysis.{m}"
    for m in (
        "data",
        "cluster",
        "backups",
        "migration.findings",
        "capacity",
        "replication",
        "guests",
        "operations",
        "ceph",
        "planner.placement",
        "planner.evacuation",
        "planner.ceph_steps",
    )
)
_ORIGIN: dict[str, str] = {}  # code -> the module that declared it (orders the catalogue)


def _area_rank(area: str) -> tuple[int, str]:
    return (_FIRST_AREAS.index(area), "") if area in _FIRST_AREAS else (len(_FIRST_AREAS), area)


def register_code(area: str, code: Code | CodeInfo, module: str = "") -> None:
    """Register one code of ``area``; ``module`` (the declaring module's ``__name__``) orders the catalogue."""
    if code.code in CODES:
        raise ValueError(f"finding code {code.code!r} registered twice")
    CODES[code.code] = CodeInfo(code.code, area, code.severity, code.title, code.rule, code.remediation)
    _ORIGIN[code.code] = module
    if area not in AREAS:
        AREAS.append(area)
        AREAS.sort(key=_area_rank)


def register_codes(area: str, module: str, *codes: Code) -> None:
    """Codes emitted by shared machinery or by planners rather than by a check of the health report
    (DATA_INCOMPLETE, evacuation verdicts, ...), declared beside the function that emits them."""
    for c in codes:
        register_code(area, c, module)


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
        _refuse(name, func, codes, anchors or [])
        for c in codes:
            register_code(area, c, func.__module__)
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


def _refuse(name: str, func: Callable[..., Any], codes: list[Code], anchors: list[str]) -> None:
    """Check a declaration whole before registering any of it (a refused check leaves nothing behind)."""
    if name in CHECKS:
        raise ValueError(f"check {name!r} registered twice")
    try:
        inspect.signature(func).bind(None, None)
    except TypeError:
        raise ValueError(f"check {name!r} must take (data, thresholds)") from None
    own = [c.code for c in codes]
    taken = sorted({c for c in own if c in CODES or own.count(c) > 1})
    if taken:
        raise ValueError(f"check {name!r}: finding code(s) {', '.join(taken)} registered twice")
    for entry in anchors:
        stray = [c for c in entry.partition("=")[2].split("/") if c and c not in own]
        if stray:
            raise ValueError(f"check {name!r}: anchor {entry!r} names codes it does not declare: {stray}")


_loaded: list[str] = []  # the modules load_checks imports, in order; empty until it first runs


def load_checks() -> dict[str, Check]:
    """Import every module that declares checks (registration happens at import); idempotent.

    The catalogue is then put in a fixed order (area, declaring module, declaration), whichever module
    a process happened to import first, so generated docs and schemas never depend on import order.
    """
    if not _loaded:
        import pve_steward.analysis.checks as package

        _loaded.extend(_MODULES)
        _loaded.extend(sorted(i.name for i in pkgutil.iter_modules(package.__path__, package.__name__ + ".")))
        _loaded.append("pve_steward.analysis.health")
        for name in _loaded:
            importlib.import_module(name)
        _settle()
    return CHECKS


def _settle() -> None:
    rank = {m: i for i, m in enumerate(_loaded)}
    seq = {code: i for i, code in enumerate(CODES)}

    def code_key(code: str) -> tuple[tuple[int, str], int, int]:
        return (_area_rank(CODES[code].area), rank.get(_ORIGIN.get(code, ""), len(rank)), seq[code])

    ordered = sorted(CODES, key=code_key)
    codes = {c: CODES[c] for c in ordered}
    CODES.clear()
    CODES.update(codes)
    pos = {name: i for i, name in enumerate(CHECKS)}
    by = sorted(CHECKS, key=lambda n: (_area_rank(CHECKS[n].area), rank.get(CHECKS[n].func.__module__, 0), pos[n]))
    checks = {n: CHECKS[n] for n in by}
    CHECKS.clear()
    CHECKS.update(checks)


def code_info(code: str) -> CodeInfo:
    """A code's entry, loading every check first if it is not registered yet (KeyError if unknown)."""
    info = CODES.get(code)
    if info is None:
        load_checks()
        info = CODES[code]
    return info


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
