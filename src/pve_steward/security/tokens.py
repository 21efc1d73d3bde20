"""Confirmation tokens for two-phase writes: HMAC-bound to exactly what was previewed.

A token signs the operation, every effect-bearing parameter, the target the server resolved
(node, guest, type), a fingerprint of the target's state (the config ``digest`` where PVE has
one), the issue time and a nonce, the cluster it was issued for (PVE address + API token id),
the principal (when the transport authenticates one) and a digest of the exact call's arguments.
Verification refuses a token that is malformed or spelled in a non-canonical base64 form, signed
with another key or altered, issued for another operation, parameters, target, cluster or
principal, expired, already used (single use, kept in a :mod:`usedtokens` store that survives
restarts and is shared by processes and replicas), or whose target changed since the preview.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Any

from pve_steward.observe import metrics
from pve_steward.security.usedtokens import (
    DEFAULT_TIMEOUT,
    ClaimExpired,
    MemoryStore,
    StoreUnavailable,
    UsedTokenStore,
    call,
)

VERSION = 1


class TokenRefused(Exception):
    """The confirmation token cannot be used; the message says why and what to do.

    ``kind`` (expired, replayed, mismatch, invalid, store_unavailable) labels the refusal in metrics.
    """

    def __init__(self, message: str, kind: str = "mismatch") -> None:
        super().__init__(message)
        self.kind = kind


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """Decode unpadded base64url; only the one canonical spelling of the bytes is accepted."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:  # other alphabets, padding, or unused low bits set in the last character
        raise ValueError("non-canonical base64")
    return data


def binding_of(cluster: str, principal: str | None, name: str | None = None) -> dict[str, str | None]:
    """What a token is bound to besides the call: this cluster and this principal (hashed, they are long).

    ``name`` is the configured cluster name when the config file names clusters; it is kept in clear
    (``cn``) so a token shown on another cluster is refused naming both. Without it the token is as before.
    """
    binding = {
        "cl": hashlib.sha256(cluster.encode()).hexdigest()[:16],
        "pr": None if principal is None else hashlib.sha256(principal.encode()).hexdigest()[:16],
    }
    return binding if name is None else {"cn": name, **binding}


def _key_bytes(raw: bytes) -> bytes:
    """A key file's key: text keys (hex, base64, a passphrase) lose surrounding whitespace and the newline an
    editor adds; binary keys (``head -c 32 /dev/urandom``) are taken as they are, since any byte, a space or
    a newline included, is part of them."""
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        return raw
    return text.encode() if text.isprintable() else raw


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


