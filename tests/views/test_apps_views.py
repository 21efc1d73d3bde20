"""The MCP Apps views in headless Chromium, fed by a test host with the real server's answers (issue 44)."""

from __future__ import annotations

import copy
from typing import Any

from playwright.sync_api import expect

from tests.untrusted import is_marked, plain

WRITE_WORDS = ("migrate", "start", "stop", "backup_now", "set_", "delete", "create", "update")


def structured(demo: dict[str, Any], op: str) -> dict[str, Any]:
    body: dict[str, Any] = demo["results"][op]["result"]["structuredContent"]
    return body


def test_health_view_starts_with_status_and_what_to_do_first(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health")
    report = plain(structured(granular_demo, "check_cluster_health"))
    view = shown.view
    view.wait_for_selector("[data-chart=nodes]")
    view.wait_for_selector(".strip [data-tile='quorum'] b:text-is('quorate')")
    text = shown.text()
    assert "Cluster health" in text and report["summary"] in text
    tiles = {t: view.locator(f".strip [data-tile='{t}'] b").inner_text() for t in ("quorum", "nodes online")}
    assert tiles == {"quorum": "quorate", "nodes online": "3 of 3"}
    assert view.locator(".strip [data-tile]").all_inner_texts()[2:] and view.locator(".strip [data-tile]").count() == 5
    # criticals grouped by what they are about: the failing disk's findings are one group, with their fixes
    disk = view.locator(".first[data-subject='disk pve3:/dev/sdb']")
    codes = {
        f["code"] for f in report["findings"] if f["subject"]["id"] == "pve3:/dev/sdb" and f["severity"] == "critical"
    }
    assert len(codes) >= 2 and all(code in disk.inner_text() for code in codes)
    assert disk.locator("h3").inner_text().startswith(f"{len(codes)} critical")
    groups = view.locator(".first").count() + view.locator(".firsts .more").count()
    assert groups >= 1 and "fix:" in view.locator(".first").first.inner_text()
    # fixes with commands: copyable, as text
    assert view.locator(".first code.cmd").count() > 0 and view.locator(".first button.copy").count() > 0
    while view.locator(".firsts button.more:not([hidden])").count():
        view.locator(".firsts button.more:not([hidden])").click()
    firsts = view.locator(".first li").all_inner_texts()
    criticals = [f for f in report["findings"] if f["severity"] == "critical"]
    assert len(firsts) == len(criticals)  # every critical of the page, each once, in its group
    assert all(any(f["code"] in x and f["message"] in x for x in firsts) for f in criticals)
    assert "detail=true" not in text and "[object Object]" not in text and "untrusted" not in text
    assert shown.errors == []
    shown.screenshot("health")


def test_health_areas_are_sorted_by_severity_and_clean_areas_pass(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health")
    report = plain(structured(granular_demo, "check_cluster_health"))
    view = shown.view
    order = {"critical": 0, "warning": 1, "skipped": 2, "info": 3, "none": 3.5, "ok": 4}
    results = view.locator(".area").evaluate_all("els => els.map(e => [e.dataset.area, e.dataset.result])")
    ranks = [order[r] for _, r in results]
    assert ranks == sorted(ranks)  # worst first
    areas = {a for a, _ in results}
    assert set(report["checked"]) <= areas | {"data"}
    # a page of the findings: the report says which areas its skipped checks and failed reads limit
    # (report.limited), so a clean area passes on the first page and the skipped one is skipped there already
    assert report["next_offset"] is not None and report["limited"] == {"pbs": {"skipped": 1, "unread": 0}}
    assert dict(results)["ha"] == "ok" and dict(results)["pbs"] == "skipped"
    assert "not shown yet" in view.locator("section", has_text="Areas, worst first").inner_text()
    while view.locator("button.more", has_text="show the next page").count():
        view.locator("button.more", has_text="show the next page").click()
        view.wait_for_function("() => !document.querySelector('button.more[disabled]')")
    results = dict(view.locator(".area").evaluate_all("els => els.map(e => [e.dataset.area, e.dataset.result])"))
    assert results["ha"] == "ok"  # every finding read: clean areas pass
    assert results["ceph"] == "warning"  # the demo's planted slow OSD (osd.5 on pve3)
    assert results["pbs"] == "skipped"  # PBS is not configured: skipped, never passed and never info
    assert "passed: no findings" in view.locator(".area[data-area='ha']").inner_text()
    assert view.locator(".strip [data-tile='PBS'] b").inner_text() == "not checked"
    total = sum(report["counts"].values())
    view.locator(".area > details:not([open]) > summary").evaluate_all("els => els.forEach(e => e.click())")
    view.wait_for_function("() => !document.querySelector('.area > details:not([open])')")
    view.wait_for_function("() => [...document.querySelectorAll('.area > details')].every(d => d.children.length > 1)")
    view.locator(".area .paged > button.more:not([hidden])").evaluate_all("els => els.forEach(e => e.click())")
    ids = view.locator("details.finding").evaluate_all("els => els.map(e => e.dataset.key)")
    assert len(ids) == total  # every finding once, after the pages
    calls = shown.page.evaluate("() => window.toolCalls")
    pages = [c for c in calls if c["name"] == "check_cluster_health"]
    assert pages and all(c["arguments"]["detail"] is True and c["arguments"]["limit"] == 30 for c in pages)
    assert shown.errors == []


def test_health_node_and_storage_bars_agree_with_the_findings(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health")
    view = shown.view
    view.wait_for_selector("[data-chart=storage]")
    while view.locator("button.more", has_text="show the next page").count():  # the CPU finding is on page 2
        view.locator("button.more", has_text="show the next page").click()
        view.wait_for_function("() => !document.querySelector('button.more[disabled]')")
    marked = granular_demo["reads"]["list_nodes"]["result"]["structuredContent"]["items"]
    nodes = plain(marked)  # the view reads the names' text, whatever the wire form
    for node in nodes:
        share = round(node["mem_used_bytes"] / node["mem_total_bytes"] * 100)
        assert view.locator(f"[data-chart=nodes] svg[aria-label='{node['name']} memory {share} %']").count() == 1
    cued = view.locator("[data-chart=nodes] .cluster-text[title='text from the cluster']")
    assert cued.count() == 3 * sum(1 for n in marked if is_marked(n, "name")) > 0  # a cue where marked
    nodes_text = view.locator("[data-chart=nodes]").inner_text()
    assert "now 12.0 GiB" in nodes_text  # each figure says its time base
    # pve3's CPU finding is a day average: its bar says so and takes the finding's colour
    cpu = view.locator("[data-chart=nodes] svg[aria-label^='pve3 CPU']")
    assert cpu.locator("rect.fill-warning").count() == 1 and "averaged 74% over the day" in nodes_text
    assert view.locator("[data-chart=nodes] svg[aria-label^='pve1 CPU'] rect.fill-warning").count() == 0
    # local-lvm on pve3 is 92 % full: past the critical threshold, drawn as such
    assert view.locator("[data-chart=storage] svg[aria-label='local-lvm on pve3 92 %'] rect.fill-critical").count() == 1
    # nfs-templates is inactive on pve2 and pve3 (STORAGE_INACTIVE): no healthy bar, the nodes named
    inactive = view.locator("[data-chart=storage] [aria-label='nfs-templates inactive']")
    assert inactive.count() == 1 and "inactive on pve2, pve3" in inactive.inner_text()
    assert view.locator("[data-chart=storage] svg[aria-label^='nfs-templates']").count() == 0
    assert shown.errors == []


def test_health_view_filters_by_keyboard(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health")
    view = shown.view
    view.locator("button[data-severity=warning]").focus()
    shown.page.keyboard.press("Enter")
    assert view.locator("button[data-severity=warning]").get_attribute("aria-pressed") == "false"
    assert view.locator(".area details[open] details.finding summary .s-warning").count() == 0
    shown.page.keyboard.press("Space")  # and back
    assert view.locator("button[data-severity=warning]").get_attribute("aria-pressed") == "true"
    for _ in range(3):  # past the info and skipped buttons to the text filter
        shown.page.keyboard.press("Tab")
    active = view.evaluate("() => [document.activeElement.tagName, document.activeElement.type]")
    assert active == ["INPUT", "search"]
    shown.page.keyboard.type("ZFS_POOL")
    found = view.locator(".area details[open] details.finding")
    assert found.count() == 1  # the area holding it opened by itself
    found.first.locator("summary").focus()
    shown.page.keyboard.press("Enter")
    assert found.first.get_attribute("open") is not None
    expect(found.first).to_contain_text("fix:")  # drawn on the toggle event, which follows the click
    assert shown.errors == []


def test_evacuation_view_is_a_runbook(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "plan_node_evacuation")
    plan = plain(structured(granular_demo, "plan_node_evacuation"))
    view = shown.view
    text = shown.text()
    assert f"Evacuate {plan['node']}" in text and plan["verdict"] in text
    blocked = {b["vmid"] for b in plan["blockers"]}
    assert view.locator(".readiness").inner_text().startswith("Partly ready: 4 moves planned; 2 guests")
    assert view.locator(".stat", has_text="guests blocked").locator("b").inner_text() == str(len(blocked))
    # blockers grouped by reason, each with its fix
    for code in {b["code"] for b in plan["blockers"]}:
        group = view.locator(f".blocker[data-code='{code}']")
        assert group.count() == 1 and "fix:" in group.inner_text()
    assert "Eject the CD-ROM" in view.locator(".blocker[data-code='MIGRATE_LOCAL_CDROM']").inner_text()
    # totals and parameters
    memory = sum(s["memory_bytes"] for s in plan["steps"] if s["mode"] == "live") / 2**30
    assert view.locator(".stat", has_text="memory moved live").locator("b").inner_text() == f"{memory:.1f} GiB"
    assert view.locator(".stat", has_text="estimated time").count() == 1
    assert "headroom percent" in view.locator("dl.params").inner_text()
    # Ceph: before and after, each with the command to copy and why
    before = view.locator("section", has_text="1 · Before the window").locator("ol.steps li")
    after = view.locator("section", has_text="3 · After the window").locator("ol.steps li")
    assert before.count() == sum(s["when"] == "before" for s in plan["ceph_steps"]) > 0
    assert after.count() == sum(s["when"] == "after" for s in plan["ceph_steps"]) > 0
    commands = view.locator("ol.steps code.cmd").all_inner_texts()
    assert "ceph osd set noout" in commands and "ceph osd unset noout" in commands
    assert all("why:" in li for li in before.all_inner_texts())
    # the moves, in order
    moves = view.locator("table[aria-label='ordered moves'] tbody tr")
    assert moves.count() == len(plan["steps"])
    for i, step in enumerate(plan["steps"]):
        cells = moves.nth(i).locator("td").all_inner_texts()
        assert cells[:5] == [str(step["order"]), str(step["vmid"]), step["name"], step["type"], step["target"]]
    ha = view.locator("table[aria-label='HA-managed guests'] tbody tr")
    assert ha.count() == len(plan["ha_guests"])
    assert "ha-manager crm-command node-maintenance enable pve2" in view.locator(".note code.cmd").all_inner_texts()
    targets = view.locator("table[aria-label='target memory'] tbody tr")
    assert targets.count() == len(plan["targets"])
    assert view.locator("svg[data-chart=flow] text", has_text=plan["node"]).count() == 1
    assert "null" not in text.split() and shown.errors == []
    shown.screenshot("evacuation")


def contract_plan(base: dict[str, Any]) -> dict[str, Any]:
    """The demo plan with the fields the planner adds (docs: briefs' contract), marked as the tools mark them."""

    def mark(t: str) -> dict[str, Any]:
        return {"untrusted": True, "text": t}

    plan = copy.deepcopy(base)
    plan["phases"] = [
        {"name": "ha", "title": "HA maintenance moves", "vmids": [122], "memory_bytes": 2**30, "note": "first"},
        {"name": "keep_running", "title": "Live moves", "vmids": [107, 108, 110], "memory_bytes": 28 * 2**30},
        {"name": "rest", "title": "The rest", "vmids": [109], "memory_bytes": 0, "note": None},
        {"name": "stop_for_window", "title": "Stop for the window", "vmids": [113], "memory_bytes": 4 * 2**30},
    ]
    plan["reserved"] = [{"node": mark("pve1"), "vmids": [122], "memory_bytes": 2**30, "why": "HA moves ct:122 here"}]
    plan["stop_for_window"] = [
        {"vmid": 113, "name": mark("legacy-crm"), "memory_bytes": 4 * 2**30, "why": "no room", "production": False},
        {"vmid": 104, "name": mark("mail01"), "memory_bytes": 8 * 2**30, "why": "no room", "production": True},
    ]
    plan["stop_sufficient"] = True
    plan["readiness"] = {
        "onboot_on_return": [{"vmid": 109, "name": mark("jumphost"), "node": mark("pve2"), "when": "node_returns"}],
        "address_clashes": [
            {"kind": "mac", "address": "BC:24:11:3A:10:14", "vmid": 114, "other_vmid": 115, "other_node": mark("pve3")}
        ],
        "ha_shutdown_policy": "conditional",
        "ha_policy_note": "a shutdown stops HA guests",
        "stale_backups": [{"vmid": 107, "name": mark("erp-app"), "age_hours": 45.0, "policy_hours": 26.4}],
    }
    return plan


def test_evacuation_view_shows_phases_stop_list_and_the_return(show: Any, granular_demo: dict[str, Any]) -> None:
    result = copy.deepcopy(granular_demo["results"]["plan_node_evacuation"]["result"])
    result["structuredContent"] = contract_plan(result["structuredContent"])
    shown = show(granular_demo, "plan_node_evacuation", result=result)
    view = shown.view
    phases = view.locator("ol.phases > li")
    assert phases.evaluate_all("els => els.map(e => e.dataset.phase)") == [
        "ha",
        "keep_running",
        "rest",
        "stop_for_window",
    ]
    assert phases.nth(0).inner_text().startswith("HA maintenance moves · 1 guest · 1.0 GiB")
    stops = view.locator("table[aria-label='stop for the window'] tbody tr")
    assert [stops.nth(i).locator("td").first.inner_text() for i in range(stops.count())] == ["113", "104"]
    assert "Stopping these frees enough room." in shown.text()
    assert view.locator("table[aria-label='reserved room'] tbody tr").count() == 1
    starts = view.locator("table[aria-label='starts on return'] tbody tr td").all_inner_texts()
    assert starts == ["109", "jumphost", "pve2", "when the node returns"]
    assert view.locator("table[aria-label='address clashes'] tbody tr td").all_inner_texts()[:3] == [
        "MAC",
        "BC:24:11:3A:10:14",
        "114",
    ]
    assert "45.0 h" in view.locator("table[aria-label='stale backups']").inner_text()
    assert "HA shutdown policy: conditional" in shown.text()
    assert "untrusted" not in shown.text() and shown.errors == []
    shown.screenshot("evacuation-phases")


def test_backups_view_has_one_row_per_guest_with_its_worst_state(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "diagnose_backups")
    report = plain(structured(granular_demo, "diagnose_backups"))
    view = shown.view
    view.wait_for_selector("table[aria-label='backups per guest']")
    view.wait_for_selector("table[aria-label='backup jobs']")
    rows = view.locator("table[aria-label='backups per guest'] tbody tr")
    ids = [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())]
    flagged = {f["subject"]["id"] for f in report["findings"] if f["subject"]["kind"] == "guest"} - {"130"}
    assert sorted(ids) == sorted(flagged) and len(ids) == len(set(ids))  # each guest once, never twice
    mail = rows.nth(ids.index("104")).locator("td").all_inner_texts()
    stale = next(f for f in report["findings"] if f["code"] == "BACKUP_STALE" and f["subject"]["id"] == "104")
    age, policy = stale["evidence"]["age_hours"], stale["evidence"]["threshold_hours"]
    assert mail[1] == "mail01" and f"{age:.1f} h (policy {policy:.1f} h)" in mail[3] and mail[4] == "too old"
    assert "within policy" not in " ".join(rows.all_inner_texts())  # 104's backup is not also drawn as healthy
    never = rows.nth(ids.index("114")).locator("td").all_inner_texts()
    assert never[3].endswith("never") and "no backup" in never[4] and "no enabled job" in never[4]
    assert rows.nth(ids.index("106")).locator("td").nth(5).inner_text() == "failed"
    # the healthy ones, once each, with their names
    view.locator("details[data-key='within'] > summary").click()
    view.wait_for_selector("table[aria-label='guests within policy']")
    good = view.locator("table[aria-label='guests within policy'] tbody tr")
    good_ids = [good.nth(i).locator("td").first.inner_text() for i in range(good.count())]
    assert good_ids and not set(good_ids) & set(ids) and len(good_ids) == len(set(good_ids))
    assert all(good.nth(i).locator("td").nth(1).inner_text() not in ("", "not read") for i in range(good.count()))
    # a failed run is counted as a run, and says which guest failed
    jobs = view.locator("table[aria-label='backup jobs'] tbody tr")
    nightly = jobs.filter(has_text="backup-nightly").locator("td").all_inner_texts()
    assert nightly[-1] == "1 run: pve2 (VM 107)"
    assert jobs.filter(has_text="backup-weekly-local").locator("td").last.inner_text() == "0"
    assert "PBS verify and prune state: not checked" in shown.text()  # the demo has no PBS link
    assert shown.errors == []
    shown.screenshot("backups")


def test_backups_view_says_when_the_list_is_cut_and_shows_pbs_state(show: Any, granular_demo: dict[str, Any]) -> None:
    demo = copy.deepcopy(granular_demo)
    listing = demo["reads"]["list_backups"]["result"]["structuredContent"]
    listing["items"] = listing["items"][:5]
    listing["page"] = {"total": 1969, "offset": 0, "returned": 5, "next_offset": 5}
    pbs = demo["reads"]["diagnose_pbs"]["result"]["structuredContent"]
    pbs["findings"] = [
        {
            "code": "PBS_PRUNE_DROPS_LAST_VERIFIED",
            "severity": "critical",
            "subject": {"kind": "guest", "id": {"untrusted": True, "text": "121"}, "name": None, "node": None},
            "message": {"untrusted": True, "text": "the next prune of 121 removes its only verified backup"},
            "evidence": {},
            "remediation": "",
        }
    ]
    jobs = demo["reads"]["list_backup_jobs"]["result"]["structuredContent"]["items"]
    jobs[0]["selection"] = "all except " + ",".join(str(v) for v in range(1000, 1400))  # a long exclusion list
    shown = show(demo, "diagnose_backups")
    view = shown.view
    view.wait_for_selector("table[aria-label='backup jobs']")
    assert "5 of 1,969 backups read" in shown.text()
    row = view.locator("table[aria-label='backups per guest'] tbody tr", has=view.locator("td:text-is('121')"))
    assert row.locator("td").nth(6).inner_text() == "drops the last verified backup"
    assert row.locator("td").nth(1).inner_text() == "monitoring"  # named from the guest list
    assert "all except 1000, 1001, " in view.locator("table[aria-label='backup jobs']").inner_text()
    assert "… and 388 more" in view.locator("table[aria-label='backup jobs']").inner_text()
    wide = view.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0  # no page wider than the viewport
    assert shown.errors == []


def test_migratability_grid_groups_non_live_first(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "diagnose_migratability")
    body = plain(structured(granular_demo, "diagnose_migratability"))
    view = shown.view
    matrix = view.locator("table[aria-label='verdict matrix']")
    headers = matrix.locator("thead th").all_inner_texts()
    assert headers == ["guest", "name", "status", "verdict", "pve1", "pve2", "pve3", "reasons"]
    groups = matrix.locator("tbody").evaluate_all("els => els.map(e => e.dataset.group)")
    assert groups == ["blocked", "restart", "offline", "live"]  # non-live first
    for verdict, count in body["verdicts"].items():
        assert view.locator(f".stat.s-{verdict} b").inner_text() == str(count)
    # the live group is folded; its rows come on demand, by keyboard too
    assert matrix.locator("tbody[data-group='live'] tr[data-vmid]").count() == 0
    matrix.locator("tbody[data-group='live'] button.group-toggle").focus()
    shown.page.keyboard.press("Enter")
    assert matrix.locator("tbody[data-group='live'] tr[data-vmid]").count() == body["verdicts"]["live"]
    assert matrix.locator("tr[data-vmid]").count() == len(body["guests"])
    # 105 (ml-train, passthrough) is blocked everywhere: one cell says so; its reasons are visible text
    row = matrix.locator("tr[data-vmid='105']")
    wide = row.locator("td.wide")
    assert wide.count() == 1 and wide.get_attribute("colspan") == "3"
    assert "blocked on every node: PASSTHROUGH" in wide.inner_text()
    reasons = row.locator("td.reasons li")
    assert reasons.first.is_visible() and "local devices hostpci0" in reasons.first.inner_text()
    assert row.locator("td").nth(2).inner_text() == "running"
    # restart: badge and cell in the same colour
    restart = matrix.locator("tr[data-vmid='120']")
    colours = restart.evaluate(
        "r => [r.querySelector('.badge'), r.querySelector('td .s-restart:not(.badge)')]"
        ".map(e => getComputedStyle(e).color)"
    )
    assert colours[0] == colours[1]
    assert shown.errors == []
    shown.screenshot("migratability")


def test_migratability_grid_filters_sorts_and_groups(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "diagnose_migratability")
    view = shown.view
    matrix = "table[aria-label='verdict matrix']"
    view.locator("input[aria-label='filter guests by text']").focus()
    shown.page.keyboard.type("LOCAL_CDROM")
    assert view.locator(f"{matrix} tr[data-vmid]").evaluate_all("els => els.map(e => e.dataset.vmid)") == ["106"]
    view.locator("input[aria-label='filter guests by text']").fill("")
    view.locator("button[data-verdict=blocked]").click()
    assert view.locator(f"{matrix} tbody[data-group='blocked']").count() == 0
    view.locator("button[data-verdict=blocked]").click()
    view.select_option("select[aria-label='group by']", "reason")
    groups = view.locator(f"{matrix} tbody").evaluate_all("els => els.map(e => e.dataset.group)")
    assert "MIGRATE_PASSTHROUGH" in groups and "MIGRATE_RESTART_REQUIRED" in groups
    view.select_option("select[aria-label='group by']", "node")
    view.select_option("select[aria-label='sort by']", "vmid")
    pve1 = view.locator(f"{matrix} tbody[data-group='pve1'] tr[data-vmid]").evaluate_all(
        "els => els.map(e => +e.dataset.vmid)"
    )
    assert pve1 == sorted(pve1) and len(pve1) > 1
    assert shown.errors == []


def test_meta_tool_views_pick_the_view_by_action(show: Any, meta_demo: dict[str, Any]) -> None:
    assert meta_demo["tools"]["diagnostics"]["_meta"]["ui"]["resourceUri"] == "ui://pve-steward/views/diagnostics.html"
    assert meta_demo["tools"]["planning"]["_meta"]["ui"]["resourceUri"] == "ui://pve-steward/views/planning.html"
    shown = show(meta_demo, "check_cluster_health")
    shown.view.wait_for_selector("[data-chart=nodes]")
    shown.view.wait_for_selector(".strip [data-tile='quorum'] b:text-is('quorate')")
    assert shown.view.locator("#app").get_attribute("data-view") == "health"
    # the reads went through the meta-tools with an action, and none was a write
    calls = shown.page.evaluate("() => window.toolCalls")
    assert {(c["name"], c["arguments"]["action"]) for c in calls} == {
        ("cluster", "list_nodes"),
        ("storage", "list_storage"),
        ("cluster", "cluster_overview"),
    }
    shown.view.locator("button.more", has_text="show the next page").click()  # a page: the same meta-tool
    shown.view.wait_for_function("() => !document.querySelector('button.more[disabled]')")
    page = shown.page.evaluate("() => window.toolCalls")[-1]
    assert page["name"] == "diagnostics" and page["arguments"]["action"] == "check_cluster_health"
    assert page["arguments"]["offset"] == 30 and shown.errors == []
    plan = show(meta_demo, "plan_node_evacuation")
    assert plan.view.locator("#app").get_attribute("data-view") == "evacuation"
    assert plan.errors == []
    # an action without a view of its own gets the findings of its report, by area
    ops = show(meta_demo, "diagnose_operations")
    report = meta_demo["results"]["diagnose_operations"]["result"]["structuredContent"]["result"]
    assert ops.view.locator("#app").get_attribute("data-view") == "report"
    ops.view.locator(".area > details:not([open]) > summary").evaluate_all("els => els.forEach(e => e.click())")
    ops.view.wait_for_function(
        "n => document.querySelectorAll('details.finding').length === n", arg=len(report["findings"])
    )
    assert len(report["findings"]) > 0
    assert ops.errors == []


def test_views_call_only_registered_read_tools(show: Any, granular_demo: dict[str, Any]) -> None:
    tools = granular_demo["tools"]
    for op in ("check_cluster_health", "diagnose_backups"):
        shown = show(granular_demo, op)
        shown.view.wait_for_selector("[data-chart]")
        shown.view.wait_for_function("() => !document.querySelector('#app .pending')")
        calls = shown.page.evaluate("() => window.toolCalls")
        assert calls
        for call in calls:
            assert tools[call["name"]]["annotations"]["readOnlyHint"] is True
            assert not any(w in call["name"] for w in WRITE_WORDS)


def test_views_degrade_without_host_tools_and_with_missing_fields(show: Any, granular_demo: dict[str, Any]) -> None:
    shown = show(granular_demo, "check_cluster_health", server_tools=False)
    shown.view.wait_for_selector("text=node figures are not available in this host")
    assert shown.page.evaluate("() => window.toolCalls") == []
    assert "this host cannot fetch more" in shown.text()  # said to the admin, not to the model
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
