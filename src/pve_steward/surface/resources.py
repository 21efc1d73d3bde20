"""MCP resources: read-only views a client can attach as context, read exactly as the tools read them.

Each cluster view runs the registered read operation's own guarded handler (same client, same
redaction, same marking of cluster-written text (``untrusted_fields``), same audit record with
``via: resource``), so a resource can never show more than the tool would. A view is offered only
when its operation is registered (``--toolsets`` applies to resources too). The finding-code
catalogue needs no cluster.

Resource functions get no per-request context from the SDK for static URIs, so the server binds
the request's :class:`AppContext` while a read runs (:func:`bound_app`).

Before a view reads anything (the version check, the node or guest lookup), the caller's grants are
asked for each operation it runs on the cluster it names (``authority.admit``): a refusal is an error
naming why, audited, and nothing reaches that cluster.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import BaseModel

from pve_steward.analysis.catalog import load_checks
from pve_steward.analysis.codes import CODES
from pve_steward.errors import PveError
from pve_steward.pve import ids
from pve_steward.security import authority
from pve_steward.surface.nodecheck import unknown_guest
from pve_steward.surface.registry import Operation, Registry
from pve_steward.tools.context import AppContext, ToolContext, UnknownCluster

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

    def __init__(self, registry: Registry, ops: list[Operation], clusters: list[str]) -> None:
        self.registry = registry
        self.selected = {op.name for op in ops}
        self.clusters = clusters  # the configured clusters' names when there are several, else empty

    def offers(self, *ops: str) -> bool:
        return all(op in self.selected for op in ops)

    async def admit(self, app: AppContext, uri: str, *ops: str) -> None:
        """The caller may run every one of ``ops`` on ``app``'s cluster, else ResourceError naming why."""
        for op in ops:
            refused = await authority.admit(app, "resource", op, {"uri": uri})
            if refused:
                raise ResourceError(f"{refused}; nothing was read from the cluster")

    async def run(self, app: AppContext, op: str, **kwargs: Any) -> Any:
        await _version_checked(app)
        t = ToolContext(app=app, op=self.registry.operations[op])
        t.audit_fields["via"] = "resource"
        try:
            return await self.registry.handlers[op](t, **kwargs)
        except ToolError as exc:
            raise ResourceError(str(exc)) from None

    def dump(self, app: AppContext, view: Any) -> str:
        """The view as JSON; with several clusters it says which one it shows."""
        data = view.model_dump(mode="json") if isinstance(view, BaseModel) else view
        return _dump({"cluster": app.cluster, **data} if self.clusters and isinstance(data, dict) else data)


def _cluster_app(cluster: str | None) -> AppContext:
    """The app of the cluster a URI names (``?cluster=NAME``, several clusters), else the default one."""
    app = _app()
    if cluster is None or app.clusters is None:
        return app
    try:
        return app.clusters.get(cluster)
    except UnknownCluster as exc:
        raise ResourceNotFoundError(str(exc)) from None


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
        return ids.parse_vmid(text)
    except ids.InvalidIdentifier as exc:
        raise ResourceNotFoundError(str(exc)) from None


