"""The OIDC issuer's signing keys (JWKS), as this server trusts them (design record 261206-59).

- **A withdrawn key stops working** within ``refresh`` seconds: keys are trusted for that long after
  the fetch that returned them. A refresh starts in the background once they are 80 % of that age (no
  caller waits for it); keys older than ``refresh`` are dropped when the refresh fails, so tokens are
  refused while the issuer's JWKS cannot be read (fail closed).
- **No fetch storm**: one fetch at a time, shared by every caller who needs it; a key id the keys do
  not have starts a fetch at most once per ``min_gap`` seconds, and after a fetch that did not list it
  the key id is remembered as unknown for ``min_gap`` seconds. Fetches are asynchronous and bounded by
  ``timeout`` in total: a hanging issuer holds no thread and delays no caller whose key is known.
- **Keys are matched to the algorithm**: a token's ``alg`` must be one of :data:`ALGORITHMS` and the key
  its ``kid`` names must be of that family (RSA for RS*/PS*, the curve of ES256/ES384, OKP for EdDSA),
  with a matching ``alg`` and ``use`` where the JWK states them. A key the JWKS lists that cannot be
  read is left out (and logged), never an error of the caller's request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

log = logging.getLogger(__name__)
# Asymmetric algorithms only: a JWKS publishes public keys (no 'none', no HMAC with a public key as secret).
FAMILY: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "PS384": ("RSA", None),
    "PS512": ("RSA", None),
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "EdDSA": ("OKP", None),
}
ALGORITHMS = list(FAMILY)
MAX_DOCUMENT = 1_000_000  # bytes read from the issuer's JWKS or discovery document
MAX_UNKNOWN = 4096  # key ids remembered as unknown (oldest forgotten first)
_READER = {"RSA": "RS256", "EC": "ES256", "OKP": "EdDSA"}  # the PyJWT algorithm that reads each key type

Fetch = Callable[[str], Awaitable[bytes]]


@dataclass(frozen=True)
class Key:
    """One usable key of the JWKS."""

    kid: str
    kty: str
    crv: str | None
    alg: str | None
    use: str | None
    key: Any  # the cryptography public key

    def fits(self, alg: str) -> bool:
        kty, crv = FAMILY[alg]
        if self.kty != kty or (crv is not None and self.crv != crv):
            return False
        return self.alg in (None, alg) and self.use in (None, "sig")


def parse_jwks(body: bytes) -> dict[str, list[Key]]:
    """The usable keys of a JWKS document by key id; unreadable keys are left out, a bad document raises."""
    from jwt.algorithms import get_default_algorithms

    document = json.loads(body)
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("the JWKS is not an object with a 'keys' list")
    readers = get_default_algorithms()
    keys: dict[str, list[Key]] = {}
    for raw in document["keys"]:
        if not isinstance(raw, dict) or not isinstance(raw.get("kid"), str) or raw.get("kty") not in _READER:
            continue
        try:
            key = readers[_READER[raw["kty"]]].from_jwk(raw)
        except Exception as exc:  # any malformed key: left out, never the caller's error
            log.warning(
                "the issuer's JWKS key %r cannot be read (%s); it is ignored", raw["kid"][:64], type(exc).__name__
            )
            continue
        crv, alg, use = raw.get("crv"), raw.get("alg"), raw.get("use")
        keys.setdefault(raw["kid"], []).append(
            Key(
                raw["kid"],
                raw["kty"],
                crv if isinstance(crv, str) else None,
                alg if isinstance(alg, str) else None,
                use if isinstance(use, str) else None,
                key,
            )
        )
    return keys


async def http_get(url: str, timeout: float) -> bytes:
    """GET ``url`` (https, or http on loopback: checked by the caller) and return at most MAX_DOCUMENT bytes."""
    import httpx2

    async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as client:
        answer = await client.get(url, headers={"Accept": "application/json"})
        answer.raise_for_status()
        body = answer.content
    if len(body) > MAX_DOCUMENT:
        raise ValueError(f"{url} answered more than {MAX_DOCUMENT} bytes")
    return body


class JwksCache:
    """The issuer's keys: see the module docstring. ``url`` names the JWKS (it may discover it first)."""

    def __init__(
        self,
        url: Callable[[], Awaitable[str]],
        *,
        refresh: float = 300.0,
        timeout: float = 5.0,
        min_gap: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        fetch: Fetch | None = None,
    ) -> None:
        self._url = url
        self.refresh = refresh
        self.timeout = timeout
        self.min_gap = min(min_gap, refresh)
        self._clock = clock
        self._fetch: Fetch = fetch or (lambda u: http_get(u, timeout))
        self._keys: dict[str, list[Key]] = {}
        self._fetched: float | None = None  # when the keys held were read
        self._started: float | None = None  # when the last fetch started (success or not)
        self._inflight: asyncio.Task[bool] | None = None
        self._unknown: dict[str, float] = {}  # key id -> until when it is known to be unknown
        self.fetches = 0

    async def key(self, kid: str, alg: str) -> Any | None:
        """The public key ``kid`` names for ``alg``, or None (unknown, of another type, or no fresh keys)."""
        now = self._clock()
        age = None if self._fetched is None else now - self._fetched
        if age is None or age >= self.refresh:
            await self._await_fetch(start=self._may_start(now))
            if self._fetched is None or self._clock() - self._fetched >= self.refresh:
                self._keys = {}  # fail closed: keys we cannot confirm are no longer trusted
                return None
        elif age >= 0.8 * self.refresh and self._may_start(now):
            self._start()  # ahead of expiry, in the background
        found = self._find(kid, alg)
        if found is not None or kid in self._keys:
            return found
        if self._unknown.get(kid, 0.0) > now:
            return None
        if self._inflight is None and not self._may_start(now):
            return None
        await self._await_fetch(start=True)
        found = self._find(kid, alg)
        if kid not in self._keys and self._fetched is not None and self._fetched >= now:
            self._remember_unknown(kid)
        return found

    def _find(self, kid: str, alg: str) -> Any | None:
        return next((k.key for k in self._keys.get(kid, []) if k.fits(alg)), None)

    def _may_start(self, now: float) -> bool:
        return self._inflight is None and (self._started is None or now - self._started >= self.min_gap)

    def _start(self) -> asyncio.Task[bool]:
        if self._inflight is None:
            self._started = self._clock()
            self._inflight = asyncio.get_running_loop().create_task(self._run_fetch())
        return self._inflight

    async def _await_fetch(self, *, start: bool) -> None:
        """Wait (bounded) for the fetch in flight, starting one if ``start``; a caller's cancel never stops it."""
        task = self._start() if start else self._inflight
        if task is None:
            return
        with anyio.move_on_after(self.timeout + 1):
            await asyncio.shield(task)

    async def _run_fetch(self) -> bool:
        try:
            with anyio.fail_after(self.timeout):
                url = await self._url()
                body = await self._fetch(url)
            keys = parse_jwks(body)
        except Exception as exc:  # the issuer is down, slow or answers garbage: keep what we have, for now
            log.warning("cannot read the OIDC issuer's keys (JWKS): %s", _describe(exc))
            return False
        finally:
            self._inflight = None
            self.fetches += 1
        self._keys, self._fetched = keys, self._clock()
        for kid in keys:
            self._unknown.pop(kid, None)
        return True

    def _remember_unknown(self, kid: str) -> None:
        if len(self._unknown) >= MAX_UNKNOWN:
            self._unknown.pop(next(iter(self._unknown)))
        self._unknown[kid] = self._clock() + self.min_gap


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {str(exc)[:200]}"
