"""The MCP Apps views in headless Chromium, fed by a test host with the real server's answers."""

from __future__ import annotations

from typing import Any

from tests.untrusted import is_marked, plain

WRITE_WORDS = ("migrate", "start", "stop", "backup_now", "set_", "delete", "create", "update")


def test_health_view_shows_findings_by_area_and_node_bars(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health")
    report = granular_demo["results"]["check_cluster_health"]["result"]["structuredContent"]
    view = shown.view
    view.wait_for_selector("[data-chart=nodes]")
    view.wait_for_selector("[data-chart=storage]")
    text = shown.text()
    assert "Cluster health" in text and report["summary"] in text
    matrix = view.locator("table[aria-label='findings by area and severity']")
    for area, counts in report["by_area"].items():
        row = matrix.locator("tr", has=view.locator(f"td:text-is('{area}')"))
        assert row.locator("td").all_inner_texts() == [
            area,
            str(counts["critical"]),
            str(counts["warning"]),
            str(counts["info"]),
        ]
    assert view.locator("details.finding").count() == len(report["findings"])
    # each node has its memory bar with the figures list_nodes gave
    for node in granular_demo["reads"]["list_nodes"]["result"]["structuredContent"]["items"]:
        share = round(node["mem_used_bytes"] / node["mem_total_bytes"] * 100)
        assert is_marked(node, "name")  # list_nodes marks cluster text; the view reads its text
        label = f"{plain(node)['name']} memory {share} %"
        assert view.locator(f"[data-chart=nodes] svg[aria-label='{label}']").count() == 1
    # marked cluster text carries a quiet cue: each node's three rows, named with a tooltip
    cued = view.locator("[data-chart=nodes] .cluster-text[title='text from the cluster']")
    assert cued.count() == 3 * len(granular_demo["reads"]["list_nodes"]["result"]["structuredContent"]["items"])
    assert "[object Object]" not in text and "untrusted" not in shown.text()
    # local-lvm on pve3 is 92 % full: past the critical threshold, drawn as such
    assert view.locator("[data-chart=storage] svg[aria-label='local-lvm on pve3 92 %'] rect.fill-critical").count() == 1
    stat = view.locator(".stat.s-critical b").inner_text()
    assert stat == str(report["counts"]["critical"])
    assert shown.errors == []
    shown.screenshot("health")


def test_health_view_filters_by_keyboard(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health")
    report = granular_demo["results"]["check_cluster_health"]["result"]["structuredContent"]
    view = shown.view
    warnings = sum(1 for f in report["findings"] if f["severity"] == "warning")
    assert warnings > 0
    view.locator("button[data-severity=warning]").focus()
    shown.page.keyboard.press("Enter")
    assert view.locator("button[data-severity=warning]").get_attribute("aria-pressed") == "false"
    assert view.locator("details.finding").count() == len(report["findings"]) - warnings
    shown.page.keyboard.press("Space")  # and back
    assert view.locator("details.finding").count() == len(report["findings"])
    shown.page.keyboard.press("Tab")
    shown.page.keyboard.press("Tab")  # past the info button to the text filter
    active = view.evaluate("() => [document.activeElement.tagName, document.activeElement.type]")
    assert active == ["INPUT", "search"]
    shown.page.keyboard.type("ZFS_POOL")
    assert view.locator("details.finding").count() == 1
    first = view.locator("details.finding summary").first
    first.focus()
    shown.page.keyboard.press("Enter")
    assert view.locator("details.finding").first.get_attribute("open") is not None
    assert "fix:" in view.locator("details.finding").first.inner_text()
    assert shown.errors == []


def test_evacuation_view_shows_targets_moves_blockers_and_ha(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "plan_node_evacuation")
    plan = plain(
        granular_demo["results"]["plan_node_evacuation"]["result"]["structuredContent"]
    )  # marked text, read as text
    view = shown.view
    text = shown.text()
    assert f"Evacuate {plan['node']}" in text and plan["verdict"] in text
    moves = view.locator("table[aria-label='ordered moves'] tbody tr")
    assert moves.count() == len(plan["steps"])
    for i, step in enumerate(plan["steps"]):
        cells = moves.nth(i).locator("td").all_inner_texts()
        assert cells[:5] == [str(step["order"]), str(step["vmid"]), step["name"], step["type"], step["target"]]
    blocked = view.locator("table[aria-label='blocked guests'] tbody tr")
    assert blocked.count() == len(plan["blockers"])
    assert [blocked.nth(i).locator("td").nth(2).inner_text() for i in range(blocked.count())] == [
        b["code"] for b in plan["blockers"]
    ]
    targets = view.locator("table[aria-label='target memory'] tbody tr")
    assert targets.count() == len(plan["targets"])
    for i, t in enumerate(plan["targets"]):
        cells = targets.nth(i).locator("td").all_inner_texts()
        assert cells[0] == t["node"] and cells[7] == str(t["guests_added"])
    assert view.locator("svg[data-chart=flow] text", has_text=plan["node"]).count() == 1
    ha = view.locator("table[aria-label='HA-managed guests'] tbody tr")
    assert ha.count() == len(plan["ha_guests"])
    if plan.get("ha_recommendation"):
        assert plan["ha_recommendation"] in text
    assert shown.errors == []
    shown.screenshot("evacuation")


def test_backups_view_shows_ages_jobs_and_failures(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "diagnose_backups")
    report = plain(
        granular_demo["results"]["diagnose_backups"]["result"]["structuredContent"]
    )  # marked text, read as text
    jobs = granular_demo["reads"]["list_backup_jobs"]["result"]["structuredContent"]
    view = shown.view
    view.wait_for_selector("[data-chart=ages]")
    view.wait_for_selector("table[aria-label='backup jobs']")
    text = shown.text()
    # mail01's newest backup is old against its job's policy (about 120 h against 26.4 h in the demo)
    stale = next(f for f in report["findings"] if f["code"] == "BACKUP_STALE" and f["subject"]["id"] == "104")
    age, policy = stale["evidence"]["age_hours"], stale["evidence"]["threshold_hours"]
    assert age > policy
    row = view.locator("[data-chart=ages] span", has_text=f"{age:.1f} h (policy {policy:.1f} h)")
    assert row.count() == 1 and "BACKUP_STALE" in row.inner_text()
    never = {f["subject"]["id"] for f in report["findings"] if f["code"] == "BACKUP_NONE"}
    assert never  # the demo has guests without any backup: one row each
    assert view.locator("[data-chart=ages] span", has_text="never · no backup").count() == len(never)
    rows = view.locator("table[aria-label='backup jobs'] tbody tr")
    assert rows.count() == len(jobs["items"])
    assert sorted(rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())) == sorted(
        j["id"] for j in jobs["items"]
    )
    failed = [f["code"] for f in report["findings"] if "FAILED" in f["code"] or "VERIFY" in f["code"]]
    assert failed and all(code in text for code in failed)
    assert shown.errors == []
    shown.screenshot("backups")


def test_migratability_view_shows_the_verdict_matrix(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "diagnose_migratability")
    body = plain(
        granular_demo["results"]["diagnose_migratability"]["result"]["structuredContent"]
    )  # marked text, read as text
    view = shown.view
    matrix = view.locator("table[aria-label='verdict matrix']")
    assert matrix.locator("tbody tr").count() == len(body["guests"])
    headers = matrix.locator("thead th").all_inner_texts()
    assert headers[:3] == ["guest", "name", "verdict"] and headers[-1] == "reasons"
    nodes = headers[3:-1]
    assert nodes == ["pve1", "pve2", "pve3"]
    for verdict, count in body["verdicts"].items():
        assert view.locator(f".stat.s-{verdict} b").inner_text() == str(count)
    # 105 (ml-train, passthrough) is blocked everywhere; its own node is marked as the source
    row = matrix.locator("tbody tr", has=view.locator("td:text-is('105')"))
    cells = row.locator("td").all_inner_texts()
    assert cells[2] == "blocked" and cells[3] == "●"
    assert cells[4].startswith("✗") and "PASSTHROUGH" in cells[4]
    assert shown.errors == []
    shown.screenshot("migratability")


def test_meta_tool_views_pick_the_view_by_action(show: Any, meta_demo: dict[str, Any]) -> None:
    assert meta_demo["tools"]["diagnostics"]["_meta"]["ui"]["resourceUri"] == "ui://pve-steward/views/diagnostics.html"
    assert meta_demo["tools"]["planning"]["_meta"]["ui"]["resourceUri"] == "ui://pve-steward/views/planning.html"
    shown = show(meta_demo, "check_cluster_health")
    shown.view.wait_for_selector("[data-chart=nodes]")
    assert shown.view.locator("#app").get_attribute("data-view") == "health"
    # the reads went through the meta-tools with an action, and none was a write
    calls = shown.page.evaluate("() => window.toolCalls")
    assert {(c["name"], c["arguments"]["action"]) for c in calls} == {
        ("cluster", "list_nodes"),
        ("storage", "list_storage"),
    }
    assert shown.errors == []
    plan = show(meta_demo, "plan_node_evacuation")
    assert plan.view.locator("#app").get_attribute("data-view") == "evacuation"
    assert plan.errors == []
    # an action without a view of its own gets the findings of its report
    ops = show(meta_demo, "diagnose_operations")
    report = meta_demo["results"]["diagnose_operations"]["result"]["structuredContent"]["result"]
    assert ops.view.locator("#app").get_attribute("data-view") == "report"
    assert ops.view.locator("details.finding").count() == len(report["findings"]) > 0
    assert ops.errors == []


def test_views_call_only_registered_read_tools(show: Any, granular_demo: dict[str, Any]) -> None:
    tools = granular_demo["tools"]
    for op in ("check_cluster_health", "diagnose_backups"):
        shown = show(granular_demo, op)
        shown.view.wait_for_selector("[data-chart]")
        calls = shown.page.evaluate("() => window.toolCalls")
        assert calls
        for call in calls:
            assert tools[call["name"]]["annotations"]["readOnlyHint"] is True
            assert not any(w in call["name"] for w in WRITE_WORDS)


def test_views_degrade_without_host_tools_and_with_missing_fields(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health", server_tools=False)
    shown.view.wait_for_selector("text=node figures are not available in this host")
    assert shown.page.evaluate("() => window.toolCalls") == []
    assert shown.errors == []
    # a plan from a future planner with fields missing or renamed still renders what it has
    partial = {
        "structuredContent": {
            "node": "pve9",
            "verdict": "EVACUATION_READY",
            "targets": [{"node": "pve8"}],
            "ceph_steps": ["ceph osd set noout", {"order": 2, "action": "unset noout"}],
        },
        "content": [],
    }
    shown = show(granular_demo, "plan_node_evacuation", result=partial)
    text = shown.text()
    assert "Evacuate pve9" in text and "no moves planned" in text and "ceph osd set noout" in text
    assert "2 · unset noout" in text
    assert shown.errors == []
    # a shape the view cannot draw at all is said, not a blank frame or an exception
    odd = {"structuredContent": {"node": "pve9", "targets": [None]}, "content": []}
    shown = show(granular_demo, "plan_node_evacuation", result=odd, ready="#app[data-view] .note")
    assert "could not be drawn" in shown.text() and "in the conversation" in shown.text()
    assert shown.errors == []


def test_views_follow_the_host_theme(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "diagnose_migratability", theme="dark")
    background = "() => getComputedStyle(document.body).backgroundColor"
    assert shown.view.evaluate("() => document.documentElement.dataset.theme") == "dark"
    dark = shown.view.evaluate(background)
    shown.page.evaluate("() => window.setTheme('light')")
    shown.view.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    light = shown.view.evaluate(background)
    assert dark == "rgb(23, 24, 28)" and light == "rgb(255, 255, 255)"
    assert shown.errors == []
    shown.page.evaluate("() => window.setTheme('dark')")
    shown.screenshot("migratability-dark")


def test_views_take_the_host_style_variables(show: Any, granular_demo: dict[str, Any]) -> None:
    variables = {"--color-background-primary": "rgb(1, 2, 3)", "--color-text-primary": "rgb(250, 240, 230)"}
    shown = show(granular_demo, "diagnose_backups", styles={"variables": variables})
    colors = shown.view.evaluate(
        "() => [getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]"
    )
    assert colors == ["rgb(1, 2, 3)", "rgb(250, 240, 230)"]
    assert shown.errors == []


def test_views_report_their_size_to_the_host(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "plan_node_evacuation")
    shown.page.wait_for_function("() => window.sizes.length > 0")
    size = shown.page.evaluate("() => window.sizes[window.sizes.length - 1]")
    assert size["height"] > 200 and size["width"] > 0
