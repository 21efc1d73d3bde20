"""What each registration mode costs the model: tools, reachable operations, tools/list size.

Run: ``.venv/bin/python bench/bench_catalog.py``. Size is the compact JSON of the tools/list
result as the client receives it; tokens are estimated as bytes / 4. Target: the default mode
(meta-tools) stays at or under 3,000 tokens while reaching at least 60 operations.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client

from pve_steward.config import load_settings
from pve_steward.server import build_server
from pve_steward.testing import FakeClient

TOKEN_TARGET = 3000
OPERATIONS_TARGET = 60

MODES: list[tuple[str, dict[str, Any]]] = [
    ("meta, tier admin (all operations)", {"tier": "admin"}),
    ("meta, tier operator", {"tier": "operator"}),
    ("meta, read-only (default)", {}),
    ("granular, tier admin", {"tier": "admin", "granular_tools": True}),
    ("granular, read-only", {"granular_tools": True}),
]


async def measure(settings: dict[str, Any]) -> tuple[int, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        mcp = build_server(
            load_settings(url="pve.invalid:8006", audit_log=Path(tmp) / "audit.jsonl", **settings),
            client=FakeClient(),
            check_version_on_start=False,
        )
        async with Client(mcp) as c:
            result = await c.list_tools()
    payload = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    size = len(json.dumps(payload, separators=(",", ":")).encode())
    operations = 0
    for tool in result.tools:
        action = tool.input_schema.get("properties", {}).get("action")
        operations += len(action.get("enum", [action.get("const")])) if action else 1
    return len(result.tools), operations, size


def main() -> int:
    print(f"{'mode':38} {'tools':>5} {'operations':>10} {'bytes':>8} {'~tokens':>8}")
    figures = {}
    for label, settings in MODES:
        tools, operations, size = asyncio.run(measure(settings))
        figures[label] = (tools, operations, size)
        print(f"{label:38} {tools:5d} {operations:10d} {size:8d} {size // 4:8d}")
    tools, operations, size = figures["meta, tier admin (all operations)"]
    granular = figures["granular, tier admin"][2]
    ok = size // 4 <= TOKEN_TARGET and operations >= OPERATIONS_TARGET
    print(
        f"\nmeta-tools reach {operations} operations in ~{size // 4} tokens "
        f"({granular / size:.1f}x smaller than granular); target <= {TOKEN_TARGET} tokens and "
        f">= {OPERATIONS_TARGET} operations: {'MET' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
