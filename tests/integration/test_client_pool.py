"""The client's request pool: a bound shared by concurrent callers, and cancellation that drops what is queued.

Real proxmoxer over HTTPS against pvesim; in-flight requests are counted by
wrapping the client's own request function, and an order under test is made by holding a request
until the state it waits for is there, so nothing here depends on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from pve_steward.config import Settings
from pve_steward.pveio.client import ApiPath, ProxmoxerClient, api_path, gather
from pve_steward.pveio.requestpool import BACKGROUND, REQUEST_PRIORITY, URGENT
from pvesim.server import SimServer

pytestmark = pytest.mark.anyio


class InFlight:
    """Wraps ``ProxmoxerClient._request`` to count requests in flight and started; with ``hold_first``,
    the first ``first`` requests started wait for that event before they are sent."""

    def __init__(self, client: ProxmoxerClient, hold_first: threading.Event | None = None, first: int = 1) -> None:
        self.now = self.peak = self.started = 0
        self.order: list[str] = []
        self._lock = threading.Lock()
        self.first_started = threading.Event()
        inner = client._request

        def counted(method: str, path: ApiPath, params: dict[str, Any]) -> Any:
            with self._lock:
                self.now += 1
                self.started += 1
                self.order.append(str(path))
                self.peak = max(self.peak, self.now)
                held = self.started <= first
            self.first_started.set()
            if held and hold_first is not None:
                assert hold_first.wait(10), "a first request was held for 10 s"
            try:
                return inner(method, path, params)
            finally:
                with self._lock:
                    self.now -= 1

        client._request = counted  # type: ignore[method-assign]


async def test_concurrency_bound_holds_across_concurrent_callers(
    start_sim: Callable[..., SimServer], settings_for: Callable[..., Settings]
) -> None:
    sim = start_sim("demo")
    client = ProxmoxerClient(settings_for(sim, concurrency=3))
    release = threading.Event()
    counter = InFlight(client, hold_first=release, first=3)  # the first three are in flight until the rest wait
    reads = [(f"r{i}", api_path("version"), {}) for i in range(8)]
    try:
        async with anyio.create_task_group() as tg:  # two tool calls at once share one pool
            for _ in range(2):
                tg.start_soon(gather, client, reads)
            # three in flight and the other 13 queued, not started: a fourth worker would have taken one (and,
            # not held, run it: peak 4, and the queue would never hold 13)
            with anyio.fail_after(10):
                while not (counter.now == 3 and client._pool._queue.qsize() == 13):
                    await anyio.sleep(0.001)
            release.set()
    finally:
        release.set()
        client.close()
    assert counter.started == 16
    assert counter.peak == 3, f"{counter.peak} requests were in flight at once with concurrency 3"


async def test_cancelled_caller_drops_queued_requests(
    start_sim: Callable[..., SimServer], settings_for: Callable[..., Settings]
) -> None:
    sim = start_sim("demo")
    client = ProxmoxerClient(settings_for(sim, concurrency=1))
    release = threading.Event()
    counter = InFlight(client, hold_first=release)  # the first read is in flight until its caller is cancelled
    reads = [(f"r{i}", api_path("version"), {}) for i in range(10)]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(gather, client, reads)
            await anyio.to_thread.run_sync(counter.first_started.wait, 10)
            tg.cancel_scope.cancel()
        release.set()
        # the pool drained: a background job queued last runs after every read the caller left queued
        await anyio.to_thread.run_sync(lambda: client._pool.submit(lambda: None, priority=BACKGROUND).result(10))
    finally:
        release.set()
        client.close()
    assert counter.started == 1, f"{counter.started - 1} requests queued by a cancelled caller were sent"


async def test_a_cheap_read_goes_before_the_queued_reads_of_a_heavy_call(
    start_sim: Callable[..., SimServer], settings_for: Callable[..., Settings]
) -> None:
    sim = start_sim("demo")
    client = ProxmoxerClient(settings_for(sim, concurrency=1))
    release = threading.Event()
    counter = InFlight(client, hold_first=release)  # the heavy call's first read is held until the cheap one waits
    heavy_reads = [(f"r{i}", api_path("version"), {}) for i in range(6)]

    async def heavy() -> None:
        REQUEST_PRIORITY.set(BACKGROUND)  # what tools/admission.py does for a heavy operation
        await gather(client, heavy_reads)

    def cheap_read_queued() -> bool:
        return any(item[0] == URGENT for item in list(client._pool._queue.queue))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heavy)
            await anyio.to_thread.run_sync(counter.first_started.wait, 10)
            tg.start_soon(client.get, api_path("cluster", "status"))
            with anyio.fail_after(10):
                while not cheap_read_queued():
                    await anyio.sleep(0.001)
            release.set()
    finally:
        release.set()
        client.close()
    assert counter.order.index("/cluster/status") == 1, counter.order
    assert len(counter.order) == 7
