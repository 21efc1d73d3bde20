"""``completion/complete``: the names the cluster knows, for prompt arguments and resource-template parameters.

An argument is completed by what its name means (``node``, ``vmid``, ``storage``, ``snapshot``,
``job`` for a backup job, ``code`` for a finding code, ``cluster`` for the configured clusters when there
are several; the other names then come from the cluster already chosen), from the short-lived inventory cache, filtered
by the typed prefix and capped at :data:`MAX_VALUES`. A reference or argument we do not offer gets
an empty answer, not an error: completion is a typing aid, and clients ask for it speculatively.
A read that fails also answers empty (and is logged); the call that uses the value will say why.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import MCPServer
from mcp.types import CompleteRequestParams, CompleteResult, Completion, PromptReference

from pve_steward.analysis.catalog import load_checks
from pve_steward.analysis.codes import CODES
from pve_steward.errors import PveError
from pve_steward.tools.context import AppContext

log = logging.getLogger(__name__)
MAX_VALUES = 100  # the protocol's cap per answer

Source = Callable[[AppContext, dict[str, str]], Awaitable[list[str]]]


async def _nodes(app: AppContext, _: dict[str, str]) -> list[str]:
    return await app.inventory.nodes(app.client)


async def _vmids(app: AppContext, _: dict[str, str]) -> list[str]:
    return [str(v) for v in sorted(await app.inventory.guests(app.client))]


async def _storages(app: AppContext, _: dict[str, str]) -> list[str]:
    return await app.inventory.storages(app.client)


async def _backup_jobs(app: AppContext, _: dict[str, str]) -> list[str]:
    return await app.inventory.backup_jobs(app.client)


async def _snapshots(app: AppContext, known: dict[str, str]) -> list[str]:
    """Snapshots of the guest already chosen in the same prompt or URI (none before a vmid is given)."""
    vmid = known.get("vmid", "")
    return await app.inventory.snapshots(app.client, int(vmid)) if vmid.isdigit() else []


async def _codes(app: AppContext, _: dict[str, str]) -> list[str]:
    load_checks()  # every module that declares codes has registered them
    return sorted(CODES)


async def _clusters(app: AppContext, _: dict[str, str]) -> list[str]:
    return list(app.clusters.names) if app.clusters is not None else []


def chosen_cluster(app: AppContext, known: dict[str, str]) -> AppContext:
    """The cluster already chosen in the same prompt (several clusters), else the default one."""
    name = known.get("cluster")
    if app.clusters is None or name not in app.clusters.apps:
        return app
    return app.clusters.get(name)


SOURCES: dict[str, Source] = {
    "node": _nodes,
    "vmid": _vmids,
    "storage": _storages,
    "snapshot": _snapshots,
    "job": _backup_jobs,
    "code": _codes,
    "cluster": _clusters,
}


def complete_values(candidates: list[str], prefix: str) -> Completion:
    """Prefix-filtered (case-insensitive) and capped; ``total`` and ``has_more`` tell what was cut."""
    wanted = prefix.lower()
    matches = [c for c in candidates if c.lower().startswith(wanted)]
    return Completion(values=matches[:MAX_VALUES], total=len(matches), has_more=len(matches) > MAX_VALUES)


def register_completions(mcp: MCPServer[Any], offered: dict[tuple[str, str], frozenset[str]]) -> None:
    """Serve completion/complete; ``offered`` maps (ref type, prompt name or URI template) -> its arguments."""

    async def handler(ctx: Any, params: CompleteRequestParams) -> CompleteResult:
        ref = params.ref
        key = ("ref/prompt", ref.name) if isinstance(ref, PromptReference) else ("ref/resource", ref.uri)
        name = params.argument.name
        source = SOURCES.get(name)
        if source is None or name not in offered.get(key, frozenset()):
            return CompleteResult(completion=Completion(values=[], total=0, has_more=False))
        known = dict(params.context.arguments or {}) if params.context else {}
        try:
            candidates = await source(chosen_cluster(ctx.lifespan_context, known), known)
        except PveError as exc:
            log.info("completion of %s could not read the cluster: %s", name, exc.message)
            candidates = []
        return CompleteResult(completion=complete_values(candidates, params.argument.value))

    # Registered on the low-level server: the decorator form gets no request context (no cluster client).
    mcp._lowlevel_server.add_request_handler("completion/complete", CompleteRequestParams, handler)
