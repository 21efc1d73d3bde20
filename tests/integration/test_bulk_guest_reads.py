"""Fewer calls for the same answer (issue 41 item 6, design record 261206-56): several guests in one get_guests
call, and config fields in list_guests' rows, through a real MCP client against pvesim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pvesim.generator import generate
from pvesim.server import SimServer
from tests.integration.test_answer_size import MAX_ANSWER
from tests.integration.test_metatools import meta_server
from tests.unit.test_start_and_answers import untabulate
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


async def test_get_guests_answers_as_get_guest_does_for_each(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim)) as c:
        bulk = await c.call_tool("get_guests", {"vmids": [105, 100, 9999, 100, 120], "include_config": True})
        one = {v: await c.call_tool("get_guest", {"vmid": v, "include_config": True}) for v in (100, 105, 120)}
    assert bulk.is_error is False, bulk.content
    got = plain(bulk.structured_content)
    assert [g["vmid"] for g in got["items"]] == [105, 100, 120]  # as asked, each once
    assert got["not_found"] == [9999] and got["unread"] == {} and got["not_listed"] == []
    for item in got["items"]:
        single = plain(one[item["vmid"]].structured_content)
        assert {k: v for k, v in item.items() if k != "uptime_s"} == {
            k: v for k, v in single.items() if k != "uptime_s"
        }
    web = next(g for g in got["items"] if g["vmid"] == 100)
    assert web["config"]["cipassword"] == "***redacted***"  # secrets as get_guest redacts them
    assert json.loads(bulk.content[0].text)["items"]["columns"][0] == "vmid"  # like objects: one table


async def test_list_guests_carries_the_config_fields_asked_for(demo_sim: SimServer, server_for: Any) -> None:
    fields = ["onboot", "agent", "net0", "cipassword", "tags"]
    async with Client(server_for(demo_sim)) as c:
        listed = await c.call_tool("list_guests", {"node": "pve1", "fields": fields, "limit": 3})
        plain_list = await c.call_tool("list_guests", {"node": "pve1", "limit": 3})
    assert listed.is_error is False, listed.content
    got = plain(listed.structured_content)
    assert got["fields"] == fields and got["incomplete"] == []
    web = next(r for r in got["items"] if r["vmid"] == 100)
    assert web["config"] == {
        "onboot": 1,
        "agent": "1",
        "net0": "virtio=BC:24:11:3A:10:00,bridge=vmbr0,firewall=1",
        "cipassword": "***redacted***",
        "tags": "prod;web",
    }
    assert all(set(r["config"]) == set(fields) for r in got["items"])  # unset keys are null, not left out
    assert [r["vmid"] for r in got["items"]] == [r["vmid"] for r in plain(plain_list.structured_content)["items"]]
    assert got["page"] == plain(plain_list.structured_content)["page"]
    text = json.loads(listed.content[0].text)
    assert untabulate(text) == listed.structured_content and "config" in text["items"]["columns"]


async def test_bulk_reads_work_through_the_guests_meta_tool(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        bulk = await c.call_tool("guests", {"action": "get_guests", "vmids": [100, 101]})
        rows = await c.call_tool("guests", {"action": "list_guests", "fields": ["onboot"], "limit": 2})
        too_many = await c.call_tool("guests", {"action": "get_guests", "vmids": list(range(100, 121))})
        bad_key = await c.call_tool("guests", {"action": "list_guests", "fields": ["net0; rm"]})
    assert [g["vmid"] for g in plain(bulk.structured_content)["result"]["items"]] == [100, 101]
    assert all("onboot" in r["config"] for r in plain(rows.structured_content)["result"]["items"])
    assert too_many.is_error and "vmids" in too_many.content[0].text and "20" in too_many.content[0].text
    assert bad_key.is_error and "fields" in bad_key.content[0].text


async def test_bulk_answers_stay_within_the_answer_size(start_sim: Any, server_for: Any) -> None:
    """On a 2,000-guest cluster: a fields page is at most 200 rows and under the 100 KB an answer may take (long
    values cut, the page shortened where needed, next_offset on), and 20 guests' details with their configs too."""
    sim = start_sim(generate(nodes=20, guests=2000, seed=3), speed=5000)
    fields = ["onboot", "agent", "net0", "net1", "scsi0", "ostype", "tags", "description", "cores", "memory"]
    async with Client(server_for(sim, "root@pam!pvesim")) as c:
        listed = await c.call_tool("list_guests", {"fields": fields, "limit": 500})
        first = plain(listed.structured_content)["items"][:20]
        bulk = await c.call_tool("get_guests", {"vmids": [r["vmid"] for r in first], "include_config": True})
    assert not listed.is_error and not bulk.is_error, (listed.content, bulk.content)
    page = listed.structured_content["page"]  # type: ignore[index]
    assert 0 < page["returned"] <= 200 and page["next_offset"] == page["returned"]
    for result in (listed, bulk):
        text = result.content[0].text  # type: ignore[union-attr]
        assert len(text.encode()) <= MAX_ANSWER, len(text.encode())
        assert untabulate(json.loads(text)) == result.structured_content
    got = plain(bulk.structured_content)
    assert len(got["items"]) + len(got["not_listed"]) == 20 and got["items"]
