"""How the client calls an operation in this server's registration mode, and why one is missing.

Texts for the model (a write's ``next_step``, a finding's remediation) name operations. In
granular mode the client calls ``get_task``; in meta mode it calls ``tasks`` with
``action=get_task``. An operation the configuration did not register (a higher tier, read-only,
a disabled toolset) is named with the reason, so the model does not try a call that cannot work.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the registry is built with the tools; a start from the kept tool list imports none of it
    from pve_steward.surface.registry import Operation, Registry


@functools.lru_cache(maxsize=4)
def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """An operation's name as a word; compiled on first use (about 40 ms at start, issue 17), once."""
    return re.compile(r"(?<![\w`=])(" + "|".join(map(re.escape, names)) + r")(?![\w`])")


@dataclass(frozen=True)
class Naming:
    """Operation name -> how to call it; the default (no registry) leaves names as they are."""

    granular: bool = True
    tool_of: dict[str, str] = field(default_factory=dict)  # registered op -> MCP tool name
    missing: dict[str, str] = field(default_factory=dict)  # known, unregistered op -> why
    _names: tuple[str, ...] = ()  # every operation's name, longest first (see _pattern)

    @classmethod
    def build(
        cls,
        registry: Registry,
        ops: list[Operation],
        *,
        granular: bool,
        tier: str,
        read_only: bool,
        toolsets: list[str] | None = None,
        disabled: list[str] | None = None,
        narrowed: Callable[[str], str | None] | None = None,
    ) -> Naming:
        chosen = {op.name for op in ops}
        tool_of = {op.name: op.name if granular else meta_tool_name(registry, op) for op in ops}
        missing: dict[str, str] = {}
        for op in registry.operations.values():
            if op.name in chosen:
                continue
            out = narrowed(op.name) if narrowed is not None else None
            if out:
                why = out
            elif (toolsets is not None and op.toolset not in toolsets) or op.toolset in (disabled or []):
                why = f"its toolset {op.toolset} is not enabled on this server, see --toolsets"
            elif op.is_write and read_only:
                why = "it is a write and this server runs read-only, see --read-only"
            else:
                where = "" if granular else f", in tool {meta_tool_name(registry, op)},"
                why = f"it needs tier {op.tier.value}{where} and this server runs at tier {tier}, see --tier"
            missing[op.name] = why
        if not granular:  # a whole meta-tool may be missing too (e.g. administer below tier admin)
            present = set(tool_of.values())
            for t, spec in registry.write_tools.items():
                if spec.name not in present:
                    missing[spec.name] = (
                        "this server runs read-only, so it has no write tools, see --read-only"
                        if read_only
                        else f"it holds the {t.value}-tier writes and this server runs at tier {tier}, see --tier"
                    )
            for toolset in registry.toolsets:
                if toolset not in present and toolset not in missing:
                    missing[toolset] = f"the toolset {toolset} is not enabled on this server, see --toolsets"
        names = tuple(sorted(registry.operations, key=len, reverse=True))
        return cls(granular=granular, tool_of=tool_of, missing=missing, _names=names)

    def call(self, op: str) -> str:
        """``get_task`` (granular) or ``tasks with action=get_task`` (meta), or the name and why it is missing."""
        if op in self.missing:
            return f"{op} (not available here: {self.missing[op]})"
        tool = self.tool_of.get(op)
        if tool is None or tool == op:
            return op
        return f"{tool} with action={op}"

    def text(self, text: str) -> str:
        """Rewrite every operation name in a sentence to how the client calls it."""
        if not self._names or not text:
            return text
        return _pattern(self._names).sub(lambda m: self.call(m.group(1)), text)


def meta_tool_name(registry: Registry, op: Operation) -> str:
    """The meta-tool an operation belongs to: its toolset for reads, its tier's write tool for writes."""
    return registry.write_tools[op.tier].name if op.is_write else op.toolset
