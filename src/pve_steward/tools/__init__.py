"""Thin MCP tools: fetch through the client, call analysis, apply the two-phase write protocol.

Every handler is ``async def handler(t: ToolContext, **params) -> PydanticModel`` wrapped in
``@guarded``; ``tools.yaml`` names it. Importing the modules registers the handlers.
"""

from __future__ import annotations

import importlib

MODULES = (
    "cluster",
    "clusters",
    "nodes",
    "guests",
    "storage",
    "backups",
    "ha",
    "tasks",
    "diagnostics",
    "planning",
    "writes",
    "config_writes",
    "ceph",
    "upgrade",
    "agent",
)


def load_all() -> None:
    for name in MODULES:
        importlib.import_module(f"pve_steward.tools.{name}")
