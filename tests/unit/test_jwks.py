"""The issuer's keys as the verifier trusts them: real RSA and EC keys, a real JWKS served over HTTP by the test
(tests/oidc.py), and a clock the test moves. A withdrawn key stops working within the refresh interval, unknown
key ids cause no fetch storm, a hanging JWKS delays no one whose key is known, and no token or key of the wrong
shape is anything but a refusal."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import jwt
import pytest

from pve_steward.security.identity import IdentityVerifier, OidcSettings
from pve_steward.security.jwks import JwksCache, parse_jwks
from pve_steward.security.principals import PrincipalsFile
from tests.oidc import AUDIENCE, Issuer

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with Issuer().serving() as served:
        yield served


def verifier_for(issuer: Issuer, clock: Clock, **cache: Any) -> IdentityVerifier:
    async def url() -> str:
        return f"{issuer.url}/jwks"

    jwks = JwksCache(url, clock=clock, **({"refresh": 300.0, "timeout": 5.0, "min_gap": 30.0} | cache))
    return IdentityVerifier(PrincipalsFile(), OidcSettings(issuer=issuer.url, audience=AUDIENCE), jwks=jwks)


async def accepted(verifier: IdentityVerifier, token: str) -> bool:
    return await verifier.verify_token(token) is not None


async def test_a_withdrawn_key_stops_working_within_the_refresh_interval(issuer: Issuer) -> None:
    """Issue 42: PyJWT's key cache never dropped a key, so a key the issuer withdrew worked until a restart."""
    clock = Clock()
    verifier = verifier_for(issuer, clock)
    issuer.add_key("k2")
    old = issuer.token("alice", kid="k1")
    assert await accepted(verifier, old)
    issuer.withdraw("k1")
    clock.now += 299  # still within the interval: the keys read at start are trusted
    assert await accepted(verifier, old)
    clock.now += 1
    assert not await accepted(verifier, old)
    assert not await accepted(verifier, issuer.token("alice", kid="k1"))  # newly minted with it: refused too
    assert await accepted(verifier, issuer.token("alice", kid="k2"))


async def test_the_refresh_starts_ahead_of_expiry_without_a_caller_waiting(issuer: Issuer) -> None:
    clock = Clock()
    verifier = verifier_for(issuer, clock)
    token = issuer.token("alice")
    assert await accepted(verifier, token) and issuer.fetches == 1
    clock.now += 250  # past 80 % of the interval: a refresh starts in the background
    issuer.hanging.set()
    assert await accepted(verifier, token)  # answered from the keys held, while the refresh hangs
    issuer.released.set()
    with anyio.fail_after(60):  # a bound, not a measure: the refresh is under way and answers at once
        while verifier.jwks is None or verifier.jwks.fetches < 2:
            await anyio.sleep(0.01)
    assert issuer.fetches == 2


async def test_an_issuer_that_cannot_be_read_past_the_interval_refuses_tokens(issuer: Issuer) -> None:
    clock = Clock()
    verifier = verifier_for(issuer, clock)
    token = issuer.token("alice")
    assert await accepted(verifier, token)
    issuer.failing = True  # the JWKS answers 503
    clock.now += 300
    assert not await accepted(verifier, token)  # fail closed: keys that cannot be confirmed are not trusted
    issuer.failing = False
    clock.now += 29
    assert not await accepted(verifier, token)  # no new fetch within min_gap of the failed one
    clock.now += 1
    assert await accepted(verifier, token)
    assert issuer.fetches == 3


async def test_unknown_key_ids_are_remembered_and_fetches_rate_limited(issuer: Issuer) -> None:
    clock = Clock()
    verifier = verifier_for(issuer, clock)
    issuer.add_key("ghost", publish=False)  # a key the issuer never published: anyone can make such tokens
    assert await accepted(verifier, issuer.token("alice"))
    fetched = issuer.fetches
    clock.now += 30  # min_gap after the first fetch: an unknown key id may start one
    for i in range(50):
        issuer.keys[f"kid-{i}"] = issuer.keys["ghost"]
        assert not await accepted(verifier, issuer.token("mallory", kid=f"kid-{i}"))
    assert issuer.fetches == fetched + 1  # one fetch for fifty unknown key ids, then none within min_gap
    clock.now += 29
    assert not await accepted(verifier, issuer.token("mallory", kid="kid-0"))  # remembered as unknown
    assert issuer.fetches == fetched + 1
    issuer.add_key("k9")  # the issuer rotates: a new key id appears
    clock.now += 1
    assert await accepted(verifier, issuer.token("alice", kid="k9"))
    assert issuer.fetches == fetched + 2


