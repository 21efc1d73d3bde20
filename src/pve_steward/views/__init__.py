"""What an operator looks at: MCP Apps views of the diagnostics and the planner, and ``check --html``."""

from pve_steward.views.apps import ui_meta, view_extension

__all__ = ["ui_meta", "view_extension"]
