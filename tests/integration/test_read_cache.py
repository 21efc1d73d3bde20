"""Read each thing once, through a real MCP client and proxmoxer against pvesim (requests counted by pvesim)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

pytestmark = pytest.mark.anyio


async def _health(c: Client) -> Any:
    result = await c.call_tool("check_cluster_health", {})
    assert not result.is_error, result.content
    return result.structured_content


async def test_ten_concurrent_health_checks_cost_at_most_one_and_a_half_of_one(start_sim: Any, server_for: Any) -> None:
    alone = start_sim("demo")
    async with Client(server_for(alone, "root@pam!pvesim", read_cache_ttl=0)) as c:
        before = alone.sim.requests
        single = await _health(c)
        one = alone.sim.requests - before

    shared = start_sim("demo")
    reports: list[Any] = []
    async with Client(server_for(shared, "root@pam!pvesim", read_cache_ttl=3.0)) as c:
        before = shared.sim.requests

        async def check() -> None:
            reports.append(await _health(c))

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(check)
        ten = shared.sim.requests - before
    assert ten <= 1.5 * one, (ten, one)
    assert all(r["summary"] == single["summary"] for r in reports)


async def test_a_change_elsewhere_is_seen_after_the_ttl_and_our_write_clears_at_once(
    start_sim: Any, server_for: Any
) -> None:
    sim = start_sim("demo")
    async with Client(server_for(sim, "root@pam!pvesim", read_cache_ttl=1.0, tier="operator")) as c:
        first = await c.call_tool("cluster_options", {})
        requests = sim.sim.requests
        again = await c.call_tool("cluster_options", {})
        assert sim.sim.requests == requests, "a read within the ttl is answered from the cache"
        assert again.structured_content == first.structured_content
        await anyio.sleep(1.1)
        await c.call_tool("cluster_options", {})
        assert sim.sim.requests == requests + 1, "after the ttl the read goes to PVE again"

        preview = await c.call_tool("guest_shutdown", {"vmid": 100})
        assert not preview.is_error, preview.content
        requests = sim.sim.requests
        await c.call_tool("cluster_options", {})
        assert sim.sim.requests == requests, "previews read fresh but are not writes: reads stay cached"
        token = preview.structured_content["confirm_token"]
        done = await c.call_tool("guest_shutdown", {"vmid": 100, "confirm_token": token})
        assert not done.is_error, done.content
        requests = sim.sim.requests
        await c.call_tool("cluster_options", {})
        assert sim.sim.requests == requests + 1, "our own write clears the cache"
