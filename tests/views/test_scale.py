"""The views on a generated 2,000-guest cluster (pvesim generate): every answer a view needs is a page under
100 KB, and each view draws a bounded document, as wide as the window (issue 44 item 7).

Structure only: how long a draw takes is measured by bench/bench_views.py (ratios against the 1 s target),
never here, so the suite holds on a loaded 2-CPU machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import pvesim
from pvesim.generator import generate
from pvesim.server import SimServer
from tests.views.support import capture

MAX_PAGE = 100 * 1024
# A view's document at 2,000 guests: it was 78,000 nodes for migratability. What a view draws at first is
# bounded by its groups and pages, not by the cluster (the demo's views have 250 to 600 nodes).
MAX_NODES = 6000
SCALE_CALLS: dict[str, dict[str, Any]] = {
    "check_cluster_health": {},
    "plan_node_evacuation": {"node": "pve01", "allow_offline": True},
    "diagnose_backups": {"detail": True},
    "diagnose_migratability": {"detail": True},
}


@pytest.fixture(scope="module")
def scale_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = generate(nodes=20, guests=2000, seed=3)
    sim = SimServer(pvesim.build_cluster(data, speed=5000.0), faults=pvesim.faults_from(data)).start()
    try:
        yield capture(sim, tmp_path_factory.mktemp("scale"), granular=True, calls=SCALE_CALLS)
    finally:
        sim.stop()


def size(answer: dict[str, Any]) -> tuple[int, int]:
    """(structured JSON, text) bytes of one answer as the host forwards it."""
    body = json.dumps(answer["structuredContent"], separators=(",", ":"), ensure_ascii=False).encode()
    text = "".join(c.get("text", "") for c in answer.get("content", [])).encode()
    return len(body), len(text)


def test_every_answer_a_view_needs_is_a_page_under_100_kb(scale_demo: dict[str, Any]) -> None:
    answers = {**scale_demo["results"], **scale_demo["reads"]}
    assert sum(1 for k in answers if k.startswith("diagnose_migratability@")) > 10  # 3 MB before, now pages
    assert sum(1 for k in answers if k.startswith("check_cluster_health@")) >= 1
    for name, call in answers.items():
        assert not call["result"].get("isError"), name
        body, text = size(call["result"])
        assert body <= MAX_PAGE and text <= MAX_PAGE, (name, body, text)
    for uri, resource in scale_demo["resources"].items():
        assert len(resource["text"].encode()) <= MAX_PAGE, uri
    listing = scale_demo["reads"]["list_backups"]["result"]["structuredContent"]
    assert listing["page"]["total"] > listing["page"]["returned"]  # the view says "N of M backups read"


def frame_width(shown: Any, width: int) -> None:
    shown.page.evaluate("w => { document.getElementById('view').style.width = w + 'px'; }", width)
    shown.view.wait_for_function("w => window.innerWidth === w", arg=width)


@pytest.mark.parametrize("op", list(SCALE_CALLS))
def test_each_view_draws_a_bounded_document_as_wide_as_the_window(
    show: Any, scale_demo: dict[str, Any], op: str
) -> None:
    shown = show(scale_demo, op)
    view = shown.view
    view.wait_for_function("() => !document.querySelector('.empty') || !/reading/.test(document.body.innerText)")
    nodes = view.evaluate("() => document.querySelectorAll('*').length")
    assert 200 < nodes <= MAX_NODES, nodes
    for width in (390, 1000):
        frame_width(shown, width)
        assert view.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 0, width
    assert "[object Object]" not in shown.text() and shown.errors == []
    shown.screenshot(f"scale-{op}")


def test_health_at_scale_groups_criticals_and_pages_on_request(show: Any, scale_demo: dict[str, Any]) -> None:
    shown = show(scale_demo, "check_cluster_health")
    report = scale_demo["results"]["check_cluster_health"]["result"]["structuredContent"]
    view = shown.view
    assert report["omitted"] > 400  # a page of 50 of some 600 findings
    firsts = view.locator(".first").count() + view.locator(".firsts .more").count()
    assert 1 <= view.locator(".first").count() <= 12 and firsts
    before = len(view.locator(".area").evaluate_all("els => els"))
    view.locator("button.more", has_text="show the next page").click()
    view.wait_for_function("() => !document.querySelector('button.more[disabled]')")
    calls = shown.page.evaluate("() => window.toolCalls")
    assert calls[-1]["name"] == "check_cluster_health" and calls[-1]["arguments"]["offset"] == 50
    text = view.locator("section", has_text="Areas, worst first").inner_text()
    assert "detail=true" not in text and len(view.locator(".area").evaluate_all("els => els")) >= before
    assert shown.errors == []


def test_migratability_at_scale_draws_a_page_and_loads_the_next(show: Any, scale_demo: dict[str, Any]) -> None:
    shown = show(scale_demo, "diagnose_migratability")
    body = scale_demo["results"]["diagnose_migratability"]["result"]["structuredContent"]
    view = shown.view
    grid = "table[aria-label='verdict matrix']"
    headers = view.locator(f"{grid} thead th").all_inner_texts()
    assert headers == ["guest", "name", "status", "verdict", "can move to", "reasons"]  # 20 nodes: one column
    rows = view.locator(f"{grid} tr[data-vmid]")
    first = rows.count()
    assert first == len(body["guests"]) < body["guests_total"] == 2000
    assert f"{first} of 2,000 guests shown" in shown.text()
    view.locator("button.more", has_text="show the next page").click()
    view.wait_for_function('n => document.querySelectorAll("tr[data-vmid]").length > n', arg=first)
    vmids = rows.evaluate_all("els => els.map(e => e.dataset.vmid)")
    assert len(vmids) == len(set(vmids)) > first  # each guest once
    assert shown.page.evaluate("() => window.toolCalls")[-1]["arguments"]["offset"] == body["next_offset"]
    # typing in the filter redraws a bounded grid
    view.locator("input[aria-label='filter guests by text']").fill("LOCKED")
    locked = rows.evaluate_all("els => els.map(e => e.innerText)")
    assert locked and all("LOCKED" in x for x in locked)
    assert view.evaluate("() => document.querySelectorAll('*').length") <= MAX_NODES
    assert shown.errors == []


def test_backups_at_scale_say_how_much_of_the_list_was_read(show: Any, scale_demo: dict[str, Any]) -> None:
    shown = show(scale_demo, "diagnose_backups")
    listing = scale_demo["reads"]["list_backups"]["result"]["structuredContent"]
    view = shown.view
    view.wait_for_selector("table[aria-label='backup jobs']")
    total = f"{listing['page']['total']:,}"
    assert f"{listing['page']['returned']} of {total} backups read" in shown.text()
    rows = view.locator("table[aria-label='backups per guest'] tbody tr")
    ids = rows.evaluate_all("els => els.map(e => e.firstChild.innerText)")
    assert len(ids) == len(set(ids)) and 0 < len(ids) <= 100  # a page of rows; more on request
    assert shown.errors == []


def test_the_scale_fixture_is_the_generated_cluster(scale_demo: dict[str, Any]) -> None:
    nodes = scale_demo["reads"]["list_nodes"]["result"]["structuredContent"]["items"]
    verdicts = scale_demo["results"]["diagnose_migratability"]["result"]["structuredContent"]["verdicts"]
    assert len(nodes) == 20 and sum(verdicts.values()) == 2000
