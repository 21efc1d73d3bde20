"""MCP resources: read-only views a client can attach as context, read exactly as the tools read them.

Each cluster view runs the registered read operation's own guarded handler (same client, same
redaction, same ``untrusted`` marking of cluster-written text, same audit record with
``via: resource``), so a resource can never show more than the tool would. A view is offered only
when its operation is registered (``--toolsets`` applies to resources too). The finding-code
catalogue needs no cluster.

Resource functions get no per-request context from the SDK for static URIs, so the server binds
the request's :class:`AppContext` while a read runs (:func:`bound_app`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import BaseModel

from pve_steward.analysis.catalog import load_checks
from pve_steward.analysis.codes import CODES
from pve_steward.errors import PveError
from pve_steward.nodecheck import unknown_guest
from pve_steward.pve import ids
from pve_steward.registry import Operation, Registry
from pve_steward.tools.context import AppContext, ToolContext

SCHEME = "pve-steward://"
JSON = "application/json"
_APP: ContextVar[AppContext | None] = ContextVar("pve_steward_resource_app", default=None)


@contextmanager
def bound_app(app: AppContext) -> Iterator[None]:
    """Make the request's app state visible to resource functions while one read runs."""
    token = _APP.set(app)
    try:
        yield
    finally:
        _APP.reset(token)


def _app() -> AppContext:
    app = _APP.get()
    if app is None:
        raise ResourceError("this resource is read through the MCP server (no request context)")
    return app


def _dump(value: Any) -> str:
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return json.dumps(data, indent=2, ensure_ascii=False)


class Views:
    """The cluster views of one server: run a registered read operation for a resource read."""

    def __init__(self, registry: Registry, ops: list[Operation]) -> None:
        self.registry = registry
        self.selected = {op.name for op in ops}

    def offers(self, *ops: str) -> bool:
        return all(op in self.selected for op in ops)

    async def run(self, op: str, **kwargs: Any) -> Any:
        app = _app()
        await _version_checked(app)
        t = ToolContext(app=app, op=self.registry.operations[op])
        t.audit_fields["via"] = "resource"
        try:
            return await self.registry.handlers[op](t, **kwargs)
        except ToolError as exc:
            raise ResourceError(str(exc)) from None


async def _version_checked(app: AppContext) -> None:
    """The version check tools make (server.cluster_ready): an unsupported release is refused alike."""
    problem = await app.version_problem()
    if problem:
        raise ResourceError(problem)


async def known_node(app: AppContext, node: str) -> str:
    """The node name if the cluster has it; ResourceNotFoundError (JSON-RPC -32602) naming the nodes if not."""
    try:
        ids.check_node(node)
    except ids.InvalidIdentifier as exc:
        raise ResourceNotFoundError(str(exc)) from None
    try:
        nodes = await app.inventory.nodes(app.client)
    except PveError:
        return node  # the view's own read will report what is wrong
    if node not in nodes:
        raise ResourceNotFoundError(f"no node '{node}'; nodes are: {', '.join(nodes)}")
    return node


def _vmid(text: str) -> int:
    try:
        return ids.check_vmid(int(text))
    except (ValueError, ids.InvalidIdentifier):
        raise ResourceNotFoundError(
            f"invalid vmid {text!r}: guest ids are integers from {ids.VMID_MIN} to {ids.VMID_MAX}"
        ) from None


def register_resources(mcp: MCPServer[Any], registry: Registry, ops: list[Operation]) -> dict[str, frozenset[str]]:
    """Register the catalogue and the cluster views; return each template's parameters (for completion)."""
    views = Views(registry, ops)
    templates: dict[str, frozenset[str]] = {}

    @mcp.resource(
        f"{SCHEME}codes",
        name="finding-codes",
        title="Finding codes",
        description="Every finding code the diagnostics emit: area, default severity, title (a stable contract).",
        mime_type=JSON,
    )
    async def codes() -> str:
        load_checks()  # every module that declares codes has registered them
        return _dump(
            [{"code": c.code, "area": c.area, "severity": c.severity, "title": c.title} for c in CODES.values()]
        )

    @mcp.resource(
        f"{SCHEME}codes/{{code}}",
        name="finding-code",
        title="Finding code",
        description="One finding code's doc: what it means, the rule behind it and how to fix it.",
        mime_type="text/markdown",
    )
    async def code_doc(code: str) -> str:
        load_checks()
        info = CODES.get(code)
        if info is None:
            raise ResourceNotFoundError(f"no finding code '{code}'; {SCHEME}codes lists them")
        app = _APP.get()
        fix = app.naming.text(info.remediation) if app else info.remediation
        return (
            f"# {info.code}: {info.title}\n\nArea: {info.area}. Default severity: {info.severity}.\n\n"
            f"Rule: {info.rule}\n\nFix: {fix}\n"
        )

    templates[f"{SCHEME}codes/{{code}}"] = frozenset({"code"})

    if views.offers("cluster_overview"):

        @mcp.resource(
            f"{SCHEME}cluster",
            name="cluster-summary",
            title="Cluster summary",
            description="Inventory summary: quorum, nodes with load, guest counts, PVE version (cluster_overview).",
            mime_type=JSON,
        )
        async def cluster() -> str:
            return _dump(await views.run("cluster_overview"))

    if views.offers("node_status"):

        @mcp.resource(
            f"{SCHEME}nodes/{{node}}",
            name="node",
            title="Node",
            description="One node: status (memory, load, kernel, version) and the guests on it.",
            mime_type=JSON,
        )
        async def node_view(node: str) -> str:
            await _version_checked(_app())
            name = await known_node(_app(), node)
            view: dict[str, Any] = {"status": (await views.run("node_status", node=name)).model_dump(mode="json")}
            if views.offers("list_guests"):
                guests = await views.run("list_guests", node=name, limit=500)
                view["guests"] = guests.model_dump(mode="json")
            return _dump(view)

        templates[f"{SCHEME}nodes/{{node}}"] = frozenset({"node"})

    if views.offers("get_guest"):

        @mcp.resource(
            f"{SCHEME}guests/{{vmid}}",
            name="guest",
            title="Guest",
            description="One VM or container: node, status, parsed config (secrets redacted; notes marked untrusted).",
            mime_type=JSON,
        )
        async def guest_view(vmid: str) -> str:
            number = _vmid(vmid)
            await _version_checked(_app())
            problem = await unknown_guest(_app(), number)
            if problem:
                raise ResourceNotFoundError(problem)
            return _dump(await views.run("get_guest", vmid=number))

        templates[f"{SCHEME}guests/{{vmid}}"] = frozenset({"vmid"})

    if views.offers("get_task"):

        @mcp.resource(
            f"{SCHEME}tasks/{{upid}}",
            name="task",
            title="Task",
            description="One PVE task by UPID: state, exit status and the end of its log.",
            mime_type=JSON,
        )
        async def task_view(upid: str) -> str:
            try:
                ids.check_upid(upid)
            except ids.InvalidIdentifier as exc:
                raise ResourceNotFoundError(str(exc)) from None
            return _dump(await views.run("get_task", upid=upid))

    return templates