def register_resources(
    mcp: MCPServer[Any], registry: Registry, ops: list[Operation], clusters: list[str] | None = None
) -> dict[str, frozenset[str]]:
    """Register the catalogue and the cluster views; return each template's parameters (for completion).

    With several clusters (``clusters`` names them) a view reads any of them: the summary is listed
    once per cluster (``pve-steward://cluster?cluster=NAME``), and the templates take an optional
    ``{?cluster}``. Without it a view reads the default (first) cluster, and says which one it shows.
    """
    views = Views(registry, ops, clusters or [])
    templates = _register_catalogue(mcp)
    if views.offers("cluster_overview"):
        _register_summary(mcp, views)
    q = "{?cluster}" if views.clusters else ""
    extra = frozenset({"cluster"}) if views.clusters else frozenset()

    async def node_view(node: str, cluster: str | None = None) -> str:
        app = _cluster_app(cluster)
        await views.admit(
            app, f"nodes/{node}", "node_status", *(["list_guests"] if views.offers("list_guests") else [])
        )
        await _version_checked(app)
        name = await known_node(app, node)
        view: dict[str, Any] = {"status": (await views.run(app, "node_status", node=name)).model_dump(mode="json")}
        if views.offers("list_guests"):
            guests = await views.run(app, "list_guests", node=name, limit=500)
            view["guests"] = guests.model_dump(mode="json")
        return views.dump(app, view)

    async def guest_view(vmid: str, cluster: str | None = None) -> str:
        number = _vmid(vmid)
        app = _cluster_app(cluster)
        await views.admit(app, f"guests/{number}", "get_guest")
        await _version_checked(app)
        problem = await unknown_guest(app, number)
        if problem:
            raise ResourceNotFoundError(problem)
        return views.dump(app, await views.run(app, "get_guest", vmid=number))

    async def task_view(upid: str, cluster: str | None = None) -> str:
        try:
            ids.check_upid(upid)
        except ids.InvalidIdentifier as exc:
            raise ResourceNotFoundError(str(exc)) from None
        app = _cluster_app(cluster)
        await views.admit(app, "tasks", "get_task")
        return views.dump(app, await views.run(app, "get_task", upid=upid))

    for op, uri, fn, (name, title, description) in (
        ("node_status", f"{SCHEME}nodes/{{node}}{q}", node_view, _NODE),
        ("get_guest", f"{SCHEME}guests/{{vmid}}{q}", guest_view, _GUEST),
        ("get_task", f"{SCHEME}tasks/{{upid}}{q}", task_view, _TASK),
    ):
        if views.offers(op):
            view = _cluster_param(fn, bool(views.clusters))
            mcp.resource(uri, name=name, title=title, description=description, mime_type=JSON)(view)
            templates[uri] = frozenset(p for p in inspect.signature(fn).parameters if p != "cluster") | extra
    return templates


# (name, title, description) of the templated views
_NODE = ("node", "Node", "One node: status (memory, load, kernel, version) and the guests on it.")
_GUEST = (
    "guest",
    "Guest",
    "One VM or container: node, status, parsed config (secrets redacted; cluster text in untrusted_fields).",
)
_TASK = ("task", "Task", "One PVE task by UPID: state, exit status and the end of its log.")


def _cluster_param(fn: Callable[..., Awaitable[str]], several: bool) -> Callable[..., Awaitable[str]]:
    """The view as the SDK matches it to its URI: the ``cluster`` query parameter only with several clusters."""
    if several:
        return fn

    async def view(**params: Any) -> str:
        return await fn(**params)

    signature = inspect.signature(fn)
    view.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != "cluster"]
    )
    view.__annotations__ = {k: v for k, v in typing.get_type_hints(fn).items() if k != "cluster"}
    view.__name__, view.__doc__ = fn.__name__, fn.__doc__
    return view


def _register_summary(mcp: MCPServer[Any], views: Views) -> None:
    """The cluster summary: the default cluster's at ``pve-steward://cluster``, and each cluster's by name."""

    def summary(cluster: str | None) -> Callable[[], Awaitable[str]]:
        async def read() -> str:
            app = _cluster_app(cluster)
            await views.admit(app, "cluster", "cluster_overview")
            return views.dump(app, await views.run(app, "cluster_overview"))

        return read

    about = "Inventory summary: quorum, nodes with load, guest counts, PVE version (cluster_overview)"
    default = f" of the default cluster, {views.clusters[0]}" if views.clusters else ""
    mcp.resource(
        f"{SCHEME}cluster",
        name="cluster-summary",
        title="Cluster summary",
        description=about + default + ".",
        mime_type=JSON,
    )(summary(None))
    for name in views.clusters:
        mcp.resource(
            f"{SCHEME}cluster?cluster={name}",
            name=f"cluster-summary-{name}",
            title=f"Cluster summary: {name}",
            description=f"{about} of cluster {name}.",
            mime_type=JSON,
        )(summary(name))


def _register_catalogue(mcp: MCPServer[Any]) -> dict[str, frozenset[str]]:
    """The finding codes: they need no cluster."""

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

    return {f"{SCHEME}codes/{{code}}": frozenset({"code"})}
