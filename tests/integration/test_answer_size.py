"""Compact answers on a generated 2,000-guest cluster (issue 17): text per guest and the health answer."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from mcp import Client

from pvesim.generator import generate
from pvesim.server import SimServer
from tests.untrusted import plain, untabulate

pytestmark = pytest.mark.anyio
MAX_ANSWER = 100_000  # bytes of text: about 25k tokens, a common client limit
PER_GUEST = 150


async def test_list_guests_and_detailed_health_stay_small(start_sim: Any, server_for: Any) -> None:
    sim = start_sim(generate(nodes=20, guests=2000, seed=3), speed=5000)
    # the cluster never changes here: the detailed check reads it from the cache the first check filled
    async with Client(server_for(sim, "root@pam!pvesim", read_cache_ttl=60)) as c:
        guests = await c.call_tool("list_guests", {"limit": 500})
        health = await c.call_tool("check_cluster_health", {})
        pages = [await c.call_tool("check_cluster_health", {"detail": True})]
        while (following := pages[-1].structured_content["next_offset"]) is not None:  # type: ignore[index]
            pages.append(await c.call_tool("check_cluster_health", {"detail": True, "offset": following}))
    assert not guests.is_error and not health.is_error, (guests.content, health.content)
    listed = guests.structured_content["items"]  # type: ignore[index]
    assert len(listed) == 500
    text = guests.content[0].text  # type: ignore[union-attr]
    assert untabulate(json.loads(text)) == guests.structured_content  # the text is the structured answer
    assert len(text.encode()) / len(listed) <= PER_GUEST, len(text.encode()) / len(listed)
    detail = health.content[0].text  # type: ignore[union-attr]
    assert len(detail.encode()) <= MAX_ANSWER, len(detail.encode())
    assert health.structured_content["omitted"] > 0  # type: ignore[index]  # a cluster this size has more
    total = sum(health.structured_content["counts"].values())  # type: ignore[index]
    assert len(pages) > 1  # 229 KB of findings in one answer before paging
    for answer in pages:
        assert not answer.is_error and len(answer.content[0].text.encode()) <= MAX_ANSWER  # type: ignore[union-attr]
    codes = [f["code"] for p in pages for f in p.structured_content["findings"]]  # type: ignore[index]
    assert len(codes) == total  # every finding, each once, across the pages


async def test_migratability_detail_comes_in_pages_under_100_kb(start_sim: Any, server_for: Any) -> None:
    """detail=true at 2,000 guests was one 3 MB answer; now pages of guests, non-live first, each guest once
    (issue 44 item 4). Later pages come from the first page's run."""
    sim = start_sim(generate(nodes=20, guests=2000, seed=3), speed=5000)
    async with Client(server_for(sim, "root@pam!pvesim")) as c:
        pages = [await c.call_tool("diagnose_migratability", {"detail": True})]
        while (following := pages[-1].structured_content["next_offset"]) is not None:  # type: ignore[index]
            pages.append(await c.call_tool("diagnose_migratability", {"detail": True, "offset": following}))
        listed = await c.call_tool("diagnose_migratability", {"limit": 20, "offset": 40})
    first = pages[0].structured_content
    assert first is not None
    total = sum(first["verdicts"].values())
    assert first["guests_total"] == total == 2000 and len(pages) > 10
    order = {"blocked": 0, "restart": 1, "offline": 2, "live": 3}
    ranks, vmids = [], []
    for answer in pages:
        body = answer.structured_content
        assert not answer.is_error and body is not None
        assert len(json.dumps(body, separators=(",", ":")).encode()) <= MAX_ANSWER
        assert len(answer.content[0].text.encode()) <= MAX_ANSWER  # type: ignore[union-attr]
        assert body["omitted_guests"] == total - len(body["guests"])
        ranks += [order[g["verdict"]] for g in body["guests"]]
        vmids += [g["vmid"] for g in body["guests"]]
        assert all(g["targets"] for g in body["guests"])  # detail: per-target verdicts, even for blocked guests
    assert len(vmids) == len(set(vmids)) == total  # every guest, each once
    assert ranks == sorted(ranks)  # non-live first, across the pages
    assert first["report"]["findings"] and all(not p.structured_content["report"]["findings"] for p in pages[1:])  # type: ignore[index]
    assert first["report"]["counts"] == pages[-1].structured_content["report"]["counts"]  # type: ignore[index]
    body = listed.structured_content
    assert body is not None and [g["vmid"] for g in body["guests"]] == vmids[40:60] and body["next_offset"] == 60


MARKS = re.compile(r'"untrusted_(?:fields|columns)":\[[^\]]*\],?')


@pytest.mark.parametrize("granular", [True, False], ids=["granular", "meta"])
async def test_the_default_health_answer_leads_with_what_to_do_first(
    demo_sim: SimServer, server_for: Any, granular: bool
) -> None:
    """Issue 41, item 7: the demo's default answer starts with its criticals grouped by subject, each with its
    fix (naming operations as this client calls them), and marks cluster text once per object or table: the
    marks are a sliver of the answer (the wrappers around every string were 19 % of it)."""
    async with Client(server_for(demo_sim, "root@pam!pvesim", granular_tools=granular)) as c:
        if granular:
            health = await c.call_tool("check_cluster_health", {})
        else:
            health = await c.call_tool("diagnostics", {"action": "check_cluster_health"})
    assert not health.is_error, health.content
    text = health.content[0].text  # type: ignore[union-attr]
    body = json.loads(text) if granular else json.loads(text)["result"]
    report = plain(health.structured_content if granular else health.structured_content["result"])  # type: ignore[index]
    assert list(body)[:6] == ["area", "status", "complete", "summary", "counts", "act_first"]  # read first
    led = report["act_first"]
    criticals = {
        (f["subject"]["kind"], f["subject"]["id"], f["subject"]["node"])
        for f in report["findings"]
        if f["severity"] == "critical"
    }
    assert len(led) + report["act_first_more"] == len(criticals)
    first = led[0]
    assert (first["subject"]["kind"], first["subject"]["id"]) == ("disk", "pve3:/dev/sdb")  # failing, under a pool
    assert first["codes"] == ["DISK_SMART_FAILED", "NODE_DISK_PENDING_SECTORS"] and len(first["fix"]) == 2
    fixes = " ".join(x for a in led for x in a["fix"])
    assert ("get_task" if granular else "tasks with action=get_task") in fixes  # as this client calls it
    assert '{"untrusted":true' not in text and '"untrusted","text"' not in text  # no wrapper, no table of wrappers
    marks = sum(len(m) for m in MARKS.findall(text))
    assert marks / len(text) < 0.02, (marks, len(text))
