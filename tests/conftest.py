"""Shared fixtures: running pvesim instances and helpers to reach them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import pvesim
from pvesim.server import SimServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def start_sim() -> Iterator[Callable[..., SimServer]]:
    """Start scenarios on free ports; every one is stopped at teardown."""
    started: list[SimServer] = []

    def _start(
        scenario: str | dict[str, Any] = "demo", *, version: str | None = None, speed: float = 500.0
    ) -> SimServer:
        data = pvesim.load_scenario(scenario) if isinstance(scenario, str) else scenario
        server = SimServer(
            pvesim.build_cluster(data, version=version, speed=speed), faults=pvesim.faults_from(data)
        ).start()
        started.append(server)
        return server

    yield _start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def demo_sim() -> Iterator[SimServer]:
    """A read-mostly demo cluster shared by tests that do not change its state."""
    server = pvesim.start_scenario("demo", speed=500.0)
    yield server
    server.stop()


def wait_task(get_status: Callable[[], dict[str, Any]], timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = get_status()
        if status["status"] == "stopped":
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"task still running after {timeout}s: {status}")
        time.sleep(0.02)
