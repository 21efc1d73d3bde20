"""``pve-steward check``: the diagnostics in a terminal, for cron and alerting without an LLM.

Printed like Proxmox's own upgrade checker (``pve8to9``): a header naming what was checked
(cluster, PVE version, token, time), one section per area with a PASS line when the area found
nothing to warn about and one line per finding (FAIL / WARN / INFO / SKIP), then a summary in
the same words. ``--json`` prints the report instead, or a JSON error object when the check could
not run. Exit codes (design record 261203-8): 0 OK (or only info), 1 warning, 2 critical,
3 unknown (the check itself could not run), 64 usage or configuration error.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

from pve_steward.analysis.codes import AREAS, CODES
from pve_steward.analysis.findings import Finding, Report
from pve_steward.serving.exitcodes import EXIT_CRITICAL, EXIT_OK, EXIT_UNKNOWN, EXIT_WARNING

LABELS = ("PASS", "INFO", "SKIP", "WARN", "FAIL")
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
    "ceph": "CEPH",
    "access": "ACCESS",
    "firewall": "FIREWALL",
    "pbs": "PROXMOX BACKUP SERVER",
    "upgrade": "UPGRADE READINESS (PVE 8 TO 9)",
    "node": "NODE HEALTH",
    "storage": "STORAGE",
    "sdn": "SDN",
}


@dataclass(frozen=True)
class Header:
    """What was checked, printed first so a saved report says where and when it came from."""

    cluster: str
    version: str
    token: str
    time: float


def cluster_name(status: Any) -> str:
    """The cluster's name from /cluster/status, or the node's for a single node without a cluster."""
    rows = [r for r in status if isinstance(r, dict)] if isinstance(status, list) else []
    nodes = [str(r.get("name")) for r in rows if r.get("type") == "node"]
    for row in rows:
        if row.get("type") == "cluster":
            return f"{row.get('name')} ({len(nodes)} nodes)"
    return f"single node {nodes[0]} (no cluster)" if nodes else "unknown"


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


def _header_lines(header: Header, areas: list[str]) -> list[str]:
    when = dt.datetime.fromtimestamp(header.time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return [
        "= PVE-STEWARD CHECK =",
        "",
        f"cluster:     {header.cluster}",
        f"PVE version: {header.version}",
        f"token:       {header.token}",
        f"time:        {when}",
        f"areas:       {', '.join(areas)}",
        "",
    ]


def _section(area: str, found: list[Finding], complete: bool) -> list[tuple[str, str]]:
    """(label, text) lines of one area: PASS when nothing in it warns or fails, then its findings."""
    lines: list[tuple[str, str]] = []
    if not any(_label(f) in ("WARN", "FAIL") for f in found):
        if area == "data":
            if complete:
                lines.append(("PASS", "every read the checks needed succeeded"))
        else:
            lines.append(("PASS", f"no warnings or failures in {TITLES.get(area, area.upper()).lower()}"))
    for f in found:
        lines.append((_label(f), f"[{f.code}] {f.message}"))
        if f.remediation and f.severity.value != "info":
            lines.append(("", f"      fix: {f.remediation}"))
    return lines


def render(report: Report, color: bool, header: Header | None = None, extra: list[str] | None = None) -> str:
    def paint(label: str) -> str:
        return f"{_COLOR[label]}{label}:{_RESET}" if color else f"{label}:"

    by_area: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_area.setdefault(CODES[f.code].area, []).append(f)
    lines: list[str] = _header_lines(header, report.checked) if header else []
    tally: Counter[str] = Counter()
    for area in AREAS:
        if area != "data" and area not in report.checked and area not in by_area:
            continue
        section = _section(area, by_area.get(area, []), report.complete)
        if not section:
            continue
        lines += [f"= {TITLES.get(area, area.upper())} =", ""]
        for label, text in section:
            tally[label] += 1
            lines.append(f"{paint(label)} {text}" if label else text)
        lines.append("")
    lines += suppression_lines(report)
    lines += extra or []
    lines += ["= SUMMARY =", "", f"TOTAL: {sum(tally[label] for label in LABELS)}"]
    lines += [f"{label}:  {tally[label]}" for label in LABELS]
    if report.omitted:
        lines.append(f"(and {report.omitted} findings not listed)")
    silenced = sum(report.suppressed_counts.model_dump().values())
    if silenced:
        lines.append(f"SUPPRESSED: {silenced} (not counted above; see the SUPPRESSED section)")
    if not report.complete:
        lines += [
            "",
            "NOTE: some data could not be read or analysed (see the DATA section); this is not a clean bill of health.",
        ]
    return "\n".join(lines) + "\n"


def _target(target: str | None) -> str:
    return f" for {target}" if target else ""


def suppression_lines(report: Report) -> list[str]:
    """The SUPPRESSED section: what configured suppressions silenced, which expired, which matched nothing."""
    c = report.suppressed_counts
    if not (report.suppressed or report.suppressions_unused or report.suppressions_expired):
        return []
    lines = ["= SUPPRESSED =", ""]
    if report.suppressed:
        lines.append(f"{c.critical} critical, {c.warning} warning, {c.info} info finding(s) silenced by configuration:")
    for s in report.suppressed:
        by = s.suppressed_by
        until = f", until {by.expires}" if by.expires else ""
        lines.append(f"SUPPRESSED: [{s.code}] {s.message} (reason: {by.reason}{until})")
    shown = len(report.suppressed)
    total = c.critical + c.warning + c.info
    if total > shown:
        lines.append(f"(and {total - shown} more suppressed findings not listed)")
    for r in report.suppressions_expired:
        lines.append(f"EXPIRED: suppression of {r.code}{_target(r.target)} expired {r.expires}; its findings are back")
    for r in report.suppressions_unused:
        lines.append(f"UNUSED: suppression of {r.code}{_target(r.target)} matched no finding (reason: {r.reason})")
    return [*lines, ""]


def shell_lines(checks: list[tuple[str, str]], advice: str, summary: str) -> list[str]:
    """The section ``check --upgrade`` adds: what was checked, and the pve8to9 checks the API cannot observe."""
    lines = ["= CHECKS THAT NEED A SHELL ON THE NODE =", "", f"NOTE: {summary}", f"NOTE: not checked here; {advice}:"]
    lines += [f"  pve8to9 {name}: {what}" for name, what in checks]
    return [*lines, ""]


def print_report(
    report: Report,
    as_json: bool,
    color_mode: str,
    header: Header | None = None,
    out: TextIO = sys.stdout,
    extra: list[str] | None = None,
) -> int:
    if as_json:
        out.write(report.model_dump_json(indent=2) + "\n")
    else:
        out.write(render(report, use_color(color_mode, out), header, extra))
    return exit_code(report)


def print_error(kind: str, message: str, code: int, as_json: bool) -> int:
    """The check could not run: one line on stderr, or a JSON object on stdout for machine readers."""
    if as_json:
        body = {"status": "unknown" if code == EXIT_UNKNOWN else "usage", "exit_code": code}
        print(json.dumps({**body, "error": {"kind": kind, "message": message}}, indent=2))
    else:
        print(f"pve-steward check: {message}", file=sys.stderr)
    return code
