"""Adding tools with what the SDK derives from their signatures derived once per process, not once per server.

The SDK derives a tool's schemas every time a tool is added: its output schema from the return
annotation (pydantic walks the whole report model; an evacuation plan's takes about 30 ms) and its
arguments model from the parameters. A granular server spent about 0.3 s of every build on it, for
the same types. A process that builds several servers (the test suite builds hundreds; a host that
serves several configurations) paid it each time.

- :func:`build_tool`: the output is derived once per (tool name, return annotation), by the SDK's own
  code on a probe function with that name and annotation; each later tool with the same pair gets
  the derived parts (``FuncMetadata`` reads them live: its docstring says reassigning them takes
  effect). The arguments model is the SDK's, per tool.
- :func:`add_kept_tool`: a tool whose function is wholly decided by a key of values (the operations'
  words, their handlers, the clusters configured) is built once per key and shared by the servers that
  add it. The key must name everything the function and its schemas depend on, and the function
  must close over nothing of one server (its context comes with each call). Granular tools and
  meta-tools are both added this way.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

from mcp.server import MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata

log = logging.getLogger(__name__)
_KEPT: dict[Hashable, Tool] = {}  # bounded by the configurations a process builds (operations x clusters)


class Output(NamedTuple):
    """What the SDK derives from a return annotation: the published schema, the model results are
    validated against, and whether a result is wrapped in ``{"result": ...}``."""

    schema: dict[str, Any] | None
    model: Any
    wrap: bool


@functools.cache
def _derived(name: str, returns: Any) -> Output:
    def probe() -> None:
        """A function with only the tool's name and return annotation: the SDK derives the rest."""

    probe.__name__ = probe.__qualname__ = name
    probe.__signature__ = inspect.Signature([], return_annotation=returns)  # type: ignore[attr-defined]
    meta = func_metadata(probe)
    return Output(meta.output_schema, meta.output_model, meta.wrap_output)


def output_of(name: str, fn: Callable[..., Any]) -> Output | None:
    """The derived output of ``fn`` as tool ``name``, or None when its annotation cannot be a cache key."""
    returns = inspect.signature(fn, eval_str=True).return_annotation
    try:
        hash(returns)
    except TypeError:  # e.g. Annotated metadata that is not hashable: the SDK derives it as usual
        return None
    return _derived(name, returns)


def build_tool(fn: Callable[..., Any], *, name: str, **kwargs: Any) -> Tool:
    """``Tool.from_function(fn, name=name, **kwargs)``, as the SDK's ``add_tool`` builds it, with the output
    derived once per process."""
    output = output_of(name, fn)
    if output is not None:
        kwargs["structured_output"] = False  # the output is set below, from the derivation kept
    tool = Tool.from_function(fn, name=name, **kwargs)
    if output is not None and output.schema is not None:
        meta = tool.fn_metadata
        meta.output_schema, meta.output_model, meta.wrap_output = output.schema, output.model, output.wrap
    return tool


def _add(mcp: MCPServer[Any], tool: Tool) -> None:
    """What the SDK's ``add_tool`` does with the tool it built: the first of a name stays."""
    manager = mcp._tool_manager  # the SDK keeps its tools only there; MCPServer adds only from a function
    if manager.get_tool(tool.name) is not None:
        log.warning("Tool already exists: %s", tool.name)
        return
    manager._tools[tool.name] = tool


def add_kept_tool(
    mcp: MCPServer[Any], key: Hashable, make: Callable[[], Callable[..., Any]], *, name: str, **kwargs: Any
) -> None:
    """Add the tool ``make()`` gives, built once per ``key`` (and words) in this process (see the module's words)."""
    full = (name, key, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
    tool = _KEPT.get(full)
    if tool is None:
        tool = _KEPT[full] = build_tool(make(), name=name, **kwargs)
    _add(mcp, tool)
