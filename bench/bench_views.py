"""Benchmark: render the evacuation view of a node with 1,000 guests in headless Chromium; view sizes.

Printed:
- the size of every view's HTML resource (target <= 100 KB each), both registration modes;
- the time from the view's handshake (the host then sends the 1,000-guest plan as its tool-result
  notification) to the frame after every move is in the document (target <= 1 s), best of ``--repeat``.

The plan is the real tool's answer (pvesim's generator, the server through an MCP client); the
view runs in the test host page of tests/views (sandboxed iframe, Apps protocol over postMessage).

    python bench/bench_views.py [--guests-on-node 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.server
import tempfile
import threading
from pathlib import Path
from typing import Any

from mcp import Client
from playwright.sync_api import sync_playwright

import pvesim
from pve_steward.config import load_settings
from pve_steward.server import build_server
from pvesim.generator import generate
from pvesim.server import SimServer

HOST_DIR = Path(__file__).resolve().parent.parent / "tests" / "views"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NODE = "pve01"


async def answers(sim: SimServer, tmp: Path, guests: int) -> dict[str, Any]:
    token_id, secret = sim.token("operator@pve!mcp")
    out: dict[str, Any] = {"sizes": {}}
    for granular in (True, False):
        settings = load_settings(
            url=sim.address,
            token_id=token_id,
            token_secret=secret,
            fingerprint=sim.fingerprint,
            audit_log=tmp / "audit.jsonl",
            granular_tools=granular,
            timeout=120,
        )
        async with Client(build_server(settings, check_version_on_start=False)) as client:
            for res in (await client.list_resources()).resources:
                if str(res.uri).startswith("ui://"):
                    content = (await client.read_resource(str(res.uri))).contents[0]
                    out["sizes"][str(res.uri)] = len(getattr(content, "text", "").encode())
                    if str(res.uri).endswith("/evacuation.html"):
                        out["html"] = getattr(content, "text", "")
            if granular:
                result = await client.call_tool(
                    "plan_node_evacuation", {"node": NODE, "allow_offline": True, "limit": guests}
                )
                assert not result.is_error, result.content
                out["result"] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


def render_times(html: str, result: dict[str, Any], repeat: int) -> tuple[list[float], int]:
    handler = functools.partial(Quiet, directory=str(HOST_DIR))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/host.html"
    times: list[float] = []
    rows = 0
    steps = len(result["structuredContent"]["steps"])
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1040, "height": 900})
                page.goto(url)
                page.evaluate(
                    """s => { window.startHost(s);
                      window.addEventListener('message', (ev) => {
                        const m = ev.data && ev.data.method;
                        if (m === 'ui/notifications/initialized') window.sentAt = Date.now(); }); }""",
                    {
                        "html": html,
                        "result": result,
                        "arguments": {},
                        "toolName": "plan_node_evacuation",
                        "theme": "light",
                        "serverTools": False,
                        "reads": {},
                    },
                )
                page.wait_for_function("() => window.sentAt !== undefined", timeout=60_000)
                frame = page.locator("#view").element_handle().content_frame()
                assert frame is not None
                done = frame.evaluate(
                    """n => new Promise((resolve) => {
                      const rows = "table[aria-label='ordered moves'] tbody tr";
                      const check = () => document.querySelectorAll(rows).length === n
                        ? requestAnimationFrame(() => resolve(Date.now())) : requestAnimationFrame(check);
                      check(); })""",
                    steps,
                )
                times.append((done - page.evaluate("() => window.sentAt")) / 1000)
                rows = frame.locator("table[aria-label='ordered moves'] tbody tr").count()
                page.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return times, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guests-on-node", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = generate(nodes=20, guests=args.guests_on_node * 2, concentrate=args.guests_on_node)
    sim = SimServer(pvesim.build_cluster(data, speed=500.0), faults=pvesim.faults_from(data)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            got = asyncio.run(answers(sim, Path(tmp), args.guests_on_node))
    finally:
        sim.stop()
    print("view HTML sizes (target <= 100 KB each):")
    for uri, size in sorted(got["sizes"].items()):
        print(f"  {uri:48} {size / 1024:6.1f} KB {'ok' if size <= 100 * 1024 else 'OVER'}")
    plan = got["result"]["structuredContent"]
    print(
        f"evacuation plan of {NODE}: {len(plan['steps'])} moves, {plan.get('blockers_total')} blockers, "
        f"{len(plan['targets'])} targets; structuredContent {len(str(plan)) / 1024:.0f} KB"
    )
    times, rows = render_times(got["html"], got["result"], args.repeat)
    best = min(times)
    print(
        f"render in Chromium (tool-result -> all {rows} moves drawn): "
        f"best {best:.3f} s, runs {', '.join(f'{t:.3f}' for t in times)} (target <= 1 s) "
        f"{'ok' if best <= 1.0 else 'SLOW'}"
    )


if __name__ == "__main__":
    main()
