"""Read each thing once: single-flight for identical in-flight GETs and a short TTL cache.

Fifty concurrent health checks used to send fifty copies of every read to PVE. Identical GETs
in flight now share one request, and an answer is reused for ``ttl`` seconds. What may be stale
is bounded and stated (design record 261203-9):

- Our own writes clear the cache (and answers still in flight when a write starts are not kept).
- Writes never read through the cache: a preview and the confirmation's re-check of digest and
  state always see PVE's current answer (the tool context hands writes the uncached client).
- A change made elsewhere (GUI, another replica) is seen at most ``ttl`` seconds late by reads.

Each caller gets its own copy of a shared answer (decoded from one JSON encoding), so one
caller's analysis can never change what another sees.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pve_steward.client import ApiPath, ProxmoxClient, WriteMethod

Key = tuple[str, tuple[tuple[str, str], ...]]


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a shared request's error as seen even when every caller was cancelled meanwhile."""
    if not task.cancelled():
        task.exception()


@dataclass
class CacheStats:
    """Counters for benchmarks and metrics: what was answered from PVE and what was not."""

    requests: int = 0
    hits: int = 0
    joined: int = 0
    invalidations: int = 0


@dataclass
class _Entry:
    encoded: str
    stored_at: float


@dataclass
class ReadCache:
    """A :class:`ProxmoxClient` in front of another one; ``ttl <= 0`` keeps only single-flight."""

    inner: ProxmoxClient
    ttl: float = 3.0
    clock: Callable[[], float] = time.monotonic
    max_entries: int = 4096
    stats: CacheStats = field(default_factory=CacheStats)
    _entries: dict[Key, _Entry] = field(default_factory=dict)
    _inflight: dict[Key, asyncio.Task[tuple[Any, str]]] = field(default_factory=dict)
    _waiting: dict[asyncio.Task[tuple[Any, str]], int] = field(default_factory=dict)
    _generation: int = 0

    @staticmethod
    def _key(path: ApiPath, params: dict[str, Any]) -> Key:
        return str(path), tuple(sorted((k, repr(v)) for k, v in params.items()))

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        key = self._key(path, params)
        entry = self._entries.get(key)
        if entry is not None and self.clock() - entry.stored_at < self.ttl:
            self.stats.hits += 1
            return json.loads(entry.encoded)
        task = self._inflight.get(key)
        if task is not None:
            self.stats.joined += 1
            return json.loads((await self._wait(task))[1])
        task = asyncio.ensure_future(self._fetch(key, path, params, self._generation))
        task.add_done_callback(_retrieve)
        self._inflight[key] = task
        return (await self._wait(task))[0]  # the one caller that gets PVE's object itself

    async def _wait(self, task: asyncio.Task[tuple[Any, str]]) -> tuple[Any, str]:
        """Wait for a shared request; it is cancelled (dropped if still queued) only when all its callers are."""
        self._waiting[task] = self._waiting.get(task, 0) + 1
        try:
            return await asyncio.shield(task)
        finally:
            left = self._waiting.pop(task) - 1
            if left:
                self._waiting[task] = left
            elif not task.done():
                task.cancel()

    async def _fetch(self, key: Key, path: ApiPath, params: dict[str, Any], generation: int) -> tuple[Any, str]:
        self.stats.requests += 1
        try:
            result = await self.inner.get(path, **params)
        finally:
            if generation == self._generation:
                self._inflight.pop(key, None)
        encoded = json.dumps(result, separators=(",", ":"))
        if self.ttl > 0 and generation == self._generation:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[key] = _Entry(encoded, self.clock())
        return result, encoded

    def invalidate(self) -> None:
        """Forget every answer, and keep none of those in flight (they may predate a change)."""
        self._generation += 1
        self._entries.clear()
        self._inflight.clear()  # later readers must not join a request that may predate the change
        self.stats.invalidations += 1

    @property
    def fresh(self) -> ProxmoxClient:
        """The view writes use: every read goes to PVE, and a write clears the cache."""
        return _Fresh(self)

    async def call(self, method: WriteMethod, path: ApiPath, /, **params: Any) -> Any:
        self.invalidate()
        try:
            return await self.inner.call(method, path, **params)
        finally:
            self.invalidate()  # the write's effects may show only after it returned


@dataclass(frozen=True)
class _Fresh:
    cache: ReadCache

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        return await self.cache.inner.get(path, **params)

    async def call(self, method: WriteMethod, path: ApiPath, /, **params: Any) -> Any:
        return await self.cache.call(method, path, **params)
