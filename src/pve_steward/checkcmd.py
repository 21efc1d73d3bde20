"""``pve-steward check``: the diagnostics in a terminal, for cron and alerting without an LLM.

Printed like Proxmox's own upgrade checker (``pve8to9``): one section per area, one line per
finding (FAIL / WARN / INFO / SKIP), a summary. ``--json`` prints the report instead. The exit
code follows the monitoring-plugin convention: 0 OK (or only info), 1 warning, 2 critical,
3 unknown (the check itself could not run).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from pve_steward.analysis.codes import AREAS, CODES
from pve_steward.analysis.findings import Finding, Report

EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNKNOWN = 0, 1, 2, 3
_LABEL = {"critical": "FAIL", "warning": "WARN", "info": "INFO"}
_COLOR = {"FAIL": "\033[1;31m", "WARN": "\033[1;33m", "INFO": "\033[36m", "SKIP": "\033[2m", "PASS": "\033[32m"}
_RESET = "\033[0m"
TITLES = {
    "data": "DATA",
    "cluster": "CLUSTER AND NODES",
    "ha": "HIGH AVAILABILITY",
    "backups": "BACKUPS",
    "migration": "MIGRATABILITY",
    "capacity": "CAPACITY",
    "replication": "REPLICATION",
    "guests": "GUESTS",
    "operations": "OPERATIONS",
}


def exit_code(report: Report) -> int:
    if report.counts.critical:
        return EXIT_CRITICAL
    if report.counts.warning:
        return EXIT_WARNING
    return EXIT_OK


def use_color(mode: str, stream: TextIO) -> bool:
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    return stream.isatty()


def _label(f: Finding) -> str:
    return "SKIP" if f.code == "CHECK_SKIPPED" else _LABEL[f.severity.value]


def render(report: Report, color: bool) -> str:
    def paint(label: str) -> str:
        return f"{_COLOR[label]}{label}:{_RESET}" if color else f"{label}:"

    by_area: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_area.setdefault(CODES[f.code].area, []).append(f)
    lines: list[str] = []
    for area in AREAS:
        if area not in report.checked and area not in by_area:
            continue
        lines += [f"= {TITLES[area]} =", ""]
        found = by_area.get(area, [])
        if not found:
            lines.append(f"{paint('PASS')} no problems found")
        for f in found:
            lines.append(f"{paint(_label(f))} [{f.code}] {f.message}")
            if f.remediation and f.severity.value != "info":
                lines.append(f"      fix: {f.remediation}")
        lines.append("")
    c = report.counts
    lines += [
        "= SUMMARY =",
        "",
        f"TOTAL:    {c.critical + c.warning + c.info + report.omitted}",
        f"CRITICAL: {c.critical}",
        f"WARNING:  {c.warning}",
        f"INFO:     {c.info}",
    ]
    if not report.complete:
        lines += [
            "",
            "NOTE: some data could not be read or analysed (see DATA sections); this is not a clean bill of health.",
        ]
    return "\n".join(lines) + "\n"


def print_report(report: Report, as_json: bool, color_mode: str, out: TextIO = sys.stdout) -> int:
    if as_json:
        out.write(report.model_dump_json(indent=2) + "\n")
    else:
        out.write(render(report, use_color(color_mode, out)))
    return exit_code(report)
