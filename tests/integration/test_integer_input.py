"""Integer parameters are read by one rule everywhere (issue 42, item 6): tools (granular and meta), prompts,
completion context and resource URIs. Issue 42 found a `vmid` that passes `str.isdigit()` but not `int()`
('²', 5,000 digits) crashing prompts and completion; every malformed value is now a sentence that names the
parameter and what it takes, never a crash or pydantic's own text."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.types import INVALID_PARAMS, PromptReference

from pvesim.server import SimServer

pytestmark = pytest.mark.anyio
BAD = ["²", "9" * 5000, " 12", "-1", "١٢٣", "1e3", "12 "]


def named(text: str, param: str = "vmid") -> bool:
    return f"invalid {param} " in text and "Traceback" not in text and "int_parsing" not in text


@pytest.mark.parametrize("bad", BAD)
async def test_prompts_and_completion_refuse_a_malformed_vmid_by_name(
    demo_sim: SimServer, server_for: Any, bad: str
) -> None:
    async with Client(server_for(demo_sim)) as c:
        with pytest.raises(MCPError) as prompt:
            await c.get_prompt("guest_review", {"vmid": bad})
        with pytest.raises(MCPError) as snapshot_prompt:
            await c.get_prompt("snapshot_review", {"vmid": bad, "snapshot": "before_upgrade"})
        with pytest.raises(MCPError) as completion:
            ref = PromptReference(type="ref/prompt", name="snapshot_review")
            await c.complete(ref, {"name": "snapshot", "value": ""}, {"vmid": bad})
        with pytest.raises(MCPError) as resource:
            await c.read_resource(f"pve-steward://guests/{bad.strip() or 'x'}")
    for error in (prompt, snapshot_prompt, completion):
        assert error.value.code == INVALID_PARAMS and named(error.value.error.message), error.value.error.message
    assert named(resource.value.error.message) or "guest ids are integers" in resource.value.error.message
    assert len(completion.value.error.message) < 300  # the value is cut when shown


@pytest.mark.parametrize("bad", BAD)
async def test_tools_refuse_a_malformed_integer_by_name(demo_sim: SimServer, server_for: Any, bad: str) -> None:
    async with Client(server_for(demo_sim)) as granular, Client(server_for(demo_sim, granular_tools=False)) as meta:
        answers = [
            await granular.call_tool("get_guest", {"vmid": bad}),
            await meta.call_tool("guests", {"action": "get_guest", "vmid": bad}),
            await granular.call_tool("list_guests", {"limit": bad}),
        ]
    texts = [a.content[0].text for a in answers]
    assert all(a.is_error for a in answers), texts
    assert named(texts[0]) and named(texts[1]) and named(texts[2], "limit"), texts


async def test_a_well_formed_vmid_still_works_everywhere(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim)) as c:
        prompt = await c.get_prompt("guest_review", {"vmid": "100"})
        ref = PromptReference(type="ref/prompt", name="snapshot_review")
        completion = await c.complete(ref, {"name": "snapshot", "value": ""}, {"vmid": "100"})
        guest = await c.call_tool("get_guest", {"vmid": "100"})
    assert "guest 100" in prompt.messages[0].content.text  # type: ignore[union-attr]
    assert completion.completion.values is not None
    assert not guest.is_error
