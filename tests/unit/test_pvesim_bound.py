"""pvesim's model of PVE's bound (pvesim/bound.py): three workers per node run handlers, other nodes' requests
are forwarded by the entry node's workers, protected methods run in pvedaemon's workers."""

from __future__ import annotations

import asyncio

import pytest

from pvesim.bound import Bound, Workers

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_node_runs_three_handlers_at_once_and_the_rest_wait_their_turn_in_order() -> None:
    workers = Workers(Bound(cost=0, proxy_cost=0), entry="pve1")
    release = asyncio.Event()
    running: list[int] = []
    order: list[int] = []

    async def handler(i: int) -> int:
        running.append(i)
        order.append(i)
        await release.wait()
        running.remove(i)
        return i

    tasks = [asyncio.create_task(workers.serve("pve2", False, lambda i=i: handler(i))) for i in range(10)]
    while len(running) < 3:
        await asyncio.sleep(0)
    for _ in range(20):  # the others had every chance to start: none did
        await asyncio.sleep(0)
    assert sorted(running) == [0, 1, 2]
    release.set()
    assert await asyncio.gather(*tasks) == list(range(10))
    assert order == list(range(10))  # first come, first served
    pools = {(p["node"], p["kind"]): p for p in workers.report()["pools"]}
    assert pools[("pve2", "pveproxy")]["served"] == 10 and pools[("pve2", "pveproxy")]["peak_waiting"] == 7
    assert pools[("pve1", "pveproxy")]["served"] == 10  # the entry node forwarded each


async def test_requests_take_the_workers_pve_gives_them() -> None:
    """The entry node's own reads run on it; another node's are forwarded and run there; a protected method runs
    in that node's pvedaemon after its pveproxy forwarded it."""
    workers = Workers(Bound(cost=0.001, proxy_cost=0.0005), entry="pve1")

    async def handler() -> str:
        return "ok"

    await workers.serve(None, False, handler)  # /cluster/resources
    await workers.serve("pve1", False, handler)  # /nodes/pve1/qemu/100/config on the entry node
    await workers.serve("pve3", False, handler)  # /nodes/pve3/qemu/101/config
    await workers.serve("pve3", True, handler)  # /nodes/pve3/qemu/101/status/current
    served = {(p["node"], p["kind"]): p["served"] for p in workers.report()["pools"]}
    assert served == {("pve1", "pveproxy"): 4, ("pve3", "pveproxy"): 2, ("pve3", "pvedaemon"): 1}
    busy = {(p["node"], p["kind"]): p["busy"] for p in workers.report()["pools"]}
    assert busy[("pve3", "pvedaemon")] >= 0.001 and busy[("pve1", "pveproxy")] >= 2 * 0.001 + 2 * 0.0005


async def test_a_request_cancelled_while_waiting_gives_its_turn_to_the_next() -> None:
    workers = Workers(Bound(workers=1, cost=0, proxy_cost=0), entry="pve1")
    release = asyncio.Event()

    async def held() -> str:
        await release.wait()
        return "first"

    async def quick() -> str:
        return "third"

    first = asyncio.create_task(workers.serve(None, False, held))
    second = asyncio.create_task(workers.serve(None, False, quick))
    third = asyncio.create_task(workers.serve(None, False, quick))
    for _ in range(5):
        await asyncio.sleep(0)
    second.cancel()
    release.set()
    assert await first == "first" and await third == "third"
    with pytest.raises(asyncio.CancelledError):
        await second
    assert [p["served"] for p in workers.report()["pools"]] == [2]
