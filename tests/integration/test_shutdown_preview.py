"""A shutdown preview promises the path PVE will take: the guest agent only when it answers
(qemu-server _do_vm_stop checks guest-ping), an ACPI event otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer

pytestmark = pytest.mark.anyio


async def effects(c: Client, vmid: int) -> str:
    result = await c.call_tool("guest_shutdown", {"vmid": vmid})
    assert not result.is_error, result.content[0].text
    body: dict[str, Any] = result.structured_content  # type: ignore[assignment]
    return " ".join(body["effects"])


async def test_shutdown_preview_names_the_agent_only_when_it_answers(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim, "operator@pve!mcp", tier="operator")) as c:
        answering = await effects(c, 100)  # agent enabled and answering
        silent = await effects(c, 110)  # agent enabled in the config, not answering
        container = await effects(c, 120)
    assert "via the guest agent (it answers)" in answering
    assert "via an ACPI power-button event (the guest agent is enabled in the config but does not answer)" in silent
    assert "via the guest agent" not in silent
    assert "via the container's init system" in container
