"""A tool added with its output derived once per process is the tool the SDK itself would add."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from mcp.server import MCPServer
from mcp.types import TextContent
from pydantic import BaseModel, Field

from pve_steward.surface import outputschema


class Node(BaseModel):
    name: str
    guests: list[int] = Field(default_factory=list)


class Report(BaseModel):
    nodes: list[Node]
    note: str | None = None


async def report(cluster: str) -> Report:
    return Report(nodes=[Node(name=cluster, guests=[100])])


async def names(limit: int = 5) -> list[str]:
    return ["pve1", "pve2"][:limit]


async def text() -> TextContent:
    return TextContent(type="text", text="plain")


async def described() -> Annotated[list[str], Field(description="names")]:
    return ["pve1"]


def _tools(adder: Any, fn: Any, name: str) -> Any:
    mcp = MCPServer("t")
    adder(mcp, fn, name)
    return mcp._tool_manager.get_tool(name)


def _sdk(mcp: MCPServer[Any], fn: Any, name: str) -> None:
    mcp.add_tool(fn, name=name)


def _ours(mcp: MCPServer[Any], fn: Any, name: str) -> None:
    outputschema.add_kept_tool(mcp, object(), lambda: fn, name=name)  # a key of its own: built here


@pytest.mark.parametrize("fn", [report, names, text, described], ids=lambda f: f.__name__)
def test_the_tool_is_the_one_the_sdk_adds(fn: Any) -> None:
    sdk, ours = _tools(_sdk, fn, fn.__name__), _tools(_ours, fn, fn.__name__)
    assert ours.parameters == sdk.parameters
    assert ours.output_schema == sdk.output_schema
    assert ours.fn_metadata.wrap_output == sdk.fn_metadata.wrap_output
    assert (ours.fn_metadata.output_model is None) == (sdk.fn_metadata.output_model is None)


@pytest.mark.anyio
@pytest.mark.parametrize(("fn", "args"), [(report, {"cluster": "c1"}), (names, {"limit": 1})])
async def test_a_call_answers_as_the_sdk_answers(fn: Any, args: dict[str, Any]) -> None:
    sdk = MCPServer("sdk")
    _sdk(sdk, fn, fn.__name__)
    ours = MCPServer("ours")
    _ours(ours, fn, fn.__name__)
    assert await ours.call_tool(fn.__name__, args) == await sdk.call_tool(fn.__name__, args)


def test_the_derivation_runs_once_per_name_and_annotation() -> None:
    outputschema._derived.cache_clear()
    for _ in range(3):
        _tools(_ours, report, "report")
    _tools(_ours, report, "report_again")  # another tool name: its own derivation (the SDK names models by it)
    info = outputschema._derived.cache_info()
    assert (info.misses, info.hits) == (2, 2)


def test_an_unhashable_annotation_is_derived_as_the_sdk_does() -> None:
    async def odd() -> Annotated[list[str], {"not": "hashable"}]:  # type: ignore[valid-type]
        return []

    assert outputschema.output_of("odd", odd) is None
    assert _tools(_ours, odd, "odd").output_schema == _tools(_sdk, odd, "odd").output_schema


def test_a_kept_tool_is_built_once_per_key_and_each_server_lists_it() -> None:
    made: list[str] = []

    def make(cluster: str) -> Any:
        made.append(cluster)

        async def tool(limit: int = 5) -> list[str]:
            return [cluster][:limit]

        return tool

    first, second, other = MCPServer("a"), MCPServer("b"), MCPServer("c")
    outputschema.add_kept_tool(first, ("c1",), lambda: make("c1"), name="kept", description="kept tool")
    outputschema.add_kept_tool(second, ("c1",), lambda: make("c1"), name="kept", description="kept tool")
    outputschema.add_kept_tool(other, ("c2",), lambda: make("c2"), name="kept", description="kept tool")
    assert made == ["c1", "c2"], "the same key is built once; another key is built anew"
    assert first._tool_manager.get_tool("kept") is second._tool_manager.get_tool("kept")
    assert other._tool_manager.get_tool("kept") is not first._tool_manager.get_tool("kept")
    outputschema.add_kept_tool(first, ("c1",), lambda: make("c1"), name="kept", description="other words")
    assert made == ["c1", "c2", "c1"], "the words it is added with are part of the key"
