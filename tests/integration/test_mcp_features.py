"""Resources, resource templates, completion/complete and logging/setLevel through a real MCP client
against pvesim (HTTPS, proxmoxer, API token)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import LoggingMessageNotificationParams, PromptReference, ResourceTemplateReference

from pve_steward.analysis.codes import CODES
from pve_steward.config import load_settings
from pve_steward.server import build_server
from pve_steward.surface.completions import MAX_VALUES
from pve_steward.testing import FakeClient
from pvesim.generator import generate
from pvesim.server import SimServer
from tests.integration.test_metatools import meta_server
from tests.untrusted import is_marked, plain

pytestmark = pytest.mark.anyio

TEMPLATES = {
    "pve-steward://codes/{code}",
    "pve-steward://nodes/{node}",
    "pve-steward://guests/{vmid}",
    "pve-steward://tasks/{upid}",
}


async def read_json(c: Client, uri: str) -> Any:
    result = await c.read_resource(uri)
    assert result.contents[0].mime_type == "application/json"
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]


async def test_resources_and_templates_are_listed_with_descriptions(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        resources = (await c.list_resources()).resources
        templates = (await c.list_resource_templates()).resource_templates
    ours = {str(r.uri) for r in resources if str(r.uri).startswith("pve-steward://")}  # ui:// are the Apps views
    assert ours == {"pve-steward://codes", "pve-steward://cluster"}
    assert {str(r.uri) for r in resources} - ours <= {
        "ui://pve-steward/views/diagnostics.html",
        "ui://pve-steward/views/planning.html",
    }
    assert {t.uri_template for t in templates} == TEMPLATES
    assert all(r.description and r.name for r in [*resources, *templates])


async def test_resources_follow_the_registered_toolsets(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path, toolsets=["diagnostics"])) as c:
        resources = {str(r.uri) for r in (await c.list_resources()).resources}
        templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
    assert resources == {"pve-steward://codes", "ui://pve-steward/views/diagnostics.html"}
    assert templates == {"pve-steward://codes/{code}"}


async def test_cluster_views_read_what_the_tools_read(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        summary = await read_json(c, "pve-steward://cluster")
        overview = (await c.call_tool("cluster", {"action": "cluster_overview"})).structured_content
        guest = await read_json(c, "pve-steward://guests/113")
        tool_guest = (await c.call_tool("guests", {"action": "get_guest", "vmid": 113})).structured_content
        node = await read_json(c, "pve-steward://nodes/pve3")
        tasks = (await c.call_tool("tasks", {"action": "list_tasks", "limit": 1})).structured_content
        upid = tasks["result"]["items"][0]["upid"]
        task = await read_json(c, f"pve-steward://tasks/{upid}")
    assert overview is not None and tool_guest is not None
    assert summary == overview["result"] and plain(summary)["cluster_name"] == "demo"
    # the same handler: same redaction and the same untrusted marking of user-written notes
    assert guest == tool_guest["result"] and is_marked(guest, "description")
    assert plain(node)["status"]["node"] == "pve3" and is_marked(node["status"], "node") and node["guests"]["items"]
    assert {g["node"] for g in plain(node)["guests"]["items"]} == {"pve3"}
    assert task["task"]["upid"] == upid and "log_tail" in task
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    views = {r["tool"] for r in records if r.get("via") == "resource"}
    assert views == {"cluster_overview", "get_guest", "node_status", "list_guests", "get_task"}


async def test_code_catalogue_and_doc(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path, tier="operator")) as c:
        catalogue = await read_json(c, "pve-steward://codes")
        doc = (await c.read_resource("pve-steward://codes/GUEST_LOCK_STUCK")).contents[0]
    assert {row["code"] for row in catalogue} == set(CODES)
    assert doc.mime_type == "text/markdown"
    text = doc.text  # type: ignore[union-attr]
    assert text.startswith("# GUEST_LOCK_STUCK: Stuck guest lock") and "Rule:" in text
    # the fix names guest_unlock, and says this operator-tier server does not offer it
    assert "guest_unlock (not available here: it needs tier admin, in tool administer" in text


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("pve-steward://nodes/pve9", "no node 'pve9'; nodes are: pve1, pve2, pve3"),
        ("pve-steward://guests/999", "no guest 999 is visible"),
        ("pve-steward://guests/abc", "invalid vmid 'abc'"),
        ("pve-steward://tasks/UPID:nonsense", "expected a PVE task id"),
        ("pve-steward://codes/NOPE", "no finding code 'NOPE'"),
        ("pve-steward://nothing", "Unknown resource"),
    ],
)
async def test_a_bad_resource_uri_is_invalid_params(
    demo_sim: SimServer, tmp_path: Path, uri: str, message: str
) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        with pytest.raises(MCPError) as caught:
            await c.read_resource(uri)
    assert caught.value.error.code == -32602 and message in caught.value.error.message


async def complete(c: Client, ref: Any, name: str, value: str, context: dict[str, str] | None = None) -> Any:
    result = await c.complete(ref, {"name": name, "value": value}, context_arguments=context)
    return result.completion


async def test_completions_filter_by_prefix(demo_sim: SimServer, tmp_path: Path) -> None:
    prompt = PromptReference(name="maintenance_preparation")
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        assert c.server_capabilities is not None and c.server_capabilities.completions is not None
        nodes = await complete(c, prompt, "node", "pve")
        one = await complete(c, prompt, "node", "PVE2")
        none = await complete(c, prompt, "node", "x")
        vmids = await complete(c, ResourceTemplateReference(uri="pve-steward://guests/{vmid}"), "vmid", "12")
        codes = await complete(c, ResourceTemplateReference(uri="pve-steward://codes/{code}"), "code", "BACKUP_J")
        storages = await complete(c, PromptReference(name="storage_review"), "storage", "local")
        jobs = await complete(c, PromptReference(name="backup_job_review"), "job", "")
        snapshots = await complete(c, PromptReference(name="snapshot_review"), "snapshot", "", {"vmid": "113"})
        no_vmid_yet = await complete(c, PromptReference(name="snapshot_review"), "snapshot", "")
    assert nodes.values == ["pve1", "pve2", "pve3"] and nodes.total == 3 and nodes.has_more is False
    assert one.values == ["pve2"] and none.values == [] and none.total == 0
    assert vmids.values == [str(v) for v in sorted(demo_sim.cluster.guests) if str(v).startswith("12")]
    assert codes.values == sorted(c for c in CODES if c.startswith("BACKUP_J"))
    assert storages.values == ["local", "local-lvm", "local-zfs"]
    assert jobs.values == sorted(j["id"] for j in demo_sim.cluster.backup_jobs)
    assert snapshots.values == sorted(demo_sim.cluster.guests[113].snapshots) and no_vmid_yet.values == []


async def test_an_unknown_reference_or_argument_completes_to_nothing(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        unknown_arg = await complete(c, PromptReference(name="maintenance_preparation"), "colour", "")
        unknown_prompt = await complete(c, PromptReference(name="test_prompt_with_arguments"), "arg1", "test")
        unknown_template = await complete(c, ResourceTemplateReference(uri="pve-steward://x/{node}"), "node", "")
        not_this_prompts = await complete(c, PromptReference(name="health_review"), "node", "")
    for answer in (unknown_arg, unknown_prompt, unknown_template, not_this_prompts):
        assert answer.values == [] and answer.total == 0


async def test_completions_are_capped(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim(generate(nodes=3, guests=150, seed=5), speed=5000)
    ref = ResourceTemplateReference(uri="pve-steward://guests/{vmid}")
    async with Client(meta_server(sim, tmp_path)) as c:
        before = sim.sim.requests
        first = await complete(c, ref, "vmid", "")
        after_first = sim.sim.requests
        second = await complete(c, ref, "vmid", "1")
        after_second = sim.sim.requests
    assert len(first.values) == MAX_VALUES and first.total == 150 and first.has_more is True
    assert first.values == sorted(first.values, key=int)
    assert second.values == [v for v in first.values if v.startswith("1")][:MAX_VALUES]
    # one inventory read per completion at most (the cache's lifetime is tested with a fake clock in unit tests)
    assert after_first == before + 1 and after_second - after_first <= 1


async def test_logging_set_level_is_honoured_for_handshake_clients(tmp_path: Path) -> None:
    """A 2025-11-25 client that sets a level gets the records of its own calls at or above it; others get none."""
    fake = FakeClient().on("GET", "/nodes", [{"node": "pve1"}])
    fake.on("GET", "/nodes/pve1/status", {"memory": "a lot"})  # malformed: the handler stops on it and logs
    settings = load_settings(url="pve.invalid:8006", audit_log=tmp_path / "audit.jsonl", granular_tools=True)
    received: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        received.append(params)

    mcp = build_server(settings, client=fake, check_version_on_start=False)
    async with Client(mcp, mode="legacy", logging_callback=on_log) as c:
        assert c.server_capabilities is not None and c.server_capabilities.logging is not None
        quiet = await c.call_tool("node_status", {"node": "pve1"})
        assert quiet.is_error and received == []  # no opt-in, nothing sent
        with pytest.warns(MCPDeprecationWarning):
            assert (await c.set_logging_level("error")) is not None
        loud = await c.call_tool("node_status", {"node": "pve1"})
        with pytest.warns(MCPDeprecationWarning):
            await c.set_logging_level("critical")
        above = await c.call_tool("node_status", {"node": "pve1"})
    assert loud.is_error and above.is_error
    assert len(received) == 1, received
    assert received[0].level == "error" and received[0].data == "tool node_status crashed"
    assert received[0].logger == "pve_steward.security.guard"
