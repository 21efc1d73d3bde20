"""Readiness (``GET /ready``): can this replica serve a tool call now?

Liveness (``/health``) only says the process answers. A load balancer or Kubernetes needs more
before sending traffic: the PVE cluster answers (``GET /version`` through the server's own client,
so TLS pinning and the token are what tool calls use), and, when writes are registered, the
used-token store answers (a write cannot be confirmed without it; design record 261203-2).

Probes run at most once per ``ttl`` seconds and concurrently with each other, so a probe storm
from many kubelets costs one PVE request per replica per ``ttl``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from pve_steward.errors import PveError
from pve_steward.security.usedtokens import StoreUnavailable, UsedTokenStore

Probe = Callable[[], Awaitable[None]]


@dataclass
class Readiness:
    """Named probes; the server's lifespan adds the PVE probe once its client exists."""

    ttl: float = 5.0
    clock: Callable[[], float] = time.monotonic
    probes: dict[str, Probe] = field(default_factory=dict)
    _last: tuple[float, dict[str, Any]] | None = None

    def add_store(self, store: UsedTokenStore) -> None:
        async def probe() -> None:
            await anyio.to_thread.run_sync(store.is_used, "readiness-probe")

        self.probes["token_store"] = probe

    def add_cluster(self, name: str, version: Callable[[], Awaitable[Any]]) -> None:
        async def probe() -> None:
            await version()

        self.probes[f"cluster:{name}"] = probe

    def remove_cluster(self, name: str) -> None:
        self.probes.pop(f"cluster:{name}", None)

    async def check(self) -> tuple[bool, dict[str, Any]]:
        """(ready, {probe: "ok" | reason}); a replica with no cluster client yet is not ready."""
        now = self.clock()
        if self._last is not None and now - self._last[0] < self.ttl:
            return _verdict(self._last[1])
        results: dict[str, Any] = {}
        if not any(name.startswith("cluster:") for name in self.probes):
            results["cluster"] = "not started"

        async def run(name: str, probe: Probe) -> None:
            try:
                with anyio.fail_after(10):
                    await probe()
                results[name] = "ok"
            except StoreUnavailable:
                results[name] = "the used-token store cannot be reached"
            except PveError as err:
                results[name] = f"cannot reach PVE: {type(err).__name__}"
            except TimeoutError:
                results[name] = "no answer within 10 s"

        async with anyio.create_task_group() as tg:
            for name, probe in self.probes.items():
                tg.start_soon(run, name, probe)
        self._last = (now, results)
        return _verdict(results)


def _verdict(results: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    return all(v == "ok" for v in results.values()), dict(sorted(results.items()))
