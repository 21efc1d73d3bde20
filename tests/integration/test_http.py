"""The HTTP transport over real HTTP: a server subprocess, bearer auth, DNS-rebinding protection,
body size cap, /health, and the refusal to serve a network interface without a token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pvesim.server import SimServer
from tests.httpserver import ACCEPT, INIT, free_port, server_env, serving
from tests.untrusted import plain

pytestmark = pytest.mark.anyio
TOKEN = "t0ps3cret-for-tests-only-0123456789abcdef"


def http_server(env: dict[str, str], port: int) -> Any:
    return serving([sys.executable, "-m", "pve_steward", "serve"], port, {**env, "PVE_STEWARD_HTTP_PORT": str(port)})


async def test_bearer_token_health_rebinding_and_size_limit(demo_sim: SimServer, tmp_path: Path) -> None:
    port = free_port()
    env = server_env(demo_sim, tmp_path, PVE_STEWARD_HTTP_BEARER_TOKEN=TOKEN, PVE_STEWARD_MAX_REQUEST_BYTES="65536")
    with http_server(env, port) as base:
        health = httpx2.get(f"{base}/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        anonymous = httpx2.post(f"{base}/mcp", json=INIT, headers=ACCEPT)
        assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
        wrong = httpx2.post(f"{base}/mcp", json=INIT, headers={**ACCEPT, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        auth = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
        rebound = httpx2.post(f"{base}/mcp", json=INIT, headers={**auth, "Host": "evil.example"})
        assert rebound.status_code == 421, rebound.status_code
        assert "--allowed-hosts evil.example:*" in rebound.text  # the 421 says which flag admits the host
        huge = httpx2.post(f"{base}/mcp", content=b'{"jsonrpc":"2.0","x":"' + b"a" * 200_000 + b'"}', headers=auth)
        assert huge.status_code == 413, huge.status_code

        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
        ):
            tools = {t.name for t in (await c.list_tools()).tools}
            overview = await c.call_tool("cluster", {"action": "cluster_overview"})
    assert "cluster" in tools and "operate" not in tools
    assert plain(overview.structured_content["result"]["cluster_name"]) == "demo"
    assert TOKEN not in (tmp_path / "audit.jsonl").read_text()


async def test_loopback_needs_no_token(demo_sim: SimServer, tmp_path: Path) -> None:
    port = free_port()
    with http_server(server_env(demo_sim, tmp_path), port) as base:
        async with Client(f"{base}/mcp") as c:
            result = await c.call_tool("diagnostics", {"action": "explain_finding", "code": "BACKUP_STALE"})
    assert result.structured_content["result"]["code"] == "BACKUP_STALE"


def test_network_bind_without_token_is_refused(demo_sim: SimServer, tmp_path: Path) -> None:
    env = {
        **server_env(demo_sim, tmp_path),
        "PVE_STEWARD_HTTP_HOST": "0.0.0.0",
        "PVE_STEWARD_HTTP_PORT": str(free_port()),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pve_steward", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "refusing to serve MCP on 0.0.0.0 without --http-bearer-token" in done.stderr
    assert "Traceback" not in done.stderr


def test_network_bind_with_token_starts(demo_sim: SimServer, tmp_path: Path) -> None:
    port = free_port()
    env: dict[str, Any] = {
        **server_env(demo_sim, tmp_path, PVE_STEWARD_HTTP_BEARER_TOKEN=TOKEN),
        "PVE_STEWARD_HTTP_HOST": "0.0.0.0",
    }
    with http_server(env, port) as base:
        ok = httpx2.post(
            f"{base}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"},
        )
        assert ok.status_code != 401


async def test_serve_starts_and_refuses_an_unsupported_pve_version_through_the_tools(
    start_sim: Any, tmp_path: Path
) -> None:
    old = start_sim("healthy", version="7.4.17")
    port = free_port()
    with http_server(server_env(old, tmp_path), port) as base:
        async with Client(f"{base}/mcp") as c:
            assert (await c.list_tools()).tools
            answer = await c.call_tool("cluster", {"action": "cluster_overview"})
    assert answer.is_error
    assert "Proxmox VE 7.4.17 is too old" in answer.content[0].text  # type: ignore[union-attr]
    assert "--disable-version-check" in answer.content[0].text  # type: ignore[union-attr]
