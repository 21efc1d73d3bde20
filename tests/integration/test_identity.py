"""Who is calling, over real HTTP: JWTs from a local OIDC issuer (keys made here, JWKS served over HTTP
and fetched by the server through discovery) and named static tokens, each mapped to a tier ceiling.

The server runs as a process; every check goes through the real validation path (PyJWT with the
issuer's JWKS) and the SDK's resource server (401 with RFC 9728 metadata).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pvesim.server import SimServer
from tests.httpserver import free_port, server_env, serving

pytestmark = pytest.mark.anyio
AUDIENCE = "pve-steward-tests"
CAROL = "carol-static-token-for-tests-0123456789abcdef"


class Issuer:
    """A local OIDC issuer: an RSA key, its JWKS and discovery document over HTTP on loopback."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.documents = {
            "/.well-known/openid-configuration": {"issuer": self.url, "jwks_uri": f"{self.url}/jwks"},
            "/jwks": {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]},
        }

    def token(self, sub: str, groups: list[str], **over: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, "groups": groups}
        claims.update(over)
        pem = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return jwt.encode(claims, pem, algorithm="RS256", headers={"kid": "k1"})

    @contextmanager
    def serving(self) -> Iterator[Issuer]:
        documents = self.documents

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(documents.get(self.path, {})).encode()
                self.send_response(200 if self.path in documents else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


def principals(tmp_path: Path) -> Path:
    path = tmp_path / "principals.toml"
    path.write_text(
        'default_tier = "read_only"\n'
        '[[groups]]\ngroup = "pve-ops"\ntier = "operator"\n'
        f'[[tokens]]\nname = "carol"\nsha256 = "{hashlib.sha256(CAROL.encode()).hexdigest()}"\ntier = "read_only"\n'
    )
    path.chmod(0o600)
    return path


@contextmanager
def identified_server(sim: SimServer, tmp_path: Path, issuer: Issuer) -> Iterator[str]:
    port = free_port()
    env = server_env(
        sim,
        tmp_path,
        "operator@pve!mcp",
        PVE_STEWARD_TIER="operator",
        PVE_STEWARD_GRANULAR_TOOLS="true",
        PVE_STEWARD_OIDC_ISSUER=issuer.url,
        PVE_STEWARD_OIDC_AUDIENCE=AUDIENCE,
        PVE_STEWARD_PRINCIPALS_FILE=str(principals(tmp_path)),
        PVE_STEWARD_TOKEN_STORE="memory",
        PVE_STEWARD_HTTP_PORT=str(port),
    )
    with serving([sys.executable, "-m", "pve_steward", "serve"], port, env) as base:
        yield base


@asynccontextmanager
async def as_caller(base: str, token: str) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
    ):
        yield c


def audit(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


async def test_tokens_are_bound_to_their_principal_and_tiers_follow_groups(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim("demo", speed=50)
    issuer = Issuer()
    with issuer.serving(), identified_server(sim, tmp_path, issuer) as base:
        async with as_caller(base, issuer.token("alice", ["pve-ops"])) as alice:
            preview = await alice.call_tool("guest_reboot", {"vmid": 100})
        token = preview.structured_content["confirm_token"]  # type: ignore[index]
        async with as_caller(base, issuer.token("bob", ["pve-ops"])) as bob:
            stolen = await bob.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
        async with as_caller(base, issuer.token("dave", ["staff"])) as dave:
            beyond = await dave.call_tool("guest_reboot", {"vmid": 100})
            read = await dave.call_tool("get_guest", {"vmid": 100})
        async with as_caller(base, issuer.token("alice", ["pve-ops"])) as alice:
            done = await alice.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
        async with as_caller(base, CAROL) as carol:
            overview = await carol.call_tool("cluster_overview", {})
        metrics_ok = httpx2.get(f"{base}/metrics", headers={"Authorization": f"Bearer {CAROL}"})
        metrics_anonymous = httpx2.get(f"{base}/metrics")
    assert stolen.is_error and "another authenticated principal" in stolen.content[0].text
    assert beyond.is_error and "dave may use tier read_only" in beyond.content[0].text
    assert not read.is_error and not overview.is_error
    assert not done.is_error and done.structured_content["status"] == "completed"  # type: ignore[index]
    assert metrics_ok.status_code == 200 and metrics_anonymous.status_code == 401
    by_principal = {(r.get("principal"), r["tool"], r["outcome"]) for r in audit(tmp_path) if r.get("tool")}
    assert ("bob", "guest_reboot", "refused") in by_principal
    assert ("dave", "guest_reboot", "denied") in by_principal
    assert ("alice", "guest_reboot", "ok") in by_principal and ("carol", "cluster_overview", "ok") in by_principal
    assert CAROL not in (tmp_path / "audit.jsonl").read_text()


async def test_bad_tokens_get_401_with_the_resource_metadata(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    issuer = Issuer()
    other = Issuer()  # the same kid, another key: a forged signature
    now = int(time.time())
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    bad = {
        "expired": issuer.token("alice", ["pve-ops"], exp=now - 120, iat=now - 600),
        "audience": issuer.token("alice", ["pve-ops"], aud="someone-else"),
        "issuer": issuer.token("alice", ["pve-ops"], iss="https://evil.example"),
        "forged": other.token("alice", ["pve-ops"], iss=issuer.url),
        "unsigned": jwt.encode({"iss": issuer.url, "aud": AUDIENCE, "sub": "x", "exp": now + 60}, None, "none"),
        "garbage": "not-a-token",
    }
    with issuer.serving(), identified_server(sim, tmp_path, issuer) as base:
        anonymous = httpx2.post(f"{base}/mcp", json=init, headers=accept)
        statuses = {
            name: httpx2.post(f"{base}/mcp", json=init, headers={**accept, "Authorization": f"Bearer {t}"}).status_code
            for name, t in bad.items()
        }
        good = httpx2.post(
            f"{base}/mcp", json=init, headers={**accept, "Authorization": f"Bearer {issuer.token('a', [])}"}
        )
        metadata = httpx2.get(f"{base}/.well-known/oauth-protected-resource/mcp")
    assert anonymous.status_code == 401
    assert "resource_metadata=" in anonymous.headers["www-authenticate"]
    assert statuses == dict.fromkeys(bad, 401), statuses
    assert good.status_code == 200
    assert metadata.status_code == 200 and metadata.json()["authorization_servers"] == [issuer.url]
