"""The first five minutes, MCP side: every bad call answers one clear sentence, and texts for the model
name tools as the client sees them. Through a real MCP client against pvesim."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from pve_steward.surface.nodecheck import node_parameters
from pve_steward.surface.registry import handler_parameters, load_registry
from pvesim.server import SimServer
from tests.integration.test_metatools import meta_server
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

REGISTRY = load_registry()
PYDANTIC = ("errors.pydantic.dev", "validation error for", "type=", "input_value")
SAMPLES: dict[str, Any] = {"vmid": 100, "storage": "local"}


def text_of(result: Any) -> str:
    assert result.is_error, result
    text: str = result.content[0].text
    assert not any(p in text for p in PYDANTIC), text
    assert "\n" not in text.strip(), text
    return text


async def test_meta_mode_names_the_action_it_needs(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path, tier="operator")) as c:
        missing = text_of(await c.call_tool("guests", {"vmid": 100}))
        unknown = text_of(await c.call_tool("guests", {"action": "delete_everything"}))
        wrong_type = text_of(await c.call_tool("guests", {"action": 5}))
        elsewhere = text_of(await c.call_tool("guests", {"action": "get_task", "upid": "x"}))
        higher = text_of(await c.call_tool("operate", {"action": "guest_unlock", "vmid": 111}))
        no_tool = text_of(await c.call_tool("administer", {"action": "guest_unlock", "vmid": 111}))
        bad_value = text_of(await c.call_tool("guests", {"action": "list_guests", "type": "vm"}))
    assert missing == (
        "guests needs the parameter 'action', one of: get_guest, get_guests, guest_agent_info, list_guests, "
        "list_snapshots"
    )
    assert unknown.startswith("unknown action 'delete_everything' for guests; 'action' must be one of: get_guest")
    assert wrong_type.startswith("unknown action 5 for guests")
    assert elsewhere == "action 'get_task' belongs to another tool: call tasks with action=get_task"
    assert higher == (
        "action 'guest_unlock' is not available: it needs tier admin, in tool administer, and this server runs "
        "at tier operator, see --tier"
    )
    assert no_tool.startswith("administer is not available: it holds the admin-tier writes")
    assert bad_value.startswith("action 'list_guests': parameter 'type': Input should be 'qemu' or 'lxc'")


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("get_guest", {"vmid": "x"}, "parameter 'vmid': invalid vmid 'x': expected a whole number"),
        ("get_guest", {}, "parameter 'vmid' is required. Parameters of get_guest: required vmid"),
        ("list_guests", {"limit": 0}, "parameter 'limit': Input should be greater than or equal to 1"),
        ("list_guests", {"type": "vm"}, "parameter 'type': Input should be 'qemu' or 'lxc'"),
        ("node_status", {"node": "a/b"}, "parameter 'node': invalid node 'a/b': node names are 1-63"),
        ("get_task", {"upid": "nope"}, "parameter 'upid': invalid upid 'nope': expected a PVE task id"),
        ("list_guests", {"colour": "red"}, "list_guests does not take 'colour'; it takes: fields, limit, name, node"),
        ("guest_unlock", {"vmid": 111}, "guest_unlock is not available: it needs tier admin and this server runs at"),
    ],
)
async def test_granular_argument_errors_are_one_sentence(
    demo_sim: SimServer, tmp_path: Path, tool: str, args: dict[str, Any], expected: str
) -> None:
    async with Client(meta_server(demo_sim, tmp_path, granular_tools=True, tier="operator")) as c:
        text = text_of(await c.call_tool(tool, args))
    assert expected in text, text


NODE_OPS = sorted(name for name, h in REGISTRY.handlers.items() if node_parameters(h))


def _with_unknown_node(op: str) -> dict[str, Any]:
    handler = REGISTRY.handlers[op]
    args = {
        p.name: SAMPLES[p.name]
        for p in handler_parameters(handler).values()
        if p.default is inspect.Parameter.empty and p.name in SAMPLES
    }
    for name in node_parameters(handler):
        args[name] = ["pve9"] if name.endswith("targets") else "pve9"
    return args


@pytest.mark.parametrize("granular", [True, False], ids=["granular", "meta"])
async def test_every_tool_that_takes_a_node_names_the_nodes(
    demo_sim: SimServer, tmp_path: Path, granular: bool
) -> None:
    assert len(NODE_OPS) >= 15  # node_status ... storage_content, the planners and the HA moves
    mcp = meta_server(demo_sim, tmp_path, granular_tools=granular, tier="admin")
    before = demo_sim.sim.requests
    async with Client(mcp) as c:
        for op in NODE_OPS:
            args = _with_unknown_node(op)
            if granular:
                result = await c.call_tool(op, args)
            else:
                tool = (
                    REGISTRY.write_tools[REGISTRY.operations[op].tier].name
                    if REGISTRY.operations[op].is_write
                    else (REGISTRY.operations[op].toolset)
                )
                result = await c.call_tool(tool, {"action": op, **args})
            text = text_of(result)
            assert re.fullmatch(r"no node 'pve9'( \(parameter '\w+'\))?; nodes are: pve1, pve2, pve3", text), (op, text)
            assert "hostname lookup" not in text
    # at most the node list per call (cached a few seconds): the operations' own reads never ran
    assert demo_sim.sim.requests - before <= len(NODE_OPS)


async def test_prompt_errors_are_json_rpc_invalid_params(
    demo_sim: SimServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        errors = {}
        for name, args in [
            ("nope", {}),
            ("maintenance_preparation", {}),
            ("maintenance_preparation", {"node": "a/b"}),
            ("maintenance_preparation", {"node": "pve1", "extra": "x"}),
            ("guest_review", {"vmid": "abc"}),
            ("snapshot_review", {"vmid": "113", "snapshot": "1bad"}),
        ]:
            with pytest.raises(MCPError) as caught:
                await c.get_prompt(name, args)
            errors[(name, tuple(args))] = caught.value.error
        good = await c.get_prompt("maintenance_preparation", {"node": "pve1"})
    assert {e.code for e in errors.values()} == {-32602}
    assert errors[("nope", ())].message.startswith("no prompt 'nope'; prompts are: backup_audit, backup_job_review")
    assert errors[("maintenance_preparation", ())].message == (
        "prompt 'maintenance_preparation' needs 'node'; it takes: node"
    )
    assert "invalid node 'a/b'" in errors[("maintenance_preparation", ("node",))].message
    assert errors[("maintenance_preparation", ("node", "extra"))].message.startswith(
        "prompt 'maintenance_preparation' does not take 'extra'"
    )
    assert "invalid vmid 'abc'" in errors[("guest_review", ("vmid",))].message
    assert "invalid snapshot '1bad'" in errors[("snapshot_review", ("vmid", "snapshot"))].message
    assert "pve1" in good.messages[0].content.text  # type: ignore[union-attr]
    assert "Traceback" not in capfd.readouterr().err


async def test_prompt_with_an_unknown_node_or_guest_is_invalid_params(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path)) as c:
        with pytest.raises(MCPError) as node:
            await c.get_prompt("maintenance_preparation", {"node": "pve9"})
        with pytest.raises(MCPError) as guest:
            await c.get_prompt("guest_review", {"vmid": "999"})
        good = await c.get_prompt("guest_review", {"vmid": "113"})
    assert node.value.error.code == -32602 and guest.value.error.code == -32602
    assert node.value.error.message == "no node 'pve9'; nodes are: pve1, pve2, pve3"
    assert guest.value.error.message.startswith("no guest 999 is visible in this cluster")
    assert "Review guest 113" in good.messages[0].content.text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("granular", "call_again", "follow"),
    [
        (True, "call guest_start again", "Verify with get_guest"),
        (False, "call operate with action=guest_start again", "Verify with guests with action=get_guest"),
    ],
    ids=["granular", "meta"],
)
async def test_next_step_names_the_tool_as_the_client_calls_it(
    start_sim: Any, tmp_path: Path, granular: bool, call_again: str, follow: str
) -> None:
    sim = start_sim("demo")
    mcp = meta_server(sim, tmp_path, granular_tools=granular, tier="operator")
    async with Client(mcp) as c:
        name, extra = ("guest_start", {}) if granular else ("operate", {"action": "guest_start"})
        preview = (await c.call_tool(name, {**extra, "vmid": 113})).structured_content
        assert preview is not None
        body = preview if granular else preview["result"]
        done = (
            await c.call_tool(name, {**extra, "vmid": 113, "confirm_token": body["confirm_token"]})
        ).structured_content
        assert done is not None
    assert call_again in body["next_step"]
    assert follow in (done if granular else done["result"])["next_step"]


@pytest.mark.parametrize(
    ("granular", "tier", "expected"),
    [
        (True, "admin", "still runs; guest_unlock checks), then clear the lock on the node: qm unlock"),
        (False, "admin", "still runs; administer with action=guest_unlock checks), then clear the lock on the node"),
        (False, "read_only", "guest_unlock (not available here: it needs tier admin, in tool administer, and"),
    ],
)
async def test_stuck_lock_points_to_guest_unlock(
    demo_sim: SimServer, tmp_path: Path, granular: bool, tier: str, expected: str
) -> None:
    mcp = meta_server(demo_sim, tmp_path, granular_tools=granular, tier=tier)
    async with Client(mcp) as c:
        if granular:
            report = (await c.call_tool("diagnose_guests", {})).structured_content
        else:
            answer = (await c.call_tool("diagnostics", {"action": "diagnose_guests"})).structured_content
            report = answer["result"] if answer else None
    assert report is not None
    stuck = [f for f in report["findings"] if f["code"] == "GUEST_LOCK_STUCK"]
    assert stuck and expected in stuck[0]["remediation"], stuck


async def test_findings_have_a_fix_real_ids_and_human_units(demo_sim: SimServer, tmp_path: Path) -> None:
    async with Client(meta_server(demo_sim, tmp_path, granular_tools=True)) as c:
        report = plain((await c.call_tool("check_cluster_health", {"detail": True})).structured_content)
        plan = plain((await c.call_tool("plan_node_evacuation", {"node": "pve3"})).structured_content)
    assert report is not None and plan is not None
    findings = report["findings"]
    assert {"REPO_NO_SUBSCRIPTION", "TASK_FAILED_RECENT", "NODE_MEMORY_OVERCOMMIT"} <= {f["code"] for f in findings}
    assert all(f["remediation"].strip() for f in findings), [f["code"] for f in findings if not f["remediation"]]
    for f in findings:
        assert "" not in f["evidence"].get("ids", []), f
    # data rows keep raw integers (evidence), texts for people use GiB, %, durations
    memory = next(f for f in findings if f["code"] == "NODE_MEMORY_OVERCOMMIT")
    assert isinstance(memory["evidence"]["total_bytes"], int) and "GiB" in memory["message"]
    texts = [f["message"] for f in findings] + [report["summary"], plan["summary"]]
    texts += [b.get("message", "") for b in plan.get("blockers", [])]
    raw = [t for t in texts if re.search(r"(?<![\w:/.-])\d{7,}(?![\w:])", t)]
    assert raw == []
