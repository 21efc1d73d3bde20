"""Who is calling, over real HTTP: JWTs from a local OIDC issuer (keys made here, JWKS served over HTTP
and fetched by the server through discovery) and named static tokens, each mapped to a tier ceiling.

The server runs as a process; every check goes through the real validation path (PyJWT with the
issuer's JWKS) and the SDK's resource server (401 with RFC 9728 metadata).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pvesim.server import SimServer
from tests.httpserver import ACCEPT, INIT, free_port, server_env, serving
from tests.oidc import AUDIENCE, Issuer

pytestmark = pytest.mark.anyio
CAROL = "carol-static-token-for-tests-0123456789abcdef"
OPS_BOT = "ops-bot-static-token-for-tests-0123456789abcdef"


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def principals(tmp_path: Path) -> Path:
    path = tmp_path / "principals.toml"
    path.write_text(
        'default_tier = "read_only"\n'
        '[[groups]]\ngroup = "pve-ops"\ntier = "operator"\n'
        f'[[tokens]]\nname = "carol"\nsha256 = "{_sha(CAROL)}"\ntier = "read_only"\n'
        f'[[tokens]]\nname = "ops-bot"\nsha256 = "{_sha(OPS_BOT)}"\ntier = "operator"\n'
    )
    path.chmod(0o600)
    return path


@contextmanager
def identified_server(sim: SimServer, tmp_path: Path, issuer: Issuer, **extra: str) -> Iterator[str]:
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
        PVE_STEWARD_DIAGNOSTICS_PROCESS="false",
        **extra,
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
    assert beyond.is_error and "dave may use tier read_only (default_tier)" in beyond.content[0].text
    assert not read.is_error and not overview.is_error
    assert not done.is_error and done.structured_content["status"] == "completed"  # type: ignore[index]
    assert metrics_ok.status_code == 200 and metrics_anonymous.status_code == 401
    by_principal = {(r.get("principal"), r["tool"], r["outcome"]) for r in audit(tmp_path) if r.get("tool")}
    oidc = f"oidc:{issuer.url}#"
    assert (oidc + "bob", "guest_reboot", "refused") in by_principal
    assert (oidc + "dave", "guest_reboot", "denied") in by_principal
    assert (oidc + "alice", "guest_reboot", "ok") in by_principal
    assert ("static:carol", "cluster_overview", "ok") in by_principal
    assert CAROL not in (tmp_path / "audit.jsonl").read_text()


async def test_bad_tokens_get_401_with_the_resource_metadata(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    issuer = Issuer()
    other = Issuer()  # the same kid, another key: a forged signature
    now = int(time.time())
    bad = {
        "expired": issuer.token("alice", ["pve-ops"], exp=now - 120, iat=now - 600),
        "audience": issuer.token("alice", ["pve-ops"], aud="someone-else"),
        "issuer": issuer.token("alice", ["pve-ops"], iss="https://evil.example"),
        "forged": other.token("alice", ["pve-ops"], iss=issuer.url),
        "unsigned": jwt.encode({"iss": issuer.url, "aud": AUDIENCE, "sub": "x", "exp": now + 60}, None, "none"),
        "garbage": "not-a-token",
    }
    with issuer.serving(), identified_server(sim, tmp_path, issuer) as base:
        anonymous = httpx2.post(f"{base}/mcp", json=INIT, headers=ACCEPT)
        statuses = {
            name: httpx2.post(f"{base}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {t}"}).status_code
            for name, t in bad.items()
        }
        good = httpx2.post(
            f"{base}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {issuer.token('a', [])}"}
        )
        metadata = httpx2.get(f"{base}/.well-known/oauth-protected-resource/mcp")
    assert anonymous.status_code == 401
    assert "resource_metadata=" in anonymous.headers["www-authenticate"]
    assert statuses == dict.fromkeys(bad, 401), statuses
    assert good.status_code == 200
    assert metadata.status_code == 200 and metadata.json()["authorization_servers"] == [issuer.url]


def initialize(base: str, token: str) -> int:
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    return httpx2.post(f"{base}/mcp", json=INIT, headers=headers, timeout=60).status_code


async def test_an_oidc_subject_named_like_a_static_token_does_not_confirm_its_preview(
    start_sim: Any, tmp_path: Path
) -> None:
    """Issue 42: OIDC subjects and static token names shared one namespace; an OIDC `sub` equal to a static
    token's name confirmed that token's preview, and it ran. Principals are now `static:NAME` and
    `oidc:ISSUER#SUBJECT`, in confirmation tokens and in audit records."""
    sim = start_sim("demo", speed=50)
    issuer = Issuer()
    with issuer.serving(), identified_server(sim, tmp_path, issuer) as base:
        async with as_caller(base, OPS_BOT) as bot:
            preview = await bot.call_tool("guest_reboot", {"vmid": 100})
        token = preview.structured_content["confirm_token"]  # type: ignore[index]
        async with as_caller(base, issuer.token("ops-bot", ["pve-ops"])) as impostor:
            taken = await impostor.call_tool("guest_reboot", {"vmid": 100, "confirm_token": token})
    assert taken.is_error and "another authenticated principal" in taken.content[0].text
    assert [t for t in sim.cluster.tasks if t.type == "qmreboot"] == []
    reboots = {(r.get("principal"), r["outcome"]) for r in audit(tmp_path) if r.get("tool") == "guest_reboot"}
    assert reboots == {("static:ops-bot", "ok"), (f"oidc:{issuer.url}#ops-bot", "refused")}


async def test_a_key_of_the_other_type_is_a_401_never_a_500(start_sim: Any, tmp_path: Path) -> None:
    """Issue 42: a JWT whose kid named a key of the other type (an EC-signed token naming the RSA key) got a 500
    with a traceback; so did JWKS keys PyJWT could not read."""
    sim = start_sim("demo")
    issuer = Issuer()
    issuer.add_key("e1", kind="EC")
    ec_as_rsa = jwt.encode(
        {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 60},
        issuer.keys["e1"],
        algorithm="ES256",
        headers={"kid": "k1"},
    )
    with issuer.serving(), identified_server(sim, tmp_path, issuer) as base:
        statuses = [initialize(base, ec_as_rsa), initialize(base, issuer.token("a", kid="e1"))]
        statuses.append(initialize(base, issuer.token("a", exp=str(int(time.time()) + 300))))  # a string exp
    assert statuses == [401, 200, 401]


async def test_a_key_withdrawn_from_the_jwks_stops_working_within_the_refresh_interval(
    start_sim: Any, tmp_path: Path
) -> None:
    """Issue 42: after the key was removed from the JWKS and the JWKS re-read, old and newly minted tokens with it
    were still accepted (PyJWT's key cache never expires keys)."""
    sim = start_sim("demo")
    issuer = Issuer()
    issuer.add_key("k2")
    with issuer.serving(), identified_server(sim, tmp_path, issuer, PVE_STEWARD_OIDC_JWKS_REFRESH="2") as base:
        old = issuer.token("alice", kid="k1")
        assert initialize(base, old) == 200
        withdrawn_at = issuer.fetches  # read first: a fetch between the two lines still lists k1
        issuer.withdraw("k1")
        deadline = time.monotonic() + 60  # generous: the point is that it happens, on the next refresh
        while initialize(base, old) == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        fetched = issuer.fetches - withdrawn_at
        after = [initialize(base, old), initialize(base, issuer.token("alice", kid="k1"))]
        still = initialize(base, issuer.token("alice", kid="k2"))
    assert after == [401, 401] and still == 200
    assert 1 <= fetched <= 2, "refused after the next refresh of the keys, not later"


async def test_unknown_key_ids_while_the_jwks_hangs_do_not_hold_up_a_valid_user(start_sim: Any, tmp_path: Path) -> None:
    """Issue 42: while the JWKS endpoint hung, 60 unauthenticated requests with unknown key ids each forced a 5 s
    fetch in a worker thread, and a valid user waited 103 s. Now unknown key ids force no fetch."""
    sim = start_sim("demo")
    issuer = Issuer()
    issuer.add_key("ghost", publish=False)
    with issuer.serving(), identified_server(sim, tmp_path, issuer) as base:
        alice = issuer.token("alice")
        assert initialize(base, alice) == 200
        fetched = issuer.fetches
        issuer.hanging.set()
        strangers: list[int] = []

        async def stranger(i: int, http: httpx2.AsyncClient) -> None:
            issuer.keys[f"storm-{i}"] = issuer.keys["ghost"]
            token = issuer.token("mallory", kid=f"storm-{i}")
            sent = await http.post(f"{base}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
            strangers.append(sent.status_code)

        async with httpx2.AsyncClient(timeout=120) as http, anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(stranger, i, http)
            answer = await http.post(f"{base}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {alice}"})
            hung = not issuer.released.is_set()  # alice was answered while the JWKS endpoint still hung
            issuer.released.set()
    assert answer.status_code == 200 and hung
    assert strangers == [401] * 60
    assert issuer.fetches == fetched, "no unauthenticated request forced a fetch of the JWKS"
