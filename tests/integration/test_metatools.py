"""Registration modes through a real MCP session: meta-tools (default), granular, read-only, toolsets."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import TypeAdapter

from pve_steward.config import load_settings
from pve_steward.security.handlers import HANDLERS, SEVERAL_CLUSTERS
from pve_steward.security.tiers import Tier
from pve_steward.server import build_server
from pve_steward.surface.metatools import PAGING, WRITE_COMMON
from pve_steward.surface.registry import handler_hints, handler_parameters, load_registry
from pve_steward.testing import FakeClient
from pvesim.server import SimServer

pytestmark = pytest.mark.anyio

REGISTRY = load_registry()

# Arguments for every read operation against the demo scenario (a test fails if one is missing).
READ_ARGS: dict[str, dict[str, Any]] = {
    "node_status": {"node": "pve1"},
    "node_disks": {"node": "pve3"},
    "node_zfs_pools": {"node": "pve3"},
    "node_updates": {"node": "pve2"},
    "node_repositories": {"node": "pve2"},
    "node_certificates": {"node": "pve1"},
    "node_subscription": {"node": "pve1"},
    "get_guest": {"vmid": 100},
    "get_guests": {"vmids": [100, 101]},
    "guest_agent_info": {"vmid": 104},
    "list_snapshots": {"vmid": 113},
    "get_task": None,  # filled from list_tasks
    "task_log": None,
    "storage_content": {"node": "pve1", "storage": "local"},
    "get_backup_job": {"id": "backup-nightly"},
    "explain_finding": {"code": "BACKUP_STALE"},
    "plan_node_evacuation": {"node": "pve1"},
    "check_guest_migration": {"vmid": 108},
}


def meta_server(sim: SimServer, tmp_path: Path, token: str = "root@pam!pvesim", **extra: Any) -> Any:
    token_id, secret = sim.token(token)
    settings = load_settings(
        url=sim.address,
        token_id=token_id,
        token_secret=secret,
        fingerprint=sim.fingerprint,
        audit_log=tmp_path / "audit.jsonl",
        retries=0,
        **extra,
    )
    return build_server(settings)


def offline_server(tmp_path: Path, **extra: Any) -> Any:
    settings = load_settings(url="pve.invalid:8006", audit_log=tmp_path / "audit.jsonl", **extra)
    return build_server(settings, client=FakeClient(), check_version_on_start=False)


async def catalog(mcp: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        return {t.name: t for t in (await c.list_tools()).tools}


def reachable(tools: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for name, tool in tools.items():
        action = tool.input_schema.get("properties", {}).get("action")
        out |= set(action["enum"]) if action else {name}
    return out


async def test_default_is_meta_tools_with_truthful_annotations(tmp_path: Path) -> None:
    tools = await catalog(offline_server(tmp_path, tier="admin"))
    assert set(tools) == {
        "cluster",
        "guests",
        "storage",
        "backups",
        "ha",
        "tasks",
        "diagnostics",
        "planning",
        "operate",
        "administer",
    }
    for name, tool in tools.items():
        a = tool.annotations
        write = name in ("operate", "administer")
        assert a.read_only_hint is (not write), name
        assert a.destructive_hint is write, name
        assert tool.input_schema["required"] == ["action"]
        assert tool.output_schema == {"type": "object"}  # the envelope {action, result}: said in docs/tools.md
        assert "human" not in tool.input_schema["properties"] and "ctx" not in tool.input_schema["properties"]
    ops = {name: tools[name].input_schema["properties"]["action"]["enum"] for name in tools}
    assert set(ops["operate"]) == {o.name for o in REGISTRY.operations.values() if o.tier is Tier.OPERATOR}
    assert set(ops["administer"]) == {o.name for o in REGISTRY.operations.values() if o.tier is Tier.ADMIN}
    assert reachable(tools) == set(REGISTRY.operations) - SEVERAL_CLUSTERS  # list_clusters: several clusters only


@pytest.mark.parametrize(
    ("tier", "read_only", "granular", "toolsets", "disabled"),
    [
        (tier, read_only, granular, toolsets, disabled)
        for tier, read_only, granular, (toolsets, disabled) in itertools.product(
            list(Tier),
            [False, True],
            [False, True],
            [(None, []), (["cluster", "backups"], []), (None, ["guests", "diagnostics"]), (["ha"], ["ha"])],
        )
    ],
)
async def test_every_combination_gives_a_consistent_catalog(
    tmp_path: Path, tier: Tier, read_only: bool, granular: bool, toolsets: list[str] | None, disabled: list[str]
) -> None:
    """Whatever the switches, the tools expose exactly the operations the registry selects, nothing else."""
    mcp = offline_server(
        tmp_path, tier=tier, read_only=read_only, granular_tools=granular, toolsets=toolsets, disable_toolsets=disabled
    )
    tools = await catalog(mcp)
    expected = {o.name for o in REGISTRY.select(tier=tier, read_only=read_only, toolsets=toolsets, disabled=disabled)}
    assert reachable(tools) == expected
    writes = {o.name for o in REGISTRY.operations.values() if o.is_write}
    if read_only or tier is Tier.READ_ONLY:
        assert not reachable(tools) & writes
        assert not {"operate", "administer"} & set(tools)
    for tool in tools.values():
        if tool.annotations.read_only_hint:
            assert not (reachable({tool.name: tool}) & writes), tool.name


async def test_every_read_action_works_through_its_meta_tool(demo_sim: SimServer, tmp_path: Path) -> None:
    """Each read operation, called as an action, returns exactly its operation's model."""
    mcp = meta_server(demo_sim, tmp_path)
    owner = {
        o.name: o.toolset for o in REGISTRY.operations.values() if not o.is_write and o.name not in SEVERAL_CLUSTERS
    }
    async with Client(mcp) as c:
        tasks = (await c.call_tool("tasks", {"action": "list_tasks", "limit": 5})).structured_content
        upid = tasks["result"]["items"][0]["upid"]
        args = dict(READ_ARGS, get_task={"upid": upid}, task_log={"upid": upid, "limit": 3})
        for op, toolset in sorted(owner.items()):
            result = await c.call_tool(toolset, {"action": op, **(args.get(op) or {})})
            assert not result.is_error, (op, result.content[0].text)
            body = result.structured_content
            assert body["action"] == op
            model = handler_hints(REGISTRY.handlers[op])["return"]
            TypeAdapter(model).validate_python(body["result"])  # the envelope carries the real model


