"""Benchmark: the views and the `check --html` report on a generated 2,000-guest cluster in headless Chromium.

Printed (issue 44: at 2,000 guests every view draws in <= 1 s and every resource or answer it needs stays
<= 100 KB per page):
- the size of every view's HTML resource, both registration modes;
- the largest answer each view reads (structuredContent and text, per page);
- per view: the time from the tool-result notification to the frame after the view and its first reads
  are drawn, best of ``--repeat``, as a ratio of the 1 s target, and the document's element count;
- a keystroke in the migratability filter (to the next frame) and loading its next page;
- the report: file size, and the time from navigation to the frame after its first section is drawn.

The answers are the real tools' (the server through an MCP client against pvesim's generator); the views
run in the test host page of tests/views (sandboxed iframe, the Apps protocol over postMessage).
Ratios, not assertions: the suite checks structure (tests/views/test_scale.py), this measures time.

    python bench/bench_views.py [--guests 2000] [--nodes 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Frame, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the test host and its capture (tests/views/support.py)

from tests.views.support import CHROMIUM, CHROMIUM_ARGS, capture, serve_host  # noqa: E402

import pvesim  # noqa: E402
from pvesim.generator import generate  # noqa: E402
from pvesim.server import SimServer  # noqa: E402

TARGET_S = 1.0
PAGE = 100 * 1024
# what "drawn" means per view: its own parts and the first reads it asks for
DRAWN = {
    "check_cluster_health": "[data-chart=nodes] svg, [data-chart=storage]",
    "plan_node_evacuation": "table[aria-label='ordered moves']",
    "diagnose_backups": "table[aria-label='backup jobs']",
    "diagnose_migratability": "table[aria-label='verdict matrix']",
}
WAIT = """sel => new Promise((resolve) => {
  const check = () => document.querySelector(sel) && !/reading…/.test(document.body.innerText)
    ? requestAnimationFrame(() => resolve(Date.now())) : requestAnimationFrame(check);
  check(); })"""


def calls() -> dict[str, dict[str, Any]]:
    return {
        "check_cluster_health": {},
        "plan_node_evacuation": {"node": "pve01", "allow_offline": True},
        "diagnose_backups": {"detail": True},
        "diagnose_migratability": {"detail": True},
    }


def sizes(answer: dict[str, Any]) -> tuple[int, int]:
    body = len(json.dumps(answer["structuredContent"], separators=(",", ":"), ensure_ascii=False).encode())
    text = len("".join(c.get("text", "") for c in answer.get("content", [])).encode())
    return body, text


def show(browser: Browser, url: str, demo: dict[str, Any], op: str) -> tuple[Any, Frame, float]:
    call = demo["results"][op]
    uri = demo["tools"][call["name"]]["_meta"]["ui"]["resourceUri"]
    page = browser.new_page(viewport={"width": 1040, "height": 900})
    page.goto(url)
    page.evaluate(
        """s => { window.addEventListener('message', (ev) => {
            if (ev.data && ev.data.method === 'ui/notifications/initialized') window.sentAt = Date.now(); });
          window.startHost(s); }""",
        {
            "html": demo["resources"][uri]["text"],
            "result": call["result"],
            "arguments": call["arguments"],
            "toolName": call["name"],
            "theme": "light",
            "serverTools": True,
            "reads": {r["key"]: r["result"] for r in demo["reads"].values()},
        },
    )
    page.wait_for_function("() => window.sentAt !== undefined", timeout=60_000)
    frame = page.locator("#view").element_handle().content_frame()
    assert frame is not None
    done = frame.evaluate(WAIT, DRAWN[op])
    return page, frame, (done - page.evaluate("() => window.sentAt")) / 1000


def verdict(seconds: float) -> str:
    return f"{seconds:.3f} s = {seconds / TARGET_S:.2f}x of {TARGET_S:g} s {'MET' if seconds <= TARGET_S else 'MISSED'}"


def bench_views(browser: Browser, url: str, demo: dict[str, Any], repeat: int) -> bool:
    ok = True
    for op in DRAWN:
        times, nodes = [], 0
        for _ in range(repeat):
            page, frame, seconds = show(browser, url, demo, op)
            times.append(seconds)
            nodes = frame.evaluate("() => document.querySelectorAll('*').length")
            page.close()
        best = min(times)
        ok &= best <= TARGET_S
        print(f"  {op:24} {verdict(best)}; runs {', '.join(f'{t:.3f}' for t in times)}; {nodes} elements")
    page, frame, _ = show(browser, url, demo, "diagnose_migratability")
    typed = frame.evaluate(
        """() => new Promise((resolve) => {
          const input = document.querySelector("input[aria-label='filter guests by text']");
          const t0 = performance.now(); input.value = "LOCKED"; input.dispatchEvent(new Event("input"));
          requestAnimationFrame(() => resolve((performance.now() - t0) / 1000)); })"""
    )
    rows = frame.locator("tr[data-vmid]").count()
    frame.evaluate("""() => { const i = document.querySelector("input[aria-label='filter guests by text']");
      i.value = ""; i.dispatchEvent(new Event("input")); }""")
    before = frame.locator("tr[data-vmid]").count()
    t0 = time.perf_counter()
    frame.locator("button.more", has_text="show the next page").click()
    frame.wait_for_function("n => document.querySelectorAll('tr[data-vmid]').length > n", arg=before)
    paged = time.perf_counter() - t0
    print(f"  migratability filter keystroke: {verdict(typed)} ({rows} rows match)")
    print(f"  migratability next page (host answers at once): {verdict(paged)}")
    ok &= typed <= TARGET_S and paged <= TARGET_S
    page.close()
    return ok


def bench_report(browser: Browser, sim: SimServer, repeat: int) -> bool:
    token_id, secret = sim.token("root@pam!pvesim")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.html"
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pve_steward", "check", "--url", sim.address, "--token-id", token_id,
             "--token-secret", secret, "--fingerprint", sim.fingerprint, "--color", "never", "--html", str(out),
             "--timeout", "120"],
            capture_output=True, text=True, env={**os.environ, "XDG_STATE_HOME": tmp}, check=False,
        )  # fmt: skip
        made = time.perf_counter() - t0
        if not out.exists():
            print(f"  report: not written ({done.stderr.strip()[-300:]})")
            return False
        size = out.stat().st_size
        times = []
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1040, "height": 900})
            t0 = time.perf_counter()
            page.goto(out.as_uri())
            page.wait_for_function(
                """() => new Promise((resolve) => {
                  const check = () => document.querySelector('#health [data-chart=nodes] svg')
                    ? requestAnimationFrame(() => resolve(true)) : requestAnimationFrame(check);
                  check(); })"""
            )
            times.append(time.perf_counter() - t0)
            nodes = page.evaluate("() => document.querySelectorAll('*').length")
            page.close()
    best = min(times)
    print(f"  report file: {size / 1024:.0f} KB (made in {made:.1f} s, exit {done.returncode})")
    print(f"  report drawn (navigation to health drawn, other parts folded): {verdict(best)}; {nodes} elements")
    return best <= TARGET_S


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guests", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = generate(nodes=args.nodes, guests=args.guests, seed=3)
    sim = SimServer(pvesim.build_cluster(data, speed=5000.0), faults=pvesim.faults_from(data)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            demo = capture(sim, Path(tmp), granular=True, calls=calls())
            print(f"{args.guests} guests on {args.nodes} nodes; answers captured in {time.perf_counter() - t0:.0f} s")
        ok = True
        print("view HTML resources (target <= 100 KB each):")
        for uri, res in sorted(demo["resources"].items()):
            n = len(res["text"].encode())
            ok &= n <= PAGE
            print(f"  {uri:48} {n / 1024:6.1f} KB {'MET' if n <= PAGE else 'MISSED'}")
        print("answers the views read, largest page of each (target <= 100 KB structured and text):")
        largest: dict[str, tuple[int, int, int]] = {}
        for key, call in {**demo["results"], **demo["reads"]}.items():
            name = key.split("@")[0]
            body, text = sizes(call["result"])
            was = largest.get(name, (0, 0, 0))
            largest[name] = (max(body, was[0]), max(text, was[1]), was[2] + 1)
        for name, (body, text, pages) in sorted(largest.items()):
            met = body <= PAGE and text <= PAGE
            ok &= met
            said = "MET" if met else "MISSED"
            print(f"  {name:24} {body / 1024:6.1f} KB / {text / 1024:6.1f} KB text, {pages} page(s) {said}")
        with serve_host() as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            print(f"draw in Chromium (tool-result -> view and its first reads drawn, best of {args.repeat}):")
            ok &= bench_views(browser, url, demo, args.repeat)
            print("check --html:")
            ok &= bench_report(browser, sim, args.repeat)
            browser.close()
    finally:
        sim.stop()
    print(f"targets: {'MET' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
