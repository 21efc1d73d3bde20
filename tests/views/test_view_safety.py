"""Cluster text is data: markup in guest names shows as text, nothing is fetched, no write is offered."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.views.conftest import Shown
from tests.views.support import CALLS, XSS, capture


@pytest.fixture
def hostile_demo(start_sim: Any, tmp_path: Path) -> dict[str, Any]:
    """The demo with markup as the names of guests that every view shows."""
    sim = start_sim("demo")
    with sim.sim.mutate() as cluster:
        for vmid in (105, 107, 114, 123):
            guest = cluster.guests[vmid]
            guest.config["name" if guest.type == "qemu" else "hostname"] = XSS
    return capture(sim, tmp_path, granular=True)


def no_markup_ran(shown: Shown) -> None:
    assert shown.view.locator("img").count() == 0
    assert shown.dialogs == []
    assert shown.errors == []


@pytest.mark.parametrize("op", list(CALLS))
def test_markup_in_guest_names_shows_as_text(show: Any, hostile_demo: dict[str, Any], op: str) -> None:
    body = hostile_demo["results"][op]["result"]["structuredContent"]
    assert XSS in str(body)  # the server passes the name through: the view must escape it
    shown = show(hostile_demo, op)
    shown.view.wait_for_function("() => !document.querySelector('#app .pending')")  # the reads are drawn
    assert XSS in shown.text()
    no_markup_ran(shown)
    if op == "plan_node_evacuation":
        shown.screenshot("xss-evacuation")


def test_every_view_resource_is_self_contained(granular_demo: dict[str, Any], meta_demo: dict[str, Any]) -> None:
    resources = {**granular_demo["resources"], **meta_demo["resources"]}
    assert len(resources) == 6
    for uri, res in resources.items():
        text = res["text"]
        assert res["mimeType"] == "text/html;profile=mcp-app"
        assert len(text.encode()) <= 100 * 1024, uri  # a view stays small (bench/bench_views.py prints sizes)
        assert res["meta"]["ui"]["csp"] == {
            "connectDomains": [],
            "resourceDomains": [],
            "frameDomains": [],
            "baseUriDomains": [],
        }, uri
        policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text)
        assert policy is not None
        assert "default-src 'none'" in policy.group(1) and "connect-src 'none'" in policy.group(1)
        assert "unsafe-inline" not in policy.group(1) and "unsafe-eval" not in policy.group(1)
        # no external reference of any kind, and no markup built from strings
        assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", text), uri
        assert "innerHTML" not in text and "outerHTML" not in text and "insertAdjacentHTML" not in text
        assert "document.write" not in text and "eval(" not in text


def test_the_policy_blocks_the_network_in_the_browser(show: Any, granular_demo: dict[str, Any], host_url: str) -> None:
    shown = show(granular_demo, "diagnose_migratability")
    outcome = shown.view.evaluate("url => fetch(url).then(() => 'fetched', () => 'blocked')", host_url)
    assert outcome == "blocked"
    assert any("Content Security Policy" in e for e in shown.errors)


def test_views_are_additive_metadata(granular_demo: dict[str, Any], meta_demo: dict[str, Any]) -> None:
    """Only the viewed tools carry _meta.ui; every other tool is registered exactly as before."""
    with_ui = {n for n, t in granular_demo["tools"].items() if "ui" in (t.get("_meta") or {})}
    assert with_ui == set(CALLS)
    with_ui = {n for n, t in meta_demo["tools"].items() if "ui" in (t.get("_meta") or {})}
    assert with_ui == {"diagnostics", "planning"}
    for name in ("diagnostics", "planning"):
        assert meta_demo["tools"][name]["annotations"]["readOnlyHint"] is True
    for demo in (granular_demo, meta_demo):  # the server advertises the extension (SEP-2133)
        assert "io.modelcontextprotocol/ui" in demo["capabilities"]["extensions"]


def marked(text: str) -> dict[str, Any]:
    return {"untrusted": True, "text": text}


def test_views_read_cluster_text_marked_once_per_object(show: Any, granular_demo: dict[str, Any]) -> None:
    """The wire form since 261206-57: plain strings, named in their object's untrusted_fields. The view
    reads them as text, cues them, and never takes the mark (or a key "__proto__") for data."""
    plan = {
        "untrusted_fields": ["node", "summary"],
        "node": "pve<b>2</b>",
        "summary": XSS,
        "verdict": "EVACUATION_READY",
        "targets": [{"untrusted_fields": ["node"], "node": "pve1", "total_bytes": 8 << 30, "planned_bytes": 1 << 30,
                     "guests_added": 1}],
        "steps": [
            {"untrusted_fields": ["name", "target"], "order": 1, "vmid": 105, "name": XSS, "type": "qemu",
             "target": "pve1", "mode": "live"},
        ],
        "blockers": [],
        "ha_guests": [{"untrusted_fields": ["name", "constraints"], "vmid": 108, "name": "db", "sid": "vm:108",
                       "constraints": ["rule <s>a</s>", "b"]}],
        "excluded_targets": {"__proto__": "x", "pve9": "offline"},
    }  # fmt: skip
    shown = show(granular_demo, "plan_node_evacuation", result={"structuredContent": plan, "content": []})
    text = shown.text()
    assert "Evacuate pve<b>2</b>" in text and XSS in text
    rows = shown.view.locator("table[aria-label='ordered moves'] tbody tr")
    assert rows.nth(0).locator("td").all_inner_texts()[2] == XSS
    assert "rule <s>a</s>; b" in text and "pve9: excluded, offline" in text
    assert "[object Object]" not in text and "untrusted" not in text
    assert shown.view.locator("b, i, s").count() == shown.view.locator(".stat b").count()  # no markup from data
    no_markup_ran(shown)


def test_views_read_marked_and_plain_cluster_text_alike(show: Any, granular_demo: dict[str, Any]) -> None:
    """Earlier servers wrapped cluster text ({"untrusted": true, "text": ...}); plain text may come unmarked."""
    plan = {
        "node": marked("pve<b>2</b>"),
        "verdict": "EVACUATION_READY",
        "targets": [{"node": marked("pve1"), "total_bytes": 8 << 30, "planned_bytes": 1 << 30, "guests_added": 1}],
        "steps": [
            {"order": 1, "vmid": 105, "name": marked(XSS), "type": "qemu", "target": "pve1", "mode": "live"},
            {"order": 2, "vmid": 106, "name": "plain-name", "type": "lxc", "target": marked("pve3"), "mode": "restart"},
        ],
        "blockers": [{"vmid": 107, "name": marked("erp <i>app</i>"), "code": "MIGRATE_LOCAL_DISK", "detail": "x"}],
        "ha_guests": [{"vmid": 108, "name": "db", "sid": "vm:108", "constraints": [marked("rule <s>a</s>"), "b"]}],
    }
    shown = show(granular_demo, "plan_node_evacuation", result={"structuredContent": plan, "content": []})
    text = shown.text()
    assert "Evacuate pve<b>2</b>" in text
    rows = shown.view.locator("table[aria-label='ordered moves'] tbody tr")
    assert rows.nth(0).locator("td").all_inner_texts()[2] == XSS
    assert rows.nth(1).locator("td").all_inner_texts()[2:5] == ["plain-name", "lxc", "pve3"]
    assert "erp <i>app</i>" in text and "rule <s>a</s>; b" in text
    assert "[object Object]" not in text and "untrusted" not in text
    assert shown.view.locator("b, i, s").count() == shown.view.locator(".stat b").count()  # no markup from data
    no_markup_ran(shown)


def test_compacting_the_assets_keeps_every_string_whole() -> None:
    """page.compact() strips indentation and whole-line comments: safe while no literal spans lines."""
    from pve_steward.views.page import asset, compact

    for name in ("core.js", "views.js"):
        for number, line in enumerate(asset(name).splitlines(), 1):
            assert line.count("`") % 2 == 0, (name, number)  # no template literal spans lines
            assert not line.rstrip().endswith("\\"), (name, number)  # no string continues on the next line
        assert "\n  " not in compact(name) and "\n//" not in compact(name)
    css = asset("style.css")
    assert all(line.strip().endswith("*/") for line in css.splitlines() if line.strip().startswith("/*"))
    assert len(compact("core.js") + compact("views.js") + compact("style.css")) < 0.95 * len(
        asset("core.js") + asset("views.js") + asset("style.css")
    )
