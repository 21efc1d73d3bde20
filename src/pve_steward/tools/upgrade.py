"""Upgrade readiness (PVE 8 to 9): the API-observable pve8to9 checks, and the ones that need a shell.

Shared by the MCP operation ``check_upgrade_readiness`` and ``pve-steward check --upgrade 9``; the
``upgrade`` area is never part of the health check (design record 261203-18).
"""

from __future__ import annotations

from typing import Any, Literal

import anyio.to_thread
from pydantic import Field

from pve_steward.analysis.findings import Report
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.upgradeinfo import (
    FROM_MAJOR,
    SHELL_ADVICE,
    SHELL_CHECKS,
    TARGET_MAJOR,
    node_major,
    nodes_to_upgrade,
)
from pve_steward.config import Settings
from pve_steward.models import Model, Untrusted
from pve_steward.pveio.admission import heavy
from pve_steward.pveio.client import ProxmoxClient
from pve_steward.pveio.urgency import URGENCY
from pve_steward.security.guard import guarded
from pve_steward.tools.collect import collect
from pve_steward.tools.context import ToolContext
from pve_steward.tools.diagnostics import PAGING, Limit, Offset, later_page, paged, suppressions, thresholds

AREA = "upgrade"


class ShellCheck(Model):
    name: str = Field(description="the pve8to9 check, as docs/checks.md names it (anchor pve8to9:<name>)")
    what: str


class UpgradeReadiness(Model):
    """The report of the API-observable checks, which nodes they applied to, and what they cannot see."""

    target: int = Field(description="the PVE major release the upgrade goes to")
    report: Report
    nodes_to_upgrade: list[Untrusted] = Field(
        description=f"online nodes still on PVE {FROM_MAJOR}: the checks ran for them"
    )
    nodes_upgraded: list[Untrusted] = Field(description=f"online nodes already on PVE {TARGET_MAJOR} or newer")
    shell_checks: list[ShellCheck] = Field(description="pve8to9 checks the API cannot observe: run pve8to9 for them")
    shell_advice: str = SHELL_ADVICE
    summary: Untrusted  # names the nodes


def shell_checks() -> list[ShellCheck]:
    return [ShellCheck(name=name, what=what) for name, what in SHELL_CHECKS]


async def upgrade_readiness(
    client: ProxmoxClient, settings: Settings, now: float, limit: int | None
) -> UpgradeReadiness:
    """Collect what the upgrade checks read, analyse it, and say which nodes it applied to."""
    t = thresholds(settings)
    data = await collect(client, now, [AREA])
    report = await anyio.to_thread.run_sync(
        lambda: diagnose(data, t, [AREA], limit, AREA, suppress=suppressions(settings), between=URGENCY.give_way)
    )
    todo = nodes_to_upgrade(data)
    done = [n for n in data.online_nodes if n not in todo and (node_major(data, n) or 0) > FROM_MAJOR]
    if todo:
        summary = (
            f"PVE {FROM_MAJOR} nodes checked for the upgrade to {TARGET_MAJOR}: {', '.join(todo)}; {report.summary}"
        )
    elif done:
        summary = f"the cluster already runs PVE {TARGET_MAJOR}: no node left to upgrade ({report.summary})"
    else:
        summary = f"no online node could be checked; {report.summary}"
    return UpgradeReadiness(
        target=TARGET_MAJOR,
        report=report,
        nodes_to_upgrade=todo,
        nodes_upgraded=done,
        shell_checks=shell_checks(),
        summary=summary,
    )


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
