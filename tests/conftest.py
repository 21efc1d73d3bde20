"""Shared fixtures: running pvesim instances and helpers to reach them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mcp.client.session import ClientSession

import pvesim
from pvesim.server import SimServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def output_schemas_checked_once_per_process() -> Iterator[None]:
    """The SDK client checks a tool's output schema against the JSON Schema metaschema and compiles a validator
    once per session; each test opens its own session, and checking our report schemas afresh each time was a
    sixth of the integration tests' CPU. The check and compile still run, as the SDK runs them, once per
    distinct schema in this process; every result is still validated, and a schema that fails its check fails
    every time (a failure is never kept)."""
    original = ClientSession._output_schema_validator
    compiled: dict[str, Any] = {}

    def shared(self: ClientSession, name: str, output_schema: dict[str, Any]) -> Any:
        if (validator := self._tool_output_validators.get(name)) is not None:
            return validator
        key = json.dumps(output_schema, sort_keys=True)
        if (validator := compiled.get(key)) is None:
            validator = compiled[key] = original(self, name, output_schema)
        self._tool_output_validators[name] = validator
        return validator

    ClientSession._output_schema_validator = shared  # type: ignore[method-assign]
    yield
    ClientSession._output_schema_validator = original  # type: ignore[method-assign]


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
