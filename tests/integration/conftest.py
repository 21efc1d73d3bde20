"""Fixtures that put the real MCP server in front of a running pvesim (HTTPS, proxmoxer, API token)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.server import MCPServer

import pvesim
from pve_steward.config import Settings, load_settings
from pve_steward.server import build_server
from pvesim.scenario import DEFAULT_TOKENS
from pvesim.server import SimServer

LIMITED_TOKEN = {
    "id": "limited@pve!mcp",
    "user_acl": [{"path": "/vms", "role": "PVEAuditor"}],
    "acl": [{"path": "/vms", "role": "PVEAuditor"}],
}


def scenario_with_limited_token(name: str = "demo") -> dict[str, Any]:
    data = pvesim.load_scenario(name)
    data["tokens"] = [*DEFAULT_TOKENS, LIMITED_TOKEN]
    return data


def sim_settings(sim: SimServer, token: str, where: Path, **extra: Any) -> Settings:
    """The settings of a server in front of ``sim`` with ``token``, its state files in ``where``."""
    token_id, secret = sim.token(token)
    values: dict[str, Any] = {
        "url": sim.address,
        "token_id": token_id,
        "token_secret": secret,
        "fingerprint": sim.fingerprint,
        "audit_log": where / "audit.jsonl",
        "token_store": str(where / "used-tokens.sqlite3"),
        "retries": 0,
        # Most tests exercise one operation through its own tool; meta-tool dispatch has its own tests.
        "granular_tools": True,
        # Tests change the simulated cluster behind the server's back between calls; answers reused for
        # seconds would hide that. The read cache has its own tests (test_read_cache.py).
        "read_cache_ttl": 0,
    }
    values.update(extra)
    return load_settings(**values)


@pytest.fixture
def settings_for(tmp_path: Path) -> Callable[..., Settings]:
    def _settings(sim: SimServer, token: str = "monitor@pve!mcp", **extra: Any) -> Settings:
        return sim_settings(sim, token, tmp_path, **extra)

    return _settings


@pytest.fixture
def server_for(settings_for: Callable[..., Settings]) -> Callable[..., MCPServer[Any]]:
    def _server(sim: SimServer, token: str = "monitor@pve!mcp", **extra: Any) -> MCPServer[Any]:
        return build_server(settings_for(sim, token, **extra))

    return _server
