"""Read each thing once: single-flight for identical in-flight GETs and a short TTL cache.

Fifty concurrent health checks used to send fifty copies of every read to PVE. Identical GETs
in flight now share one request, and an answer is reused for ``ttl`` seconds. What may be stale
is bounded and stated (design record 261203-9):

- Our own writes clear the cache (and answers still in flight when a write starts are not kept).
- Writes never read through the cache: a preview and the confirmation's re-check of digest and
  state always see PVE's current answer (the tool context hands writes the uncached client).
- A change made elsewhere (GUI, another replica) is seen at most ``ttl`` seconds late by reads.

Each caller of ``get`` gets its own copy of a shared answer (decoded from one JSON encoding), so
one caller's code can never change what another sees. The heavy reads (the collector's) take
``get_shared`` instead: one decoded answer per entry, handed to every such reader, who must never
change it. Four concurrent health checks at 2,000 guests held 31 MB of decoded copies, and decoded
each one on the event loop's CPU (design record 261204-37). A test runs every heavy operation and
checks each shared answer still equals its JSON.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from pve_steward.pveio.client import ApiPath, ProxmoxClient, WriteMethod
from pve_steward.pveio.requestpool import REQUEST_PRIORITY, URGENT
from pve_steward.pveio.singleflight import SingleFlight

Key = tuple[str, tuple[tuple[str, str], ...]]
T = TypeVar("T")
log = logging.getLogger(__name__)


def read_key(path: ApiPath, params: dict[str, Any]) -> Key:
    """What a GET reads: the same path and parameters are the same read (the collector's key too)."""
    return str(path), tuple(sorted((k, repr(v)) for k, v in params.items()))


@dataclass
class CacheStats:
    """Counters for benchmarks and metrics: what was answered from PVE and what was not."""

    requests: int = 0
    hits: int = 0
    joined: int = 0
    invalidations: int = 0


_UNSET: Any = object()


@dataclass
class _Entry:
    """One answer as JSON text: PVE's own body (``{"data": ...}``) when the client kept it, else ours."""

    encoded: str | bytes
    stored_at: float
    wrapped: bool = False  # PVE's body: the answer is its "data"
    derived: dict[Callable[[Any], Any], Any] = field(default_factory=dict)  # see ReadCache.indexed
    shared: Any = _UNSET  # the answer every get_shared reader is handed (decoded once)
    lifetime: float = 0.0  # kept this long when longer than the TTL (an index read with max_age)

    def copy(self) -> Any:
        """A caller's own copy of the answer (callers may change what they get)."""
        value = json.loads(self.encoded)
        return value["data"] if self.wrapped else value

    def read_only(self) -> Any:
        """The one decoded answer of this entry for readers that never change it."""
        if self.shared is _UNSET:
            self.shared = self.copy()
        return self.shared


@runtime_checkable
class RawReads(Protocol):
    """A client that also hands back the body PVE sent, so the cache need not encode the answer again."""

    async def get_with_body(self, path: ApiPath, /, **params: Any) -> tuple[Any, bytes | None]: ...


@dataclass
class ReadCache:
    """A :class:`ProxmoxClient` in front of another one; ``ttl <= 0`` keeps only single-flight."""

    inner: ProxmoxClient
    ttl: float = 3.0
    clock: Callable[[], float] = time.monotonic
    max_entries: int = 16_384  # a 2,000-guest health check and migratability question (6,000 reads) fit
    stats: CacheStats = field(default_factory=CacheStats)
    _entries: dict[Key, _Entry] = field(default_factory=dict)
    _inflight: SingleFlight[tuple[Key, int], tuple[Any, _Entry]] = field(default_factory=SingleFlight)
    _generation: int = 0
    _refreshing: dict[Key, asyncio.Task[None]] = field(default_factory=dict)  # held: a task must not be collected
    _sweep: asyncio.TimerHandle | None = None  # drops expired answers (and what was decoded from them)
    _sweep_loop: asyncio.AbstractEventLoop | None = None

    def __post_init__(self) -> None:
        self._raw: RawReads | None = self.inner if isinstance(self.inner, RawReads) else None

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        return await self._answer(path, params, shared=False)

    async def get_shared(self, path: ApiPath, /, **params: Any) -> Any:
        """The answer every ``get_shared`` reader of it is handed: never change it (nor anything in it)."""
        return await self._answer(path, params, shared=True)

    async def _answer(self, path: ApiPath, params: dict[str, Any], shared: bool) -> Any:
        key = read_key(path, params)
        entry = self._entries.get(key)
        if entry is not None and self.clock() - entry.stored_at < self.ttl:
            self.stats.hits += 1
            return entry.read_only() if shared else entry.copy()
        return (await self._read(key, path, params, shared))[0]

    async def _read(self, key: Key, path: ApiPath, params: dict[str, Any], shared: bool = False) -> tuple[Any, _Entry]:
        """Read through single-flight: (the answer this caller may keep, its entry in the cache).

        A ``shared`` reader gets the entry's read-only answer; the first of them PVE's object itself,
        unless a caller who may change it got that one.
        """
        generation = self._generation
        # A read joins one in flight at its own priority or a more urgent one, never a less urgent one: a
        # cheap call must not wait for a request queued behind a heavy diagnostic's reads (requestpool.py).
        priority = REQUEST_PRIORITY.get()
        flight = (key, URGENT) if priority == URGENT or (key, URGENT) in self._inflight else (key, priority)
        (result, entry), first = await self._inflight.run(flight, lambda: self._fetch(key, path, params, generation))
        if first and shared and entry.shared is _UNSET:
            entry.shared = result  # PVE's object itself, kept read-only for every shared reader
        if not first:
            self.stats.joined += 1
        if shared:
            return entry.read_only(), entry
        return (result if first else entry.copy()), entry  # one caller gets PVE's object itself

    async def indexed(
        self, path: ApiPath, build: Callable[[Any], T], /, *, max_age: float | None = None, **params: Any
    ) -> T:
        """``build(answer)``, made once per cached answer and shared by every caller: never change it.

        For a lookup in a large answer: ``get_guest`` found its guest by decoding a copy of all of
        /cluster/resources on every call, the largest cost of a cheap call at 2,000 guests (issue 17).
        ``max_age`` lets a caller that verifies what it takes (fetch.located) use an answer older than
        the TTL, read again ahead at half that age; with a TTL of 0 nothing is kept, whatever it says.
        """
        key = read_key(path, params)
        ttl = self.ttl if max_age is None or self.ttl <= 0 else max(max_age, self.ttl)
        entry = self._entries.get(key)
        age = self.clock() - entry.stored_at if entry is not None else ttl
        if entry is None or age >= ttl:
            answer, read = await self._read(key, path, params)
            built = build(answer)
            stored = self._entries.get(key)
            if stored is read:  # kept with the answer it was built from
                stored.derived.setdefault(build, built)
                stored.lifetime = max(stored.lifetime, ttl)
            return built
        self.stats.hits += 1
        if age >= ttl / 2 and key not in self._refreshing:
            self._refresh_ahead(key, path, params, list(entry.derived) or [build])
        if build not in entry.derived:
            entry.derived[build] = build(entry.copy())
        return entry.derived[build]  # type: ignore[no-any-return]

    def _refresh_ahead(
        self, key: Key, path: ApiPath, params: dict[str, Any], builds: list[Callable[[Any], Any]]
    ) -> None:
        """Read a looked-up answer again before it expires, and index it, so no cheap call waits for
        either (one read per half TTL while lookups come; what they see is never older than ``ttl``)."""
        generation = self._generation

        async def refresh() -> None:
            REQUEST_PRIORITY.set(URGENT)  # this task's own context: cheap calls are waiting on it
            try:
                (result, read), first = await self._inflight.run(
                    (key, URGENT), lambda: self._fetch(key, path, params, generation)
                )
                if first and self._entries.get(key) is read:  # the entry this read stored
                    read.derived.update((build, build(result)) for build in builds)
            except Exception:  # the next lookup past the TTL reads it itself, and reports a failure
                log.debug("refreshing %s ahead of its expiry failed", key[0], exc_info=True)
            finally:
                self._refreshing.pop(key, None)

        self._refreshing[key] = asyncio.get_running_loop().create_task(refresh())

    async def _fetch(self, key: Key, path: ApiPath, params: dict[str, Any], generation: int) -> tuple[Any, _Entry]:
        self.stats.requests += 1
        body: bytes | None = None
        if self._raw is not None:
            result, body = await self._raw.get_with_body(path, **params)
        else:
            result = await self.inner.get(path, **params)
        # PVE's body as it came: encoding a 2,000-guest answer again took the event loop up to 20 ms (issue 17)
        entry = (
            _Entry(body, self.clock(), wrapped=True)
            if body is not None
            else _Entry(json.dumps(result, separators=(",", ":")), self.clock())
        )
        if self.ttl > 0 and generation == self._generation:
            self._entries.pop(key, None)  # kept in the order stored: the first is the oldest
            while len(self._entries) >= self.max_entries:
                # the oldest answer goes, not all of them: clearing every answer when the cache filled made a
                # health check and a migratability question at 2,000 guests (4,000 configs) read each other's
                # answers again, and a concurrent twin lose the answers it was about to take (issue 43)
                del self._entries[next(iter(self._entries))]
            self._entries[key] = entry
            loop = asyncio.get_running_loop()
            if self._sweep is None or self._sweep_loop is not loop:
                self._sweep, self._sweep_loop = loop.call_later(self.ttl, self._expire), loop
        return result, entry

    def _expire(self) -> None:
        """Drop the answers past their time: a health check's thousands of answers (and their decoded copies)
        were kept until the next four thousand reads, as memory an idle server held (design record 261206-60)."""
        now = self.clock()
        left = {k: e for k, e in self._entries.items() if now - e.stored_at < max(self.ttl, e.lifetime)}
        if len(left) != len(self._entries):
            self._entries = left
        self._sweep = None
        if left and self._sweep_loop is not None and not self._sweep_loop.is_closed():
            due = min(e.stored_at + max(self.ttl, e.lifetime) for e in left.values()) - now
            self._sweep = self._sweep_loop.call_later(max(due, 0.05), self._expire)

    def changed_shared(self) -> list[str]:
        """The paths whose shared answer no longer equals the JSON it was decoded from: a reader
        changed it in place, which get_shared forbids (tests run every heavy operation, then ask)."""
        return [key[0] for key, e in self._entries.items() if e.shared is not _UNSET and e.shared != e.copy()]

    def invalidate(self) -> None:
        """Forget every answer, and keep none of those in flight (they may predate a change)."""
        self._generation += 1
        self._entries.clear()
        self._inflight.forget()  # later readers must not join a request that may predate the change
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
