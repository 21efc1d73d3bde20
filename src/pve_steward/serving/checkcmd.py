"""``pve-steward check``: the diagnostics in a terminal, for cron and alerting without an LLM.

Printed like Proxmox's own upgrade checker (``pve8to9``): a header naming what was checked
(cluster, PVE version, token, time), one section per area with a PASS line when the area found
nothing to warn about and one line per finding (FAIL / WARN / NOTICE / INFO / SKIP), then a summary
in the same words. Cluster text reaches the terminal with its control characters escaped.
``--json`` prints the report with each finding's level and each area's result, or a JSON error
object when the check could not run. Exit codes (design record 261203-8): 0 OK (or only info), 1 warning, 2 critical,
3 unknown (the check itself could not run), 64 usage or configuration error.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

from pve_steward.analysis.codes import AREAS, CODES
from pve_steward.analysis.findings import Finding, Report, Severity, Subject
from pve_steward.serving.exitcodes import EXIT_CRITICAL, EXIT_OK, EXIT_UNKNOWN, EXIT_WARNING

# pve8to9's levels (pve-manager PVE/CLI/pve8to9.pm log_pass/log_info/log_notice/log_skip/log_warn/log_fail):
# PASS an area checked and clean; INFO a fact to know, nothing to do; NOTICE worth a look, not a problem;
# SKIP not checked (a privilege, a cap, a feature not configured); WARN a problem; FAIL a problem to fix first.
# Design record 261206-62: a finding keeps its severity (a public contract); the level is how `check` prints it.
LABELS = ("PASS", "INFO", "NOTICE", "SKIP", "WARN", "FAIL")
RESULT_RANK = {"PASS": 0, "INFO": 1, "NOTICE": 2, "SKIP": 3, "WARN": 4, "FAIL": 5}
# Info findings that state a fact with nothing to do (their fix says so): INFO. Every other info finding asks
# for a look (a token without expiry, a job disabled, updates pending): NOTICE, as pve8to9 prints such lines.
FACTS = frozenset(
    {"CLUSTER_STANDALONE", "GUEST_LOCKED", "MIGRATE_TEMPLATE", "REPLICATION_PENDING_REMOVAL", "UPGRADE_NODE_UPGRADED"}
)
_COLOR = {
    "FAIL": "\033[1;31m",
    "WARN": "\033[1;33m",
    "NOTICE": "\033[1m",
    "INFO": "\033[36m",
    "SKIP": "\033[2m",
    "PASS": "\033[32m",
}
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
# Control (Cc), format (Cf: bidi overrides, zero-width), surrogates, private use, line/paragraph separators:
# cluster text reaches a terminal with each of them escaped, never as the escape sequence it may carry.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


def terminal_safe(text: object) -> str:
    """Text for a terminal line: every control or format character shown as ``\\xNN``/``\\uNNNN``, never sent."""
    value = "" if text is None else str(text)
    if value.isprintable():  # the common case: nothing to escape (isprintable is false for every class above)
        return value
    return "".join(
        (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") if unicodedata.category(c) in _UNPRINTABLE else c
        for c in value
    )


@dataclass(frozen=True)
class Header:
    """What was checked, printed first so a saved report says where and when it came from."""

    cluster: str
    version: str
    token: str
    time: float

    def when(self) -> str:
        return dt.datetime.fromtimestamp(self.time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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


def level(f: Finding) -> str:
    """How ``check`` prints a finding: FAIL, WARN, NOTICE, INFO or SKIP (its severity stays as it is)."""
    if f.code == "CHECK_SKIPPED":
        return "SKIP"
    if f.severity is Severity.CRITICAL:
        return "FAIL"
    if f.severity is Severity.WARNING:
        return "WARN"
    return "INFO" if f.code in FACTS else "NOTICE"


@dataclass(frozen=True)
class Line:
    """One printed line: a level and our text, the finding it stands for (if any) and its fix."""

    label: str
    text: str
    finding: Finding | None = None
    fix: str = ""


@dataclass
class Section:
    """One area as ``check`` prints it: its result (the worst level in it) and its lines."""

    area: str
    title: str
    lines: list[Line] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)  # reads it needed that failed (DATA_INCOMPLETE)

    @property
    def result(self) -> str:
        labels = [x.label for x in self.lines] or ["PASS"]
        worst = max(labels, key=RESULT_RANK.__getitem__)
        return "WARN" if self.unread and RESULT_RANK[worst] < RESULT_RANK["WARN"] else worst


def _affects(f: Finding) -> list[str]:
    affects = f.evidence.get("affects") if isinstance(f.evidence, dict) else None
    return [str(a) for a in affects] if isinstance(affects, list) else []


def outline(report: Report) -> list[Section]:
    """The report as ``check`` prints it, in every format: one section per area examined, a PASS line when
    it was checked whole and nothing in it warns or fails, a SKIP line in each area a skipped check limits
    (in DATA when it names none), and a note in each area a failed read leaves unchecked."""
    shown = ["data"] + [a for a in AREAS if a != "data" and (a in report.checked or a in report.by_area)]
    sections = {a: Section(a, TITLES.get(a, a.upper())) for a in shown}
    for f in report.findings:
        area = CODES[f.code].area
        if f.code in ("CHECK_SKIPPED", "DATA_INCOMPLETE"):
            for other in _affects(f):
                if other in sections and other != "data":
                    if f.code == "DATA_INCOMPLETE":
                        sections[other].unread.append(f.message)
                    else:
                        sections[other].lines.append(_line(f))
            if f.code == "CHECK_SKIPPED" and any(a in sections for a in _affects(f) if a != "data"):
                continue  # said in the areas it limits
        sections[area if area in sections else "data"].lines.append(_line(f))
    for section in sections.values():
        _pass_line(section, report.complete)
    return [s for s in sections.values() if s.lines or s.unread]


def _line(f: Finding) -> Line:
    fix = f.remediation if f.remediation and f.severity is not Severity.INFO else ""
    return Line(level(f), f"[{f.code}] {f.message}", f, fix)


def _pass_line(section: Section, complete: bool) -> None:
    """PASS only for an area checked whole and clean: a skipped check or a failed read is no clean bill."""
    if section.unread or any(x.label in ("WARN", "FAIL", "SKIP") for x in section.lines):
        return
    if section.area != "data":
        section.lines.insert(0, Line("PASS", f"no warnings or failures in {section.title.lower()}"))
    elif complete:
        section.lines.insert(0, Line("PASS", "every read the checks needed succeeded"))


def tally(sections: list[Section]) -> Counter[str]:
    return Counter(x.label for s in sections for x in s.lines)


def _header_lines(header: Header, areas: list[str]) -> list[str]:
    return [
        "= PVE-STEWARD CHECK =",
        "",
        f"cluster:     {header.cluster}",
        f"PVE version: {header.version}",
        f"token:       {header.token}",
        f"time:        {header.when()}",
        f"areas:       {', '.join(areas)}",
        "",
    ]


def subject_words(s: Subject) -> str:
    """``guest 114 (scratch-build) pve3``: a subject in words, each part once ("cluster", "node pve3")."""
    ident = "" if s.id == s.kind else s.id
    # a node's own finding is "node pve3", a disk's "disk pve3:/dev/sdb": the node is said once
    node = "" if not s.node or s.id == s.node or s.id.startswith(f"{s.node}:") else s.node
    return " ".join(x for x in (s.kind, ident, f"({s.name})" if s.name else "", node) if x)


def act_first_lines(report: Report) -> list[str]:
    """The section a terminal reader starts with, as the MCP answer does (Report.act_first): the subjects with the
    worst findings, those that reach most first, each with its codes and fixes; cluster text escaped."""
    if not report.act_first:
        return []
    lines = ["= WHAT TO DO FIRST =", ""]
    for n, led in enumerate(report.act_first, start=1):
        lines.append(terminal_safe(f"{n}. {subject_words(led.subject)}: {', '.join(led.codes)}"))
        lines += [f"      fix: {terminal_safe(fix)}" for fix in led.fix]
    if report.act_first_more:
        lines.append(f"(and {report.act_first_more} more with {report.status} findings: in the sections below)")
    return [*lines, ""]


def render(report: Report, color: bool, header: Header | None = None, extra: list[str] | None = None) -> str:
    def paint(label: str) -> str:
        return f"{_COLOR[label]}{label}:{_RESET}" if color else f"{label}:"

    lines: list[str] = _header_lines(header, report.checked) if header else []
    lines += act_first_lines(report)
    sections = outline(report)
    for section in sections:
        lines += [f"= {section.title} =", ""]
        for line in section.lines:
            lines.append(f"{paint(line.label)} {terminal_safe(line.text)}")
            if line.fix:
                lines.append(f"      fix: {terminal_safe(line.fix)}")
        lines += [f"      not a clean bill: {terminal_safe(m)} (see DATA)" for m in section.unread]
        lines.append("")
    lines += [terminal_safe(x) for x in suppression_lines(report)]
    lines += [terminal_safe(x) for x in extra or []]
    counted = tally(sections)
    lines += ["= SUMMARY =", "", f"TOTAL: {sum(counted[label] for label in LABELS)}"]
    lines += [f"{label + ':':8}{counted[label]}" for label in LABELS]
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


def json_body(report: Report, header: Header | None = None) -> dict[str, Any]:
    """``check --json``: the report, each finding with the level ``check`` prints it at, and per area its
    result (PASS, NOTICE, SKIP, WARN, FAIL ...): SKIP apart from info, as in the text."""
    body: dict[str, Any] = report.model_dump(mode="json")
    for row, f in zip(body["findings"], report.findings, strict=True):
        row["level"] = level(f)
    sections = outline(report)
    counted = tally(sections)
    body["check"] = {
        "levels": {label: counted[label] for label in LABELS},
        "areas": [
            {
                "area": s.area,
                "title": s.title,
                "result": s.result,
                "levels": dict(Counter(x.label for x in s.lines)),
                "unread_reads": len(s.unread),
            }
            for s in sections
        ],
    }
    if header is not None:
        body["check"]["header"] = {
            "cluster": header.cluster,
            "pve_version": header.version,
            "token": header.token,
            "time": header.when(),
        }
    return body


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
    if as_json:  # ASCII: no control character of cluster text reaches the terminal (JSON escapes the rest)
        out.write(json.dumps(json_body(report, header), indent=2, ensure_ascii=True) + "\n")
    else:
        out.write(render(report, use_color(color_mode, out), header, extra))
    return exit_code(report)


def print_error(kind: str, message: str, code: int, as_json: bool) -> int:
    """The check could not run: one line on stderr, or a JSON object on stdout for machine readers."""
    if as_json:
        body = {"status": "unknown" if code == EXIT_UNKNOWN else "usage", "exit_code": code}
        print(json.dumps({**body, "error": {"kind": kind, "message": message}}, indent=2, ensure_ascii=True))
    else:
        print(f"pve-steward check: {terminal_safe(message)}", file=sys.stderr)
    return code