async def test_action_parameters_are_validated_per_action(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        foreign = await c.call_tool("guests", {"action": "list_guests", "vmid": 100})
        missing = await c.call_tool("guests", {"action": "get_guest"})
        bad = await c.call_tool("guests", {"action": "get_guest", "vmid": 5})
        hostile = await c.call_tool("cluster", {"action": "node_status", "node": "pve1/../../access"})
        wrong_type = await c.call_tool("guests", {"action": "list_guests", "limit": "many"})
        unknown = await c.call_tool("guests", {"action": "delete_everything"})
    assert foreign.is_error
    text = foreign.content[0].text
    assert "action 'list_guests' does not take 'vmid'" in text and "optional node, type, status" in text
    assert "parameter 'vmid'" in missing.content[0].text and "required vmid" in missing.content[0].text
    assert "parameter 'vmid'" in bad.content[0].text and "100" in bad.content[0].text
    assert "invalid node 'pve1/../../access'" in hostile.content[0].text
    assert "parameter 'limit'" in wrong_type.content[0].text
    assert unknown.is_error and "get_guest" in unknown.content[0].text


async def test_writes_through_meta_tools_keep_the_two_phase_protocol(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    mcp = meta_server(sim, tmp_path, "operator@pve!mcp", tier="operator")
    async with Client(mcp) as c:
        preview = (await c.call_tool("operate", {"action": "guest_reboot", "vmid": 104})).structured_content
        assert preview["action"] == "guest_reboot" and preview["result"]["status"] == "preview"
        token = preview["result"]["confirm_token"]
        swapped = await c.call_tool("operate", {"action": "guest_shutdown", "vmid": 104, "confirm_token": token})
        done = await c.call_tool("operate", {"action": "guest_reboot", "vmid": 104, "confirm_token": token})
    assert "issued for 'guest_reboot', not 'guest_shutdown'" in swapped.content[0].text
    assert done.structured_content["result"]["status"] == "completed"
    assert "administer" not in await catalog(mcp)


async def test_read_only_removes_writes_at_registration(demo_sim: SimServer, tmp_path: Path) -> None:
    mcp = meta_server(demo_sim, tmp_path, "operator@pve!mcp", tier="admin", read_only=True)
    tools = await catalog(mcp)
    assert "operate" not in tools and "administer" not in tools
    async with Client(mcp) as c:
        result = await c.call_tool("operate", {"action": "guest_stop", "vmid": 100})
    assert result.is_error and "operate is not available: this server runs read-only" in result.content[0].text
    assert demo_sim.cluster.guests[100].status == "running"


async def test_elicitation_works_through_meta_tools(start_sim: Any, tmp_path: Path) -> None:
    from mcp.types import ElicitResult

    sim = start_sim("demo")
    asked: list[str] = []

    async def decline(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="decline")

    mcp = meta_server(sim, tmp_path, "operator@pve!mcp", tier="operator")
    async with Client(mcp, elicitation_callback=decline) as c:
        preview = (await c.call_tool("operate", {"action": "guest_suspend", "vmid": 104})).structured_content
        token = preview["result"]["confirm_token"]
        done = await c.call_tool("operate", {"action": "guest_suspend", "vmid": 104, "confirm_token": token})
    assert len(asked) == 1 and "VM 104" in asked[0]
    assert done.is_error and "decline" in done.content[0].text
    assert sim.cluster.guests[104].qmpstatus != "paused"


async def test_each_action_line_names_every_parameter_once_said_or_marked(tmp_path: Path) -> None:
    """``name*+(required, optional?): summary``: task parameters are said once (*), and so are a paged
    diagnosis's detail/limit/offset (+) where more than one action of the tool takes them."""
    tools = await catalog(offline_server(tmp_path, tier="admin"))
    for name, tool in tools.items():
        head, *lines = tool.description.split("\n")
        assert head.endswith("Actions:") and len(lines) == len(tool.input_schema["properties"]["action"]["enum"])
        for line in lines:
            signature, _, summary = line.partition("): ")
            action, _, params = signature.partition("(")
            marks = action[len(action.rstrip("*+")) :]
            hints = handler_parameters(HANDLERS[action.rstrip("*+")])
            named = {p.rstrip("?") for p in params.split(", ") if p}
            said_once = set(WRITE_COMMON) | (set(PAGING) if "+" in marks else set())
            expected = {p for p in hints if p not in said_once}
            assert named == expected, (name, line)
            assert summary and ("*" in marks) == ("wait" in hints), (name, line)
            if "+" in marks:
                assert "+ = paged: also detail?, limit?, offset?." in head and set(PAGING) <= set(hints)
        paged = [line for line in lines if all(f"{p}?" in line for p in PAGING)]
        assert len(paged) <= 1, (name, paged)  # with two or more, they are marked instead of listed
