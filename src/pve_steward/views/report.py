"""``pve-steward check --html FILE`` and ``check --format markdown``.

The HTML report is the same views as the MCP Apps resources, in one self-contained file with the
data embedded: the data is what the tools answer (the server is run in-process against the same
client, read-only, granular), so the report and the views never disagree. Markdown is for
tickets: the findings by area, cluster text escaped so it cannot become markup or links.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.server import MCPServer

from pve_steward.analysis.codes import AREAS, CODES
from pve_steward.analysis.findings import Report
from pve_steward.analysis.thresholds import thresholds_from
from pve_steward.config import Settings
from pve_steward.pveio.client import ProxmoxClient
from pve_steward.serving.checkcmd import TITLES, exit_code, print_report
from pve_steward.views.apps import view_config
from pve_steward.views.page import build_page

# read name (views.js extra()) -> tool and arguments
REPORT_READS: dict[str, tuple[str, dict[str, Any]]] = {
    "nodes": ("list_nodes", {}),
    "storage": ("list_storage", {}),
    "jobs": ("list_backup_jobs", {}),
    "backups": ("list_backups", {"limit": 500}),
}


def emit(
    args: argparse.Namespace,
    report: Report,
    settings: Settings,
    client: ProxmoxClient,
    header: Any,
    extra: list[str] | None = None,
) -> int:
    """What ``check`` prints (text, JSON or markdown) and, with ``--html``, the report file; ``extra``:
    plain lines after the findings (``check --upgrade``'s checks that need a shell)."""
    html_path: Path | None = getattr(args, "html", None)
    text = markdown(report) + ("\n" + "\n".join(md_line(line) for line in extra) + "\n" if extra else "")
    if html_path is not None:
        document = anyio.run(collect_document, report, settings, client)
        html_path.write_text(render_html(document, settings, text), encoding="utf-8")
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
        doc["backups"] = await call("diagnose_backups", {"detail": True})
        doc["migratability"] = await call("diagnose_migratability", {"detail": True})
        nodes = doc["extras"]["nodes"] or {}
        for node in nodes.get("items", []):
            if node.get("online"):
                plan = await call("plan_node_evacuation", {"node": text_of(node["name"]), "limit": 1000})
                if plan is not None:
                    doc["evacuations"].append(plan)
    return doc


def render_html(document: dict[str, Any], settings: Settings, fallback: str) -> str:
    config = view_config("document", {}, {}, thresholds_from(settings.thresholds))
    return build_page("pve-steward report", config, data=document, fallback=fallback)


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
    """Cluster text (either shape) as inert markdown: one line, markup characters escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text_of(text).split()))


def markdown(report: Report) -> str:
    c = report.counts
    lines = [
        f"## pve-steward check: {report.status.upper()}",
        "",
        f"{c.critical} critical, {c.warning} warning, {c.info} info"
        + (f" ({report.omitted} not listed)" if report.omitted else ""),
        "",
    ]
    if not report.complete:
        lines += ["> **Incomplete**: some data could not be read or analysed; this is not a clean bill of health.", ""]
    lines += ["| area | critical | warning | info |", "|---|--:|--:|--:|"]
    for area, n in report.by_area.items():
        lines.append(f"| {md(TITLES.get(area, area).lower())} | {n.critical} | {n.warning} | {n.info} |")
    by_area: dict[str, list[Any]] = {}
    for f in report.findings:
        by_area.setdefault(CODES[f.code].area, []).append(f)
    for area in AREAS:
        found = by_area.get(area)
        if not found:
            continue
        lines += ["", f"### {TITLES.get(area, area).capitalize()}", "", "| severity | code | subject | finding |"]
        lines.append("|---|---|---|---|")
        for f in found:
            s = f.subject
            name = f"({text_of(s.name)})" if s.name else ""
            subject = " ".join(x for x in (s.kind, s.id, name, text_of(s.node)) if x)
            lines.append(f"| {f.severity.value} | `{f.code}` | {md(subject)} | {md(f.message)} |")
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
