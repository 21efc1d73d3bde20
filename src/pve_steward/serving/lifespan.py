"""The server's state while it serves: one application context per configured cluster.

Made when the server starts serving (the SDK's lifespan), not when it is built: the clients, read
caches, version gates and PBS links belong to a running server, and nothing touches a cluster before
a tool call needs it (issue 17).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pve_steward.config import Settings
from pve_steward.pveio.admission import Admission
from pve_steward.pveio.client import ProxmoxClient, ProxmoxerClient, api_path
from pve_steward.pveio.clusters import ClusterTarget
from pve_steward.pveio.compat import VersionGate
from pve_steward.pveio.pbslink import pbs_link
from pve_steward.pveio.readcache import ReadCache
from pve_steward.security.audit import AuditLog
from pve_steward.security.tokens import TokenSigner
from pve_steward.serving.readiness import Readiness
from pve_steward.surface.naming import Naming
from pve_steward.tools.context import AppContext, Clusters


@dataclass
class Lifespan:
    """The SDK's lifespan: ``client`` (or ``clients`` by cluster name) may be injected, else proxmoxer is used."""

    settings: Settings
    targets: list[ClusterTarget]
    audit: AuditLog
    signer: TokenSigner
    readiness: Readiness
    clock: Callable[[], float]
    check_version: bool
    client: ProxmoxClient | None = None
    clients: Mapping[str, ProxmoxClient] | None = None
    naming: Naming = field(default_factory=Naming)
    live: list[AppContext] = field(default_factory=list)  # the contexts of the servers running now

    def name_with(self, naming: Naming) -> None:
        """How texts name operations, once the tools are built (they may be built after the start)."""
        self.naming = naming
        for app in self.live:
            app.naming = naming

    def context(self, target: ClusterTarget | None, api: ProxmoxClient, admission: Admission) -> AppContext:
        own = self.settings if target is None else target.settings
        # No cluster I/O before serving: the version is checked by the first call that needs it.
        gate = VersionGate(
            own.url,
            lambda: api.get(api_path("version")),
            disabled=own.disable_version_check or not self.check_version,
        )
        return AppContext(
            settings=own,
            client=api,
            reads=ReadCache(api, ttl=own.read_cache_ttl),
            admission=admission,
            audit=self.audit,
            signer=self.signer,
            clock=self.clock,
            naming=self.naming,
            gate=gate,
            cluster=None if target is None else target.name,
            max_tier=None if target is None else target.tier,
            pbs=pbs_link(own),  # each cluster's own PBS connection ([clusters.NAME.pbs] or the pbs_* settings)
        )

    def _client_for(self, target: ClusterTarget | None, owned: list[ProxmoxerClient]) -> ProxmoxClient:
        several = len(self.targets) > 1
        given = self.client if target is None or not several else None
        given = (self.clients or {}).get(target.name, given) if target is not None else given
        if given is not None:
            return given
        owned.append(ProxmoxerClient(self.settings if target is None else target.client_settings))
        return owned[-1]

    def _rebuildable(self, apps: list[AppContext]) -> bool:
        """The diagnostics process can stand in for these contexts: it builds the same from the settings
        (proxmoxer clients, the real clock); a test's injected client or clock stays in this process."""
        return self.clock is time.time and all(type(app.client) is ProxmoxerClient for app in apps)

    @asynccontextmanager
    async def __call__(self, server: Any) -> AsyncIterator[AppContext]:
        owned: list[ProxmoxerClient] = []
        # One budget of heavy calls for the process; runs are shared per cluster (admission.heavy's key).
        admission = Admission(limit=self.settings.heavy_calls, wait=self.settings.busy_wait)
        apps: list[AppContext] = []
        try:
            chosen: list[ClusterTarget | None] = [*self.targets] if self.targets else [None]
            apps = [self.context(target, self._client_for(target, owned), admission) for target in chosen]
            if self.settings.offload_heavy and self._rebuildable(apps):
                from pve_steward.serving.worker.link import WorkerLink

                worker = WorkerLink(self.settings, self.targets)
                worker.warm()  # in the background: serving does not wait for it
                for app in apps:
                    app.worker = worker
            self.live += apps
            for app in apps:  # GET /ready probes each cluster through its own client
                self.readiness.add_cluster(app.cluster or "default", partial(app.client.get, api_path("version")))
            yield Clusters({str(app.cluster): app for app in apps}).default if len(self.targets) > 1 else apps[0]
        finally:
            if apps and apps[0].worker is not None:
                await apps[0].worker.close()
            for app in apps:
                self.live.remove(app)
                self.readiness.remove_cluster(app.cluster or "default")
                if app.pbs is not None:
                    app.pbs.close()
            for own in owned:
                own.close()
