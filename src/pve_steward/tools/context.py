"""What a tool handler receives: the process-wide app state and the per-call context."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pve_steward.config import Settings
from pve_steward.pveio.admission import Admission
from pve_steward.pveio.client import ProxmoxClient
from pve_steward.pveio.inventory import InventoryCache
from pve_steward.pveio.readcache import ReadCache
from pve_steward.security.audit import AuditLog
from pve_steward.security.handlers import OperationView
from pve_steward.security.tiers import Tier
from pve_steward.surface.naming import Naming

if TYPE_CHECKING:
    from pve_steward.pveio.pbslink import PbsLink
    from pve_steward.security.tokens import TokenSigner
    from pve_steward.serving.worker.link import WorkerLink

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class AppContext:
    """Built once by the composition root (server.py) and shared by every call."""

    settings: Settings
    client: ProxmoxClient
    audit: AuditLog
    signer: TokenSigner
    clock: Callable[[], float] = time.time
    pve_version: str | None = None
    reads: ReadCache | None = None  # the shared read cache; writes use its fresh view
    admission: Admission = field(default_factory=Admission)  # the budget of heavy operations
    inventory: InventoryCache = field(default_factory=InventoryCache)  # names for completions and the node check
    naming: Naming = field(default_factory=Naming)  # how texts name operations in this registration mode
    gate: Any = None  # compat.VersionGate: the version check, run by the first tool call (server.py)
    pbs: PbsLink | None = None  # the optional Proxmox Backup Server connection (design record 261203-20)
    cluster: str | None = None  # the [clusters.NAME] this context serves (None: the single-cluster settings)
    max_tier: Tier | None = None  # that cluster's tier ceiling
    clusters: Clusters | None = None  # every configured cluster, when there are several
    worker: WorkerLink | None = None  # runs the heavy operations in the diagnostics process (worker/), if on

    async def version_problem(self) -> str | None:
        """The version check on first use (kept once made): why this cluster is refused, or None.

        Tools raise it as a tool error (server.cluster_ready), cluster views as a resource error.
        """
        gate = self.gate
        if gate is None:
            return None
        problem: str | None = await gate.problem()
        if problem is None:
            self.pve_version = gate.version
        return problem


class UnknownCluster(ValueError):
    """A cluster argument that names no configured cluster."""


class Clusters:
    """The per-cluster contexts by name; the first is the default (resources, prompts, completions)."""

    def __init__(self, apps: dict[str, AppContext]) -> None:
        if not apps:
            raise ValueError("Clusters needs at least one cluster")
        self.apps = apps
        self.names = list(apps)
        self.default = apps[self.names[0]]
        for app in apps.values():
            app.clusters = self

    def get(self, name: str) -> AppContext:
        app = self.apps.get(name)
        if app is None:
            raise UnknownCluster(f"no cluster '{name}'; 'cluster' must be one of: {', '.join(self.names)}")
        return app


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


@dataclass
class ToolContext:
    """One tool call: the operation being run, progress reporting, who is calling, audit extras."""

    app: AppContext
    op: OperationView
    progress: Progress = _no_progress
    client_identity: str | None = None
    can_elicit: bool = False
    mcp_context: Any = None
    human: Any = None  # the elicitation outcome for writes (see security/confirm.py); None for reads
    audit_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def client(self) -> ProxmoxClient:
        """Reads share answers through the cache; a write (preview and confirmation) always reads fresh."""
        if self.app.reads is None:
            return self.app.client
        return self.app.reads.fresh if self.op.is_write else self.app.reads

    @property
    def settings(self) -> Settings:
        return self.app.settings

    def now(self) -> float:
        return self.app.clock()

    def refer(self, op: str) -> str:
        """How the client calls ``op`` in this server's registration mode (for next_step texts)."""
        return self.app.naming.call(op)
