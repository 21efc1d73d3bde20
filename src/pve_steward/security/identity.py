"""Who is calling (HTTP): OIDC access tokens (JWT) or named static tokens, each a principal with its limits.

The server is an OAuth 2.1 resource server through the MCP SDK (``token_verifier`` + ``AuthSettings``,
which also serves the RFC 9728 protected-resource metadata and answers 401 with ``WWW-Authenticate``).
This verifier accepts:

- **JWTs from an OIDC issuer**: signed by a key of the issuer's JWKS that fits the token's algorithm
  (``jwks.py``: asymmetric algorithms only, withdrawn keys dropped within ``oidc_jwks_refresh``),
  with ``iss``, ``aud`` and a numeric ``exp`` (30 s leeway; ``nbf`` and ``iat`` numeric when present).
  The principal is the ``oidc_principal_claim`` (default ``sub``), namespaced by the issuer.
- **Named static tokens** from the principals file: only the SHA-256 of each token is stored;
  comparison is constant-time.

The principal (``authority.Principal``: id ``static:NAME`` or ``oidc:ISSUER#SUBJECT`` and the grants of
its principals-file entries) rides in the SDK's ``AccessToken``; ``authority.refusal`` decides with it on
every path, every audit record names its id, and confirmation tokens are bound to it (tokens.py).
Anything wrong with a bearer token is a refusal (401), never an error of the server.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.provider import AccessToken, TokenVerifier

from pve_steward.security.authority import Principal
from pve_steward.security.jwks import ALGORITHMS, JwksCache, http_get
from pve_steward.security.principals import PrincipalsFile, load_principals

__all__ = ["IdentityVerifier", "OidcSettings", "PrincipalsFile", "load_principals"]
log = logging.getLogger(__name__)
LEEWAY_S = 30
MAX_KID = 256
MAX_SUBJECT = 255  # OIDC Core 1.0, 2: sub is at most 255 ASCII characters


@dataclass(frozen=True)
class OidcSettings:
    issuer: str
    audience: str
    jwks_url: str | None = None
    principal_claim: str = "sub"
    groups_claim: str = "groups"
    jwks_refresh: float = 300.0


class Refused(ValueError):
    """A bearer token that is not accepted; the message is logged (never the token), the caller gets 401."""


def _is_loopback_http(url: str) -> bool:
    return url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))


def _require_https(url: str, what: str) -> None:
    if not url.startswith("https://") and not _is_loopback_http(url):
        raise ValueError(f"{what} must be an https:// URL (plain http only on loopback, for tests): {url}")


class IdentityVerifier(TokenVerifier):
    """The SDK's token verifier: a JWT from the OIDC issuer, or a named static token."""

    def __init__(self, principals: PrincipalsFile, oidc: OidcSettings | None, jwks: JwksCache | None = None) -> None:
        self._principals = principals
        self._oidc = oidc
        self._jwks_url: str | None = None if oidc is None else oidc.jwks_url
        if oidc is not None:
            _require_https(oidc.issuer, "oidc_issuer")
            if oidc.jwks_url:
                _require_https(oidc.jwks_url, "oidc_jwks_url")
        self.jwks = jwks or (JwksCache(self._jwks_location, refresh=oidc.jwks_refresh) if oidc else None)

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            static = self._static(token)
            if static is not None or self._oidc is None or token.count(".") != 2:
                return static
            return await self._verify_jwt(token)
        except Refused as exc:
            log.info("bearer token refused: %s", exc)
        except Exception as exc:  # whatever a token or a key holds, the caller gets 401, never a 500
            log.info("bearer token refused: %s", type(exc).__name__)
        return None

    def _static(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        for entry in self._principals.tokens:
            if hmac.compare_digest(digest, entry.sha256):
                return _access(token, self._principals.static(entry), None, None)
        return None

    async def _verify_jwt(self, token: str) -> AccessToken:
        import jwt

        assert self._oidc is not None and self.jwks is not None
        oidc = self._oidc
        header = jwt.get_unverified_header(token)
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise Refused(f"algorithm {str(alg)[:20]!r} is not accepted")
        if not isinstance(kid, str) or not 0 < len(kid) <= MAX_KID:
            raise Refused("the token names no usable key id (kid)")
        key = await self.jwks.key(kid, alg)
        if key is None:
            raise Refused(f"no key {kid[:64]!r} for {alg} in the issuer's current keys")
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[alg],
            audience=oidc.audience,
            issuer=oidc.issuer,
            leeway=LEEWAY_S,
            options={"require": ["exp", "iss", "aud"]},
        )
        for name in ("exp", "nbf", "iat"):  # PyJWT reads '"exp": "9999999999"' as a number; RFC 7519 says NumericDate
            value = claims.get(name)
            if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise Refused(f"claim {name} is not a number")
        subject = claims.get(oidc.principal_claim)
        if not isinstance(subject, str) or not 0 < len(subject) <= MAX_SUBJECT:
            raise Refused(f"no usable {oidc.principal_claim} claim")
        groups = claims.get(oidc.groups_claim) or []
        names = [str(g) for g in groups] if isinstance(groups, list) else [str(groups)]
        principal = self._principals.oidc(oidc.issuer, subject, names)
        return _access(token, principal, oidc.issuer, int(claims["exp"]))

    async def _jwks_location(self) -> str:
        """The JWKS URL: configured, or the issuer's ``jwks_uri`` (OIDC Discovery 1.0, section 4), found once."""
        if self._jwks_url is None:
            assert self._oidc is not None
            url = self._oidc.issuer.rstrip("/") + "/.well-known/openid-configuration"
            config = json.loads(await http_get(url, 5.0))
            found = config.get("jwks_uri") if isinstance(config, dict) else None
            if not isinstance(found, str):
                raise ValueError(f"the OpenID configuration of {self._oidc.issuer} names no jwks_uri")
            _require_https(found, "the issuer's jwks_uri")
            self._jwks_url = found
        return self._jwks_url


def _access(token: str, principal: Principal, issuer: str | None, expires: int | None) -> AccessToken:
    """The SDK's view of the caller: its ids are the namespaced principal id (the SDK binds sessions to them)."""
    claims = principal.claims() | ({"iss": issuer} if issuer is not None else {})
    return AccessToken(
        token=token,
        client_id=principal.id,
        subject=principal.id,
        scopes=[],
        expires_at=expires,
        claims=claims,
    )
