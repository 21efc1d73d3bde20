"""Golden snapshots of the tool catalog in each registration mode: any schema change is a visible diff.

Regenerate after an intended change with ``UPDATE_SNAPSHOTS=1 make test`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pve_steward.config import load_settings
from pve_steward.server import build_server
from pve_steward.testing import FakeClient

pytestmark = pytest.mark.anyio

SNAPSHOTS = Path(__file__).parent / "snapshots"
MODES: dict[str, dict[str, Any]] = {
    "meta-admin": {"tier": "admin"},
    "meta-read-only": {},
    "granular-admin": {"tier": "admin", "granular_tools": True},
    # several clusters: every tool takes `cluster`; `lab` allows no writes, so write tools list only `prod`
    "meta-two-clusters": {
        "tier": "operator",
        "url": None,
        "clusters": {
            "prod": {"url": "prod.invalid", "token_id": "ops@pve!mcp", "token_secret": "s"},
            "lab": {"url": "lab.invalid", "token_id": "ops@pve!mcp", "token_secret": "s", "max_tier": "read_only"},
        },
    },
}


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_tool_catalog_matches_its_snapshot(mode: str, tmp_path: Path) -> None:
    settings = load_settings(**({"url": "pve.invalid:8006", "audit_log": tmp_path / "audit.jsonl"} | MODES[mode]))
    mcp = build_server(settings, client=FakeClient(), check_version_on_start=False)
    async with Client(mcp) as c:
        tools = (await c.list_tools()).tools
    current = json.dumps(
        [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], indent=1, sort_keys=True
    )
    path = SNAPSHOTS / f"{mode}.json"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(current + "\n", encoding="utf-8")
    assert path.exists(), f"no snapshot {path.name}: run UPDATE_SNAPSHOTS=1 make test"
    assert path.read_text(encoding="utf-8") == current + "\n", (
        f"the {mode} tool catalog changed: review, then UPDATE_SNAPSHOTS=1 make test"
    )
