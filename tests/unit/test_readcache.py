"""The read cache: identical in-flight reads share one request; answers live ttl seconds; writes clear it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from pve_steward.errors import PveUnavailable
from pve_steward.pveio.client import ApiPath, WriteMethod, api_path, node, vmid
from pve_steward.pveio.readcache import ReadCache
from pve_steward.pveio.requestpool import BACKGROUND, REQUEST_PRIORITY

RESOURCES = api_path("cluster", "resources")


@dataclass
class GatedClient:
    """Answers a GET only when the test opens the gate, so requests can overlap on purpose."""

    answer: Any = field(default_factory=lambda: [{"vmid": 100, "node": "pve1", "type": "qemu"}])
    error: BaseException | None = None
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    gets: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        self.gets.append(f"{path} {sorted(params.items())}")
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.answer

    async def call(self, method: WriteMethod, path: ApiPath, /, **params: Any) -> Any:
        self.writes.append(f"{method} {path}")
        return "UPID:pve1:00001234:00005678:65000000:qmstart:100:root@pam:"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_concurrent_identical_reads_share_one_request_and_get_their_own_copy() -> None:
    async def run() -> None:
        inner = GatedClient()
        cache = ReadCache(inner, ttl=3.0)
        callers = [asyncio.create_task(cache.get(RESOURCES)) for _ in range(10)]
        await asyncio.sleep(0)
        inner.gate.set()
        answers = await asyncio.gather(*callers)
        assert len(inner.gets) == 1
        assert cache.stats.requests == 1 and cache.stats.joined == 9
        assert all(a == inner.answer for a in answers)
        answers[1][0]["vmid"] = 999  # one caller changing its answer changes nobody else's
        assert answers[2][0]["vmid"] == 100
        assert (await cache.get(RESOURCES))[0]["vmid"] == 100

    asyncio.run(run())


def test_read_only_readers_share_one_answer_and_a_changing_caller_never_gets_it() -> None:
    """get_shared hands every heavy reader one decoded answer (PVE's own object to the first), hit or
    joined; a plain get still gets an answer of its own, and the one it may change is never shared."""

    async def run() -> None:
        inner = GatedClient()
        cache = ReadCache(inner, ttl=3.0)
        readers = [asyncio.create_task(cache.get_shared(RESOURCES)) for _ in range(3)]
        mine = asyncio.create_task(cache.get(RESOURCES))
        await asyncio.sleep(0)
        inner.gate.set()
        shared = await asyncio.gather(*readers)
        own = await mine
        assert len(inner.gets) == 1
        assert shared[0] is inner.answer and all(a is shared[0] for a in shared), "one object for every reader"
        assert own == inner.answer and own is not inner.answer
        assert await cache.get_shared(RESOURCES) is shared[0], "a hit is the same object"
        assert cache.changed_shared() == []
        shared[0][0]["vmid"] = 999  # what get_shared forbids: the self-check names the read
        assert cache.changed_shared() == [str(RESOURCES)]
        assert (await cache.get(RESOURCES))[0]["vmid"] == 100, "a plain get decodes PVE's JSON, not the shared one"

        changing = GatedClient()
        changing.gate.set()
        other = ReadCache(changing, ttl=3.0)
        first = await other.get(RESOURCES)  # PVE's object itself, for a caller who may change it
        first[0]["vmid"] = 1
        assert (await other.get_shared(RESOURCES))[0]["vmid"] == 100

    asyncio.run(run())


def test_different_parameters_are_different_reads() -> None:
    async def run() -> None:
        inner = GatedClient()
        inner.gate.set()
        cache = ReadCache(inner, ttl=3.0)
        await cache.get(RESOURCES, type="vm")
        await cache.get(RESOURCES, type="node")
        await cache.get(RESOURCES, type="vm")
        assert len(inner.gets) == 2

    asyncio.run(run())


def test_answers_expire_after_ttl() -> None:
    async def run() -> None:
        inner = GatedClient()
        inner.gate.set()
        clock = Clock()
        cache = ReadCache(inner, ttl=3.0, clock=clock)
        await cache.get(RESOURCES)
        clock.now += 2.9
        await cache.get(RESOURCES)
        assert len(inner.gets) == 1 and cache.stats.hits == 1
        clock.now += 0.2
        await cache.get(RESOURCES)
        assert len(inner.gets) == 2

    asyncio.run(run())


def test_expired_answers_are_dropped_and_an_index_kept_for_its_age() -> None:
    """An idle server keeps no answer past its time (a health check's thousands of answers were held until the
    next four thousand reads); an index read with ``max_age`` is kept that long."""

    async def run() -> None:
        inner = GatedClient()
        inner.gate.set()
        clock = Clock()
        cache = ReadCache(inner, ttl=0.05, clock=clock)
        await cache.get(api_path("version"))
        await cache.indexed(RESOURCES, len, max_age=60)
        clock.now += 1  # past the TTL, within the index's age
        while len(cache._entries) > 1:  # the sweep, due a TTL after the first answer, drops the expired one
            await asyncio.sleep(0.01)
        assert [key for key, _ in cache._entries] == [str(RESOURCES)]
        clock.now += 60
        cache._expire()
        assert not cache._entries

    asyncio.run(asyncio.wait_for(run(), 60))


def test_ttl_zero_keeps_single_flight_only() -> None:
    async def run() -> None:
        inner = GatedClient()
        cache = ReadCache(inner, ttl=0)
        first = [asyncio.create_task(cache.get(RESOURCES)) for _ in range(3)]
        await asyncio.sleep(0)
        inner.gate.set()
        await asyncio.gather(*first)
        await cache.get(RESOURCES)
        assert len(inner.gets) == 2

    asyncio.run(run())


def test_a_write_clears_the_cache_and_discards_reads_that_started_before_it() -> None:
    async def run() -> None:
        inner = GatedClient()
        cache = ReadCache(inner, ttl=60.0)
        early = asyncio.create_task(cache.get(RESOURCES))
        await asyncio.sleep(0)
        await cache.call("POST", api_path("nodes", "status"))
        inner.gate.set()
        await early
        await cache.get(RESOURCES)  # the read that raced the write was not kept
        assert len(inner.gets) == 2
        await cache.get(RESOURCES)
        assert len(inner.gets) == 2
        await cache.call("POST", api_path("nodes", "status"))
        await cache.get(RESOURCES)
        assert len(inner.gets) == 3
        assert inner.writes == ["POST /nodes/status", "POST /nodes/status"]

    asyncio.run(run())


def test_an_error_reaches_every_waiter_and_is_not_cached() -> None:
    async def run() -> None:
        inner = GatedClient(error=PveUnavailable("node unreachable", status=595, path="/cluster/resources"))
        cache = ReadCache(inner, ttl=60.0)
        callers = [asyncio.create_task(cache.get(RESOURCES)) for _ in range(3)]
        await asyncio.sleep(0)
        inner.gate.set()
        results = await asyncio.gather(*callers, return_exceptions=True)
        assert all(isinstance(r, PveUnavailable) for r in results)
        inner.error = None
        assert await cache.get(RESOURCES) == inner.answer
        assert len(inner.gets) == 2

    asyncio.run(run())


def test_cancelling_one_caller_leaves_the_shared_request_to_the_others() -> None:
    async def run() -> None:
        inner = GatedClient()
        cache = ReadCache(inner, ttl=3.0)
        first = asyncio.create_task(cache.get(RESOURCES))
        second = asyncio.create_task(cache.get(RESOURCES))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        inner.gate.set()
        assert await second == inner.answer
        with pytest.raises(asyncio.CancelledError):
            await first
        assert len(inner.gets) == 1

    asyncio.run(run())


def test_the_fresh_view_reads_past_the_cache_and_its_writes_clear_it() -> None:
    async def run() -> None:
        inner = GatedClient()
        inner.gate.set()
        cache = ReadCache(inner, ttl=60.0)
        await cache.get(RESOURCES)
        await cache.fresh.get(RESOURCES)
        assert len(inner.gets) == 2, "a write's preview and re-check always ask PVE"
        await cache.get(RESOURCES)
        assert len(inner.gets) == 2
        await cache.fresh.call("POST", api_path("nodes", "status"))
        await cache.get(RESOURCES)
        assert len(inner.gets) == 3 and inner.writes == ["POST /nodes/status"]

    asyncio.run(run())


def test_a_request_whose_callers_are_all_cancelled_is_cancelled_too() -> None:
    async def run() -> None:
        inner = GatedClient()
        cache = ReadCache(inner, ttl=3.0)
        callers = [asyncio.create_task(cache.get(RESOURCES)) for _ in range(2)]
        await asyncio.sleep(0.01)
        assert len(inner.gets) == 1
        for c in callers:
            c.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
        await asyncio.sleep(0.01)
        assert not len(cache._inflight)
        inner.gate.set()
        assert await cache.get(RESOURCES) == inner.answer
        assert len(inner.gets) == 2, "nobody was left to receive the first answer: it was dropped, not kept"

    asyncio.run(run())


async def _settle() -> None:
    """Let every task started so far run up to its request (single-flight starts the request in a task)."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_an_urgent_read_does_not_join_a_background_one_but_a_background_read_joins_an_urgent_one() -> None:
    """A cheap call's read would otherwise wait behind every read a heavy diagnostic queued first."""

    async def background_read(cache: ReadCache) -> Any:
        REQUEST_PRIORITY.set(BACKGROUND)  # what admission.py does for a heavy operation (a task's own context)
        return await cache.get(RESOURCES)

    async def run() -> None:
        inner = GatedClient()
        cache = ReadCache(inner, ttl=3.0)
        heavy = asyncio.create_task(background_read(cache))
        await _settle()
        cheap = asyncio.create_task(cache.get(RESOURCES))
        await _settle()
        assert len(inner.gets) == 2, "the urgent read went out on its own"
        later_heavy = asyncio.create_task(background_read(cache))
        await _settle()
        assert len(inner.gets) == 2, "a later background read joined one in flight"
        inner.gate.set()
        answers = await asyncio.gather(heavy, cheap, later_heavy)
        assert all(a == inner.answer for a in answers)
        assert cache.stats.requests == 2 and cache.stats.joined == 1

    asyncio.run(run())


def _open_cache() -> tuple[GatedClient, Clock, ReadCache]:
    """A cache with a 3 s TTL on a test clock, in front of a client that answers at once."""
    inner = GatedClient()
    inner.gate.set()
    clock = Clock()
    return inner, clock, ReadCache(inner, ttl=3.0, clock=clock)


def _by_vmid(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(r["vmid"]): r for r in rows}


def test_an_index_is_built_once_per_cached_answer_and_shared() -> None:
    built: list[int] = []

    def index(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        built.append(len(rows))
        return _by_vmid(rows)

    async def run() -> None:
        inner, clock, cache = _open_cache()
        first = await cache.indexed(RESOURCES, index, type="vm")  # a miss: read, built, kept with the answer
        second = await cache.indexed(RESOURCES, index, type="vm")  # shared: not built again from the entry
        third = await cache.indexed(RESOURCES, index, type="vm")
        assert first == {100: {"vmid": 100, "node": "pve1", "type": "qemu"}}
        assert first is second is third and built == [1] and len(inner.gets) == 1
        clock.now += 3.0  # expired: read again
        await cache.indexed(RESOURCES, index, type="vm")
        assert len(inner.gets) == 2

    asyncio.run(run())


def test_a_looked_up_answer_is_read_and_indexed_again_before_it_expires() -> None:
    """No cheap call waits for the read at expiry: a lookup past half the TTL starts it ahead."""

    async def run() -> None:
        inner, clock, cache = _open_cache()
        await cache.indexed(RESOURCES, _by_vmid, type="vm")
        await cache.indexed(RESOURCES, _by_vmid, type="vm")
        clock.now += 1.4
        await cache.indexed(RESOURCES, _by_vmid, type="vm")
        await _settle()
        assert len(inner.gets) == 1, "read again before half the TTL"
        inner.answer = [{"vmid": 100, "node": "pve2", "type": "qemu"}]  # the guest migrated meanwhile
        clock.now += 0.2
        stale = await cache.indexed(RESOURCES, _by_vmid, type="vm")  # still within the TTL: served at once
        assert stale[100]["node"] == "pve1"
        await _settle()
        assert len(inner.gets) == 2, "no read ahead of the expiry"
        clock.now += 1.5  # the first answer would have expired now; the one read ahead has not
        fresh = await cache.indexed(RESOURCES, _by_vmid, type="vm")
        assert fresh[100]["node"] == "pve2" and len(inner.gets) == 2

    asyncio.run(run())


def test_a_failed_read_ahead_leaves_the_answer_to_expire_as_usual() -> None:
    async def run() -> None:
        inner, clock, cache = _open_cache()
        await cache.indexed(RESOURCES, _by_vmid, type="vm")
        inner.error = PveUnavailable("pve1 is down")
        clock.now += 2.0
        assert 100 in await cache.indexed(RESOURCES, _by_vmid, type="vm")
        await _settle()
        clock.now += 1.5
        with pytest.raises(PveUnavailable):  # past the TTL the lookup reads itself, and sees the failure
            await cache.indexed(RESOURCES, _by_vmid, type="vm")

    asyncio.run(run())


def test_a_caller_that_checks_what_it_takes_may_use_an_older_index_but_never_with_ttl_zero() -> None:
    """fetch.located takes the index of the guests up to max_age old (it checks the node it reads on);
    every other caller keeps the TTL, and a cache told to keep nothing (TTL 0) keeps nothing for it."""

    async def run() -> None:
        inner, clock, cache = _open_cache()
        await cache.indexed(RESOURCES, _by_vmid, max_age=60.0, type="vm")
        clock.now += 20.0
        await cache.indexed(RESOURCES, _by_vmid, max_age=60.0, type="vm")
        await _settle()
        assert len(inner.gets) == 1, "within max_age and before half of it: no read"
        await cache.indexed(RESOURCES, _by_vmid, type="vm")  # past the TTL for a caller without max_age
        assert len(inner.gets) == 2
        clock.now += 31.0
        await cache.indexed(RESOURCES, _by_vmid, max_age=60.0, type="vm")  # past half of it: read ahead
        await _settle()
        assert len(inner.gets) == 3

        keeps_nothing = ReadCache(inner, ttl=0, clock=clock)
        await keeps_nothing.indexed(RESOURCES, _by_vmid, max_age=60.0, type="vm")
        await keeps_nothing.indexed(RESOURCES, _by_vmid, max_age=60.0, type="vm")
        assert len(inner.gets) == 5

    asyncio.run(run())


def test_a_full_cache_lets_the_oldest_answer_go_and_keeps_the_rest() -> None:
    """At its bound the cache drops its oldest answer, not every answer: a 2,000-guest health check and a
    migratability question read each other's 4,000 configs again when a full cache cleared itself (issue 43)."""

    async def run() -> None:
        inner = GatedClient()
        inner.gate.set()
        cache = ReadCache(inner, ttl=60.0, max_entries=3)
        paths = [api_path("nodes", node("pve1"), "qemu", vmid(v), "config") for v in (100, 101, 102, 103)]
        for path in paths:
            await cache.get(path)
        await cache.get(paths[1])  # still there: no new request
        await cache.get(paths[2], current=1)  # another read of the same path: the oldest (100) goes
        assert cache.stats.requests == 5 and cache.stats.hits == 1
        for path in paths[2:]:
            await cache.get(path)
        assert cache.stats.requests == 5 and cache.stats.hits == 3
        await cache.get(paths[0])  # it went first: read again, in place of the oldest left (102)
        await cache.get(paths[3])  # kept
        assert cache.stats.requests == 6 and cache.stats.hits == 4

    asyncio.run(run())
