"""Read each thing once, through a real MCP client and proxmoxer against pvesim (requests counted by pvesim)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from pve_steward.pveio import readcache
from tests.untrusted import plain

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


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The read caches' clock, moved by the test only (``clock[0]``): what is within the ttl depends on no load."""
    now = [1000.0]
    own_init = readcache.ReadCache.__post_init__

    def with_test_clock(self: readcache.ReadCache) -> None:
        own_init(self)
        self.clock = lambda: now[0]

    monkeypatch.setattr(readcache.ReadCache, "__post_init__", with_test_clock)
    return now


async def test_a_change_elsewhere_is_seen_after_the_ttl_and_our_write_clears_at_once(
    start_sim: Any, server_for: Any, clock: list[float]
) -> None:
    sim = start_sim("demo")
    async with Client(server_for(sim, "root@pam!pvesim", read_cache_ttl=3.0, tier="operator")) as c:
        first = await c.call_tool("cluster_options", {})  # kept at 1000.0
        requests = sim.sim.requests
        again = await c.call_tool("cluster_options", {})
        clock[0] = 1002.5
        await c.call_tool("cluster_options", {})
        assert sim.sim.requests == requests, "a read within the ttl is answered from the cache"
        assert again.structured_content == first.structured_content
        clock[0] = 1003.0
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


async def test_health_checks_that_differ_only_in_their_page_share_one_run(start_sim: Any, server_for: Any) -> None:
    """Four pages of one health check asked at once: one run (admission.heavy's presentation arguments), its
    reads no more than one check's, and each caller gets its own page of the same ranked findings."""
    alone = start_sim("demo")
    async with Client(server_for(alone, "root@pam!pvesim", read_cache_ttl=0)) as c:
        before = alone.sim.requests
        whole = (await c.call_tool("check_cluster_health", {"detail": True})).structured_content
        one = alone.sim.requests - before

    shared = start_sim("demo")
    asked = [{"limit": 1}, {"limit": 3}, {"limit": 2, "offset": 2}, {"detail": True}]
    answers: dict[int, Any] = {}
    mcp = server_for(shared, "root@pam!pvesim", read_cache_ttl=0)
    async with Client(mcp) as c:
        (app,) = mcp.settings.lifespan.live  # the running server's context (lifespan.Lifespan)
        before = shared.sim.requests

        async def check(i: int) -> None:
            result = await c.call_tool("check_cluster_health", asked[i])
            assert not result.is_error, result.content
            answers[i] = result.structured_content

        async with anyio.create_task_group() as tg:
            for i in range(len(asked)):
                tg.start_soon(check, i)
        together = shared.sim.requests - before
        joined = app.admission.joined
    assert joined == len(asked) - 1, "the other pages joined the first caller's run"
    assert together == one, (together, one)
    assert whole is not None and len(whole["findings"]) > 4
    pages = {i: [(f["code"], str(f["subject"]["id"])) for f in a["findings"]] for i, a in answers.items()}
    codes = pages[3]  # the detail answer: every finding of the one run, in rank order
    assert len(codes) == len(whole["findings"]) and pages == {0: codes[:1], 1: codes[:3], 2: codes[2:4], 3: codes}
    assert [answers[i]["next_offset"] for i in range(4)] == [1, 3, 4, None]
    assert {a["summary"] for a in answers.values()} == {whole["summary"]}


async def test_later_pages_continue_the_run_of_the_first(start_sim: Any, server_for: Any) -> None:
    """Paging through next_offset reads nothing again: the pages come from the first page's run, one ranking."""
    sim = start_sim("demo")
    mcp = server_for(sim, "root@pam!pvesim", read_cache_ttl=0)

    async def health(c: Client, **arguments: Any) -> Any:
        result = await c.call_tool("check_cluster_health", arguments)
        assert not result.is_error, result.content
        return result.structured_content

    def ids(report: Any) -> list[tuple[str, str]]:
        return [(f["code"], str(f["subject"]["id"])) for f in report["findings"]]

    async with Client(mcp) as c:
        (app,) = mcp.settings.lifespan.live
        first = await health(c, limit=3)
        requests = sim.sim.requests
        second = await health(c, limit=3, offset=first["next_offset"])
        rest = await health(c, detail=True, offset=1)
        assert sim.sim.requests == requests, "later pages read nothing"
        assert app.admission.continued == 2
        await health(c, limit=3)  # a first page is a new run
        assert sim.sim.requests > requests
        other = await health(c, areas=["backups"], limit=3, offset=3)  # other work: no kept run to continue
    assert first["next_offset"] == 3 and second["next_offset"] == 6
    assert ids(rest)[:2] == ids(first)[1:] and ids(rest)[2:5] == ids(second)
    assert other["findings"] and app.admission.continued == 2


async def test_a_guest_moved_by_someone_else_is_read_on_its_new_node(start_sim: Any, server_for: Any) -> None:
    """get_guest locates a guest in an index of the guests kept up to fetch.LOCATOR_AGE (a cheap call does
    not decode /cluster/resources every 1.5 s): a guest another admin moved meanwhile is still read on its
    new node, because PVE answers that its config is not on the old one."""
    from pve_steward.tools.fetch import LOCATOR_AGE
    from tests.conftest import wait_task
    from tests.integration.pve import api

    sim = start_sim("demo", speed=20)
    async with Client(server_for(sim, "root@pam!pvesim", read_cache_ttl=0.5)) as c:
        first = await c.call_tool("get_guest", {"vmid": 100})
        assert plain(first.structured_content)["node"] == "pve1"
        pve = api(sim)
        upid = pve.nodes("pve1").qemu(100).migrate.post(target="pve2", online=1)
        assert wait_task(pve.nodes("pve1").tasks(upid).status.get)["exitstatus"] == "OK"
        await anyio.sleep(0.6)  # past the read cache's TTL, well within the locator's age
        assert LOCATOR_AGE > 0.6
        reads = sim.sim.requests
        moved = await c.call_tool("get_guest", {"vmid": 100})
        assert not moved.is_error, moved.content
        assert plain(moved.structured_content)["node"] == "pve2"
        assert (500, "GET", "/nodes/pve1/qemu/100/config") in sim.sim.failure_log  # read on the old node
        assert sim.sim.requests - reads <= 7  # the stale read, a fresh index, and the three reads again
        snapshots = await c.call_tool("list_snapshots", {"vmid": 100})
        assert plain(snapshots.structured_content)["node"] == "pve2"


async def test_the_kept_index_of_the_guests_is_read_once_per_half_its_age(start_sim: Any, server_for: Any) -> None:
    """Repeated get_guest calls past the read cache's TTL read /cluster/resources ahead once per half the
    locator's age, not once per half the TTL; a guest the kept index lacks is looked up in a fresh one."""
    sim = start_sim("demo")
    async with Client(server_for(sim, "root@pam!pvesim", read_cache_ttl=0.2)) as c:
        await c.call_tool("get_guest", {"vmid": 100})
        before = sim.sim.requests
        for _ in range(5):
            await anyio.sleep(0.25)
            assert not (await c.call_tool("get_guest", {"vmid": 100})).is_error
        assert sim.sim.requests - before == 5 * 3  # config, status and snapshots; no /cluster/resources
        reads = sim.sim.requests
        missing = await c.call_tool("get_guest", {"vmid": 999})
        assert missing.is_error and "no guest 999" in missing.content[0].text
        assert sim.sim.requests - reads == 1  # a guest the kept index lacks is looked up in a fresh one
