"""``completion/complete``: the names the cluster knows, for prompt arguments and resource-template parameters.

An argument is completed by what its name means (``node``, ``vmid``, ``storage``, ``snapshot``,
``job`` for a backup job, ``code`` for a finding code, ``cluster`` for the configured clusters when there
are several; the other names then come from the cluster already chosen), from the short-lived inventory cache, filtered
by the typed prefix and capped at :data:`MAX_VALUES`. A reference or argument we do not offer gets
an empty answer, not an error: completion is a typing aid, and clients ask for it speculatively.
A read that fails also answers empty (and is logged); the call that uses the value will say why.

Completion shows the cluster's names, so it asks the caller's grants first (``authority.admit``, as the
operation that lists those names: ``list_guests`` for a vmid...), on the cluster it would read: a refusal
is a JSON-RPC error naming why, audited, and nothing is read. A ``vmid`` given as context is read by the
one integer rule (``ids.parse_vmid``); a malformed one is an invalid-params error, never a crash.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.types import INVALID_PARAMS, CompleteRequestParams, CompleteResult, Completion, PromptReference

from pve_steward.errors import PveError
from pve_steward.pve.ids import InvalidIdentifier, parse_vmid
from pve_steward.security import authority
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
    vmid = known.get("vmid")
    return await app.inventory.snapshots(app.client, parse_vmid(vmid)) if vmid else []


async def _codes(app: AppContext, _: dict[str, str]) -> list[str]:
    # imported on the first completion of a code: a start from the kept tool list never needs the catalog
    from pve_steward.analysis.catalog import load_checks
    from pve_steward.analysis.codes import CODES

    load_checks()  # every module that declares codes has registered them
    return sorted(CODES)


async def _clusters(app: AppContext, _: dict[str, str]) -> list[str]:
    names = list(app.clusters.names) if app.clusters is not None else []
    principal = authority.current()
    return names if principal is None else principal.clusters(names)


def chosen_cluster(app: AppContext, known: dict[str, str]) -> AppContext:
    """The cluster already chosen in the same prompt (several clusters), else the default one."""
    name = known.get("cluster")
    if app.clusters is None or name not in app.clusters.apps:
        return app
    return app.clusters.get(name)


# The operation whose answer shows the names a source offers (None: no cluster is read).
READS: dict[str, str | None] = {
    "node": "list_nodes",
    "vmid": "list_guests",
    "storage": "list_storage",
    "snapshot": "list_snapshots",
    "job": "list_backup_jobs",
    "code": None,
    "cluster": None,
}

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
        app = chosen_cluster(ctx.lifespan_context, known)
        op = READS[name]
        refused = await authority.admit(app, "completion", op, {"argument": name}) if op is not None else None
        if refused:
            raise MCPError(INVALID_PARAMS, f"completion of '{name}': {refused}; nothing was read from the cluster")
        try:
            candidates = await source(app, known)
        except InvalidIdentifier as exc:
            raise MCPError(INVALID_PARAMS, f"completion of '{name}': {exc}") from None
        except PveError as exc:
            log.info("completion of %s could not read the cluster: %s", name, exc.message)
            candidates = []
        return CompleteResult(completion=complete_values(candidates, params.argument.value))

    # Registered on the low-level server: the decorator form gets no request context (no cluster client).
    mcp._lowlevel_server.add_request_handler("completion/complete", CompleteRequestParams, handler)
