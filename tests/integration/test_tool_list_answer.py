"""tools/list is serialized once per set of tools and protocol version (surface/toollist.py): every session of
every server with those tools gets the same list as an object of its own, and a list that may differ by request
is never the one kept."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from pve_steward.server import OpsServer
from pve_steward.surface import toollist
from pvesim.server import SimServer

pytestmark = pytest.mark.anyio


def _counting(mcp: OpsServer) -> list[int]:
    """Count the SDK's tools/list builds (each one is dumped, validated and dumped again)."""
    built = [0]
    inner = mcp.list_tools

    async def counted() -> Any:
        built[0] += 1
        return await inner()

    mcp.list_tools = counted  # type: ignore[method-assign]
    return built


async def test_each_session_gets_the_first_answer_as_an_object_of_its_own(demo_sim: SimServer, server_for: Any) -> None:
    toollist._KEPT.clear()
    mcp = server_for(demo_sim)
    built = _counting(mcp)
    async with Client(mcp) as c:
        first = (await c.list_tools()).tools
        answer = await c.call_tool("get_guest", {"vmid": 100})  # the client lists again to validate the answer
    assert not answer.is_error
    first[0].input_schema["properties"].clear()  # what one client does to its list stays in its list
    first[0].input_schema["changed"] = True
    async with Client(mcp) as c:
        second = (await c.list_tools()).tools
    other = server_for(demo_sim)  # another server of the same settings: the same tools, built once per process
    other_built = _counting(other)
    async with Client(other) as c:
        third = (await c.list_tools()).tools
    assert (built[0], other_built[0]) == (1, 0), "tools/list was built again for the same tools"
    assert second[0].input_schema["properties"] and "changed" not in second[0].input_schema
    toollist._KEPT.clear()
    async with Client(server_for(demo_sim)) as c:  # built afresh
        fresh = (await c.list_tools()).tools
    assert [t.model_dump(mode="json") for t in second] == [t.model_dump(mode="json") for t in fresh]
    assert [t.model_dump(mode="json") for t in third] == [t.model_dump(mode="json") for t in fresh]


async def test_other_tools_are_never_answered_with_a_kept_list(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim)) as c:
        granular = {t.name for t in (await c.list_tools()).tools}
    async with Client(server_for(demo_sim, granular_tools=False)) as c:
        meta = {t.name for t in (await c.list_tools()).tools}
    async with Client(server_for(demo_sim, "operator@pve!mcp", tier="operator")) as c:
        operator = {t.name for t in (await c.list_tools()).tools}
    assert "get_guest" in granular and "get_guest" not in meta and "guests" in meta
    assert "guest_reboot" in operator and "guest_reboot" not in granular


async def test_a_start_that_has_not_built_its_tools_never_keeps_its_list(demo_sim: SimServer, server_for: Any) -> None:
    """A start from a kept surface answers tools/list before building (OpsServer.defer); what it answers then
    is not what is kept, so the list built on the first call is what later sessions get."""
    mcp = server_for(demo_sim)
    async with Client(mcp) as c:
        built_list = [t.model_dump(mode="json") for t in (await c.list_tools()).tools]
    toollist._KEPT.clear()
    deferred = server_for(demo_sim)
    stale = [t.model_copy(update={"description": "a description nobody wrote"}) for t in await deferred.list_tools()]
    built = [False]

    def furnish() -> None:
        built[0] = True

    deferred.defer(furnish, stale)
    async with Client(deferred) as c:
        before = (await c.list_tools()).tools
        assert before[0].description == "a description nobody wrote" and built[0] is False
        await c.call_tool("get_guest", {"vmid": 100})  # the first call builds
    assert built[0] is True
    async with Client(deferred) as c:
        after = [t.model_dump(mode="json") for t in (await c.list_tools()).tools]
    assert after == built_list
