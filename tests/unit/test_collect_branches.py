"""The collector's side-by-side branches: a read in flight in one branch is not sent again by another,
and the gaps come out in branch order whichever branch answered first (FakeClient, PVE-shaped)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from pve_steward.analysis.data import Missing
from pve_steward.pveio.client import ApiPath, api_path
from pve_steward.testing import FakeClient
from pve_steward.tools.collect import Collector, collect
from tests.unit.pve_fixtures import NOW, cluster_status, guest_row, node_row

pytestmark = pytest.mark.anyio


class GatedClient(FakeClient):
    """Answers a GET only once the test opens the gate, so two branches overlap for certain."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        self.calls.append(("GET", str(path), params))
        await self.gate.wait()
        return [{"zone": "z1", "type": "simple"}]


async def test_a_read_in_flight_in_another_branch_is_awaited_not_repeated() -> None:
    client = GatedClient()
    collector = Collector(client, NOW, ["sdn"])
    zones = api_path("cluster", "sdn", "zones")
    got: dict[str, Any] = {}

    async def branch(key: str) -> None:
        got.update(await collector._read([(key, zones, {})]))

    async with anyio.create_task_group() as tg:
        tg.start_soon(branch, "first")
        tg.start_soon(branch, "second")
        await anyio.wait_all_tasks_blocked()
        client.gate.set()
    assert client.requested("GET") == ["GET /cluster/sdn/zones"]
    assert got["first"] == got["second"] == [{"zone": "z1", "type": "simple"}]
    assert got["first"] is not got["second"]  # each branch may change its own copy


async def test_gaps_follow_branch_order_not_answer_order() -> None:
    collector = Collector(FakeClient(), NOW, ["guests"])
    slow_done = anyio.Event()

    def gap(what: str) -> Missing:
        return Missing(what=what, path="/x", error="boom", affects=("guests",))

    async def slow() -> None:
        await anyio.sleep(0.05)
        collector._gaps.append(gap("slow branch"))
        slow_done.set()

    async def fast() -> None:
        collector._gaps.append(gap("fast branch"))
        await slow_done.wait()  # still running while the slow one records: each keeps its own list
        collector._gaps.append(gap("fast branch, later"))

    collector.data.missing.append(gap("before the branches"))
    await collector._branches([slow, fast])
    assert [m.what for m in collector.data.missing] == [
        "before the branches",
        "slow branch",
        "fast branch",
        "fast branch, later",
    ]


async def test_configs_are_laid_out_together_in_vmid_order() -> None:
    """The order every check walks them (ascending vmid), not the order of the reads' keys ("config:1000"
    sorts before "config:200"); each a copy of the answer, so the read cache's shared answer stays as read."""
    answers = {vmid: {"name": f"vm{vmid}", "memory": "1024", "cores": 2} for vmid in (1000, 200, 300)}
    client = FakeClient()
    client.on("GET", "/cluster/status", cluster_status({"pve1": True}))
    client.on("GET", "/cluster/resources", [node_row("pve1")] + [guest_row(v, "pve1", "qemu") for v in answers])
    for vmid, config in answers.items():
        client.on("GET", f"/nodes/pve1/qemu/{vmid}/config", config)
    data = await collect(client, NOW, ["guests"])
    assert list(data.configs) == [200, 300, 1000]
    assert data.configs == answers
    assert all(data.configs[v] is not answers[v] for v in answers)
