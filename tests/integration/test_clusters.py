"""Several clusters through a real MCP client, proxmoxer and HTTPS against two pvesim instances."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from pve_steward.config import Settings, load_settings
from pve_steward.security.audit import verify
from pve_steward.server import build_server
from pvesim.server import SimServer
from tests.httpserver import free_port
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


def table(sim: SimServer, token: str = "operator@pve!mcp", **extra: Any) -> dict[str, Any]:
    token_id, secret = sim.token(token)
    return {"url": sim.address, "token_id": token_id, "token_secret": secret, "fingerprint": sim.fingerprint, **extra}


@pytest.fixture
def several(tmp_path: Path) -> Callable[..., Settings]:
    def _settings(clusters: dict[str, dict[str, Any]], **extra: Any) -> Settings:
        values: dict[str, Any] = {
            "clusters": clusters,
            "audit_log": tmp_path / "audit.jsonl",
            "token_store": str(tmp_path / "used-tokens.sqlite3"),
            "retries": 0,
            "read_cache_ttl": 0,
            "tier": "operator",
            **extra,
        }
        return load_settings(**values)

    return _settings


def body(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def records(path: Path) -> list[dict[str, Any]]:
    assert verify(path).ok
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("granular", [True, False])
async def test_each_call_answers_from_the_cluster_it_names(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings], granular: bool
) -> None:
    a, b = start_sim("demo"), start_sim("healthy", version="8.4.14")
    mcp = build_server(several({"a": table(a), "b": table(b)}, granular_tools=granular))

    async def overview(c: Client, cluster: str) -> dict[str, Any]:
        if granular:
            return body(await c.call_tool("cluster_overview", {"cluster": cluster}))  # type: ignore[no-any-return]
        return body(await c.call_tool("cluster", {"action": "cluster_overview", "cluster": cluster}))["result"]  # type: ignore[no-any-return]

    async with Client(mcp) as c:
        first, second = await overview(c, "a"), await overview(c, "b")
    assert sorted(n["name"] for n in plain(first)["nodes"]) == ["pve1", "pve2", "pve3"]
    assert sorted(n["name"] for n in plain(second)["nodes"]) == ["hv1", "hv2", "hv3"]
    assert first["pve_version"].startswith("9.") and second["pve_version"].startswith("8.4")


async def test_concurrent_heavy_calls_on_two_clusters_are_not_shared(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings]
) -> None:
    a, b = start_sim("demo"), start_sim("healthy")
    mcp = build_server(several({"a": table(a), "b": table(b)}, granular_tools=True))
    found: dict[str, Any] = {}
    async with Client(mcp) as c:

        async def health(cluster: str) -> None:
            found[cluster] = body(await c.call_tool("check_cluster_health", {"cluster": cluster, "areas": ["backups"]}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(health, "a")
            tg.start_soon(health, "b")
    # The same operation with the same arguments on two clusters is two runs, each with its own answer.
    assert found["a"]["counts"]["warning"] + found["a"]["counts"]["critical"] > 0  # the demo's backup problems
    assert found["b"]["counts"] == {"critical": 0, "warning": 0, "info": 0}  # the healthy cluster has none


async def test_node_names_are_checked_against_the_named_cluster(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings]
) -> None:
    a, b = start_sim("demo"), start_sim("healthy")
    mcp = build_server(several({"a": table(a), "b": table(b)}, granular_tools=True))
    async with Client(mcp) as c:
        assert body(await c.call_tool("node_status", {"cluster": "b", "node": "hv2"}))
        wrong = await c.call_tool("node_status", {"cluster": "b", "node": "pve1"})
    assert wrong.is_error and "no node 'pve1'; nodes are: hv1, hv2, hv3" in wrong.content[0].text


@pytest.mark.parametrize("granular", [True, False])
async def test_list_clusters_reports_a_cluster_that_is_down(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings], granular: bool
) -> None:
    a, b = start_sim("demo"), start_sim("healthy", version="8.4.14")
    down = {**table(b), "url": f"127.0.0.1:{free_port()}"}  # nothing listens there
    clusters = {"a": table(a), "b": table(b, max_tier="read_only"), "c": down}
    mcp = build_server(several(clusters, granular_tools=granular))
    call = ("list_clusters", {}) if granular else ("cluster", {"action": "list_clusters"})
    overview = ("cluster_overview", {}) if granular else ("cluster", {"action": "cluster_overview"})
    async with Client(mcp) as c:
        answer = body(await c.call_tool(*call))
        working = await c.call_tool(overview[0], {**overview[1], "cluster": "a"})
        failing = await c.call_tool(overview[0], {**overview[1], "cluster": "c"})
    listed = answer if granular else answer["result"]
    rows = listed["clusters"]
    assert [(r["name"], r["reachable"], r["default"], r["max_tier"]) for r in rows] == [
        ("a", True, True, "operator"),
        ("b", True, False, "read_only"),
        ("c", False, False, "operator"),
    ]
    assert rows[0]["pve_version"].startswith("9.") and rows[1]["pve_version"].startswith("8.4")
    assert rows[0]["supported"] is rows[1]["supported"] is True and rows[0]["problem"] is None
    assert rows[2]["pve_version"] is None and rows[2]["supported"] is None
    assert f"cannot reach Proxmox VE at {down['url']}" in rows[2]["problem"]
    assert listed["unreachable"] == ["c"]
    assert not working.is_error  # one cluster down does not stop the others
    assert failing.is_error and f"cannot reach Proxmox VE at {down['url']}" in failing.content[0].text


@pytest.mark.parametrize("granular", [True, False])
async def test_a_token_issued_for_one_cluster_is_refused_on_the_other(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings], tmp_path: Path, granular: bool
) -> None:
    a, b = start_sim("demo"), start_sim("demo")  # the same guest in the same state on both
    mcp = build_server(several({"a": table(a), "b": table(b)}, granular_tools=granular))
    tool, base = ("guest_start", {}) if granular else ("operate", {"action": "guest_start"})
    stopped = next(v for v, g in a.cluster.guests.items() if g.status == "stopped" and not g.template)
    args = {**base, "vmid": stopped}
    async with Client(mcp) as c:
        preview = body(await c.call_tool(tool, {**args, "cluster": "a"}))
        token = (preview if granular else preview["result"])["confirm_token"]
        refused = await c.call_tool(tool, {**args, "cluster": "b", "confirm_token": token})
        assert refused.is_error
        assert "issued for cluster 'a', not cluster 'b'" in refused.content[0].text
        assert b.cluster.guests[stopped].status == "stopped"
        done = body(await c.call_tool(tool, {**args, "cluster": "a", "confirm_token": token, "wait": True}))
    assert (done if granular else done["result"])["status"] == "completed"
    assert a.cluster.guests[stopped].status == "running" and b.cluster.guests[stopped].status == "stopped"

    log = records(tmp_path / "audit.jsonl")
    calls = [r for r in log if r.get("event") == "tool_call" and r["tool"] == "guest_start"]
    assert [(r["cluster"], r["outcome"]) for r in calls] == [("a", "ok"), ("b", "refused"), ("a", "ok")]
    assert calls[0]["pve_token"] == "operator@pve!mcp"
    executing = [r for r in log if r.get("event") == "write_executing"]
    assert len(executing) == 1 and executing[0]["cluster"]["name"] == "a"
    assert executing[0]["cluster"]["url"] == a.address


async def test_a_cluster_ceiling_hides_and_refuses_its_writes(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings]
) -> None:
    a, b = start_sim("demo"), start_sim("demo")
    mcp = build_server(several({"a": table(a), "lab": table(b, max_tier="read_only")}, granular_tools=True))
    async with Client(mcp) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        refused = await c.call_tool("guest_start", {"cluster": "lab", "vmid": 102})
        read = await c.call_tool("get_guest", {"cluster": "lab", "vmid": 102})
    assert tools["guest_start"].input_schema["properties"]["cluster"]["enum"] == ["a"]
    assert tools["get_guest"].input_schema["properties"]["cluster"]["enum"] == ["a", "lab"]
    assert refused.is_error
    assert "cluster 'lab' allows at most read_only (max_tier of [clusters.lab])" in refused.content[0].text
    assert not read.is_error


@pytest.mark.parametrize("granular", [True, False])
async def test_the_cluster_argument_is_required_and_checked(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings], granular: bool
) -> None:
    a, b = start_sim("demo"), start_sim("healthy")
    mcp = build_server(several({"a": table(a), "b": table(b)}, granular_tools=granular))
    tool, base = ("list_guests", {}) if granular else ("guests", {"action": "list_guests"})
    what = "list_guests" if granular else "action 'list_guests'"
    async with Client(mcp) as c:
        schema = next(t for t in (await c.list_tools()).tools if t.name == tool).input_schema
        missing = await c.call_tool(tool, base)
        unknown = await c.call_tool(tool, {**base, "cluster": "prod"})
        listing = "list_clusters" if granular else "cluster"
        extra = await c.call_tool(
            listing, {"cluster": "a"} if granular else {"action": "list_clusters", "cluster": "a"}
        )
    assert "cluster" in schema["required"]
    assert missing.is_error and f"{what} needs the parameter 'cluster', one of: a, b" in missing.content[0].text
    assert unknown.is_error and "unknown cluster 'prod'; 'cluster' must be one of: a, b" in unknown.content[0].text
    assert extra.is_error and "does not take 'cluster'" in extra.content[0].text


async def test_prompts_name_a_cluster_and_complete_from_it(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings]
) -> None:
    a, b = start_sim("healthy"), start_sim("demo")
    mcp = build_server(several({"first": table(a), "second": table(b)}))
    prompt = PromptReference(name="maintenance_preparation")
    async with Client(mcp) as c:
        listed = {p.name: p for p in (await c.list_prompts()).prompts}
        clusters = await c.complete(prompt, {"name": "cluster", "value": "s"})
        first = await c.complete(prompt, {"name": "node", "value": ""})
        second = await c.complete(prompt, {"name": "node", "value": ""}, context_arguments={"cluster": "second"})
        text = await c.get_prompt("maintenance_preparation", {"cluster": "second", "node": "pve2"})
        with pytest.raises(MCPError) as wrong_node:
            await c.get_prompt("maintenance_preparation", {"cluster": "first", "node": "pve2"})
        with pytest.raises(MCPError) as wrong_cluster:
            await c.get_prompt("health_review", {"cluster": "third"})
        resource = await c.read_resource("pve-steward://cluster")
    assert {arg.name for arg in listed["health_review"].arguments or []} == {"cluster"}
    assert clusters.completion.values == ["second"]
    assert first.completion.values == ["hv1", "hv2", "hv3"]  # without a cluster chosen: the default one
    assert second.completion.values == ["pve1", "pve2", "pve3"]
    assert 'Work on cluster "second": pass cluster="second" to every call.' in text.messages[0].content.text  # type: ignore[union-attr]
    assert "no node 'pve2'; nodes are: hv1, hv2, hv3" in str(wrong_node.value)
    assert "no cluster 'third'; clusters are: first, second" in str(wrong_cluster.value)
    assert "hv1" in resource.contents[0].text and "pve1" not in resource.contents[0].text  # type: ignore[union-attr]


async def test_resources_read_the_cluster_their_uri_names(
    start_sim: Callable[..., SimServer], several: Callable[..., Settings], tmp_path: Path
) -> None:
    a, b = start_sim("healthy"), start_sim("demo")
    mcp = build_server(several({"first": table(a), "second": table(b)}))
    nodes = ResourceTemplateReference(uri="pve-steward://nodes/{node}{?cluster}")
    async with Client(mcp) as c:
        listed = {str(r.uri): r for r in (await c.list_resources()).resources}
        templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
        default, first, second = [
            json.loads((await c.read_resource(f"pve-steward://cluster{q}")).contents[0].text)  # type: ignore[union-attr]
            for q in ("", "?cluster=first", "?cluster=second")
        ]
        node = json.loads((await c.read_resource("pve-steward://nodes/pve2?cluster=second")).contents[0].text)  # type: ignore[union-attr]
        guest = json.loads((await c.read_resource("pve-steward://guests/100?cluster=second")).contents[0].text)  # type: ignore[union-attr]
        with pytest.raises(MCPError) as wrong_node:
            await c.read_resource("pve-steward://nodes/pve2?cluster=first")
        with pytest.raises(MCPError) as not_there:
            await c.read_resource("pve-steward://guests/100")  # the default cluster has no guest 100
        with pytest.raises(MCPError) as unknown:
            await c.read_resource("pve-steward://nodes/pve2?cluster=third")
        clusters = await c.complete(nodes, {"name": "cluster", "value": ""})
        second_nodes = await c.complete(nodes, {"name": "node", "value": ""}, context_arguments={"cluster": "second"})
    summaries = {"pve-steward://cluster", "pve-steward://cluster?cluster=first", "pve-steward://cluster?cluster=second"}
    assert summaries <= set(listed)
    assert "of the default cluster, first" in (listed["pve-steward://cluster"].description or "")
    assert {"pve-steward://nodes/{node}{?cluster}", "pve-steward://guests/{vmid}{?cluster}"} <= templates
    assert (default["cluster"], first["cluster"], second["cluster"]) == ("first", "first", "second")
    assert default == first and {n["name"] for n in plain(second)["nodes"]} == {"pve1", "pve2", "pve3"}
    assert node["cluster"] == "second" and plain(node)["status"]["node"] == "pve2"
    assert guest["cluster"] == "second" and guest["vmid"] == 100
    assert "no node 'pve2'; nodes are: hv1, hv2, hv3" in str(wrong_node.value)
    assert "100" in str(not_there.value)
    assert "no cluster 'third'" in str(unknown.value) and "first, second" in str(unknown.value)
    assert clusters.completion.values == ["first", "second"]
    assert second_nodes.completion.values == ["pve1", "pve2", "pve3"]
    # audited like the tools: which cluster, and that a resource read it
    reads = [r for r in records(tmp_path / "audit.jsonl") if r.get("via") == "resource"]
    assert {(r["cluster"], r["tool"]) for r in reads} >= {("second", "node_status"), ("second", "get_guest")}


@pytest.mark.parametrize("granular", [True, False])
async def test_one_cluster_table_changes_no_tool_schema(
    demo_sim: SimServer, several: Callable[..., Settings], settings_for: Callable[..., Settings], granular: bool
) -> None:
    async def catalog(settings: Settings) -> str:
        async with Client(build_server(settings)) as c:
            tools = (await c.list_tools()).tools
        return json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], sort_keys=True)

    one = several({"only": table(demo_sim)}, tier="admin", granular_tools=granular)
    classic = settings_for(demo_sim, "operator@pve!mcp", tier="admin", granular_tools=granular)
    assert await catalog(one) == await catalog(classic)
    assert "list_clusters" not in await catalog(one)
    async with Client(build_server(one)) as c:
        tool, args = ("cluster_overview", {}) if granular else ("cluster", {"action": "cluster_overview"})
        assert not (await c.call_tool(tool, args)).is_error
