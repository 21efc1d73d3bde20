"""Narrowing through real MCP sessions: denied actions are not registered (granular and meta modes), and on a
shared HTTP server request headers narrow a call but never widen what the server allows."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pvesim.server import SimServer
from tests.httpserver import free_port, server_env, serving

pytestmark = pytest.mark.anyio
TOKEN = "narrowing-test-token-0123456789abcdef012"


def text(result: Any) -> str:
    return str(result.content[0].text)


async def test_denied_and_unlisted_actions_are_not_registered_granular(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim, "operator@pve!mcp", tier="admin", deny_actions="guest_stop,snapshot_*")
    async with Client(mcp) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        stop = await c.call_tool("guest_stop", {"vmid": 100})
    assert "guest_start" in tools and "guest_reset" in tools
    assert "guest_stop" not in tools and not {t for t in tools if t.startswith("snapshot_")}
    assert stop.is_error and "excluded by --deny-actions 'guest_stop'" in text(stop)

    async with Client(server_for(demo_sim, allow_actions="list_*,get_*")) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
    assert tools and all(t.startswith(("list_", "get_")) for t in tools) and "list_guests" in tools


async def test_denied_actions_are_not_registered_meta(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim, "operator@pve!mcp", tier="admin", granular_tools=False, deny_actions="guest_stop")
    async with Client(mcp) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        stop = await c.call_tool("administer", {"action": "guest_stop", "vmid": 100})
        reset = await c.call_tool("administer", {"action": "guest_reset", "vmid": 100})
    actions = tools["administer"].input_schema["properties"]["action"]["enum"]
    assert "guest_reset" in actions and "guest_stop" not in actions
    assert stop.is_error and "action 'guest_stop' is not available: it is excluded by --deny-actions" in text(stop)
    assert not reset.is_error and reset.structured_content["result"]["status"] == "preview"  # type: ignore[index]


async def test_headers_narrow_a_shared_server_and_never_widen_it(start_sim: Any, tmp_path: Path) -> None:
    sim: SimServer = start_sim("demo")
    port = free_port()
    env = server_env(
        sim,
        tmp_path,
        "operator@pve!mcp",
        PVE_STEWARD_TOKEN_STORE=str(tmp_path / "used.sqlite3"),
        PVE_STEWARD_HTTP_PORT=str(port),
        PVE_STEWARD_HTTP_BEARER_TOKEN=TOKEN,
        PVE_STEWARD_TIER="operator",
        PVE_STEWARD_GRANULAR_TOOLS="true",
    )

    async def session(base: str, **headers: str) -> tuple[set[str], Any, Any, int]:
        """Tools listed, a read, a write preview, and how many PVE requests the write sent."""
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", **headers}, timeout=120) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
        ):
            tools = {t.name for t in (await c.list_tools()).tools}
            read = await c.call_tool("list_guests", {})
            before = sim.sim.requests
            write = await c.call_tool("guest_reboot", {"vmid": 104})
            return tools, read, write, sim.sim.requests - before

    with serving([sys.executable, "-m", "pve_steward", "serve"], port, env) as base:
        _, read, write, _ = await session(base)
        assert not read.is_error and not write.is_error  # no header: the server's own settings

        everything, _, _, _ = await session(base)
        listed, read, write, sent = await session(base, **{"X-Pve-Steward-Read-Only": "1"})
        assert not read.is_error and write.is_error and sent == 0
        assert "guest_reboot" in everything and "guest_reboot" not in listed and "list_guests" in listed
        assert "asked for read-only (X-Pve-Steward-Read-Only)" in text(write)

        _, _, write, sent = await session(base, **{"X-Pve-Steward-Tier": "read_only"})
        assert write.is_error and sent == 0 and "narrowed the tier to read_only" in text(write)

        listed, read, write, _ = await session(base, **{"X-Pve-Steward-Toolsets": "tasks"})
        assert read.is_error and "left out (X-Pve-Steward-Toolsets)" in text(read)
        assert listed and "list_guests" not in listed and "list_tasks" in listed  # tools/list narrowed too

        # asking for more than the server allows: nothing above operator appears or runs
        tools, read, write, _ = await session(base, **{"X-Pve-Steward-Tier": "admin", "X-Pve-Steward-Read-Only": "0"})
        assert not read.is_error and not write.is_error  # operator writes still work: the header did not narrow
        assert "guest_stop" not in tools and "guest_reset" not in tools
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {TOKEN}", "X-Pve-Steward-Tier": "admin"}, timeout=120
            ) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
        ):
            stop = await c.call_tool("guest_stop", {"vmid": 100})
    assert stop.is_error and "needs tier admin" in text(stop)
    assert sim.cluster.guests[100].status == "running"
