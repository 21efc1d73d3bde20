"""The anchor checks admins already run (cv4pve-diag, check_pve, pve8to9) and which of our checks cover them.

``anchors.yaml`` (packaged beside this module) is data about the anchors only; coverage comes from the
``anchors=[...]`` of each ``@check`` (analysis/catalog.py), so a claim lives beside the code that makes
it good. ``docs/checks.md`` is generated from both (design record 261203-14).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from pve_steward.analysis.catalog import Check, load_checks

NOT_IMPLEMENTED = "not implemented yet"


@dataclass(frozen=True)
class Anchor:
    anchor: str  # the tool: cv4pve-diag, check_pve, pve8to9
    code: str  # its check's code, mode or name
    what: str
    api: bool  # the PVE API alone can supply the data
    area: str = ""
    why: str = ""  # why we do not cover it (used while no check does)

    @property
    def id(self) -> str:
        return f"{self.anchor}:{self.code}"


@cache
def anchors() -> tuple[Anchor, ...]:
    """Every anchor check, in the file's order; a malformed row is an error naming it."""
    text = resources.files("pve_steward.analysis").joinpath("anchors.yaml").read_text(encoding="utf-8")
    out: list[Anchor] = []
    for i, row in enumerate(yaml.safe_load(text) or []):
        try:
            out.append(Anchor(**row))
        except TypeError as exc:
            raise ValueError(f"anchors.yaml row {i + 1} ({row!r}): {exc}") from None
    ids = [a.id for a in out]
    doubled = sorted({i for i in ids if ids.count(i) > 1})
    if doubled:
        raise ValueError(f"anchors.yaml lists {', '.join(doubled)} more than once")
    return tuple(out)


def coverage() -> dict[str, list[tuple[Check, tuple[str, ...]]]]:
    """Anchor id -> the checks that declare it, each with the codes that answer it."""
    out: dict[str, list[tuple[Check, tuple[str, ...]]]] = {}
    for c in load_checks().values():
        for ident, codes in c.anchor_codes().items():
            out.setdefault(ident, []).append((c, codes))
    return out


def unknown_anchors() -> list[str]:
    """``check: anchor id`` for every anchor a check names that anchors.yaml does not list."""
    known = {a.id for a in anchors()}
    return [f"{c.name}: {ident}" for c in load_checks().values() for ident in c.anchor_codes() if ident not in known]
