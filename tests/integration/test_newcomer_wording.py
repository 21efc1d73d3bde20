"""Issue 46's wording items that only a running server shows: a start refused for a running guest, notes
set on a guest without any, a blocked guest's memory, and the health check's fix texts in meta mode."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.untrusted import plain

pytestmark = pytest.mark.anyio
GIB = 1024**3


async def test_starting_a_running_guest_says_it_is_running(start_sim: Any, server_for: Any) -> None:
    async with Client(server_for(start_sim("demo"), "operator@pve!mcp", tier="operator")) as c:
        refused = await c.call_tool("guest_start", {"vmid": 100})
    text = refused.content[0].text  # type: ignore[union-attr]
    assert refused.is_error and "guest is stopped: no, it is running" in text, text
    assert "already running" not in text


async def test_notes_for_a_guest_without_any_list_no_risk(start_sim: Any, server_for: Any) -> None:
    sim: SimServer = start_sim("demo")
    assert not sim.cluster.guests[100].config.get("description")
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        fresh = await c.call_tool("guest_set_notes", {"vmid": 100, "notes": "Web frontend. Owner: web team."})
        kept = await c.call_tool("guest_set_notes", {"vmid": 113, "notes": "Archive VM."})
    preview = plain(fresh.structured_content)
    assert not fresh.is_error and preview["status"] == "preview", preview
    assert preview["risks"] == [] and "(it has none)" in " ".join(preview["effects"])
    overwritten = plain(kept.structured_content)
    assert any("are overwritten" in r for r in overwritten["risks"]), overwritten


async def test_a_blocked_guest_shows_the_memory_a_move_would_reserve(demo_sim: SimServer, server_for: Any) -> None:
    """123 files (2 GiB, running) cannot move (a bind mount): its answer does not say 0 beside 2 GiB."""
    async with Client(server_for(demo_sim)) as c:
        answer = await c.call_tool("check_guest_migration", {"vmid": 123})
    move = plain(answer.structured_content)
    assert not answer.is_error and move["can_move"] is False and move["blockers"], move
    assert move["memory_bytes"] == move["migratability"]["memory_bytes"] == 2 * GIB


async def test_fix_texts_name_the_operation_as_a_meta_tool_client_calls_it(
    demo_sim: SimServer, server_for: Any
) -> None:
    async with Client(server_for(demo_sim, granular_tools=False)) as c:
        answer = await c.call_tool("diagnostics", {"action": "explain_finding", "code": "NODE_CPU_HIGH"})
    body = plain(answer.structured_content)
    assert not answer.is_error, body
    text = str(body)
    assert "planning with action=check_guest_migration" in text and "plan_guest_move" not in text
