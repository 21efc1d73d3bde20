"""The heavy operations share the read cache's answers (ReadCache.get_shared): none may change one.

Every heavy operation runs on every scenario, twice at once and then again from the cache, through a
real MCP client and proxmoxer against pvesim; then each shared answer must still equal PVE's JSON.
A change in place would be seen by every other check running or to come (design record 261204-37).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from pve_steward.analysis.catalog import AREAS
from pve_steward.pveio import readcache

pytestmark = pytest.mark.anyio


@pytest.fixture
def caches(monkeypatch: pytest.MonkeyPatch) -> list[readcache.ReadCache]:
    """Every read cache the servers of a test make (one per cluster context)."""
    made: list[readcache.ReadCache] = []
    own_init = readcache.ReadCache.__post_init__

    def keep(self: readcache.ReadCache) -> None:
        own_init(self)
        made.append(self)

    monkeypatch.setattr(readcache.ReadCache, "__post_init__", keep)
    return made


def _calls(nodes: list[str], vmids: list[int]) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("check_cluster_health", {"areas": list(AREAS), "detail": True, "limit": 1000}),
        ("check_upgrade_readiness", {}),
        ("diagnose_migratability", {"detail": True, "limit": 1000}),
        ("diagnose_backups", {"detail": True}),
        ("diagnose_pbs", {"detail": True}),
    ]
    calls += [("plan_node_evacuation", {"node": n, "allow_offline": True}) for n in nodes]
    calls += [("check_guest_migration", {"vmid": v, "allow_offline": True}) for v in vmids[:5]]
    return calls


@pytest.mark.parametrize("scenario", ["demo", "ceph", "migration", "upgrade", "truth"])
async def test_no_heavy_operation_changes_a_shared_answer(
    scenario: str, start_sim: Any, server_for: Any, caches: list[readcache.ReadCache]
) -> None:
    sim = start_sim(scenario)
    async with Client(server_for(sim, "root@pam!pvesim", read_cache_ttl=60)) as c:
        nodes = [n["name"] for n in (await c.call_tool("list_nodes", {})).structured_content["items"]]
        guests = (await c.call_tool("list_guests", {"limit": 500})).structured_content["items"]
        calls = _calls(nodes, [g["vmid"] for g in guests])
        ran: list[str] = []

        async def run(name: str, args: dict[str, Any]) -> None:
            result = await c.call_tool(name, args)
            ran.append(name if not result.is_error else f"{name}: {result.content[0].text[:120]}")  # type: ignore[union-attr]

        for _ in range(2):  # at once (readers join one read), then again from the cache's shared answers
            async with anyio.create_task_group() as tg:
                for name, args in calls:
                    tg.start_soon(run, name, args)
    shared = [e for cache in caches for e in cache._entries.values() if e.shared is not readcache._UNSET]
    assert len(shared) >= 10, f"the heavy reads did not go through get_shared: {len(shared)} shared answers"
    assert [p for cache in caches for p in cache.changed_shared()] == []
    assert sum(1 for r in ran if ":" not in r) >= len(calls), ran
