"""What a tool handler declares about itself, in code: the table of handlers and their write-ness.

Whether an operation writes, the lowest tier that may run it, its destructive/idempotent hints,
its toolset and its name (the handler binding) are properties of the handler function, declared
by ``@guarded(...)`` in ``security/guard.py``; no file can change them (design record 261203-3).
``tools.yaml`` only adds the words around them. This module imports neither the registry nor the
guard, so both can depend on it without an import circle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pve_steward.security.tiers import Tier

Handler = Callable[..., Awaitable[Any]]
HANDLERS: dict[str, Handler] = {}
SPEC_ATTRIBUTE = "__operation__"
# Operations that only exist on a server configured for several clusters: they are about the choice of
# cluster, answer for every cluster the caller may use, and take no cluster argument.
SEVERAL_CLUSTERS = frozenset({"list_clusters"})


@dataclass(frozen=True)
class HandlerSpec:
    """The facts about an operation that decide what it may do; fixed at import, never read from a file."""

    name: str
    toolset: str
    tier: Tier = Tier.READ_ONLY
    destructive: bool = False
    idempotent: bool = True
    open_world: bool = False

    @property
    def is_write(self) -> bool:
        return self.tier is not Tier.READ_ONLY

    def check(self) -> None:
        """A read is never destructive; a write is never read_only (the tier is what makes it a write)."""
        if not self.is_write and self.destructive:
            raise ValueError(f"{self.name}: a read-only operation cannot be destructive")


class OperationView(Protocol):
    """What a handler's context says about the operation being run (the registry's Operation fits)."""

    @property
    def name(self) -> str: ...

    @property
    def is_write(self) -> bool: ...

    @property
    def tier(self) -> Tier: ...


def spec_of(fn: Callable[..., Any]) -> HandlerSpec | None:
    spec = getattr(fn, SPEC_ATTRIBUTE, None)
    return spec if isinstance(spec, HandlerSpec) else None
