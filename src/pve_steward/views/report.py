"""``pve-steward check --html FILE`` and ``check --format markdown``.

The HTML report is the same views as the MCP Apps resources, in one self-contained file with the
data embedded: the data is what the tools answer (the server is run in-process against the same
client, read-only, granular), so the report and the views never disagree. Its header says what was
checked (cluster, PVE version, token, time, skipped checks); each part is a section drawn when it is
opened, and each answer in it a page as a view would read it (design record 261206-62). Without
JavaScript it shows the check as ``check`` prints it, as HTML. Markdown is for tickets: the same
levels, cluster text escaped so it cannot become markup, links or terminal escapes.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.server import MCPServer

from pve_steward.analysis.codes import CODES
from pve_steward.analysis.findings import Report, make_report
from pve_steward.analysis.thresholds import thresholds_from
from pve_steward.config import Settings
from pve_steward.pveio.client import ProxmoxClient
from pve_steward.serving.checkcmd import (
    LABELS,
    Header,
    Section,
    exit_code,
    json_body,
    outline,
    print_report,
    subject_words,
    tally,
    terminal_safe,
)
from pve_steward.views.apps import READS, view_config
from pve_steward.views.page import build_page

# read name (views.js extra()) -> tool and arguments: what the views read, a page each
REPORT_READS: dict[str, tuple[str, dict[str, Any]]] = dict(READS)
PLAN_STEPS = 10  # moves and blockers per evacuation plan in the report (each plan counts all of them)


def emit(
    args: argparse.Namespace,
    report: Report,
    settings: Settings,
    client: ProxmoxClient,
    header: Header | None,
    extra: list[str] | None = None,
) -> int:
    """What ``check`` prints (text, JSON or markdown) and, with ``--html``, the report file; ``extra``:
    plain lines after the findings (``check --upgrade``'s checks that need a shell)."""
    html_path: Path | None = getattr(args, "html", None)
    text = markdown(report, header) + ("\n" + "\n".join(md_line(line) for line in extra) + "\n" if extra else "")
    if html_path is not None:
        document = anyio.run(collect_document, report, settings, client)
        document["check"] = json_body(report, header)["check"]
        html_path.write_text(render_html(document, settings, static_html(report, header, extra)), encoding="utf-8")
        print(f"pve-steward: wrote {html_path}", file=sys.stderr)
    if getattr(args, "format", "text") == "markdown":
        sys.stdout.write(text)
        return exit_code(report)
    return print_report(report, args.json, args.color, header, extra=extra)


def md_line(line: str) -> str:
    """One of our own text lines as markdown: section titles become headings, the rest is escaped."""
    if line.startswith("= ") and line.endswith(" ="):
        return "### " + line.strip("= ").capitalize()
    return md(line) if line.strip() else ""


async def collect_document(report: Report, settings: Settings, client: ProxmoxClient) -> dict[str, Any]:
    """Everything the report shows, as the tools answer it (an answer that failed is said so)."""
    from pve_steward.server import build_server  # the composition root; imported late (it imports views)

    with tempfile.TemporaryDirectory() as state:
        # a read-only server of our own: it must not take the writer's place on a running server's log
        reporting = settings.model_copy(
            update={
                "granular_tools": True,
                "read_only": True,
                "audit_log": Path(state) / "audit.jsonl",
                "token_store": "memory",
            }
        )
        mcp = build_server(reporting, client=client, check_version_on_start=False)
        return await _collect(mcp, report)


async def _collect(mcp: MCPServer[Any], report: Report) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "health": report.model_dump(mode="json"),
        "extras": {},
        "evacuations": [],
        "problems": [],
    }
    async with Client(mcp) as c:

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
            result = await c.call_tool(tool, arguments)
            if result.is_error:
                text = " ".join(getattr(x, "text", "") for x in result.content)
                doc["problems"].append(f"{tool}: {text}")
                return None
            body: dict[str, Any] = result.structured_content or {}
            return body

        for name, (tool, arguments) in REPORT_READS.items():
            doc["extras"][name] = await call(tool, arguments)
        if "backups" in report.checked:  # the check's own findings: the report and the text never disagree
            doc["backups"] = backups_part(report).model_dump(mode="json")
        else:
            doc["backups"] = await call("diagnose_backups", {"detail": True})
        doc["migratability"] = await call("diagnose_migratability", {"detail": True})
        nodes = doc["extras"]["nodes"] or {}
        for node in nodes.get("items", []):
            if node.get("online"):
                plan = await call("plan_node_evacuation", {"node": text_of(node["name"]), "limit": PLAN_STEPS})
                if plan is not None:
                    doc["evacuations"].append(plan)
    return doc


