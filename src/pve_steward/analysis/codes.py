"""The registry of finding codes: the public contract.

Codes never change meaning and are never reused; adding one is a minor change, changing or
removing one is a major change with a design record. Each code is declared beside the function
that emits it (``@check`` or ``register_codes``, analysis/catalog.py); ``CODES`` and ``AREAS`` are
collected from those declarations once ``load_checks()`` ran. ``docs/tools.md`` is generated from
them and a test fails if a code is emitted that is not registered.
"""

from __future__ import annotations

from pve_steward.analysis.catalog import AREAS, CODES, CodeInfo, load_checks

__all__ = ["AREAS", "CODES", "CodeInfo", "render_codes"]


def render_codes() -> str:
    load_checks()
    lines = [
        "# Finding codes",
        "",
        "Stable codes: they never change meaning and are never reused. Severity is the default; the rule "
        "says when a finding escalates. Thresholds in parentheses are defaults, overridable with "
        "`--thresholds name=value,...`.",
        "",
    ]
    for area in AREAS:
        lines += [f"## {area}", "", "| code | severity | meaning | rule |", "|---|---|---|---|"]
        for info in CODES.values():
            if info.area == area:
                lines.append(f"| `{info.code}` | {info.severity} | {info.title} | {info.rule} |")
        lines.append("")
    return "\n".join(lines).rstrip()
