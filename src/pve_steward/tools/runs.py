"""The runs behind the diagnostic tools, apart from the MCP surface: collect what the areas read, analyse it.

The tools (diagnostics.py, upgrade.py) wrap these with the guard and the heavy budget; ``pve-steward check``
calls them directly, so a check imports no MCP SDK: 0.8 s of CPU less on each run, which a monitoring
system pays every few minutes (issue 43).
"""

from __future__ import annotations

import anyio.to_thread
from pydantic import Field

from pve_steward.analysis.findings import Report
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.suppression import Suppression
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
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
from pve_steward.pveio.client import ProxmoxClient
from pve_steward.pveio.urgency import URGENCY
from pve_steward.tools.collect import collect
from pve_steward.tools.pbsread import PbsLink

UPGRADE_AREA = "upgrade"


def thresholds(settings: Settings) -> Thresholds:
    return thresholds_from(settings.thresholds)


def suppressions(settings: Settings) -> list[Suppression]:
    return settings.suppress


async def run_check(
    client: ProxmoxClient,
    settings: Settings,
    now: float,
    areas: list[str],
    limit: int | None,
    name: str = "health",
    pbs: PbsLink | None = None,
) -> Report:
    """Collect exactly what the areas need and analyse it (shared by the MCP tools and `check`)."""
    t = thresholds(settings)
    data = await collect(
        client,
        now,
        areas,
        agent_probe_limit=t.agent_probe_limit,
        pending_probe_limit=int(t.get("pending_probe_limit")),
        pbs=pbs,
    )
    # in a worker thread: the event loop keeps serving cheap calls while a large cluster is analysed
    return await anyio.to_thread.run_sync(
        diagnose, data, t, areas, limit, name, suppressions(settings), URGENCY.give_way
    )


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
    data = await collect(client, now, [UPGRADE_AREA])
    report = await anyio.to_thread.run_sync(
        lambda: diagnose(
            data, t, [UPGRADE_AREA], limit, UPGRADE_AREA, suppress=suppressions(settings), between=URGENCY.give_way
        )
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
