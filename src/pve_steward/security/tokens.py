"""Confirmation tokens for two-phase writes: HMAC-bound to exactly what was previewed.

A token signs the operation, every effect-bearing parameter, the target the server resolved
(node, guest, type), a fingerprint of the target's state (the config ``digest`` where PVE has
one), the issue time and a nonce. Verification refuses a token that is malformed, signed with
another key or altered, issued for another operation, parameters or target, expired, already
used (single use, per process), or whose target changed since the preview.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
from pathlib import Path
from typing import Any

VERSION = 1


class TokenRefused(Exception):
    """The confirmation token cannot be used; the message says why and what to do."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


class TokenSigner:
    """Issues and checks tokens; the key is shared by replicas through ``confirm_key_file``."""

    def __init__(self, key: bytes | None = None, ttl: int = 300) -> None:
        self._key = key or secrets.token_bytes(32)
        if len(self._key) < 32:
            raise ValueError("the confirmation key must be at least 32 bytes")
        self.ttl = ttl
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path | None, ttl: int) -> TokenSigner:
        if path is None:
            return cls(ttl=ttl)
        try:
            raw = path.read_bytes().strip()
        except OSError as exc:
            raise ValueError(f"cannot read confirm_key_file {path}: {exc.strerror}") from exc
        return cls(raw, ttl)

    def derived_key(self, purpose: str) -> bytes:
        """A separate key for another purpose (e.g. sealing MCP request state), same secret source."""
        return hmac.new(self._key, f"pve-steward/{purpose}".encode(), hashlib.sha256).digest()

    def issue(
        self, op: str, params: dict[str, Any], target: dict[str, Any], state: str, now: float, summary: str = ""
    ) -> str:
        """Sign what was previewed; ``summary`` is the human-readable action (shown when asking the human)."""
        payload = {
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
        return f"{_b64(body)}.{_b64(mac)}"

    def _decode(self, token: str) -> dict[str, Any]:
        try:
            body_text, mac_text = token.split(".")
            body, mac = _unb64(body_text), _unb64(mac_text)
        except (ValueError, TypeError) as exc:
            raise TokenRefused("the confirmation token is malformed; run the preview again to get a new one") from exc
        expected = hmac.new(self._key, body, hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            raise TokenRefused(
                "the confirmation token was altered or was issued by another server key; run the preview again"
            )
        payload: dict[str, Any] = json.loads(body)
        if payload.get("v") != VERSION:
            raise TokenRefused("the confirmation token has an unknown version; run the preview again")
        return payload

    def peek(self, token: str) -> dict[str, Any] | None:
        """The payload of a correctly signed token (no other check), else None."""
        try:
            return self._decode(token)
        except TokenRefused:
            return None

    def check(self, token: str, op: str, params: dict[str, Any], now: float) -> dict[str, Any]:
        """Validate signature, operation, parameters, expiry and single use; return the payload.

        Runs before the target is re-resolved, so a replayed or stale token is named as such rather
        than as a failed precondition. The target and its state are checked by :meth:`check_target`.
        """
        payload = self._decode(token)
        if payload["op"] != op:
            raise TokenRefused(f"this confirmation token was issued for '{payload['op']}', not '{op}'")
        changed = sorted(k for k in set(payload["p"]) | set(params) if payload["p"].get(k) != params.get(k))
        if changed:
            raise TokenRefused(
                "the parameters differ from the preview (" + ", ".join(changed) + "); "
                "preview again with the values you want"
            )
        if now > payload["exp"]:
            raise TokenRefused(f"the confirmation token expired ({self.ttl}s lifetime); preview again")
        with self._lock:
            self._used = {n: exp for n, exp in self._used.items() if exp >= now}
            if payload["n"] in self._used:
                raise TokenRefused("this confirmation token was already used; a token confirms one execution")
        return payload

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

    def consume(self, payload: dict[str, Any]) -> None:
        """Mark a checked token as used (call right before executing)."""
        with self._lock:
            if payload["n"] in self._used:
                raise TokenRefused("this confirmation token was already used; a token confirms one execution")
            self._used[payload["n"]] = float(payload["exp"])
