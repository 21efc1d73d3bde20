"""Upgrade readiness (PVE 8 to 9): the API-observable pve8to9 checks, and the ones that need a shell.

The MCP operation ``check_upgrade_readiness``; its run (runs.py) is shared with ``pve-steward check
--upgrade 9``. The ``upgrade`` area is never part of the health check (design record 261203-18).
"""

from __future__ import annotations

from typing import Any, Literal

from pve_steward.pveio.admission import heavy
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext
from pve_steward.tools.diagnostics import PAGING, Limit, Offset, later_page, paged
from pve_steward.tools.runs import UpgradeReadiness, upgrade_readiness


def paged_readiness(t: ToolContext, result: UpgradeReadiness, arguments: dict[str, Any]) -> UpgradeReadiness:
    """This caller's page of the findings; the node lists and shell checks come whole."""
    return result.model_copy(update={"report": paged(t, result.report, arguments)})


@guarded(toolset="diagnostics")
@heavy(presentation=PAGING, present=paged_readiness, continues=later_page)
async def check_upgrade_readiness(
    t: ToolContext,
    target: Literal[9] = 9,
    detail: bool = False,
    limit: Limit = 50,
    offset: Offset = 0,
) -> UpgradeReadiness:
    """pve8to9's API-observable checks over every PVE 8 node, graded as pve8to9 grades them."""
    del detail, limit, offset  # each caller's page is cut by `paged_readiness`
    await t.progress(0, 2, f"reading the cluster for the upgrade to PVE {target}")
    result = await upgrade_readiness(t.client, t.settings, t.now(), None)
    await t.progress(2, 2, result.summary)
    return result
