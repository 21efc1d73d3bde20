"""The MCP Apps views (extension ``io.modelcontextprotocol/ui``): which tool shows which view.

A tool advertises its view with ``_meta.ui.resourceUri``; the host reads that ``ui://`` resource
and feeds it the tool's result over postMessage. The metadata is per tool, so:

- ``--granular-tools``: each of the four tools has its own resource (one view);
- meta-tools (default): the read tool holding a viewed action (``diagnostics``, ``planning``) points
  at one resource holding the views of its actions; the view picks one by the result's ``action``
  (other actions of that tool get a findings list, or a line saying the answer is in the chat).

The views may ask the host to run named read operations (node and storage usage, backup jobs and
archives) through ``tools/call``; only reads are listed, and only those this server registers.
Clients without Apps ignore the metadata and the resources: their answers are unchanged.
"""

from __future__ import annotations

from typing import Any

from mcp.server.apps import Apps, ResourceCsp

from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from pve_steward.config import Settings
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
# what a view may ask the host to read: name -> (operation, arguments); reads only
READS: dict[str, tuple[str, dict[str, Any]]] = {
    "nodes": ("list_nodes", {}),
    "storage": ("list_storage", {}),
    "jobs": ("list_backup_jobs", {}),
    "backups": ("list_backups", {"limit": 500}),
}


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


def view_config(view: str, actions: dict[str, str], reads: dict[str, Any], thresholds: Thresholds) -> dict[str, Any]:
    t = thresholds
    return {
        "view": view,
        "actions": actions,
        "reads": reads,
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
    for tool, resource in tool_views(registry, ops, granular=granular).items():
        if granular:
            view, actions, title = resource, {}, TITLES[resource]
        else:
            actions = {op.name: VIEW_OF_OP[op.name] for op in ops if op.toolset == tool and op.name in VIEW_OF_OP}
            view, title = "report", f"pve-steward {tool}"
        apps.add_html_resource(
            URI.format(resource),
            build_page(title, view_config(view, actions, reads, thresholds)),
            name=f"view-{resource}",
            title=title,
            description=f"Shows the result of {tool} (MCP Apps view; read-only)",
            csp=ResourceCsp(connect_domains=[], resource_domains=[], frame_domains=[], base_uri_domains=[]),
            prefers_border=True,
        )
    return apps
