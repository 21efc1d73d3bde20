"""The shared per-cluster request budget on a real redis-server (budget.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pve_steward.pveio.budget import RedisBudget, Unlimited, open_budget
from tests.httpserver import free_port
from tests.redisserver import redis_server


def test_two_replicas_draw_from_one_budget(tmp_path: Path) -> None:
    """Burst 3 at one request per 100 s: three requests go at once whichever replica sends them, the fourth
    waits (up to one interval: the slow rate keeps the test off wall-clock margins)."""
    with redis_server(tmp_path) as url:
        a = RedisBudget(url, "https://pve-a:8006", rate=0.01, burst=3)
        b = RedisBudget(url, "https://pve-a:8006", rate=0.01, burst=3)
        other = RedisBudget(url, "https://pve-b:8006", rate=0.01, burst=3)
        granted = [a.try_acquire(), b.try_acquire(), a.try_acquire()]
        fourth = b.try_acquire()
        assert granted == [0, 0, 0]
        assert 0 < fourth <= 100_000  # milliseconds
        assert other.try_acquire() == 0  # another cluster has its own budget


def test_an_unreachable_redis_skips_the_budget_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    budget = RedisBudget(f"redis://127.0.0.1:{free_port()}/0", "c", rate=1, burst=1, timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="pve_steward.pveio.budget"):
        assert [budget.try_acquire(), budget.try_acquire()] == [0, 0]
    assert sum("request budget skipped" in r.message for r in caplog.records) == 1  # once per outage


def test_a_budget_needs_a_shared_redis() -> None:
    assert isinstance(open_budget(None, "c", None, 10), Unlimited)
    for store in ("sqlite", None, "https://redis.lan"):  # the settings' rule, worded alike (budget.check_budget_store)
        with pytest.raises(ValueError, match="request_budget is shared by the replicas through Redis"):
            open_budget(store, "c", 50, 10)
    assert isinstance(open_budget("sqlite", "c", 0, 10), Unlimited)


def test_settings_refuse_a_budget_without_redis() -> None:
    from pydantic import ValidationError

    from pve_steward.config import Settings

    with pytest.raises(ValidationError, match="shared by the replicas through Redis"):
        Settings(url="https://pve:8006", request_budget=50)
    ok = Settings(url="https://pve:8006", request_budget=50, token_store="redis://127.0.0.1:6379/0")
    assert ok.request_budget == 50
