"""Start without cluster I/O (the version is checked by the first tool call) and compact answers (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pve_steward.config import Settings
from pve_steward.errors import PveConnectionRefused
from pve_steward.server import build_server, compact_answer
from pve_steward.testing import FakeClient
from tests.unit.pve_fixtures import cluster_status, guest_row, node_row

pytestmark = pytest.mark.anyio


def demo_client() -> FakeClient:
    rows = [node_row("pve1"), node_row("pve2")] + [guest_row(100 + i, f"pve{1 + i % 2}") for i in range(6)]
    fake = FakeClient()
    fake.on("GET", "/cluster/resources", rows)
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True, "pve2": True}))
    return fake


def _settings(tmp_path: Path, **extra: Any) -> Settings:
    return Settings(url="https://pve.example:8006", token_id="ops@pve!mcp", audit_log=tmp_path / "audit.jsonl", **extra)


async def test_listing_touches_nothing_and_the_version_is_read_once(tmp_path: Path) -> None:
    fake = demo_client()
    fake.on("GET", "/version", {"version": "9.1.2", "release": "9.1"})
    async with Client(build_server(_settings(tmp_path), client=fake)) as c:
        assert (await c.list_tools()).tools
        assert fake.calls == []
        first = await c.call_tool("guests", {"action": "list_guests"})
        second = await c.call_tool("guests", {"action": "list_guests"})
    assert not first.is_error and not second.is_error, first.content
    assert fake.requested().count("GET /version") == 1


async def test_unsupported_version_is_refused_by_every_tool_with_the_way_out(tmp_path: Path) -> None:
    fake = demo_client().on("GET", "/version", {"version": "7.4.17"})
    async with Client(build_server(_settings(tmp_path), client=fake)) as c:
        answers = [await c.call_tool("cluster", {"action": "cluster_overview"}) for _ in range(2)]
    for answer in answers:
        assert answer.is_error
        assert "Proxmox VE 7.4.17 is not supported" in answer.content[0].text
        assert "--disable-version-check" in answer.content[0].text
    assert fake.requested() == ["GET /version"]  # the verdict is kept; no tool reached the cluster


async def test_disabled_version_check_reads_no_version(tmp_path: Path) -> None:
    fake = demo_client().on("GET", "/version", {"version": "7.4.17"})
    async with Client(build_server(_settings(tmp_path, disable_version_check=True), client=fake)) as c:
        answer = await c.call_tool("guests", {"action": "list_guests"})
    assert not answer.is_error, answer.content
    assert "GET /version" not in fake.requested()


async def test_an_unreachable_cluster_is_named_and_tried_again(tmp_path: Path) -> None:
    down = PveConnectionRefused("GET /version: connection refused by pve.example:8006 (nothing listens there)")
    fake = demo_client().on("GET", "/version", down)
    async with Client(build_server(_settings(tmp_path), client=fake)) as c:
        refused = await c.call_tool("cluster", {"action": "cluster_overview"})
        fake.on("GET", "/version", {"version": "9.1.2"})
        working = await c.call_tool("cluster", {"action": "cluster_overview"})
    assert refused.is_error
    assert refused.content[0].text.startswith("cannot reach Proxmox VE at pve.example:8006: GET /version")
    assert not working.is_error, working.content


@pytest.mark.parametrize("granular", [False, True])
async def test_text_is_compact_json_of_the_structured_content(tmp_path: Path, granular: bool) -> None:
    fake = demo_client()
    settings = _settings(tmp_path, granular_tools=granular)
    async with Client(build_server(settings, client=fake, check_version_on_start=False)) as c:
        if granular:
            answer = await c.call_tool("list_guests", {})
        else:
            answer = await c.call_tool("guests", {"action": "list_guests"})
    assert not answer.is_error, answer.content
    (block,) = answer.content
    text = block.text  # type: ignore[union-attr]
    assert json.loads(text) == answer.structured_content
    assert text == json.dumps(answer.structured_content, separators=(",", ":"), ensure_ascii=False)


def test_only_a_plain_structured_answer_is_rewritten() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    structured = {"action": "guest_stop", "result": {"summary": "stop VM 100 on pve1", "token": "t"}}
    result = CallToolResult(content=[TextContent(type="text", text="{\n  ...")], structured_content=structured)
    text = compact_answer(result).content[0].text  # type: ignore[union-attr]
    assert text == '{"action":"guest_stop","result":{"summary":"stop VM 100 on pve1","token":"t"}}'
    error = CallToolResult(content=[TextContent(type="text", text="boom")], is_error=True)
    assert compact_answer(error) is error
    image = ImageContent(type="image", data="AAAA", mime_type="image/png")
    blocks = CallToolResult(content=[TextContent(type="text", text="x"), image], structured_content=structured)
    assert compact_answer(blocks) is blocks
