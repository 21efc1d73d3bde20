"""Narrowing: what a server registers (action allow/deny globs) and what one HTTP request may do (headers).

Both only take away. ``--allow-actions``/``--deny-actions`` filter the operations after tiers and
toolsets, in granular and meta modes alike (a denied action is not registered at all). On a shared
HTTP server a client may narrow its own requests with headers:

- ``X-Pve-Steward-Read-Only: 1`` no writes on this request;
- ``X-Pve-Steward-Tier: read_only|operator`` at most this tier (a higher one than the server's is ignored);
- ``X-Pve-Steward-Toolsets: guests,tasks`` only operations of these toolsets;
- ``X-Pve-Steward-Deny-Actions: guest_*`` none of these operations.

A header never widens: the server's own settings are checked first (``guard.policy_refusal``) and the
headers only add refusals. ``tools/list`` follows the headers too (server.py ``_handle_list_tools``): a
tool is listed when at least one of its operations may run on that request. A header with a value that
cannot be read refuses the call (a client trying to narrow must not be widened by a typo).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from typing import Any

from pve_steward.config import Settings
from pve_steward.security.tiers import Tier

READ_ONLY_HEADER = "x-pve-steward-read-only"
TIER_HEADER = "x-pve-steward-tier"
TOOLSETS_HEADER = "x-pve-steward-toolsets"
DENY_HEADER = "x-pve-steward-deny-actions"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def narrowed_out(name: str, allow: list[str] | None, deny: list[str] | None) -> str | None:
    """Why the action lists leave ``name`` out (None: they keep it). Deny wins over allow."""
    denied = next((glob for glob in deny or [] if fnmatch.fnmatchcase(name, glob)), None)
    if denied is not None:
        return f"it is excluded by --deny-actions '{denied}'"
    if allow is not None and not any(fnmatch.fnmatchcase(name, glob) for glob in allow):
        return "it is not in --allow-actions"
    return None


def selection(settings: Settings) -> dict[str, Any]:
    """The registry filter of these settings (``Registry.select`` keyword arguments)."""
    return {
        "tier": settings.tier,
        "read_only": settings.read_only,
        "toolsets": settings.toolsets,
        "disabled": settings.disable_toolsets,
        "allow": settings.allow_actions,
        "deny": settings.deny_actions,
    }


def narrowing(settings: Settings) -> Callable[[str], str | None]:
    """Operation name -> why the action lists leave it out (for texts naming a missing operation)."""
    return lambda name: narrowed_out(name, settings.allow_actions, settings.deny_actions)


def request_headers(mcp_context: Any) -> Mapping[str, str] | None:
    """The HTTP request's headers of this call (None on stdio or outside a request)."""
    try:
        request = mcp_context.request_context.request
    except (AttributeError, LookupError, ValueError):
        return None
    headers = getattr(request, "headers", None)
    return headers if isinstance(headers, Mapping) else None


def header_refusal(
    headers: Mapping[str, str] | None, name: str, toolset: str, tier: Tier, is_write: bool
) -> str | None:
    """Why this request's narrowing headers refuse the operation (None: they allow it, or there are none)."""
    if not headers:
        return None
    read_only = headers.get(READ_ONLY_HEADER)
    if read_only is not None:
        flag = read_only.strip().lower()
        if flag not in _TRUE | _FALSE:
            return f"header X-Pve-Steward-Read-Only must be 1 or 0, not {read_only[:20]!r}"
        if flag in _TRUE and is_write:
            return f"{name} is a write and this request asked for read-only (X-Pve-Steward-Read-Only)"
    asked = headers.get(TIER_HEADER)
    if asked is not None:
        try:
            ceiling = Tier(asked.strip().lower())
        except ValueError:
            return f"header X-Pve-Steward-Tier must be one of read_only, operator, admin, not {asked[:20]!r}"
        if is_write and not ceiling.allows(tier):
            narrowed = f"this request narrowed the tier to {ceiling.value} (X-Pve-Steward-Tier)"
            return f"{name} needs tier {tier.value}; {narrowed}"
    sets = headers.get(TOOLSETS_HEADER)
    if sets is not None and toolset not in {s.strip() for s in sets.split(",")}:
        return f"{name} belongs to toolset {toolset}, which this request left out (X-Pve-Steward-Toolsets)"
    deny = headers.get(DENY_HEADER)
    if deny is not None:
        globs = [g.strip() for g in deny.split(",") if g.strip()]
        if any(fnmatch.fnmatchcase(name, g) for g in globs):
            return f"{name} is excluded by this request's X-Pve-Steward-Deny-Actions"
    return None
