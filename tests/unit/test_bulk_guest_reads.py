"""Bulk guest reads read each thing once (FakeClient, PVE-shaped answers): get_guests takes one index of the
guests for all its vmids and each guest's three reads once; list_guests reads the configs of its page only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pve_steward.config import Settings
from pve_steward.errors import PveNotFound, PvePermissionError
from pve_steward.server import build_server
from pve_steward.testing import FakeClient
from tests.unit.pve_fixtures import guest_row, node_row, qemu_config
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


def _fake() -> FakeClient:
    fake = FakeClient()
    rows = [node_row("pve1"), node_row("pve2")] + [guest_row(100 + i, f"pve{1 + i % 2}") for i in range(6)]
    fake.on("GET", "/version", {"version": "9.1.2", "release": "9.1"})
    fake.on("GET", "/cluster/resources", rows)
    fake.on("GET", "/nodes/{node}/qemu/{vmid}/config", qemu_config("g", cipassword="hunter2"))
    fake.on("GET", "/nodes/{node}/qemu/{vmid}/status/current", {"status": "running", "ha": {"managed": 0}})
    fake.on("GET", "/nodes/{node}/qemu/{vmid}/snapshot", [{"name": "current"}])
    return fake


async def _call(fake: FakeClient, tmp_path: Path, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    settings = Settings(
        url="https://pve.example:8006", token_id="ops@pve!mcp", audit_log=tmp_path / "a.jsonl", read_cache_ttl=0
    )
    async with Client(build_server(settings.model_copy(update={"granular_tools": True}), client=fake)) as c:
        result = await c.call_tool(tool, args)
    assert not result.is_error, result.content
    return plain(result.structured_content)  # type: ignore[no-any-return]


async def test_get_guests_reads_the_index_once_and_each_guest_once(tmp_path: Path) -> None:
    fake = _fake()
    got = await _call(fake, tmp_path, "get_guests", {"vmids": [101, 100, 101, 777]})
    asked = fake.requested("GET")
    assert asked.count("GET /cluster/resources") == 1
    for vmid, node in ((100, "pve1"), (101, "pve2")):
        for part in ("config", "status/current", "snapshot"):
            assert asked.count(f"GET /nodes/{node}/qemu/{vmid}/{part}") == 1
    assert [g["vmid"] for g in got["items"]] == [101, 100] and got["not_found"] == [777]
    assert len([c for c in asked if "/qemu/" in c]) == 6


async def test_a_guest_gone_from_its_node_is_looked_up_again_and_a_refused_one_said(tmp_path: Path) -> None:
    fake = _fake()
    moved = [node_row("pve1"), node_row("pve2"), guest_row(100, "pve2"), guest_row(101, "pve2")]
    answers = iter([[node_row("pve1"), node_row("pve2"), guest_row(100, "pve1"), guest_row(101, "pve2")], moved])
    fake.on("GET", "/cluster/resources", lambda _p: next(answers))
    missing = PveNotFound("Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist", status=500)
    fake.on("GET", "/nodes/pve1/qemu/100/config", missing)
    fake.on("GET", "/nodes/pve2/qemu/101/config", PvePermissionError("Permission check failed (/vms/101, VM.Audit)"))
    got = await _call(fake, tmp_path, "get_guests", {"vmids": [100, 101]})
    assert [(g["vmid"], g["node"]) for g in got["items"]] == [(100, "pve2")]
    assert "Permission check failed" in got["unread"]["101"]


async def test_list_guests_reads_the_configs_of_its_page_only_and_redacts_them(tmp_path: Path) -> None:
    fake = _fake()
    got = await _call(fake, tmp_path, "list_guests", {"fields": ["onboot", "cipassword", "ostype"], "limit": 2})
    configs = [c for c in fake.requested("GET") if c.endswith("/config")]
    assert configs == ["GET /nodes/pve1/qemu/100/config", "GET /nodes/pve2/qemu/101/config"]
    assert [r["config"] for r in got["items"]] == [{"onboot": 1, "cipassword": "***redacted***", "ostype": None}] * 2
    assert got["page"]["next_offset"] == 2
    plain_page = await _call(_fake(), tmp_path, "list_guests", {"limit": 2})
    assert plain_page["fields"] is None and all("config" not in r for r in plain_page["items"])
