"""What an operator looks at: MCP Apps views of the diagnostics and the planner, and ``check --html``."""