def backups_part(report: Report) -> Report:
    """The backups area of the check, as ``diagnose_backups`` would answer it."""
    found = [f for f in report.findings if CODES[f.code].area == "backups"]
    return make_report("backups", found, ["backups"], limit=None)


def render_html(document: dict[str, Any], settings: Settings, fallback: str) -> str:
    config = view_config("document", {}, {}, thresholds_from(settings.thresholds))
    return build_page("pve-steward report", config, data=document, fallback=fallback)


def static_html(report: Report, header: Header | None, extra: list[str] | None = None) -> str:
    """The check as ``check`` prints it, as HTML for a reader without JavaScript: a header, the levels,
    each area as a section that opens. Every text is escaped here (cluster text included)."""
    e = html.escape
    sections = outline(report)
    counted = tally(sections)
    out = ['<div class="static">', f"<h1>pve-steward check: {e(report.status.upper())}</h1>"]
    if header is not None:
        rows = (("cluster", header.cluster), ("PVE version", header.version), ("token", header.token))
        out.append('<dl class="params">' + "".join(f"<dt>{k}</dt><dd>{e(v)}</dd>" for k, v in rows))
        out.append(f"<dt>time</dt><dd>{e(header.when())}</dd></dl>")
    out.append('<p class="levels">' + " ".join(f'<span class="l-{x}">{x} {counted[x]}</span>' for x in LABELS) + "</p>")
    if not report.complete:
        out.append('<p class="note">Incomplete: some data could not be read or analysed; not a clean bill.</p>')
    out.append(_static_areas(sections))
    out += [_static_section(s) for s in sections if any(x.finding for x in s.lines) or s.unread]
    if extra:
        out.append("<pre>" + e("\n".join(extra)) + "</pre>")
    return "\n".join([*out, "</div>"])


def _static_areas(sections: list[Section]) -> str:
    head = "".join(f'<th scope="col">{x}</th>' for x in ("area", "result", "FAIL", "WARN", "NOTICE", "INFO", "SKIP"))
    rows = []
    for s in sections:
        n = Counter(x.label for x in s.lines)
        cells = [
            f'<td data-label="area">{html.escape(s.title.lower())}</td>',
            f'<td data-label="result">{s.result}</td>',
        ]
        cells += [f'<td class="num" data-label="{x}">{n[x]}</td>' for x in ("FAIL", "WARN", "NOTICE", "INFO", "SKIP")]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="cards"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _static_section(s: Section) -> str:
    e = html.escape
    items = [f'<p class="note">not a clean bill: {e(m)}</p>' for m in s.unread]
    for x in s.lines:
        f = x.finding
        if f is None:
            continue
        fix = f"<div>fix: {e(f.remediation)}</div>" if f.remediation else ""
        items.append(
            f'<li><b class="l-{x.label}">{x.label}</b> <span class="mono">{e(f.code)}</span> '
            f"{e(subject_words(f.subject))}: {e(f.message)}{fix}</li>"
        )
    is_open = " open" if s.result in ("FAIL", "WARN") else ""
    return f"<details{is_open}><summary>{e(s.title)}: {s.result}</summary><ul>{''.join(items)}</ul></details>"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#!~])")


def text_of(value: object) -> str:
    """Cluster text in either shape it arrives in: plain (named in ``untrusted_fields``) or, from earlier
    servers, ``{"untrusted": true, "text": ...}``."""
    if isinstance(value, dict) and value.get("untrusted") is True:
        text = value.get("text")
        if isinstance(text, str):
            return text
    return "" if value is None else str(value)