async def test_a_hanging_jwks_delays_no_caller_whose_key_is_known(issuer: Issuer) -> None:
    """Issue 42: with the JWKS endpoint hanging, 60 requests with unknown key ids each forced a 5 s fetch in a
    worker thread and a valid user waited 103 s. Now they share one fetch, and the valid user does not wait."""
    clock = Clock()
    verifier = verifier_for(issuer, clock, timeout=30.0)
    good = issuer.token("alice")
    assert await accepted(verifier, good)
    issuer.add_key("ghost", publish=False)
    fetched = issuer.fetches
    issuer.hanging.set()
    clock.now += 30
    done: list[str] = []

    async def stranger(i: int) -> None:
        issuer.keys[f"storm-{i}"] = issuer.keys["ghost"]
        await verifier.verify_token(issuer.token("mallory", kid=f"storm-{i}"))
        done.append("stranger")

    async with anyio.create_task_group() as tg:
        for i in range(60):
            tg.start_soon(stranger, i)
        await anyio.sleep(0.2)
        assert await accepted(verifier, good)
        done.append("alice")
        issuer.released.set()
    assert done[0] == "alice", "the valid user was answered while the strangers' fetch hung"
    assert issuer.fetches == fetched + 1


@pytest.mark.parametrize("case", ["ec-token-rsa-kid", "rsa-token-ec-kid", "hmac-with-public-key", "alg-none", "no-kid"])
async def test_a_key_of_the_other_type_or_a_foreign_algorithm_is_refused(issuer: Issuer, case: str) -> None:
    """Issue 42: a JWT whose kid named a key of the other type got HTTP 500 with a traceback."""
    issuer.add_key("e1", kind="EC")
    verifier = verifier_for(issuer, Clock())
    now = int(time.time())
    claims = {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "exp": now + 60}
    if case == "ec-token-rsa-kid":
        token = _signed(issuer, "e1", claims, headers={"kid": "k1"})
    elif case == "rsa-token-ec-kid":
        token = _signed(issuer, "k1", claims, headers={"kid": "e1"})
    elif case == "hmac-with-public-key":  # the classic: the RSA public key used as an HMAC secret
        public = issuer.jwks()["keys"][0]
        token = jwt.encode(claims, hashlib.sha256(str(public).encode()).digest(), "HS256", headers={"kid": "k1"})
    elif case == "alg-none":
        token = jwt.encode(claims, None, "none", headers={"kid": "k1"})
    else:
        token = _signed(issuer, "k1", claims, headers={})
    assert await verifier.verify_token(token) is None
    assert await accepted(verifier, issuer.token("alice", kid="e1"))  # the EC key itself works


def _signed(issuer: Issuer, kid: str, claims: dict[str, Any], headers: dict[str, Any]) -> str:
    alg = "ES256" if kid.startswith("e") else "RS256"
    return jwt.encode(claims, issuer.keys[kid], algorithm=alg, headers=headers)


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
async def test_time_claims_must_be_numbers(issuer: Issuer, claim: str) -> None:
    """Issue 42: PyJWT reads '"exp": "9999999999"' as a number, so a string exp was accepted."""
    verifier = verifier_for(issuer, Clock())
    now = int(time.time())
    value = {"exp": now + 300, "nbf": now - 10, "iat": now - 10}[claim]
    assert await accepted(verifier, issuer.token("alice", **{claim: value}))
    assert not await accepted(verifier, issuer.token("alice", **{claim: str(value)}))
    assert not await accepted(verifier, issuer.token("alice", **{claim: True}))


def test_unreadable_keys_are_left_out_and_a_bad_document_is_an_error(issuer: Issuer) -> None:
    good = issuer.jwks()["keys"][0]
    broken = [
        {"kid": "b1", "kty": "RSA", "n": 5, "e": "AQAB"},  # TypeError inside PyJWT
        {"kid": "b2", "kty": "RSA", "n": "AQAB", "e": "AQAB"},  # ValueError from cryptography
        {"kid": "b3", "kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"},  # InvalidKeyError
        {"kid": "x", "kty": "oct", "k": "c2VjcmV0"},  # a symmetric key has no place in a JWKS
        "not a key",
        {"kty": "RSA"},
    ]
    keys = parse_jwks(json.dumps({"keys": [*broken, good]}).encode())
    assert list(keys) == ["k1"]
    with pytest.raises(ValueError, match="not an object with a 'keys' list"):
        parse_jwks(b'["keys"]')
