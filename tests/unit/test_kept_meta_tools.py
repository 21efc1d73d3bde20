"""Meta-tools are built once per process for the same operations, handlers and words, and shared by the
servers that list them; a change in any of those builds its own (surface/metatools.py kept_meta_tools)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pve_steward.config import Settings
from pve_steward.security.tiers import Tier
from pve_steward.server import build_server
from pve_steward.surface.metatools import kept_meta_tools
from pve_steward.surface.registry import load_registry
from pve_steward.testing import FakeClient
from tests.registered import registered_server
from tests.untrusted import plain

PACKAGED = Path(__file__).resolve().parents[2] / "src" / "pve_steward" / "tools.yaml"


def _tool(mcp: Any, name: str) -> Any:
    return mcp._tool_manager.get_tool(name)


def test_two_servers_of_one_configuration_share_each_meta_tool(tmp_path: Path) -> None:
    first, second = registered_server(tmp_path), registered_server(tmp_path)
    names = {t.name for t in first._tool_manager.list_tools()}
    assert {"cluster", "diagnostics", "operate"} <= names
    assert names == {t.name for t in second._tool_manager.list_tools()}
    assert all(_tool(first, name) is _tool(second, name) for name in names)


def test_a_changed_word_or_tier_builds_its_own_meta_tools(tmp_path: Path) -> None:
    spec = yaml.safe_load(PACKAGED.read_text())
    spec["toolsets"]["cluster"]["description"] = "Cluster reads, worded for this deployment"
    words = tmp_path / "tools.yaml"
    words.write_text(yaml.safe_dump(spec))
    packaged, reworded = registered_server(tmp_path), registered_server(tmp_path, tools_file=words)
    assert _tool(reworded, "cluster") is not _tool(packaged, "cluster")
    assert _tool(reworded, "cluster").description.startswith("Cluster reads, worded for this deployment.")
    assert not _tool(packaged, "cluster").description.startswith("Cluster reads, worded")
    read_only = registered_server(tmp_path, read_only=True)
    assert _tool(read_only, "operate") is None and _tool(packaged, "operate") is not None


def test_the_key_names_every_operation_with_its_handler() -> None:
    registry = load_registry()
    everything = registry.select(tier=Tier.ADMIN, read_only=False)
    reads = registry.select(tier=Tier.ADMIN, read_only=True)
    key, tools = kept_meta_tools(registry, everything)
    again, same = kept_meta_tools(registry, everything)
    fewer, other = kept_meta_tools(registry, reads)
    assert (again, same) == (key, tools) and same is tools
    assert fewer != key and other is not tools
    assert len(key) == len(everything)  # type: ignore[arg-type]
    assert {a for t in tools for a in t.actions} == {op.name for op in everything}


@pytest.mark.anyio
async def test_a_shared_meta_tool_answers_each_server_with_its_own_cluster(tmp_path: Path) -> None:
    """The function closes over no server: each call takes its cluster from the server it reaches."""
    from mcp import Client

    answers = []
    for name in ("one", "two"):
        client = FakeClient(
            {
                "GET /cluster/status": [{"type": "cluster", "name": name, "quorate": 1, "nodes": 1, "version": 1}],
                "GET /nodes": [{"node": "pve1", "status": "online"}],
                "GET /cluster/resources": [],
                "GET /version": {"version": "8.4.1", "release": "8.4"},
            }
        )
        mcp = build_server(Settings(audit_log=tmp_path / f"{name}.jsonl"), client=client, check_version_on_start=False)
        async with Client(mcp) as c:
            result = await c.call_tool("cluster", {"action": "cluster_overview"})
        assert not result.is_error, result.content
        answers.append(result.structured_content["result"]["cluster_name"])
    assert [plain(a) for a in answers] == ["one", "two"]
