"""The yardstick for bench_start.py: a bare SDK MCPServer with one tool, served over stdio."""

from __future__ import annotations

from mcp.server import MCPServer

mcp = MCPServer("bare")


@mcp.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


if __name__ == "__main__":
    mcp.run()
