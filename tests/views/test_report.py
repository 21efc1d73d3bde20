"""``check --html FILE`` in the browser and ``check --format markdown``, against pvesim."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from pvesim.server import SimServer
from tests.views.conftest import Shown, watch
from tests.views.support import ARTIFACTS, DOC_IMAGES, XSS


def check(sim: SimServer, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    token_id, secret = sim.token("root@pam!pvesim")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pve_steward",
            "check",
            "--url",
            sim.address,
            "--token-id",
            token_id,
            "--token-secret",
            secret,
            "--fingerprint",
            sim.fingerprint,
            "--color",
            "never",
            *extra,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        timeout=180,
        check=False,
    )


def open_report(browser: Browser, path: Path, width: int = 1040) -> tuple[Shown, list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    shown = watch(page)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_selector("#migratability details.part > summary")
    return shown, requests


def open_all(page: Any) -> None:
    """Every section, area and folded group open: the whole report in the document."""
    page.locator("details.part:not([open]) > summary").evaluate_all("els => els.forEach(e => e.click())")
    page.wait_for_function("() => [...document.querySelectorAll('details.part')].every(d => d.children.length > 1)")
    page.locator(".area > details:not([open]) > summary").evaluate_all("els => els.forEach(e => e.click())")
    page.locator("button.group-toggle[aria-expanded='false']").evaluate_all("els => els.forEach(e => e.click())")
    page.wait_for_function("() => !document.querySelector(\"button.group-toggle[aria-expanded='false']\")")


def test_check_html_is_one_compact_self_contained_report(demo_sim: SimServer, tmp_path: Path, browser: Browser) -> None:
    out = tmp_path / "report.html"
    done = check(demo_sim, tmp_path, "--html", str(out))
    assert done.returncode == 2, done.stderr  # critical findings: the exit code is unchanged
    assert "= SUMMARY =" in done.stdout  # and so is what is printed
    assert not (tmp_path / "state").exists()  # the report's own server kept no log where `serve` keeps its own
    text = out.read_text(encoding="utf-8")
    assert len(text.encode()) < 1_000_000
    shown, requests = open_report(browser, out)
    page = shown.page
    assert requests == [out.as_uri()]  # nothing else was fetched
    head = page.locator("header.report-head").inner_text()
    for what in ("demo (3 nodes)", "9.1.2", "root@pam!pvesim", "UTC", "Skipped checks:", "PBS: not configured"):
        assert what in head, what
    levels = page.locator("header .levels").inner_text()
    assert "FAIL 18" in levels and "SKIP 1" in levels and "PASS 3" in levels  # as `check` printed them
    for label, n in (("FAIL", 18), ("SKIP", 1), ("PASS", 3)):
        assert re.search(rf"^{label}:\s+{n}$", done.stdout, re.MULTILINE)
    # compact: the health section is open, every other section is a line until it is opened
    parts = page.locator("details.part")
    assert parts.count() == 6 and page.locator("details.part[open]").count() == 1
    summaries = page.locator("details.part > summary").all_inner_texts()
    assert any(s.startswith("Evacuate pve2") and "4 moves" in s for s in summaries)
    assert page.locator("#health [data-chart=nodes] svg").count() == 9  # memory, CPU, disk of 3 nodes
    assert page.locator("#migratability table").count() == 0  # not drawn until opened
    open_all(page)
    assert page.locator("#evacuation-pve2 table[aria-label='ordered moves'] tbody tr").count() == 4
    assert page.locator("#backups table[aria-label='backup jobs'] tbody tr").count() == 2
    assert page.locator("#migratability table[aria-label='verdict matrix'] tr[data-vmid]").count() == 22
    findings = sum(int(n) for n in re.findall(r"(\d+) (?:critical|warning|info)", summaries[0]))
    page.wait_for_function("n => document.querySelectorAll('#health details.finding').length === n", arg=findings)
    assert shown.errors == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    page.close()


def test_check_html_fits_a_phone_and_reads_without_javascript(
    demo_sim: SimServer, tmp_path: Path, browser: Browser
) -> None:
    out = tmp_path / "report.html"
    assert check(demo_sim, tmp_path, "--html", str(out)).returncode == 2
    shown, _ = open_report(browser, out, width=390)
    open_all(shown.page)
    overflow = shown.page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0  # no sideways scrolling at 390 px, every section open
    assert shown.errors == []
    shown.page.screenshot(path=str(ARTIFACTS / "report-390.png"), full_page=True)
    shown.page.close()
    for width in (1040, 390):
        context = browser.new_context(java_script_enabled=False, viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto(out.as_uri())
        text = page.locator("body").inner_text()
        assert "pve-steward check: CRITICAL" in text and "demo (3 nodes)" in text
        rows = page.locator(".static table tbody tr").all_inner_texts()
        assert ["high", "availability", "PASS"] in [r.split()[:3] for r in rows]
        assert ["proxmox", "backup", "server", "SKIP"] in [r.split()[:4] for r in rows]  # no info, no pass
        backups = page.locator(".static details", has_text="BACKUPS: FAIL")
        assert backups.get_attribute("open") is not None and "BACKUP_NONE" in backups.inner_text()
        assert page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 0
        context.close()


@pytest.fixture
def hostile_sim(start_sim: Any) -> SimServer:
    sim: SimServer = start_sim("demo")
    with sim.sim.mutate() as cluster:
        for vmid in (107, 114):
            guest = cluster.guests[vmid]
            guest.config["name" if guest.type == "qemu" else "hostname"] = XSS
    return sim


def test_check_html_shows_markup_in_names_as_text(hostile_sim: SimServer, tmp_path: Path, browser: Browser) -> None:
    out = tmp_path / "report.html"
    done = check(hostile_sim, tmp_path, "--html", str(out))
    assert out.exists(), done.stderr
    assert XSS not in out.read_text(encoding="utf-8")  # embedded as inert JSON (\u003c...)
    shown, _ = open_report(browser, out)
    open_all(shown.page)
    assert XSS in shown.page.locator("#app").inner_text()
    assert shown.page.locator("img").count() == 0
    assert shown.dialogs == [] and shown.errors == []
    shown.page.close()
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(out.as_uri())
    assert XSS in page.locator(".static").inner_text() and page.locator("img").count() == 0  # escaped, as text
    context.close()


def test_check_markdown_for_tickets(hostile_sim: SimServer, tmp_path: Path) -> None:
    done = check(hostile_sim, tmp_path, "--format", "markdown")
    assert done.returncode == 2, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "## pve-steward check: CRITICAL"
    assert "| area | result | FAIL | WARN | NOTICE | INFO | SKIP |" in lines
    assert "| high availability | PASS | 0 | 0 | 0 | 0 | 0 |" in lines  # a clean area passes
    assert "| proxmox backup server | SKIP | 0 | 0 | 0 | 0 | 1 |" in lines  # a skip is no info and no pass
    assert "### Backups" in lines
    none = next(line for line in lines if line.startswith("| FAIL | `BACKUP_NONE`"))
    assert none.startswith("| FAIL | `BACKUP_NONE` | guest 114 (")
    assert r"\<img src=x onerror=alert(1)\>" in none and XSS not in done.stdout
    first = next(line for line in lines if "`BACKUP_NONE`" in line and "guest 114" in line)  # led with, escaped too
    assert lines.index("### What to do first") < lines.index(first) < lines.index(none)
    assert r"**guest 114 (\<img src=x onerror=alert(1)\>) pve3**" in first
    assert all(line.count("|") - line.count(r"\|") == 6 for line in lines if line.startswith("| FAIL"))


def test_doc_images(show: Any, granular_demo: dict[str, Any], request: pytest.FixtureRequest) -> None:
    """One screenshot per view for the README (written to docs/images with UPDATE_DOC_IMAGES=1)."""
    import os

    update = os.environ.get("UPDATE_DOC_IMAGES") == "1"
    for op, name in (
        ("check_cluster_health", "view-health"),
        ("plan_node_evacuation", "view-evacuation"),
        ("diagnose_backups", "view-backups"),
        ("diagnose_migratability", "view-migratability"),
    ):
        shown = show(granular_demo, op)
        shown.view.wait_for_selector("h2")
        shown.page.wait_for_timeout(300)
        shown.screenshot(name, also=DOC_IMAGES / f"{name}.png" if update else None)
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000
        assert shown.errors == []


def test_markdown_reads_marked_and_plain_text_alike() -> None:
    from pve_steward.views.report import md, text_of

    assert md({"untrusted": True, "text": "<b>web|01</b>\n[x](y)"}) == r"\<b\>web\|01\</b\> \[x\](y)"
    assert md("<b>web|01</b>") == r"\<b\>web\|01\</b\>"
    assert text_of({"untrusted": True, "text": "pve1"}) == "pve1" == text_of("pve1")
    assert text_of(None) == "" and text_of({"text": "not marked"}) == str({"text": "not marked"})
