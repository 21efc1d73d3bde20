"""The HA manager's view of one service, read for the previews of writes that go through it."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.harequest import error_state_refusal
from pve_steward.errors import PveError
from pve_steward.pveio.client import api_path
from pve_steward.tools.context import ToolContext
from pve_steward.tools.twophase import Check


async def crm_state(t: ToolContext, sid: str) -> str | PveError:
    """The HA manager's state of the service (its status row's crm_state; '' when it has none)."""
    try:
        rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "ha", "status", "current"))
    except PveError as exc:
        return exc
    row = next((r for r in rows if r.get("type") == "service" and r.get("sid") == sid), {})
    return str(row.get("crm_state") or "")


async def ha_accepts(t: ToolContext, sid: str, wanted: str | None) -> Check:
    """The preview check that the HA manager takes the request (analysis/harequest.py)."""
    crm = await crm_state(t, sid)
    if isinstance(crm, PveError):
        return Check(check="HA accepts the request", ok=False, detail=f"not provable: {crm.message}")
    refused = error_state_refusal(sid, crm, wanted)
    if refused:
        return Check(check="HA accepts the request", ok=False, detail=refused)
    return Check(check="HA accepts the request", ok=True, detail=f"HA manager state {crm or 'none'}")
