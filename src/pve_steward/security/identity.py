"""Who is calling (HTTP): OIDC access tokens (JWT) or named static tokens, each mapped to a tier ceiling.

The server is an OAuth 2.1 resource server through the MCP SDK (``token_verifier`` + ``AuthSettings``,
which also serves the RFC 9728 protected-resource metadata and answers 401 with ``WWW-Authenticate``).
This verifier accepts:

- **JWTs from an OIDC issuer**: signature by a key from the issuer's JWKS (discovered from
  ``/.well-known/openid-configuration`` unless ``oidc_jwks_url`` is given), ``iss``, ``aud``, ``exp``
  (required, 30 s leeway), an asymmetric algorithm only (no ``none``, no HMAC: a JWKS publishes public
  keys). The principal is the ``oidc_principal_claim`` (default ``sub``); its groups
  (``oidc_groups_claim``) map to a tier ceiling and clusters through the principals file.
- **Named static tokens** from the principals file (``[[tokens]] name, sha256, tier``): for small teams
  without an identity provider. Only the SHA-256 of each token is stored; comparison is constant-time.

The principal's tier is a ceiling below the server's ``--tier``: a write above it is refused at call
time naming the principal's tier (guard.py). The principal is in every audit record and bound into
confirmation tokens (tokens.py ``binding_of``), so a token previewed by alice is refused for bob.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.server.auth.provider import AccessToken, TokenVerifier
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pve_steward.security.files import refuse_exposed
from pve_steward.security.tiers import Tier

log = logging.getLogger(__name__)
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]
LEEWAY_S = 30


class StaticToken(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the token (printf %s TOKEN | sha256sum)")
    tier: Tier = Tier.READ_ONLY
    clusters: list[str] | None = None


class GroupRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    group: str = Field(min_length=1)
    tier: Tier = Tier.READ_ONLY
    clusters: list[str] | None = None


class PrincipalsFile(BaseModel):
    """The principals file (TOML): static tokens, OIDC group rules, the tier of an OIDC user in no group."""

    model_config = ConfigDict(extra="forbid")
    default_tier: Tier = Tier.READ_ONLY
    tokens: list[StaticToken] = Field(default_factory=list)
    groups: list[GroupRule] = Field(default_factory=list)


@dataclass(frozen=True)
class OidcSettings:
    issuer: str
    audience: str
    jwks_url: str | None = None
    principal_claim: str = "sub"
    groups_claim: str = "groups"


def load_principals(path: Path | None) -> PrincipalsFile:
    """Read and check the principals file; every problem names the entry and the field."""
    if path is None:
        return PrincipalsFile()
    refuse_exposed(path, "principals_file")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        parsed = PrincipalsFile.model_validate(raw)
    except OSError as exc:
        raise ValueError(f"cannot read principals_file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"principals_file {path} is not valid TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"principals_file {path}: {where}: {first['msg']}") from None
    names = [t.name for t in parsed.tokens]
    if len(names) != len(set(names)):
        raise ValueError(f"principals_file {path}: two static tokens share a name")
    return parsed


def _is_loopback_http(url: str) -> bool:
    return url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))


def _require_https(url: str, what: str) -> None:
    if not url.startswith("https://") and not _is_loopback_http(url):
        raise ValueError(f"{what} must be an https:// URL (plain http only on loopback, for tests): {url}")


class IdentityVerifier(TokenVerifier):
    """The SDK's token verifier: a JWT from the OIDC issuer, or a named static token."""

    def __init__(self, principals: PrincipalsFile, oidc: OidcSettings | None) -> None:
        self._principals = principals
        self._oidc = oidc
        self._jwks: Any = None  # jwt.PyJWKClient, made on first use (it fetches the issuer's keys)
        if oidc is not None:
            _require_https(oidc.issuer, "oidc_issuer")
            if oidc.jwks_url:
                _require_https(oidc.jwks_url, "oidc_jwks_url")

    async def verify_token(self, token: str) -> AccessToken | None:
        static = self._static(token)
        if static is not None:
            return static
        if self._oidc is None or token.count(".") != 2:
            return None
        return await anyio.to_thread.run_sync(self._verify_jwt, token)

    def _static(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        for entry in self._principals.tokens:
            if hmac.compare_digest(digest, entry.sha256):
                return _access(token, entry.name, entry.tier, entry.clusters, "static", None)
        return None

    def _verify_jwt(self, token: str) -> AccessToken | None:
        import jwt

        assert self._oidc is not None
        oidc = self._oidc
        try:
            key = self._keys().get_signing_key_from_jwt(token).key
            claims = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=oidc.audience,
                issuer=oidc.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, OSError, ValueError) as exc:
            log.info("bearer token refused: %s", type(exc).__name__)
            return None
        principal = claims.get(oidc.principal_claim)
        if not isinstance(principal, str) or not principal:
            log.info("bearer token refused: no %s claim", oidc.principal_claim)
            return None
        groups = claims.get(oidc.groups_claim) or []
        tier, clusters = self._map_groups([str(g) for g in groups] if isinstance(groups, list) else [str(groups)])
        return _access(token, principal, tier, clusters, "oidc", int(claims["exp"]))

    def _map_groups(self, groups: list[str]) -> tuple[Tier, list[str] | None]:
        """The highest tier of the matching group rules, and the union of their clusters (None: all)."""
        rules = [r for r in self._principals.groups if r.group in groups]
        if not rules:
            return self._principals.default_tier, None
        tier = max((r.tier for r in rules), key=lambda t: t.rank)
        if any(r.clusters is None for r in rules):
            return tier, None
        return tier, sorted({c for r in rules for c in r.clusters or []})

    def _keys(self) -> Any:
        import jwt

        if self._jwks is None:
            assert self._oidc is not None
            url = self._oidc.jwks_url or _discover_jwks(self._oidc.issuer)
            self._jwks = jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=5)
        return self._jwks


def _discover_jwks(issuer: str) -> str:
    """The issuer's ``jwks_uri`` from its OpenID configuration (OIDC Discovery 1.0, section 4)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    with urllib.request.urlopen(url, timeout=5) as answer:  # https enforced in __init__
        config = json.loads(answer.read(1_000_000))
    jwks = config.get("jwks_uri")
    if not isinstance(jwks, str):
        raise ValueError(f"the OpenID configuration of {issuer} names no jwks_uri")
    _require_https(jwks, "the issuer's jwks_uri")
    return jwks


def _access(
    token: str, name: str, tier: Tier, clusters: list[str] | None, source: str, expires: int | None
) -> AccessToken:
    return AccessToken(
        token=token,
        client_id=name,
        subject=name,
        scopes=[f"tier:{tier.value}"],
        expires_at=expires,
        claims={"tier": tier.value, "clusters": clusters, "source": source},
    )


def principal_tier(access: AccessToken | None) -> Tier | None:
    """The tier ceiling of the authenticated principal (None: nobody authenticated, e.g. stdio)."""
    if access is None or not access.claims:
        return None
    value = access.claims.get("tier")
    return Tier(value) if isinstance(value, str) else None
