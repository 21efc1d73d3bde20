"""The configured clusters: which answer, and which PVE release each runs (several clusters only)."""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import Field

from pve_steward.errors import PveError, connection_problem
from pve_steward.models import Model
from pve_steward.pveio.client import api_path
from pve_steward.pveio.clusters import lower
from pve_steward.pveio.compat import UnsupportedVersion, check_version
from pve_steward.security import authority
from pve_steward.security.guard import guarded
from pve_steward.tools.context import AppContext, ToolContext

CONCURRENCY = 4  # clusters asked at once; a slow one holds one slot, not the answer for the others


class ClusterStatus(Model):
    name: str = Field(description="the value of the 'cluster' argument")
    url: str | None
    default: bool = Field(description="the cluster resources and prompts read")
    max_tier: str = Field(description="the highest write tier this server allows on this cluster")
    reachable: bool = Field(description="False: /version could not be read with this server's token (see problem)")
    pve_version: str | None = None
    supported: bool | None = Field(None, description="whether pve-steward supports this release; None if unknown")
    problem: str | None = Field(None, description="why the cluster cannot be used, if it cannot")


class ClusterList(Model):
    clusters: list[ClusterStatus]
    unreachable: list[str] = Field(default_factory=list, description="names of the clusters that did not answer")


async def _status(app: AppContext, default: bool) -> ClusterStatus:
    settings = app.settings
    tier = lower(settings.tier, app.max_tier or settings.tier)
    base: dict[str, Any] = {"name": app.cluster, "url": settings.url, "default": default, "max_tier": tier.value}
    try:
        answer: dict[str, Any] = await app.client.get(api_path("version"))
    except PveError as exc:
        return ClusterStatus(**base, reachable=False, problem=connection_problem(settings.url, exc))
    version = str(answer.get("version", "?"))
    try:
        check_version(version)
    except UnsupportedVersion as exc:
        return ClusterStatus(**base, reachable=True, pve_version=version, supported=False, problem=str(exc))
    return ClusterStatus(**base, reachable=True, pve_version=version, supported=True)


@guarded(toolset="cluster")
async def list_clusters(t: ToolContext) -> ClusterList:
    """Ask every configured cluster for its version, a few at a time; a failure is reported, never hidden."""
    clusters = t.app.clusters
    apps = list(clusters.apps.values()) if clusters is not None else [t.app]
    principal = authority.current()  # a caller limited to some clusters is told about those, and asks no other
    if principal is not None:
        allowed = set(principal.clusters([str(app.cluster) for app in apps]))
        apps = [app for app in apps if app.cluster in allowed]
    default = clusters.default if clusters is not None else t.app
    found: dict[int, ClusterStatus] = {}
    slots = anyio.Semaphore(CONCURRENCY)

    async def ask(i: int, app: AppContext) -> None:
        async with slots:
            found[i] = await _status(app, app is default)

    async with anyio.create_task_group() as tg:
        for i, app in enumerate(apps):
            tg.start_soon(ask, i, app)
    rows = [found[i] for i in range(len(apps))]
    return ClusterList(clusters=rows, unreachable=[r.name for r in rows if not r.reachable])