def md(text: object) -> str:
    """Cluster text (either shape) as inert markdown: one line, control characters escaped (the markdown goes
    to a terminal too), markup characters escaped."""
    return _MD_SPECIAL.sub(r"\\\1", terminal_safe(" ".join(text_of(text).split())))


def markdown(report: Report, header: Header | None = None) -> str:
    """The check for a ticket: the levels ``check`` prints (PASS per clean area, SKIP apart), cluster text inert."""
    sections = outline(report)
    counted = tally(sections)
    lines = [f"## pve-steward check: {report.status.upper()}", ""]
    if header is not None:
        lines += [
            f"cluster {md(header.cluster)} · PVE {md(header.version)} · token {md(header.token)} · {header.when()}",
            "",
        ]
    lines += [
        " · ".join(f"{label} {counted[label]}" for label in reversed(LABELS))
        + (f" ({report.omitted} findings not listed)" if report.omitted else ""),
        "",
    ]
    if not report.complete:
        lines += ["> **Incomplete**: some data could not be read or analysed; this is not a clean bill of health.", ""]
    if report.act_first:
        lines += ["### What to do first", ""]
        for rank, led in enumerate(report.act_first, start=1):
            codes = ", ".join(f"`{c}`" for c in led.codes)
            fixes = "; ".join(md(fix) for fix in led.fix)
            lines.append(f"{rank}. **{md(subject_words(led.subject))}**: {codes}" + (f": {fixes}" if fixes else ""))
        if report.act_first_more:
            lines += ["", f"({report.act_first_more} more with {report.status} findings: in the areas below)"]
        lines.append("")
    lines += ["| area | result | FAIL | WARN | NOTICE | INFO | SKIP |", "|---|---|--:|--:|--:|--:|--:|"]
    for section in sections:
        n = Counter(x.label for x in section.lines)
        counts = " | ".join(str(n[label]) for label in ("FAIL", "WARN", "NOTICE", "INFO", "SKIP"))
        lines.append(f"| {md(section.title.lower())} | {section.result} | {counts} |")
    for section in sections:
        rows = [x for x in section.lines if x.finding is not None]
        if not rows and not section.unread:
            continue
        lines += ["", f"### {section.title.capitalize()}", ""]
        lines += [f"> not a clean bill: {md(m)} (see Data)" for m in section.unread]
        if not rows:
            continue
        lines += ["| level | code | subject | finding | fix |", "|---|---|---|---|---|"]
        for x in rows:
            f = x.finding
            assert f is not None
            cells = [x.label, f"`{f.code}`", md(subject_words(f.subject)), md(f.message), md(f.remediation)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + _md_suppressed(report)) + "\n"


def _md_suppressed(report: Report) -> list[str]:
    """Suppressed findings, expired and unused suppressions: listed, never dropped (design record 261203-19)."""
    if not (report.suppressed or report.suppressions_unused or report.suppressions_expired):
        return []
    c = report.suppressed_counts
    lines = [
        "",
        "### Suppressed",
        "",
        f"{c.critical} critical, {c.warning} warning, {c.info} info silenced by configuration",
    ]
    lines += ["", "| severity | code | subject | finding | reason | expires |", "|---|---|---|---|---|---|"]
    for s in report.suppressed:
        by = s.suppressed_by
        subject = " ".join(x for x in (s.subject.kind, s.subject.id, text_of(s.subject.node)) if x)
        cells = [s.severity.value, f"`{s.code}`", md(subject), md(s.message), md(by.reason), by.expires or ""]
        lines.append("| " + " | ".join(cells) + " |")
    for r in report.suppressions_expired:
        lines.append(f"- expired: suppression of `{r.code}` {md(r.target or '')} ({r.expires}): its findings are back")
    for r in report.suppressions_unused:
        lines.append(f"- unused: suppression of `{r.code}` {md(r.target or '')} matched no finding")
    return lines
