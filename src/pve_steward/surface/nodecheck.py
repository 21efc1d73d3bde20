"""One shared node resolver: every tool parameter typed as a node name is checked against the cluster.

PVE answers a node it does not know with a hostname-lookup error (or, for list filters, with
nothing at all). Before a call runs, each node-typed argument (``node``, ``target``, ``targets``...)
is looked up in the short-lived inventory of ``GET /nodes``, which lists every member to any user
(PVE's Nodes.pm index, permission ``user: all``). A node it lacks is refused with the nodes it has.
If that list cannot be read, the call goes ahead and reports its own error.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Annotated, Any

from pydantic.functional_validators import AfterValidator

from pve_steward.errors import PveError
from pve_steward.pve.ids import NODE_RE, check_node
from pve_steward.surface.registry import handler_hints, handler_parameters
from pve_steward.tools.context import AppContext


def _is_node_type(tp: Any) -> bool:
    """Does this annotation (possibly Optional, a list, or Annotated) hold pve_steward's NodeName?"""
    if typing.get_origin(tp) is Annotated:
        if any(isinstance(m, AfterValidator) and m.func is check_node for m in tp.__metadata__):
            return True
        return _is_node_type(typing.get_args(tp)[0])
    return any(_is_node_type(arg) for arg in typing.get_args(tp))


def node_parameters(handler: Callable[..., Any]) -> list[str]:
    """The handler's parameters that name nodes (a node or a list of nodes)."""
    hints = handler_hints(handler)
    return [name for name in handler_parameters(handler) if _is_node_type(hints[name])]


async def unknown_node(app: AppContext, given: list[tuple[str, Any]]) -> str | None:
    """A sentence for the first node the cluster does not have, or None (all known, or cannot tell)."""
    names = [(param, v) for param, value in given for v in (value if isinstance(value, list) else [value])]
    # Malformed names are left to the parameter's own validation (a clearer error, no request).
    names = [(param, v) for param, v in names if isinstance(v, str) and NODE_RE.fullmatch(v)]
    if not names:
        return None
    try:
        nodes = await app.inventory.nodes(app.client)
    except PveError:
        return None
    if not nodes:
        return None
    for param, value in names:
        if value not in nodes:
            where = "" if param == "node" else f" (parameter '{param}')"
            return f"no node '{value}'{where}; nodes are: {', '.join(nodes)}"
    return None


async def unknown_guest(app: AppContext, vmid: int) -> str | None:
    """A sentence when the cluster shows no such guest to this token, or None (visible, or cannot tell)."""
    try:
        guests = await app.inventory.guests(app.client)
    except PveError:
        return None
    if vmid in guests:
        return None
    return f"no guest {vmid} is visible in this cluster (it does not exist, or the token lacks VM.Audit on it)"
