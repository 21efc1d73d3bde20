"""A request budget for one PVE cluster, shared by every replica through Redis.

``--concurrency`` bounds one process; N replicas would still put N times the load on pveproxy.
With ``--request-budget R`` (requests per second) and a Redis URL, every replica takes each API
request from one shared budget: a GCRA limiter (the "generic cell rate algorithm" of ATM networks,
the same as Redis' own rate-limit patterns) kept in one key per cluster, timed by Redis' clock so
replicas with skewed clocks agree. ``--request-burst`` requests may go at once after a quiet spell.

If Redis cannot be reached the budget is skipped (logged once per outage): it protects PVE from
our load, and refusing every read would turn a Redis outage into a PVE outage for the assistant.
Writes are not affected by that choice: their at-most-once claim has its own fail-closed store.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any, Protocol

from pve_steward.pveio.redisurl import is_redis

log = logging.getLogger(__name__)

# KEYS[1]: the cluster's key. ARGV: interval ms per request, burst tolerance ms.
# Answers 0 (go) or the milliseconds to wait before asking again.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then return allow_at - now end
local new_tat = tat + interval
redis.call('SET', KEYS[1], new_tat, 'PX', new_tat - now + tolerance + 1000)
return 0
"""


class RequestBudget(Protocol):
    def acquire(self) -> None:
        """Block the calling worker thread until one request may be sent."""


class Unlimited:
    def acquire(self) -> None:
        return None


class RedisBudget:
    """``rate`` requests per second for ``cluster``, shared through the Redis at ``url``."""

    def __init__(self, url: str, cluster: str, rate: float, burst: int = 1, timeout: float = 1.0) -> None:
        import redis

        if rate <= 0:
            raise ValueError("request_budget must be above 0 requests per second")
        self._redis: Any = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            client_name=client_name(),  # CLIENT LIST shows which process draws from the budget
        )
        self._script = self._redis.register_script(_GCRA)
        self._key = f"pve-steward:budget:{cluster}"
        self._interval = max(1, round(1000 / rate))
        self._tolerance = self._interval * max(0, burst - 1)
        self._errors = redis.RedisError
        self._outage = threading.Event()
        self.waited_s = 0.0  # total time this process waited for the budget (metrics, bench)

    def try_acquire(self) -> int:
        """Take one request now (0) or say how many milliseconds to wait before asking again."""
        try:
            wait_ms = int(self._script(keys=[self._key], args=[self._interval, self._tolerance]))
        except self._errors as exc:
            if not self._outage.is_set():
                self._outage.set()
                log.warning("request budget skipped: Redis cannot be reached (%s)", type(exc).__name__)
            return 0
        if self._outage.is_set():
            self._outage.clear()
            log.warning("request budget back: Redis answers again")
        return max(0, wait_ms)

    def acquire(self) -> None:
        while (wait_ms := self.try_acquire()) > 0:
            self.waited_s += wait_ms / 1000
            time.sleep(wait_ms / 1000)


def client_name() -> str:
    """This process's name on its budget connections: ``pve-steward-budget:HOST:PID``."""
    host = "".join(c if c.isalnum() or c in ".-" else "-" for c in socket.gethostname()) or "-"
    return f"pve-steward-budget:{host}:{os.getpid()}"


def check_budget_store(rate: float | None, url: str | None) -> None:
    """The one rule, for the settings and for the client alike: a budget needs a Redis URL the replicas share."""
    if rate and not is_redis(url):
        raise ValueError(
            "request_budget is shared by the replicas through Redis: set request_budget_store "
            "(or token_store) to redis://host:port/db"
        )


def open_budget(url: str | None, cluster: str, rate: float | None, burst: int) -> RequestBudget:
    check_budget_store(rate, url)
    if not rate or url is None:
        return Unlimited()
    return RedisBudget(url, cluster, rate, burst)
