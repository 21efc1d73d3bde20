"""Streamable HTTP transport, hardened: loopback by default, bearer token required elsewhere.

- Binding to anything but loopback without ``--http-bearer-token`` is refused at start.
- With a token, every request except ``GET /health`` needs ``Authorization: Bearer <token>``
  (compared in constant time); others get 401 before reaching MCP.
- DNS-rebinding protection is always on: loopback hosts plus ``--allowed-hosts``.
- Request bodies are capped (``--max-request-bytes``) by the SDK transport.
- ``GET /health`` answers without authentication and without touching the cluster.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pve_steward import __version__
from pve_steward.config import Settings

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
OPEN_PATHS = frozenset({"/health"})

ASGIApp = Any


class UnsafeBind(ValueError):
    """Serving MCP on a network interface without authentication."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(settings: Settings) -> None:
    if not is_loopback(settings.http_host) and settings.http_bearer_token is None:
        raise UnsafeBind(
            f"refusing to serve MCP on {settings.http_host} without --http-bearer-token: anyone who can reach "
            "that address could operate the cluster. Set a token (PVE_STEWARD_HTTP_BEARER_TOKEN) or bind 127.0.0.1."
        )


def transport_security(settings: Settings) -> TransportSecuritySettings:
    hosts = LOOPBACK_HOSTS + list(settings.allowed_hosts)
    origins = (
        LOOPBACK_ORIGINS
        + [f"http://{h}" for h in settings.allowed_hosts]
        + [f"https://{h}" for h in settings.allowed_hosts]
    )
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class BearerAuth:
    """ASGI middleware: a static bearer token in front of everything but the open paths."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not hmac.compare_digest(given, self._expected):
            body = json.dumps({"error": "missing or invalid bearer token"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="pve-steward"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def build_http_app(mcp: Any, settings: Settings) -> ASGIApp:
    """The ASGI app: MCP at /mcp, /health, DNS-rebinding protection, size cap, optional bearer auth."""
    check_bind(settings)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "server": "pve-steward", "version": __version__})

    mcp.custom_route("/health", methods=["GET"])(health)

    app = mcp.streamable_http_app(
        transport_security=transport_security(settings),
        max_request_body_size=settings.max_request_bytes,
        host=settings.http_host,
    )
    token = settings.http_bearer_token
    return BearerAuth(app, token.get_secret_value()) if token is not None else app


def run_http(mcp: Any, settings: Settings) -> None:
    import uvicorn

    app = build_http_app(mcp, settings)
    uvicorn.run(app, host=settings.http_host, port=settings.http_port, log_level="warning")
