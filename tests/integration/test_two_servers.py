"""Two stdio servers on one machine (Claude Desktop and Cursor, each starting its own): both run with default
settings side by side, both audit every write into the one default log, and its chain verifies."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from pve_steward.cli import main
from pvesim.server import SimServer

pytestmark = pytest.mark.anyio

ROUNDS = 4  # writes per server; the two servers' writes run at the same time


def _server(sim: SimServer, home: Path) -> StdioServerParameters:
    token_id, secret = sim.token("operator@pve!mcp")
    env = {  # the connection and the write tier; every other setting is the default (the state dir from XDG)
        **os.environ,
        "XDG_STATE_HOME": str(home),
        "PVE_STEWARD_URL": sim.address,
        "PVE_STEWARD_TOKEN_ID": token_id,
        "PVE_STEWARD_TOKEN_SECRET": secret,
        "PVE_STEWARD_FINGERPRINT": sim.fingerprint,
        "PVE_STEWARD_TIER": "operator",
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "pve_steward", "serve"], env=env)


async def _write_tags(c: Client, vmid: int, tag: str) -> None:
    args: dict[str, Any] = {"action": "guest_set_tags", "vmid": vmid, "tags": [tag]}
    preview = await c.call_tool("operate", args)
    assert not preview.is_error, preview.content[0].text
    token = preview.structured_content["result"]["confirm_token"]  # type: ignore[index]
    done = await c.call_tool("operate", {**args, "confirm_token": token})
    assert not done.is_error, done.content[0].text


async def test_two_stdio_servers_audit_every_write_into_one_chain(
    start_sim: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim("demo")
    ready = anyio.Event()
    connected = 0

    async def client(name: str, vmid: int) -> None:
        nonlocal connected
        info = Implementation(name=name, version="1.0")
        async with Client(_server(sim, tmp_path), client_info=info) as c:
            connected += 1
            if connected == 2:
                ready.set()
            await ready.wait()  # both servers are up before either writes: they run side by side
            for i in range(ROUNDS):
                await _write_tags(c, vmid, f"{name}-{i}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(client, "claude-desktop", 100)
        tg.start_soon(client, "cursor", 103)

    audit = tmp_path / "pve-steward" / "audit.jsonl"
    assert main(["audit", "verify", "--file", str(audit)]) == 0, capsys.readouterr().out
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    started = {r["write_id"]: r for r in records if r.get("event") == "write_executing"}
    ended = [r for r in records if r.get("event") == "write_outcome" and r.get("outcome") == "ok"]
    for name, vmid in (("claude-desktop", 100), ("cursor", 103)):
        mine = [started[r["write_id"]] for r in ended if started[r["write_id"]]["client"] == f"{name}/1.0"]
        assert len(mine) == ROUNDS and {r["target"]["vmid"] for r in mine} == {vmid}, name
    assert main(["audit", "pending", "--file", str(audit)]) == 0  # every started write has its outcome
    assert sim.cluster.guests[100].config["tags"] == f"claude-desktop-{ROUNDS - 1}"
    assert sim.cluster.guests[103].config["tags"] == f"cursor-{ROUNDS - 1}"
