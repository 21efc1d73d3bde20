"""The MCP Apps views (extension ``io.modelcontextprotocol/ui``): which tool shows which view.

A tool advertises its view with ``_meta.ui.resourceUri``; the host reads that ``ui://`` resource
and feeds it the tool's result over postMessage. The metadata is per tool, so:

- ``--granular-tools``: each of the four tools has its own resource (one view);
- meta-tools (default): the read tool holding a viewed action (``diagnostics``, ``planning``) points
  at one resource holding the views of its actions; the view picks one by the result's ``action``
  (other actions of that tool get a findings list, or a line saying the answer is in the chat).

The views may ask the host to run named read operations (node and storage usage, backup jobs and
archives) through ``tools/call``, and the next page of the answer they show (the same read with an
offset); only reads are listed, and only those this server registers. Every answer a view reads is
a page under 100 KB (design record 261206-62). Clients without Apps ignore the metadata and the
resources: their answers are unchanged.
"""

from __future__ import annotations

from typing import Any

from mcp.server.apps import Apps, ResourceCsp

from pve_steward.analysis.codes import AREAS, CODES
from pve_steward.analysis.health import diagnose  # noqa: F401  (every check registered: CODES is whole)
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from pve_steward.config import Settings
from pve_steward.serving import checkcmd
from pve_steward.surface.registry import Operation, Registry
from pve_steward.views.page import build_page

URI = "ui://pve-steward/views/{}.html"
# operation -> view kind (views.js: VIEWS[kind])
VIEW_OF_OP = {
    "check_cluster_health": "health",
    "plan_node_evacuation": "evacuation",
    "diagnose_backups": "backups",
    "diagnose_migratability": "migratability",
}
TITLES = {
    "health": "Cluster health",
    "evacuation": "Evacuation plan",
    "backups": "Backups",
    "migratability": "Migratability",
}
# Backups and guests a view reads per page: at 2,000 guests a page of 250 is about 80 KB (under 100 KB).
LIST_PAGE = 250
# what a view may ask the host to read: name -> (operation, arguments); reads only
READS: dict[str, tuple[str, dict[str, Any]]] = {
    "nodes": ("list_nodes", {}),
    "storage": ("list_storage", {}),
    "overview": ("cluster_overview", {}),
    "jobs": ("list_backup_jobs", {}),
    "backups": ("list_backups", {"limit": LIST_PAGE}),
    "guests": ("list_guests", {"limit": LIST_PAGE}),
    "pbs": ("diagnose_pbs", {"detail": True}),
}
# a viewed answer's next page: the same operation with ``offset`` (and detail=true where it pages by size)
PAGED_DETAIL = {"check_cluster_health": True, "diagnose_backups": True, "diagnose_migratability": True}


# the codes whose fix a view shows beside a blocker or a reason (findings carry their own fix): the
# migration codes and HA's per-guest ones, the codes an evacuation blocker may have
def _blocker_code(code: str, area: str) -> bool:
    return area == "migration" or code.startswith("HA_GUEST_")


def tool_views(registry: Registry, ops: list[Operation], *, granular: bool) -> dict[str, str]:
    """Tool name -> the name of its view resource, for the tools this server registers."""
    if granular:
        return {op.name: VIEW_OF_OP[op.name] for op in ops if op.name in VIEW_OF_OP}
    return {op.toolset: op.toolset for op in ops if op.name in VIEW_OF_OP and not op.is_write}


def ui_meta(registry: Registry, tool: str) -> dict[str, Any] | None:
    """The ``_meta`` a tool is registered with (None: no view); granular names and toolset names never clash."""
    if tool in VIEW_OF_OP:
        return {"ui": {"resourceUri": URI.format(VIEW_OF_OP[tool])}}
    if any(op.toolset == tool and op.name in VIEW_OF_OP for op in registry.operations.values()):
        return {"ui": {"resourceUri": URI.format(tool)}}
    return None


def read_calls(ops: list[Operation], *, granular: bool) -> dict[str, dict[str, Any]]:
    """The reads a view may request, as tools/call parameters in this server's registration mode."""
    selected = {op.name: op for op in ops if not op.is_write}
    calls: dict[str, dict[str, Any]] = {}
    for name, (op_name, args) in READS.items():
        op = selected.get(op_name)
        if op is None:
            continue
        calls[name] = (
            {"tool": op.name, "arguments": args}
            if granular
            else {"tool": op.toolset, "arguments": {"action": op.name, **args}}
        )
    return calls


def page_calls(ops: list[Operation], *, granular: bool) -> dict[str, dict[str, Any]]:
    """View kind -> how to ask for the next page of its answer (the tool, its action, whether detail pages)."""
    calls: dict[str, dict[str, Any]] = {}
    for op in ops:
        if op.name not in VIEW_OF_OP or op.is_write:
            continue
        arguments = {} if granular else {"action": op.name}
        calls[VIEW_OF_OP[op.name]] = {
            "tool": op.name if granular else op.toolset,
            "arguments": arguments,
            "detail": PAGED_DETAIL.get(op.name, False),
        }
    return calls


def code_words() -> dict[str, Any]:
    """Areas in the order ``check`` prints them, each area's codes, and title and fix of the codes a blocker
    or a migratability reason may carry (a few KB: the view stays under 100 KB)."""
    by_area: dict[str, list[str]] = {}
    for code, info in sorted(CODES.items()):
        by_area.setdefault(info.area, []).append(code)
    return {
        "areas": {a: checkcmd.TITLES.get(a, a.upper()).lower() for a in ["data", *AREAS]},
        "codes": {a: " ".join(codes) for a, codes in by_area.items()},
        "fixes": {c: [i.title, i.remediation] for c, i in sorted(CODES.items()) if _blocker_code(c, i.area)},
    }


def view_config(
    view: str,
    actions: dict[str, str],
    reads: dict[str, Any],
    thresholds: Thresholds,
    pages: dict[str, Any] | None = None,
) -> dict[str, Any]:
    t = thresholds
    return {
        "view": view,
        "actions": actions,
        "reads": reads,
        "pages": pages or {},
        **code_words(),
        "thresholds": {
            "memory_pressure_warning_pct": t.get("memory_pressure_warning_pct"),
            "memory_pressure_critical_pct": t.get("memory_pressure_critical_pct"),
            "storage_warning_pct": t.get("storage_warning_pct"),
            "storage_critical_pct": t.get("storage_critical_pct"),
        },
    }


def view_extension(registry: Registry, ops: list[Operation], settings: Settings) -> Apps:
    """The SDK's Apps extension carrying one ``ui://`` resource per view this server's tools point at."""
    apps = Apps()
    granular, thresholds = settings.granular_tools, thresholds_from(settings.thresholds)
    reads = read_calls(ops, granular=granular)
    pages = page_calls(ops, granular=granular)
    for tool, resource in tool_views(registry, ops, granular=granular).items():
        if granular:
            view, actions, title = resource, {}, TITLES[resource]
        else:
            actions = {op.name: VIEW_OF_OP[op.name] for op in ops if op.toolset == tool and op.name in VIEW_OF_OP}
            view, title = "report", f"pve-steward {tool}"
        apps.add_html_resource(
            URI.format(resource),
            build_page(title, view_config(view, actions, reads, thresholds, pages)),
            name=f"view-{resource}",
            title=title,
            description=f"Shows the result of {tool} (MCP Apps view; read-only)",
            csp=ResourceCsp(connect_domains=[], resource_domains=[], frame_domains=[], base_uri_domains=[]),
            prefers_border=True,
        )
    return apps
