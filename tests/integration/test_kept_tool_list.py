"""A start from a kept tool list: the same answers as a full build, the tools built on first need (surface.py).

Driven through a real MCP client (in memory, and over stdio as a client starts the server) with real
proxmoxer over HTTPS against pvesim.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters

from pve_steward.config import Settings, load_settings
from pve_steward.server import OpsServer, build_server
from pve_steward.surface.toolcache import KEEP, fingerprint, surface_file
from pvesim.server import SimServer
from tests.integration.test_cli import STEWARD, cluster_env, endpoint, started

pytestmark = pytest.mark.anyio


def _settings(sim: SimServer, tmp_path: Path, **extra: Any) -> Settings:
    token_id, secret = sim.token("root@pam!pvesim")
    return load_settings(
        url=sim.address,
        token_id=token_id,
        token_secret=secret,
        fingerprint=sim.fingerprint,
        audit_log=tmp_path / "audit.jsonl",
        token_store=str(tmp_path / "used-tokens.sqlite3"),
        retries=0,
        **extra,
    )


def _kept(folder: Path) -> Path:
    """The one kept surface in ``folder``."""
    (only,) = folder.glob("surface-*.json")
    return only


async def _surface(mcp: OpsServer) -> dict[str, Any]:
    """Everything a client lists, as JSON."""
    async with Client(mcp) as c:
        listed = {
            "tools": (await c.list_tools()).tools,
            "prompts": (await c.list_prompts()).prompts,
            "resources": (await c.list_resources()).resources,
            "templates": (await c.list_resource_templates()).resource_templates,
        }
    return {k: [item.model_dump(mode="json") for item in v] for k, v in listed.items()}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"granular_tools": True, "tier": "admin"},
        {"tier": "operator", "toolsets": ["guests", "tasks", "diagnostics"]},
        {"read_only": True, "tier": "admin"},
    ],
    ids=["meta-read-only", "granular-admin", "meta-operator-toolsets", "read-only-flag"],
)
async def test_a_start_from_the_kept_list_answers_what_a_full_build_answers(
    demo_sim: SimServer, tmp_path: Path, extra: dict[str, Any]
) -> None:
    settings = _settings(demo_sim, tmp_path, **extra)
    first = build_server(settings, surface_dir=tmp_path)
    assert isinstance(first, OpsServer) and first._furnish is None, "no kept list yet: a full build"
    built = await _surface(first)
    assert _kept(tmp_path) == surface_file(tmp_path, fingerprint(settings))
    second = build_server(settings, surface_dir=tmp_path)
    assert isinstance(second, OpsServer) and second._furnish is not None, "the kept list was not used"
    async with Client(second) as c:
        tools = [t.model_dump(mode="json") for t in (await c.list_tools()).tools]
    assert tools == built["tools"]
    assert second._furnish is not None, "tools/list built the tools"
    assert await _surface(second) == built  # prompts, resources and templates build them, the same
    assert second._furnish is None


async def test_the_first_call_builds_the_tools_and_works(demo_sim: SimServer, tmp_path: Path) -> None:
    settings = _settings(demo_sim, tmp_path)
    async with Client(build_server(settings, surface_dir=tmp_path)) as c:
        await c.list_tools()
    mcp = build_server(settings, surface_dir=tmp_path)
    async with Client(mcp) as c:
        overview = await c.call_tool("cluster", {"action": "cluster_overview"})
        missing = await c.call_tool("guests", {"action": "get_guest", "vmid": 999})
    assert not overview.is_error and overview.structured_content is not None
    assert missing.is_error and "no guest 999 is visible" in missing.content[0].text  # type: ignore[union-attr]


async def test_another_configuration_or_a_damaged_file_builds_in_full(demo_sim: SimServer, tmp_path: Path) -> None:
    settings = _settings(demo_sim, tmp_path)
    async with Client(build_server(settings, surface_dir=tmp_path)) as c:
        await c.list_tools()
    kept = _kept(tmp_path)
    other = build_server(_settings(demo_sim, tmp_path, granular_tools=True), surface_dir=tmp_path)
    assert isinstance(other, OpsServer) and other._furnish is None
    kept.write_text("{not json")
    damaged = build_server(settings, surface_dir=tmp_path)
    assert isinstance(damaged, OpsServer) and damaged._furnish is None
    async with Client(damaged) as c:
        assert {t.name for t in (await c.list_tools()).tools} >= {"cluster", "guests", "diagnostics"}
    assert json.loads(kept.read_text())["tools"], "the damaged file was replaced"


async def test_a_kept_list_that_differs_from_the_built_tools_is_corrected(demo_sim: SimServer, tmp_path: Path) -> None:
    settings = _settings(demo_sim, tmp_path)
    async with Client(build_server(settings, surface_dir=tmp_path)) as c:
        true_tools = [t.model_dump(mode="json") for t in (await c.list_tools()).tools]
    kept = json.loads((_kept(tmp_path)).read_text())
    kept["tools"][0]["description"] = "a description nobody wrote"
    (_kept(tmp_path)).write_text(json.dumps(kept))
    mcp = build_server(settings, surface_dir=tmp_path)
    async with Client(mcp) as c:
        assert (await c.list_tools()).tools[0].description == "a description nobody wrote"  # as kept, until built
        await c.call_tool("cluster", {"action": "cluster_overview"})  # builds the tools
        assert [t.model_dump(mode="json") for t in (await c.list_tools()).tools] == true_tools
    assert json.loads((_kept(tmp_path)).read_text())["tools"][0]["description"] != "a description nobody wrote"


async def test_a_kept_list_claiming_no_writes_never_runs_writes_without_the_token_store(
    demo_sim: SimServer, tmp_path: Path
) -> None:
    settings = _settings(demo_sim, tmp_path, tier="operator")
    async with Client(build_server(settings, surface_dir=tmp_path)) as c:
        await c.list_tools()
    kept = json.loads((_kept(tmp_path)).read_text())
    assert kept["writes"] is True
    kept["writes"] = False
    (_kept(tmp_path)).write_text(json.dumps(kept))
    mcp = build_server(settings, surface_dir=tmp_path)
    async with Client(mcp) as c:
        for _ in range(2):  # every request fails, none runs on half-built tools
            with pytest.raises(MCPError):
                await c.call_tool("guests", {"action": "get_guest", "vmid": 100})
    assert not list(tmp_path.glob("surface-*.json")), "the wrong list was kept"


async def test_stdio_starts_answer_from_the_kept_list_and_keep_no_secret(demo_sim: SimServer, tmp_path: Path) -> None:
    """How a desktop client runs the server: a new process per session, the same configuration."""
    token_id, secret = demo_sim.token("auditor@pve!mcp")
    env = cluster_env(demo_sim, tmp_path, PVE_STEWARD_AUDIT_LOG=str(tmp_path / "audit.jsonl"))
    params = StdioServerParameters(command=sys.executable, args=["-m", "pve_steward", "serve"], env=env)
    listed, written = [], []
    for _ in range(2):
        async with Client(params) as c:
            listed.append([t.model_dump(mode="json") for t in (await c.list_tools()).tools])
            overview = await c.call_tool("cluster", {"action": "cluster_overview"})
            assert not overview.is_error
        written.append((_kept(tmp_path)).stat().st_mtime_ns)
    assert listed[0] == listed[1]
    assert written[0] == written[1], "the second start built its tools for tools/list instead of using the kept list"
    kept = (_kept(tmp_path)).read_text()
    assert secret not in kept and token_id not in kept
    assert oct((_kept(tmp_path)).stat().st_mode & 0o777) == "0o600"


async def test_a_few_configurations_are_kept_side_by_side(demo_sim: SimServer, tmp_path: Path) -> None:
    """A client with a read-only and an admin entry for one cluster starts both from their kept lists."""
    configurations = [{"heavy_calls": n} for n in range(1, KEEP + 3)]
    for extra in configurations:
        async with Client(build_server(_settings(demo_sim, tmp_path, **extra), surface_dir=tmp_path)) as c:
            await c.list_tools()
    assert len(list(tmp_path.glob("surface-*.json"))) == KEEP
    for extra in configurations[-KEEP:]:
        again = build_server(_settings(demo_sim, tmp_path, **extra), surface_dir=tmp_path)
        assert isinstance(again, OpsServer) and again._furnish is not None, extra


async def test_http_starts_answer_from_the_kept_list_and_build_on_the_first_call(
    demo_sim: SimServer, tmp_path: Path
) -> None:
    """Over HTTP the SDK looks a tool's input schema up before any middleware: that builds the tools too."""
    env = cluster_env(demo_sim, tmp_path, PVE_STEWARD_AUDIT_LOG=str(tmp_path / "audit.jsonl"))
    cmd = [*STEWARD, "serve", "--transport", "http", "--http-port", "0"]
    listed, written = [], []
    for _ in range(2):
        with started(cmd, env) as lines:
            async with Client(endpoint(lines)) as c:
                listed.append([t.model_dump(mode="json") for t in (await c.list_tools()).tools])
                guest = await c.call_tool("guests", {"action": "get_guest", "vmid": 100})
                assert not guest.is_error, guest.content
        written.append(_kept(tmp_path).stat().st_mtime_ns)
    assert listed[0] == listed[1] and written[0] == written[1]
