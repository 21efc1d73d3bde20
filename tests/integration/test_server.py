"""The MCP server through a real MCP client session, talking HTTPS to pvesim through proxmoxer."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from pve_steward.security.audit import verify
from pve_steward.server import build_server
from pvesim.server import SimServer
from tests.integration.conftest import scenario_with_limited_token
from tests.integration.pve import api
from tests.integration.test_cli import cluster_env
from tests.unit.test_start_and_answers import untabulate
from tests.untrusted import is_marked, plain

pytestmark = pytest.mark.anyio


async def call(mcp: Any, tool: str, args: dict[str, Any] | None = None) -> Any:
    async with Client(mcp) as c:
        return await c.call_tool(tool, args or {})


async def test_tools_are_typed_and_annotated(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert {"cluster_overview", "list_guests", "get_guest", "list_tasks", "get_task"} <= set(tools)
    for tool in tools.values():
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False and tool.annotations.open_world_hint is False
        assert tool.output_schema is not None and tool.description
    vmid = tools["get_guest"].input_schema["properties"]["vmid"]
    assert (vmid["minimum"], vmid["maximum"], vmid["description"]) == (100, 999999999, "Guest id")
    assert tools["get_task"].input_schema["properties"]["upid"]["pattern"].startswith("^UPID:")


async def test_cluster_overview_matches_the_api(demo_sim: SimServer, server_for: Any) -> None:
    result = await call(server_for(demo_sim), "cluster_overview")
    assert result.is_error is False
    data = plain(result.structured_content)
    raw = api(demo_sim).cluster.resources.get(type="vm")
    assert data["cluster_name"] == "demo" and data["quorate"] is True and data["pve_version"] == "9.1.2"
    assert [n["name"] for n in data["nodes"]] == ["pve1", "pve2", "pve3"]
    assert data["guests"]["total"] == len(raw)
    assert data["guests"]["running"] == sum(1 for r in raw if r["status"] == "running" and not r.get("template"))
    assert data["ha_resources"] == 3 and data["incomplete"] == []
    text = json.loads(result.content[0].text)  # the compact text: the same value, lists as tables
    assert plain(untabulate(text)) == data


async def test_list_guests_filters_and_pages(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim)
    async with Client(mcp) as c:
        pve3 = (await c.call_tool("list_guests", {"node": "pve3"})).structured_content
        first = (await c.call_tool("list_guests", {"limit": 5})).structured_content
        second = await c.call_tool("list_guests", {"limit": 5, "offset": first["page"]["next_offset"]})
        tagged = (await c.call_tool("list_guests", {"tag": "web"})).structured_content
        named = (await c.call_tool("list_guests", {"name": "web*"})).structured_content
        cts = (await c.call_tool("list_guests", {"type": "lxc", "status": "running"})).structured_content
    assert {plain(g["node"]) for g in pve3["items"]} == {"pve3"} and pve3["page"]["total"] == 6
    assert first["page"] == {"total": 22, "offset": 0, "returned": 5, "next_offset": 5}
    assert [g["vmid"] for g in first["items"]] == [100, 101, 102, 103, 104]
    assert second.structured_content["items"][0]["vmid"] == 105
    assert [g["vmid"] for g in tagged["items"]] == [100, 101]
    assert [plain(g["name"]) for g in named["items"]] == ["web01", "web02"]
    assert {g["type"] for g in cts["items"]} == {"lxc"}


async def test_get_guest_redacts_secrets_and_marks_untrusted_text(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim)
    async with Client(mcp) as c:
        web = (await c.call_tool("get_guest", {"vmid": 100, "include_config": True})).structured_content
        crm = (await c.call_tool("get_guest", {"vmid": 113})).structured_content
        gpu = (await c.call_tool("get_guest", {"vmid": 105})).structured_content
    assert plain(web)["node"] == "pve1" and is_marked(web, "node")
    assert plain(web)["config"]["cipassword"] == "***redacted***" and is_marked(web, "config")  # raw config: marked
    assert "$5$" not in json.dumps(web)
    assert is_marked(crm, "description") and "ignore all previous instructions" in plain(crm)["description"]
    assert crm["snapshots"] == 1 and crm["status"] == "stopped"
    assert gpu["local_devices"] == ["hostpci0"] and plain(gpu["cpu_type"]) == "host"


async def test_tasks(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim)
    async with Client(mcp) as c:
        failed = (await c.call_tool("list_tasks", {"errors_only": True})).structured_content
        assert {t["type"] for t in failed["items"]} == {"vzdump", "qmstart"}
        vzdump = next(t for t in failed["items"] if t["type"] == "vzdump")
        detail = (await c.call_tool("get_task", {"upid": vzdump["upid"], "log_lines": 3})).structured_content
        pve2 = (await c.call_tool("list_tasks", {"node": "pve2", "type": "vzdump"})).structured_content
    detail, pve2 = plain(detail), plain(pve2)
    assert detail["task"]["state"] == "failed" and detail["task"]["exitstatus"] == "job errors"
    assert detail["log_tail"][-1] == "TASK ERROR: job errors" and len(detail["log_tail"]) == 3
    assert [t["node"] for t in pve2["items"]] == ["pve2"]


async def test_errors_are_clear(start_sim: Any, server_for: Any) -> None:
    sim = start_sim(scenario_with_limited_token())
    async with Client(server_for(sim)) as c:
        unknown = await c.call_tool("get_guest", {"vmid": 999})
        invalid = await c.call_tool("get_guest", {"vmid": 99})
        hostile = await c.call_tool("node_status", {"node": "pve1/../../access"})
    assert unknown.is_error and "no guest 999 is visible" in unknown.content[0].text, unknown.content
    assert invalid.is_error and "vmid" in invalid.content[0].text, invalid.content
    assert "guest ids are integers from 100 to 999999999" in invalid.content[0].text
    assert hostile.is_error and "invalid node 'pve1/../../access'" in hostile.content[0].text, hostile.content
    requests_before = sim.sim.requests
    async with Client(server_for(sim, "limited@pve!mcp")) as c:
        denied = await c.call_tool("node_status", {"node": "pve1"})
        partial = (await c.call_tool("cluster_overview", {})).structured_content
    assert denied.is_error, denied.content
    assert "Permission check failed (/nodes/pve1, Sys.Audit)" in denied.content[0].text, denied.content
    assert "grant PVEAuditor on /nodes" in denied.content[0].text
    assert partial["incomplete"] and partial["incomplete"][0].startswith("status:"), partial["incomplete"]
    assert sim.sim.requests > requests_before
    with sim.sim.mutate() as cluster:
        cluster.nodes["pve3"].online = False
    offline = await call(server_for(sim), "node_status", {"node": "pve3"})
    assert offline.is_error and "unreachable" in offline.content[0].text, offline.content
    assert "No route to host" in offline.content[0].text, offline.content


async def test_invalid_input_sends_no_request(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim)
    async with Client(mcp) as c:
        before = demo_sim.sim.requests
        for bad in ({"vmid": "100; DROP"}, {"vmid": -5}, {"vmid": 10**12}):
            assert (await c.call_tool("get_guest", bad)).is_error
        assert (await c.call_tool("get_task", {"upid": "UPID:x:../../access"})).is_error
        assert demo_sim.sim.requests == before


async def refused(mcp: Any, pattern: str) -> None:
    """The server starts and lists its tools; the first tool call answers the problem."""
    async with Client(mcp) as c:
        assert (await c.list_tools()).tools
        answer = await c.call_tool("cluster_overview", {})
    assert answer.is_error and re.search(pattern, answer.content[0].text), answer.content


async def test_bad_token_tls_and_version_are_answered_by_the_tools(start_sim: Any, settings_for: Any) -> None:
    sim = start_sim("healthy")
    await refused(build_server(settings_for(sim, token_secret="not-the-secret")), "refused the API token")
    await refused(build_server(settings_for(sim, fingerprint="00" * 32)), "fingerprint mismatch")
    await refused(build_server(settings_for(sim, fingerprint=None)), "certificate not trusted")
    ca = settings_for(sim, fingerprint=None, ca_file=sim.cert_path)
    assert (await call(build_server(ca), "cluster_overview")).is_error is False
    old = start_sim("healthy", version="7.4.17")
    too_old = r"Proxmox VE 7\.4\.17 is too old.*upgrade the cluster to 8\.0 or later.*--disable-version-check"
    await refused(build_server(settings_for(old)), too_old)
    forced = build_server(settings_for(old, disable_version_check=True))
    assert (await call(forced, "cluster_overview")).structured_content["pve_version"] == "7.4.17"
    future = start_sim("healthy", version="10.0.1")
    await refused(build_server(settings_for(future)), "10.0.1 is newer than this pve-steward supports.*: upgrade pve-")


async def test_every_call_is_audited_and_the_chain_verifies(
    demo_sim: SimServer, settings_for: Any, tmp_path: Path
) -> None:
    settings = settings_for(demo_sim)
    async with Client(build_server(settings)) as c:
        await c.call_tool("cluster_overview", {})
        await c.call_tool("get_guest", {"vmid": 999})
    lines = [json.loads(line) for line in settings.audit_log.read_text().splitlines()]
    assert [(r["tool"], r["outcome"]) for r in lines] == [("cluster_overview", "ok"), ("get_guest", "refused")]
    assert verify(settings.audit_log).ok
    secret = settings.secret()
    assert secret and secret not in settings.audit_log.read_text()


async def test_stdio_subprocess_lists_tools(demo_sim: SimServer, tmp_path: Path) -> None:
    env = cluster_env(demo_sim, tmp_path, PVE_STEWARD_AUDIT_LOG=str(tmp_path / "audit.jsonl"))
    params = StdioServerParameters(command=sys.executable, args=["-m", "pve_steward", "--granular-tools"], env=env)
    async with Client(params) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        overview = await c.call_tool("cluster_overview", {})
    assert {"cluster_overview", "get_guest"} <= names
    assert plain(overview.structured_content["cluster_name"]) == "demo"


async def test_stdio_server_starts_and_lists_tools_with_the_cluster_unreachable(tmp_path: Path) -> None:
    """No cluster I/O before serving: a closed port still gives a tool list, and tools name the problem."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "PVE_STEWARD_URL": f"127.0.0.1:{port}",
        "PVE_STEWARD_TOKEN_ID": "ops@pve!mcp",
        "PVE_STEWARD_TOKEN_SECRET": "00000000-0000-0000-0000-000000000000",
        "PVE_STEWARD_FINGERPRINT": ":".join(["AB"] * 32),
        "PVE_STEWARD_AUDIT_LOG": str(tmp_path / "audit.jsonl"),
        "PVE_STEWARD_RETRIES": "0",
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "pve_steward", "serve"], env=env)
    async with Client(params) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        answer = await c.call_tool("cluster", {"action": "cluster_overview"})
    assert "cluster" in names
    assert answer.is_error
    text = answer.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"cannot reach Proxmox VE at 127.0.0.1:{port}: GET /version: connection refused"), text
