"""/metrics over real HTTP: a real MCP client makes calls against pvesim, the exposition is parsed with
prometheus_client's own parser and the counters named in issue 20 must have moved."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from pvesim.server import SimServer
from tests.httpserver import free_port, server_env, serving

pytestmark = pytest.mark.anyio
TOKEN = "metrics-test-token-0123456789abcdef0123"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition: (name, sorted labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(data: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in data.items() if n == name and set(labels.items()) <= set(ls))


async def test_metrics_count_calls_findings_requests_tokens_and_cache(start_sim: Any, tmp_path: Path) -> None:
    sim: SimServer = start_sim("demo")
    port = free_port()
    env = server_env(
        sim,
        tmp_path,
        "operator@pve!mcp",
        PVE_STEWARD_TOKEN_STORE=str(tmp_path / "used.sqlite3"),
        PVE_STEWARD_HTTP_PORT=str(port),
        PVE_STEWARD_HTTP_BEARER_TOKEN=TOKEN,
        PVE_STEWARD_TIER="operator",
        PVE_STEWARD_GRANULAR_TOOLS="true",
        PVE_STEWARD_READ_CACHE_TTL="30",
    )
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serving([sys.executable, "-m", "pve_steward", "serve"], port, env) as base:
        assert httpx2.get(f"{base}/metrics").status_code == 401  # like /mcp, /metrics needs the token
        assert httpx2.get(f"{base}/health").status_code == 200  # /health stays open
        async with (
            httpx2.AsyncClient(headers=auth, timeout=120) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
        ):
            health = await c.call_tool("check_cluster_health", {})
            assert not health.is_error, health.content[0].text  # type: ignore[union-attr]
            again = await c.call_tool("list_guests", {})
            assert not (await c.call_tool("list_guests", {})).is_error and not again.is_error
            unknown = await c.call_tool("get_guest", {"vmid": 999})
            assert unknown.is_error
            preview = await c.call_tool("guest_reboot", {"vmid": 104})
            token = preview.structured_content["confirm_token"]  # type: ignore[index]
            done = await c.call_tool("guest_reboot", {"vmid": 104, "confirm_token": token})
            assert not done.is_error, done.content
            replay = await c.call_tool("guest_reboot", {"vmid": 104, "confirm_token": token})
            assert replay.is_error
        scraped = httpx2.get(f"{base}/metrics", headers=auth)
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    data = samples(scraped.text)
    findings = [f for f in (health.structured_content or {}).get("findings", []) if isinstance(f, dict) and "code" in f]
    assert findings, "the demo cluster has findings"

    assert total(data, "pve_steward_tool_calls_total", operation="list_guests", outcome="ok") == 2
    assert total(data, "pve_steward_tool_calls_total", operation="guest_reboot", outcome="ok") == 2
    assert total(data, "pve_steward_tool_calls_total", operation="guest_reboot", outcome="refused") == 1
    assert total(data, "pve_steward_tool_call_duration_seconds_count", operation="check_cluster_health") == 1
    assert total(data, "pve_steward_tool_calls_in_flight") == 0
    first = findings[0]
    assert total(data, "pve_steward_findings_total", code=first["code"], severity=first["severity"]) >= 1
    assert total(data, "pve_steward_findings_total") == len(findings)
    assert total(data, "pve_steward_pve_requests_total", endpoint="cluster", method="GET", status="200") >= 1
    assert total(data, "pve_steward_pve_requests_total", endpoint="nodes", method="POST", status="200") == 1
    assert total(data, "pve_steward_pve_request_duration_seconds_count", endpoint="nodes") >= 1
    assert total(data, "pve_steward_confirmation_tokens_total", event="issued") == 1
    assert total(data, "pve_steward_confirmation_tokens_total", event="confirmed") == 1
    assert total(data, "pve_steward_confirmation_tokens_total", event="refused", reason="replayed") == 1
    assert total(data, "pve_steward_read_cache_total", result="hit") >= 1  # the second list_guests
