"""PVE's own bound on API requests: workers per node and a cost per request (a flag, default off).

How a PVE node serves API requests (pve-manager ``PVE/Service/pveproxy.pm`` and ``pvedaemon.pm``,
pve-http-server ``src/PVE/APIServer/AnyEvent.pm``, ``PVE/HTTPServer.pm``):

- pveproxy forks ``max_workers => 3`` workers (``MAX_WORKERS`` in /etc/default/pveproxy overrides it);
  each is one AnyEvent loop that accepts connections under an accept lock and runs an API handler
  synchronously (``handle_api2_request`` -> ``rest_handler``): while a handler runs, that worker serves
  nothing else. So a node answers at most three API calls at once.
- A method with ``proxyto => 'node'`` asked of another node (``rest_handler``: ``resolve_proxyto``) is
  forwarded: ``proxy_request`` sends it with AnyEvent::HTTP to that node's pveproxy (port 8006,
  ``PVEDisableProxy``) and the worker serves others meanwhile. The entry node's worker spends only its
  own share (parsing, ``auth_handler``, the permission check, forwarding, writing the answer back); the
  other node's pveproxy runs the handler.
- A ``protected`` method, on a pveproxy not running as root, is forwarded the same way to the node's
  pvedaemon (``localhost:85``), which forks ``max_workers => 3`` workers of its own.

The model (``Bound``): every node has a pool of ``workers`` pveproxy workers and ``daemon_workers``
pvedaemon workers. A request holds one worker of its node's pool for ``cost`` (the handler), and each
worker that forwards it holds one of its pool for ``proxy_cost`` first. pvesim's own work for the request
runs inside the handler's hold (as the latency model does); a hold lasts ``cost`` or that work, whichever is
longer. Waiting requests take free workers in arrival order (a lower bound: pveproxy keeps a connection
on the worker that accepted it, which can only make a node slower). The node pvesim answers as is the
first node, as ``/cluster/status`` says (``local``).

Each pool counts what it did, so a bench can state the bound a run implies: no client can finish faster
than the busiest pool's work divided by its workers (``/_sim/state``, ``workers``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Bound(BaseModel):
    """The ``pveproxy`` block of a scenario's faults (or ``PUT /_sim/faults``): PVE's workers and costs."""

    workers: int = Field(3, ge=1, le=64, description="pveproxy workers per node (max_workers, default 3)")
    daemon_workers: int = Field(3, ge=1, le=64, description="pvedaemon workers per node (max_workers, default 3)")
    cost: float = Field(0.04, ge=0, le=10, description="seconds a worker spends running one request's handler")
    proxy_cost: float = Field(
        0.01, ge=0, le=10, description="seconds a worker spends forwarding a request to another node or pvedaemon"
    )


@dataclass
class Pool:
    """One node's pveproxy or pvedaemon workers, and what they did."""

    node: str
    kind: str
    size: int
    served: int = 0
    work: float = 0.0  # worker-seconds the model asks for (cost or proxy cost per hold)
    busy: float = 0.0  # worker-seconds held (pvesim's own work may take longer than the model's)
    waited: float = 0.0  # request-seconds spent waiting for a worker
    peak_waiting: int = 0
    _free: int = 0
    _queue: list[asyncio.Future[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._free = self.size

    async def hold(self, seconds: float, work: Callable[[], Awaitable[T]] | None = None) -> T | None:
        """Take a worker (first come, first served), run ``work`` on it, and keep it ``seconds`` in all."""
        arrived = time.monotonic()
        if self._free > 0 and not self._queue:
            self._free -= 1
        else:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append(turn)
            self.peak_waiting = max(self.peak_waiting, len(self._queue))
            try:
                await turn  # a release hands its worker straight to the first in line
            except asyncio.CancelledError:
                if turn in self._queue:
                    self._queue.remove(turn)
                elif turn.done() and not turn.cancelled():
                    self._release()
                raise
        started = time.monotonic()
        self.waited += started - arrived
        try:
            result = await work() if work is not None else None
            left = started + seconds - time.monotonic()
            if left > 0:
                await asyncio.sleep(left)
            return result
        finally:
            self.busy += time.monotonic() - started
            self.work += seconds
            self.served += 1
            self._release()

    def _release(self) -> None:
        while self._queue:
            turn = self._queue.pop(0)
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1

    def report(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind,
            "workers": self.size,
            "served": self.served,
            "work": round(self.work, 4),
            "busy": round(self.busy, 4),
            "waited": round(self.waited, 4),
            "peak_waiting": self.peak_waiting,
        }


class Workers:
    """Every node's pools under one ``Bound``; ``serve`` routes a request through them as PVE would."""

    def __init__(self, bound: Bound, entry: str) -> None:
        self.bound = bound
        self.entry = entry
        self._pools: dict[tuple[str, str], Pool] = {}
        self.started = time.monotonic()

    def pool(self, node: str, kind: str) -> Pool:
        key = (node, kind)
        found = self._pools.get(key)
        if found is None:
            size = self.bound.workers if kind == "pveproxy" else self.bound.daemon_workers
            found = self._pools[key] = Pool(node, kind, size)
        return found

    async def serve(self, node: str | None, protected: bool, handle: Callable[[], Awaitable[T]]) -> T:
        """Run ``handle`` where PVE would: on ``node`` (None: the entry node), in pvedaemon if ``protected``."""
        cost, forward = self.bound.cost, self.bound.proxy_cost
        target = node or self.entry
        if target != self.entry:
            await self.pool(self.entry, "pveproxy").hold(forward)  # parse, authenticate, check, forward
        if protected:
            await self.pool(target, "pveproxy").hold(forward)  # to localhost:85
            result = await self.pool(target, "pvedaemon").hold(cost, handle)
        else:
            result = await self.pool(target, "pveproxy").hold(cost, handle)
        assert result is not None
        return result

    def report(self) -> dict[str, Any]:
        """What each pool did since the start (or the last reset), and for how long."""
        return {
            "elapsed": round(time.monotonic() - self.started, 4),
            "bound": self.bound.model_dump(),
            "entry": self.entry,
            "pools": [p.report() for p in sorted(self._pools.values(), key=lambda p: (p.node, p.kind))],
        }
