"""Issue 20's "done when": two clusters, two users, two replicas, one real redis-server.

Two server processes read one TOML config naming two pvesim clusters, identify callers by named
static tokens (alice and bob, operators), share used tokens, the confirmation key and the request
budget through Redis (with an append-only file: `replicas = 2` refuses one without). The client
alternates between the replicas; every promise is checked on the same deployment: each cluster answers
for itself, a token runs once whichever replica confirms it, a token is bound to its principal and its
cluster, both replicas are ready for both clusters, and every audit record names who did what where.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pvesim.server import SimServer
from tests.httpserver import free_port, serving
from tests.redisserver import running_redis

pytestmark = pytest.mark.anyio
ALICE = "alice-static-token-for-the-team-test-0123456789"
BOB = "bob-static-token-for-the-team-test-0123456789ab"


def private(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(0o600)
    return path


def team_config(tmp_path: Path, sims: dict[str, SimServer], store: str) -> Path:
    principals = private(
        tmp_path / "principals.toml",
        "".join(
            f'[[tokens]]\nname = "{name}"\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\ntier = "operator"\n'
            for name, token in (("alice", ALICE), ("bob", BOB))
        ),
    )
    key = private(tmp_path / "confirm.key", os.urandom(32))
    lines = [
        'tier = "operator"',
        "granular_tools = true",
        f'token_store = "{store}"',
        "request_budget = 500",
        "replicas = 2",  # the start refuses a store the two cannot share, or a Redis that forgets on restart
        f'confirm_key_file = "{key}"',
        f'principals_file = "{principals}"',
    ]
    for name, sim in sims.items():
        token_id, secret = sim.token("operator@pve!mcp")
        secret_file = private(tmp_path / f"{name}.token", secret + "\n")
        lines += [
            f"[clusters.{name}]",
            f'url = "{sim.address}"',
            f'token_id = "{token_id}"',
            f'token_secret_file = "{secret_file}"',
            f'fingerprint = "{sim.fingerprint}"',
            'max_tier = "operator"',
        ]
    return private(tmp_path / "team.toml", "\n".join(lines) + "\n")


def replica(config: Path, tmp_path: Path, name: str) -> Any:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PVE_STEWARD_")},
        "PVE_STEWARD_CONFIG": str(config),
        "PVE_STEWARD_TRANSPORT": "http",
        "PVE_STEWARD_HTTP_PORT": str(port),
        "PVE_STEWARD_AUDIT_LOG": str(tmp_path / f"audit-{name}.jsonl"),
    }
    return serving([sys.executable, "-m", "pve_steward", "serve"], port, env)


@asynccontextmanager
async def as_user(base: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
    ):
        yield c


def reboots(sim: SimServer) -> list[Any]:
    return [t for t in list(sim.cluster.tasks) if t.type == "qmreboot" and t.user == "operator@pve!mcp"]


def records(tmp_path: Path) -> list[dict[str, Any]]:
    out = []
    for name in ("one", "two"):
        path = tmp_path / f"audit-{name}.jsonl"
        out += [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return out


async def test_two_clusters_two_users_two_replicas(start_sim: Any, tmp_path: Path) -> None:
    prod, lab = start_sim("demo", speed=50), start_sim("healthy", speed=50)
    with running_redis(tmp_path, appendonly=True) as redis:
        config = team_config(tmp_path, {"prod": prod, "lab": lab}, redis.url)
        with replica(config, tmp_path, "one") as one, replica(config, tmp_path, "two") as two:
            ready = [httpx2.get(f"{base}/ready", timeout=30).json() for base in (one, two)]
            async with as_user(one, ALICE) as alice:
                listed = await alice.call_tool("list_clusters", {})
                lab_guests = await alice.call_tool("list_guests", {"cluster": "lab"})
                preview = await alice.call_tool("guest_reboot", {"vmid": 100, "cluster": "prod"})
            token = preview.structured_content["confirm_token"]  # type: ignore[index]
            async with as_user(two, BOB) as bob:
                stolen = await bob.call_tool("guest_reboot", {"vmid": 100, "cluster": "prod", "confirm_token": token})
            async with as_user(two, ALICE) as alice:
                elsewhere = await alice.call_tool(
                    "guest_reboot", {"vmid": 100, "cluster": "lab", "confirm_token": token}
                )
                done = await alice.call_tool("guest_reboot", {"vmid": 100, "cluster": "prod", "confirm_token": token})
            async with as_user(one, ALICE) as alice:
                again = await alice.call_tool("guest_reboot", {"vmid": 100, "cluster": "prod", "confirm_token": token})
            anonymous = httpx2.post(f"{one}/mcp", json={}, timeout=30)
    for answer in ready:
        assert answer["status"] == "ready"
        assert answer["checks"] == {"cluster:lab": "ok", "cluster:prod": "ok", "token_store": "ok"}
    assert [row["name"] for row in listed.structured_content["clusters"]] == ["prod", "lab"]  # type: ignore[index]
    assert lab_guests.structured_content["page"]["total"] == 4  # type: ignore[index]  # the healthy scenario's
    assert stolen.is_error and "another authenticated principal" in stolen.content[0].text
    assert elsewhere.is_error and "cluster" in elsewhere.content[0].text
    assert not done.is_error and done.structured_content["status"] == "completed"  # type: ignore[index]
    assert again.is_error and "already used" in again.content[0].text
    assert len(reboots(prod)) == 1 and reboots(lab) == []
    assert anonymous.status_code == 401
    writes = [r for r in records(tmp_path) if r.get("tool") == "guest_reboot"]
    assert {(r["principal"], r["cluster"], r["outcome"]) for r in writes} >= {
        ("static:alice", "prod", "ok"),
        ("static:bob", "prod", "refused"),
        ("static:alice", "lab", "refused"),
    }
    assert ALICE not in json.dumps(records(tmp_path)) and BOB not in json.dumps(records(tmp_path))
