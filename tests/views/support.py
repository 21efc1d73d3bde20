"""Real answers for the views: the server run through a real MCP client against pvesim, and a browser."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from pve_steward.config import load_settings
from pve_steward.server import build_server
from pvesim.server import SimServer

HERE = Path(__file__).parent
ARTIFACTS = HERE.parent / "artifacts"
DOC_IMAGES = HERE.parent.parent / "docs" / "images"
# Chromium's headless build (Debian's chromium-headless-shell; Playwright's own default for headless), else the
# full browser (GitHub's Ubuntu runners link one as `chromium`). The full browser's --headless keeps its UI: a
# WebUI renderer that took CPU for as long as a page was open. The views' tests took 271 s of CPU with it and
# 155 s with the shell, on the same Chromium release (record 261207-70).
CHROMIUM = shutil.which("chromium-headless-shell") or shutil.which("chromium") or "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
XSS = "<img src=x onerror=alert(1)>"

# the four viewed tools and the arguments the demo is shown with
CALLS: dict[str, dict[str, Any]] = {
    "check_cluster_health": {"limit": 30},  # past the demo's criticals, so the view has warnings to filter
    "plan_node_evacuation": {"node": "pve2"},
    "diagnose_backups": {"detail": True},
    "diagnose_migratability": {"detail": True},
}
READ_CALLS: dict[str, dict[str, Any]] = {  # what the views read (views/apps.py READS)
    "list_nodes": {},
    "list_storage": {},
    "cluster_overview": {},
    "list_backup_jobs": {},
    "list_backups": {"limit": 250},
    "list_guests": {"limit": 250},
    "diagnose_pbs": {"detail": True},
}
META_TOOL = {
    "check_cluster_health": "diagnostics",
    "diagnose_backups": "diagnostics",
    "diagnose_migratability": "diagnostics",
    "plan_node_evacuation": "planning",
    "list_nodes": "cluster",
    "list_storage": "storage",
    "cluster_overview": "cluster",
    "list_guests": "guests",
    "diagnose_pbs": "diagnostics",
    "list_backup_jobs": "backups",
    "list_backups": "backups",
}


def dump(result: Any) -> dict[str, Any]:
    """A CallToolResult as the host forwards it to the view (the wire form)."""
    out: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


async def _capture(sim: SimServer, state: Path, granular: bool, calls: dict[str, dict[str, Any]]) -> dict[str, Any]:
    token_id, secret = sim.token("root@pam!pvesim")
    settings = load_settings(
        url=sim.address,
        token_id=token_id,
        token_secret=secret,
        fingerprint=sim.fingerprint,
        audit_log=state / f"audit-{granular}.jsonl",
        retries=0,
        granular_tools=granular,
        read_cache_ttl=60,  # the cluster does not change while the answers are captured: share its reads
        timeout=120,
    )
    mcp = build_server(settings)
    out: dict[str, Any] = {"tools": {}, "resources": {}, "results": {}, "reads": {}}
    async with Client(mcp) as client:
        out["capabilities"] = client.server_capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
        for tool in (await client.list_tools()).tools:
            out["tools"][tool.name] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        for res in (await client.list_resources()).resources:
            if str(res.uri).startswith("ui://"):
                read = await client.read_resource(str(res.uri))
                content = read.contents[0]
                out["resources"][str(res.uri)] = {
                    "text": getattr(content, "text", ""),
                    "mimeType": content.mime_type,
                    "meta": content.meta,
                }
        for op, args in {**calls, **READ_CALLS}.items():
            name, arguments = (op, args) if granular else (META_TOOL[op], {"action": op, **args})
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result.content
            key = name + ("" if granular else f"/{op}")
            target = out["results"] if op in calls else out["reads"]
            target[op] = {"name": name, "arguments": arguments, "key": key, "result": dump(result)}
            if op in calls:  # the next pages, as a view asks for them (views/apps.py page_calls)
                await _pages(client, op, name, arguments, key, dump(result), out["reads"])
        if not granular:  # an action of a viewed meta-tool that has no view of its own
            arguments = {"action": "diagnose_operations"}
            result = await client.call_tool("diagnostics", arguments)
            out["results"]["diagnose_operations"] = {
                "name": "diagnostics",
                "arguments": arguments,
                "result": dump(result),
            }
    return out


async def _pages(
    client: Client, op: str, name: str, arguments: dict[str, Any], key: str, first: dict[str, Any], into: dict[str, Any]
) -> None:
    """Every later page of a viewed answer, keyed as the test host looks it up (tool[/action]@offset)."""
    body = first.get("structuredContent") or {}
    body = body.get("result", body) if "action" in body else body
    following = body.get("next_offset")
    while following is not None:
        more = {**arguments, "offset": following}
        if op != "plan_node_evacuation":
            more["detail"] = True
        result = await client.call_tool(name, more)
        assert not result.is_error, result.content
        answer = {"name": name, "arguments": more, "key": f"{key}@{following}", "result": dump(result)}
        into[f"{op}@{following}"] = answer
        page = result.structured_content or {}
        following = (page.get("result", page) if "action" in page else page).get("next_offset")


def capture(
    sim: SimServer, state: Path, granular: bool, calls: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Run in a thread of its own: Playwright's sync API keeps an event loop in the test thread."""
    out: dict[str, Any] = {}

    def run() -> None:
        out.update(anyio.run(_capture, sim, state, granular, calls or CALLS))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert out, "capturing the demo answers failed (see the thread's traceback above)"
    return out


@contextmanager
def serve_host() -> Iterator[str]:
    """The test host page on a free loopback port."""
    handler = functools.partial(_Quiet, directory=str(HERE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/host.html"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None
