"""Heavy reads in flight per PVE node (client.PER_NODE): a node runs three API calls at once, so sixteen of its
guests' reads at once kept thirteen waiting there, ahead of every other user's request (design record 261206-61)."""

from __future__ import annotations

import asyncio
from typing import Any

from pve_steward.config import Settings
from pve_steward.pveio.client import PER_NODE, ProxmoxerClient, api_path, node, vmid
from pve_steward.pveio.requestpool import BACKGROUND, REQUEST_PRIORITY, URGENT


class HeldPool:
    """Stands in for the request pool: counts the reads in flight per node and answers when the test says."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.inflight: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    async def run(self, fn: Any, method: str, path: Any, params: Any, priority: int = URGENT) -> Any:
        where = path.segments[1] if path.segments[0] == "nodes" else "-"
        self.inflight[where] = self.inflight.get(where, 0) + 1
        self.peak[where] = max(self.peak.get(where, 0), self.inflight[where])
        try:
            await self.release.wait()
            return {}, None
        finally:
            self.inflight[where] -= 1


def _client(pool: HeldPool) -> ProxmoxerClient:
    client = ProxmoxerClient(Settings(url="pve.invalid:8006", token_id="ops@pve!mcp", token_secret="s" * 36))  # type: ignore[arg-type]
    client._workers = pool  # type: ignore[assignment]
    return client


def test_heavy_reads_of_one_node_are_held_to_twice_its_workers_and_other_nodes_go_on() -> None:
    async def run() -> None:
        pool = HeldPool()
        client = _client(pool)
        REQUEST_PRIORITY.set(BACKGROUND)
        reads = [client.get(api_path("nodes", node("pve1"), "qemu", vmid(100 + i), "config")) for i in range(20)]
        reads += [client.get(api_path("nodes", node("pve2"), "qemu", vmid(200 + i), "config")) for i in range(3)]
        reads += [client.get(api_path("cluster", "resources"))]
        tasks = [asyncio.create_task(r) for r in reads]
        while sum(pool.inflight.values()) < PER_NODE + 3 + 1:
            await asyncio.sleep(0)
        for _ in range(20):
            await asyncio.sleep(0)  # every read had its chance to start: pve1's others wait for a slot
        assert pool.inflight == {"pve1": PER_NODE, "pve2": 3, "-": 1}
        pool.release.set()
        await asyncio.gather(*tasks)
        assert pool.peak["pve1"] == PER_NODE

    asyncio.run(run())


def test_a_cheap_calls_read_is_not_held_behind_heavy_reads_of_its_node() -> None:
    async def run() -> None:
        pool = HeldPool()
        client = _client(pool)

        async def heavy(i: int) -> Any:
            REQUEST_PRIORITY.set(BACKGROUND)
            return await client.get(api_path("nodes", node("pve1"), "qemu", vmid(100 + i), "config"))

        tasks = [asyncio.create_task(heavy(i)) for i in range(10)]
        while pool.inflight.get("pve1", 0) < PER_NODE:
            await asyncio.sleep(0)
        REQUEST_PRIORITY.set(URGENT)
        cheap = asyncio.create_task(client.get(api_path("nodes", node("pve1"), "qemu", vmid(999), "status", "current")))
        while pool.inflight["pve1"] < PER_NODE + 1:
            await asyncio.sleep(0)
        assert pool.inflight["pve1"] == PER_NODE + 1  # the cheap call's read is in flight beside the six
        pool.release.set()
        await asyncio.gather(cheap, *tasks)

    asyncio.run(run())


def test_the_node_we_talk_to_shares_one_gate_for_its_own_paths_and_the_cluster_wide_ones() -> None:
    """Paths without proxyto (/cluster/..., /access/...) run on the node the client talks to, which
    /cluster/status names local: its gate is that node's, not a second one beside it."""

    async def run() -> None:
        pool = HeldPool()
        client = _client(pool)
        status = [{"type": "cluster", "name": "c"}, {"type": "node", "name": "pve2", "local": 0}]
        status.append({"type": "node", "name": "pve1", "local": 1})
        client._request = lambda method, path, params: status  # type: ignore[method-assign]
        assert client._request_with_body("GET", api_path("cluster", "status"), {})[0] == status
        REQUEST_PRIORITY.set(BACKGROUND)
        reads = [client.get(api_path("nodes", node("pve1"), "qemu", vmid(100 + i), "config")) for i in range(5)]
        reads += [client.get(api_path("cluster", "resources")) for _ in range(3)]
        # no proxyto in PVE's schema: another node's RRD data is read where it is asked, on pve1
        reads += [client.get(api_path("nodes", node(n), "rrddata"), timeframe="day") for n in ("pve2", "pve3")]
        tasks = [asyncio.create_task(r) for r in reads]
        while sum(pool.inflight.values()) < PER_NODE:
            await asyncio.sleep(0)
        for _ in range(20):
            await asyncio.sleep(0)
        assert sum(pool.inflight.values()) == PER_NODE  # one gate for pve1: its configs, the cluster's reads, RRD
        pool.release.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())
