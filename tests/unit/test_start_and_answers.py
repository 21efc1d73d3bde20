"""Start without cluster I/O (the version is checked by the first tool call) and compact answers (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from pve_steward.config import Settings
from pve_steward.errors import PveConnectionRefused
from pve_steward.models import MARK
from pve_steward.server import build_server
from pve_steward.surface.answers import compact_answer, render
from pve_steward.testing import FakeClient
from tests.unit.pve_fixtures import cluster_status, guest_row, node_row
from tests.untrusted import text_strings, untabulate

__all__ = ["untabulate"]  # imported from here by integration tests

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
    for reply in answers:
        assert reply.is_error
        assert "Proxmox VE 7.4.17 is too old" in reply.content[0].text
        assert "--disable-version-check" in reply.content[0].text
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
    assert untabulate(json.loads(text)) == answer.structured_content  # lossless
    assert text == render(answer.structured_content) and " " not in text.replace("running", "")
    assert '"columns":["vmid",' in text and '"untrusted_columns":["name","node","tags","config"]' in text


def test_tables_keep_nulls_nesting_and_unlike_lists() -> None:
    data = {
        "items": [
            {MARK: ["n"], "a": 1, "n": "web", "sub": [{"x": 1}, {"x": 2}]},
            {MARK: ["n"], "a": 2, "n": None, "sub": []},
        ],
        "mixed": [{"a": 1}, {"b": 2}],
        "one": [{MARK: ["n"], "n": "x"}],
        "unlike_marks": [{MARK: ["n"], "n": "x"}, {MARK: ["m"], "n": "y"}],
    }
    table = json.loads(render(data))
    assert table["items"] == {
        "columns": ["a", "n", "sub"],
        "untrusted_columns": ["n"],
        "rows": [[1, "web", {"columns": ["x"], "rows": [[1], [2]]}], [2, None, []]],
    }
    assert table["mixed"] == data["mixed"] and table["one"] == data["one"]
    # rows that mark differently keep their own marks, in a column of their own; the table marks what any marks
    assert table["unlike_marks"] == {
        "columns": [MARK, "n"],
        "untrusted_columns": ["n"],
        "rows": [[["n"], "x"], [["m"], "y"]],
    }
    assert untabulate(table) == data


def test_a_column_of_objects_is_marked_once_for_the_table() -> None:
    subject = {MARK: ["id", "name"], "kind": "guest", "id": "100", "name": "web"}
    data = [
        {MARK: ["message"], "code": "A", "subject": subject, "message": "m1"},
        {MARK: ["message"], "code": "B", "subject": {**subject, "name": None}, "message": "m2"},
        {MARK: ["message"], "code": "C", "subject": None, "message": "m3"},
    ]
    table = json.loads(render(data))
    assert table["untrusted_columns"] == ["message", "subject.id", "subject.name"]
    assert table["rows"][0] == ["A", {"kind": "guest", "id": "100", "name": "web"}, "m1"]
    assert MARK not in render(data)  # marked once per table, not per row or cell
    assert untabulate(table) == data
    marked = {(path.rsplit(".", 1)[-1], text) for path, text, m in text_strings(table) if m}
    assert marked == {("message", "m1"), ("message", "m2"), ("message", "m3"), ("id", "100"), ("name", "web")}
    unmarked = {text for _, text, m in text_strings(table) if not m}
    assert unmarked == {"A", "B", "C", "guest"}


def test_a_list_of_cluster_strings_stays_a_list_in_every_row() -> None:
    """Tags and log lines: one form per column (a list of strings), never a table of wrappers."""
    data = [{MARK: ["tags"], "vmid": 1, "tags": ["a", "b"]}, {MARK: ["tags"], "vmid": 2, "tags": ["c"]}]
    table = json.loads(render(data))
    assert table == {"columns": ["vmid", "tags"], "untrusted_columns": ["tags"], "rows": [[1, ["a", "b"]], [2, ["c"]]]}
    assert untabulate(table) == data


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


def test_an_answer_is_built_once_per_result_object_and_left_as_it_is() -> None:
    """The tools build their answers (answers.answer): the SDK's form, the compact text, and one encoding
    for the one object that callers of a shared run all get."""
    from pve_steward.analysis.findings import Counts
    from pve_steward.surface.answers import answer

    report = Counts(critical=2, info=3)
    meta, again = answer(report, "check_cluster_health"), answer(report, "check_cluster_health")
    assert meta is again and compact_answer(meta) is meta
    assert meta.structured_content == {"action": "check_cluster_health", "result": report.model_dump(mode="json")}
    assert meta.content[0].text == render(meta.structured_content)  # type: ignore[union-attr]
    granular = answer(report)
    assert granular is not meta and granular.structured_content == report.model_dump(mode="json", by_alias=True)
    equal = Counts(critical=2, info=3)
    assert answer(equal, "check_cluster_health") is not meta, "kept by identity, not by value"


@pytest.mark.parametrize("uri", ["pve-steward://cluster", "pve-steward://nodes/pve1", "pve-steward://guests/100"])
async def test_a_cluster_view_of_an_unsupported_version_is_refused_like_a_tool(tmp_path: Path, uri: str) -> None:
    fake = demo_client().on("GET", "/version", {"version": "7.4.17"})
    async with Client(build_server(_settings(tmp_path), client=fake)) as c:
        with pytest.raises(MCPError, match=r"Proxmox VE 7\.4\.17 is too old"):
            await c.read_resource(uri)
    assert fake.requested() == ["GET /version"]  # nothing else was read from an unsupported release
