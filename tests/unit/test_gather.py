"""``gather``: many reads through a bounded number of tasks, each read once, every answer or error kept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pve_steward.errors import PveApiError
from pve_steward.pveio.client import GATHER_LANES, ApiPath, api_path, gather, node, vmid


class CountingClient:
    def __init__(self) -> None:
        self.pending = self.peak = 0
        self.paths: list[str] = []

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        self.paths.append(str(path))
        self.pending += 1
        self.peak = max(self.peak, self.pending)
        await asyncio.sleep(0)
        self.pending -= 1
        if str(path).endswith("/113/config"):
            raise PveApiError("no such guest", path=str(path), status=500)
        return {"path": str(path), **params}


def test_thousands_of_reads_go_through_a_bounded_number_of_tasks_each_once() -> None:
    """A task per read put thousands of task starts ahead of a cheap call's next step (issue 17)."""
    client = CountingClient()
    reads = [
        (f"config:{i}", api_path("nodes", node("pve1"), "qemu", vmid(100 + i), "config"), {"current": 1})
        for i in range(3000)
    ]
    got = asyncio.run(gather(client, reads))
    assert len(got) == 3000 and len(client.paths) == 3000 and len(set(client.paths)) == 3000
    assert got["config:7"] == {"path": "/nodes/pve1/qemu/107/config", "current": 1}
    assert isinstance(got["config:13"], PveApiError)
    assert client.peak <= GATHER_LANES < 3000


def test_no_reads_answer_nothing() -> None:
    assert asyncio.run(gather(CountingClient(), [])) == {}


class ReversedClient:
    """Answers the last read asked first: completion order is the reverse of the order asked."""

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        await asyncio.sleep(0.001 * (10 - int(str(path).split("/")[4]) % 100))
        return str(path)


def test_answers_come_in_the_order_asked_whatever_order_they_arrive_in() -> None:
    """Tools list failed reads from this order (cluster_overview.incomplete): it must not depend on timing."""
    reads = [(f"r{i}", api_path("nodes", node("pve1"), "qemu", vmid(100 + i), "config"), {}) for i in range(10)]
    got = asyncio.run(gather(ReversedClient(), reads))
    assert list(got) == [f"r{i}" for i in range(10)]


def test_a_read_that_crashes_raises_its_own_exception_not_a_group() -> None:
    """A malformed answer or a bug inside one read surfaces as itself, as a plain await would: the guard names
    its type ("stopped on an unexpected ValueError") instead of the task group's ExceptionGroup."""

    class Malformed(CountingClient):
        async def get(self, path: ApiPath, /, **params: Any) -> Any:
            if str(path).endswith("/105/config"):
                raise ValueError("invalid literal for int()")
            return await super().get(path, **params)

    reads = [(f"c{i}", api_path("nodes", node("pve1"), "qemu", vmid(100 + i), "config"), {}) for i in range(20)]
    with pytest.raises(ValueError, match="invalid literal"):
        asyncio.run(gather(Malformed(), reads))