class TokenSigner:
    """Issues and checks tokens; the key is shared by replicas through ``confirm_key_file``."""

    def __init__(
        self,
        key: bytes | None = None,
        ttl: int = 300,
        store: UsedTokenStore | None = None,
        store_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._key = key or secrets.token_bytes(32)
        if len(self._key) < 32:
            raise ValueError("the confirmation key must be at least 32 bytes")
        self.ttl = ttl
        self.store: UsedTokenStore = store if store is not None else MemoryStore()
        self.store_timeout = store_timeout

    @classmethod
    def from_file(
        cls, path: Path | None, ttl: int, store: UsedTokenStore | None = None, store_timeout: float = DEFAULT_TIMEOUT
    ) -> TokenSigner:
        if path is None:
            return cls(ttl=ttl, store=store, store_timeout=store_timeout)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read confirm_key_file {path}: {exc.strerror}") from exc
        return cls(_key_bytes(raw), ttl, store, store_timeout)

    def derived_key(self, purpose: str) -> bytes:
        """A separate key for another purpose (e.g. sealing MCP request state), same secret source."""
        return hmac.new(self._key, f"pve-steward/{purpose}".encode(), hashlib.sha256).digest()

    def issue(
        self,
        op: str,
        params: dict[str, Any],
        target: dict[str, Any],
        state: str,
        now: float,
        summary: str = "",
        binding: dict[str, str | None] | None = None,
        call: str | None = None,
    ) -> str:
        """Sign what was previewed; ``summary`` is the human-readable action (shown when asking the human).

        ``binding`` (see :func:`binding_of`) ties the token to a cluster and principal; ``call`` is a
        digest of the call's own arguments, so the question asked of the human is about this call.
        """
        payload = {
            **(binding or {}),
            "c": call,
            "v": VERSION,
            "op": op,
            "p": params,
            "t": target,
            "s": state,
            "iat": int(now),
            "exp": int(now) + self.ttl,
            "n": secrets.token_hex(8),
            "sum": summary,
        }
        body = _canonical(payload)
        mac = hmac.new(self._key, body, hashlib.sha256).digest()
        metrics.TOKENS.labels(event="issued", reason="").inc()
        return f"{_b64(body)}.{_b64(mac)}"

    def _decode(self, token: str) -> dict[str, Any]:
        try:
            body_text, mac_text = token.split(".")
            body, mac = _unb64(body_text), _unb64(mac_text)
        except (ValueError, TypeError) as exc:
            raise TokenRefused(
                "the confirmation token is malformed; run the preview again to get a new one", "invalid"
            ) from exc
        expected = hmac.new(self._key, body, hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            raise TokenRefused(
                "the confirmation token was altered or was issued by another server key; run the preview again",
                "invalid",
            )
        payload: dict[str, Any] = json.loads(body)
        if payload.get("v") != VERSION:
            raise TokenRefused("the confirmation token has an unknown version; run the preview again", "invalid")
        return payload

    def peek(self, token: str) -> dict[str, Any] | None:
        """The payload of a correctly signed token (no other check), else None."""
        try:
            return self._decode(token)
        except TokenRefused:
            return None

    def verify(
        self,
        token: str,
        op: str,
        params: dict[str, Any],
        now: float,
        binding: dict[str, str | None] | None = None,
    ) -> dict[str, Any]:
        """Validate signature, binding, operation, parameters and expiry (not single use); return the payload."""
        payload = self._decode(token)
        if binding is not None and payload.get("cn") != binding.get("cn"):
            issued = f"cluster '{payload['cn']}'" if payload.get("cn") else "a server without named clusters"
            here = f"cluster '{binding['cn']}'" if binding.get("cn") else "this server"
            raise TokenRefused(f"this confirmation token was issued for {issued}, not {here}; preview again on {here}")
        for key, what in (("cl", "another cluster or PVE API token"), ("pr", "another authenticated principal")):
            if binding is not None and payload.get(key) != binding.get(key):
                raise TokenRefused(f"this confirmation token was issued for {what}; preview again here")
        if payload["op"] != op:
            raise TokenRefused(f"this confirmation token was issued for '{payload['op']}', not '{op}'")
        changed = sorted(k for k in set(payload["p"]) | set(params) if payload["p"].get(k) != params.get(k))
        if changed:
            raise TokenRefused(
                "the parameters differ from the preview (" + ", ".join(changed) + "); "
                "preview again with the values you want"
            )
        if now > payload["exp"]:
            raise TokenRefused(f"the confirmation token expired ({self.ttl}s lifetime); preview again", "expired")
        return payload

    async def check(
        self,
        token: str,
        op: str,
        params: dict[str, Any],
        now: float,
        binding: dict[str, str | None] | None = None,
    ) -> dict[str, Any]:
        """:meth:`verify`, then single use; return the payload.

        Runs before the target is re-resolved, so a replayed or stale token is named as such rather
        than as a failed precondition. The target and its state are checked by :meth:`check_target`.
        """
        payload = self.verify(token, op, params, now, binding)
        if await self.is_used(payload):
            raise TokenRefused("this confirmation token was already used; a token confirms one execution", "replayed")
        return payload

    async def is_used(self, payload: dict[str, Any]) -> bool:
        """Whether the token's nonce was claimed (fails closed: an unreachable store refuses)."""
        store, nonce = self.store, str(payload["n"])
        try:
            return await call(store, lambda: store.is_used(nonce), self.store_timeout)
        except StoreUnavailable as exc:
            raise TokenRefused(
                f"{exc}; writes are refused until it answers (fail closed)", "store_unavailable"
            ) from None

    @staticmethod
    def check_target(payload: dict[str, Any], target: dict[str, Any], state: str) -> None:
        """The target the server resolves now must be the previewed one, in the same state."""
        if payload["t"] != target:
            raise TokenRefused(
                f"the target changed since the preview (was {payload['t']}, now {target}); preview again"
            )
        if payload["s"] != state:
            raise TokenRefused(
                "the target's state changed since the preview (config digest, status or lock differ); preview again"
            )

    async def consume(self, payload: dict[str, Any]) -> None:
        """Claim a checked token's nonce, atomically (call right before executing).

        The claim is the single decision: of two calls, processes or replicas racing with one token,
        exactly one gets past this line. A store whose own clock (Redis) sees the token expired refuses it.
        """
        store, nonce, expires = self.store, str(payload["n"]), float(payload["exp"])
        try:
            claimed = await call(store, lambda: store.claim(nonce, expires), self.store_timeout)
        except StoreUnavailable as exc:
            raise TokenRefused(
                f"{exc}; writes are refused until it answers (fail closed)", "store_unavailable"
            ) from None
        except ClaimExpired:
            raise TokenRefused(
                f"the confirmation token expired ({self.ttl}s lifetime, by the clock the replicas share); "
                "preview again",
                "expired",
            ) from None
        if not claimed:
            raise TokenRefused("this confirmation token was already used; a token confirms one execution", "replayed")
        metrics.TOKENS.labels(event="confirmed", reason="").inc()
