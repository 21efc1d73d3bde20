"""Streamable HTTP transport, hardened: loopback by default, bearer token required elsewhere.

- Binding to anything but loopback without ``--http-bearer-token`` is refused at start.
- With a token, every request except ``GET /health`` needs ``Authorization: Bearer <token>``
  (compared in constant time); others get 401 before reaching MCP.
- DNS-rebinding protection is always on: loopback hosts plus ``--allowed-hosts``.
  Listening on a non-loopback address without ``--allowed-hosts`` warns at start; a 421 names the flag.
- Request bodies are capped (``--max-request-bytes``) by the SDK transport.
- Slow clients cannot hold connections: headers must arrive within ``--http-header-timeout`` and a
  body within ``--http-body-timeout``; one client address may hold ``--http-max-connections-per-client``
  connections; MCP sessions are capped (``--http-max-sessions``) and expire when idle.
- ``GET /health`` (liveness) answers without authentication and without touching the cluster.
- ``GET /ready`` (readiness) answers 200 when the PVE cluster and, with writes, the used-token store
  answer, else 503 naming what failed (see ``readiness.py``); no authentication, no cluster data.
- ``GET /metrics`` is Prometheus' text format (see ``metrics.py``); it needs the bearer token when one is set.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import h11
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pve_steward import __version__
from pve_steward.config import Settings
from pve_steward.observe import metrics
from pve_steward.pveio.urgency import URGENCY

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
OPEN_PATHS = frozenset({"/health", "/ready"})

ASGIApp = Any
log = logging.getLogger(__name__)
_SHOWABLE_HOST = re.compile(r"^[A-Za-z0-9.\-\[\]:]{1,100}$")


class UnsafeBind(ValueError):
    """Serving MCP on a network interface without authentication."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def identified(settings: Settings) -> bool:
    """Callers are identified by the SDK's resource server (OIDC or named tokens; security/identity.py)."""
    return settings.oidc_issuer is not None or settings.principals_file is not None


def check_bind(settings: Settings) -> None:
    if not is_loopback(settings.http_host) and settings.http_bearer_token is None and not identified(settings):
        raise UnsafeBind(
            f"refusing to serve MCP on {settings.http_host} without --http-bearer-token: anyone who can reach "
            "that address could operate the cluster. Set a token (PVE_STEWARD_HTTP_BEARER_TOKEN) or bind 127.0.0.1."
        )


def bind_warnings(settings: Settings) -> list[str]:
    """What is allowed but probably not meant: a network address that only loopback Host headers may reach."""
    if not is_loopback(settings.http_host) and not settings.allowed_hosts:
        return [
            f"listening on {settings.http_host} without --allowed-hosts: only requests whose Host header is a "
            "loopback name are accepted (DNS-rebinding protection), so clients reaching this address by name or "
            "IP get 421. Add the names they use, e.g. --allowed-hosts mcp.example.lan:*"
        ]
    return []


def transport_security(settings: Settings) -> TransportSecuritySettings:
    hosts = LOOPBACK_HOSTS + list(settings.allowed_hosts)
    origins = (
        LOOPBACK_ORIGINS
        + [f"http://{h}" for h in settings.allowed_hosts]
        + [f"https://{h}" for h in settings.allowed_hosts]
    )
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class BearerAuth:
    """ASGI middleware: a static bearer token in front of everything but the open paths.

    With identity on (``verifier``), MCP itself is guarded by the SDK's resource server; this middleware
    then guards only ``/metrics`` (custom routes are never authenticated by the SDK), accepting the
    static token when one is set or any identified principal's token.
    """

    def __init__(self, app: ASGIApp, token: str | None, verifier: Any = None) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode() if token is not None else None
        self._verifier = verifier

    async def _allowed(self, given: bytes) -> bool:
        if self._expected is not None and hmac.compare_digest(given, self._expected):
            return True
        if self._verifier is not None and given.startswith(b"Bearer "):
            return await self._verifier.verify_token(given[7:].decode("latin-1")) is not None
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or path in OPEN_PATHS or (self._verifier is not None and path != "/metrics"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not await self._allowed(given):
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


class HostHint:
    """ASGI middleware: a 421 (Host header refused) says which flag admits the host."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        state = {"misdirected": False}

        async def hinted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 421:
                state["misdirected"] = True
                body = misdirected_body(host)
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(body)).encode()))
                await send({**message, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            if state["misdirected"]:
                return  # the original body is replaced
            await send(message)

        await self.app(scope, receive, hinted)


def misdirected_body(host: str) -> bytes:
    shown = host if _SHOWABLE_HOST.match(host) else "this host"
    name = shown.rsplit(":", 1)[0] if shown.count(":") == 1 else shown
    return (
        f"Host header {shown!r} is not allowed (DNS-rebinding protection accepts loopback names only). If clients "
        f"reach this server under that name, start it with --allowed-hosts {name}:* "
        "(env PVE_STEWARD_ALLOWED_HOSTS).\n"
    ).encode()


def build_http_app(mcp: Any, settings: Settings) -> ASGIApp:
    """The ASGI app: MCP at /mcp, /health, /metrics, DNS-rebinding protection, size cap, optional bearer auth."""
    check_bind(settings)
    metrics.keep()  # this process serves /metrics: it counts

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "server": "pve-steward", "version": __version__})

    async def ready(request: Request) -> Response:
        readiness = getattr(mcp, "readiness", None)
        if readiness is None:
            return JSONResponse({"status": "ready", "checks": {}})
        ok, checks = await readiness.check()
        body = {"status": "ready" if ok else "not ready", "checks": checks}
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics_text(request: Request) -> Response:
        from pve_steward.serving.worker.link import LINKS

        others = [await link.metrics() for link in list(LINKS)]  # the diagnostics process's series, added in
        return Response(metrics.render(others), media_type=metrics.CONTENT_TYPE)

    mcp.custom_route("/health", methods=["GET"])(health)
    mcp.custom_route("/ready", methods=["GET"])(ready)
    mcp.custom_route("/metrics", methods=["GET"])(metrics_text)

    app = mcp.streamable_http_app(
        transport_security=transport_security(settings),
        max_request_body_size=settings.max_request_bytes,
        session_idle_timeout=settings.http_session_idle_timeout,
        max_sessions=settings.http_max_sessions,
        host=settings.http_host,
    )
    app = HostHint(Precedence(app, getattr(mcp, "cheap", None)))
    token = settings.http_bearer_token
    secret = token.get_secret_value() if token is not None else None
    verifier = getattr(mcp, "identity", None)
    return BearerAuth(app, secret, verifier) if secret is not None or verifier is not None else app


# a new client's first request; the SDK answers it from what it knows (no tool, no cluster I/O)
HANDSHAKES = frozenset(["server/discover", "initialize"])


class Precedence:
    """ASGI middleware: an MCP request is a cheap call from its first byte (urgency.Urgency), so its
    parsing and answer go before heavy work too; a heavy tool call gives that up when it starts.

    With ``cheap`` (the server's own classifier), a heavy tool call is known from its body before the SDK
    parses it: it is not marked, and each of its steps on the event loop (its start, its answer) waits
    for its turn (``Urgency.heavy_turn``) and then holds the lane until it parks or its response is
    written. A handshake (a new client's ``server/discover`` or ``initialize``) takes the lane the same
    way: fifty clients connecting at once cost about 75 ms of the event loop, which ran ahead of a cheap
    call's next step (issue 17, design record 261204-38).
    """

    PEEK_BYTES = 64 * 1024  # a tools/call request is a few hundred bytes; a larger body is not looked into

    def __init__(self, app: ASGIApp, cheap: Callable[[str, dict[str, Any]], bool] | None = None) -> None:
        self.app = app
        self.cheap = cheap

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        if self.cheap is None:
            with URGENCY.urgent():
                await self.app(scope, receive, send)
            return
        first = await receive()
        given = False

        async def replay() -> Any:  # the SDK reads the body as it arrived, first message included
            nonlocal given
            if not given:
                given = True
                return first
            return await receive()

        if self._gives_way(first):
            with URGENCY.heavy_request() as step:

                async def written(message: dict[str, Any]) -> None:
                    await send(message)
                    if message.get("type") == "http.response.body" and not message.get("more_body"):
                        step.end()  # its answer is out: the next step in the lane goes

                await URGENCY.heavy_turn()
                await self.app(scope, replay, written)
            return
        with URGENCY.urgent():
            await self.app(scope, replay, send)

    def _gives_way(self, message: dict[str, Any]) -> bool:
        """Whether a whole one-message body is a handshake or a tools/call of a heavy operation; anything
        else counts as a cheap call."""
        body = message.get("body", b"") if message.get("type") == "http.request" else b""
        if message.get("more_body") or not body or len(body) > self.PEEK_BYTES:
            return False
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return False  # the SDK answers it
        if not isinstance(request, dict):
            return False
        if request.get("method") in HANDSHAKES:
            return True
        if request.get("method") != "tools/call":
            return False
        params = request.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        arguments = (params.get("arguments") or {}) if isinstance(params, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, dict) or self.cheap is None:
            return False
        return not self.cheap(name, arguments)


def guarded_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with header/body read deadlines and a per-address connection cap.

    uvicorn itself only times out idle keep-alive connections: a client that sends half a request
    line holds its connection (and a file descriptor) for ever, so a thousand of them starve the
    server (issue 16). Deadlines are total, not per chunk, so trickling bytes does not extend them.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    deadlines = {h11.IDLE: settings.http_header_timeout, h11.SEND_BODY: settings.http_body_timeout}
    cap = settings.http_max_connections_per_client
    per_address: Counter[str] = Counter()

    class GuardedH11Protocol(H11Protocol):
        _address: str | None = None
        _timer: asyncio.TimerHandle | None = None
        _timed_state: Any = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._address = self.client[0] if self.client else None
            if self._address is not None:
                per_address[self._address] += 1
                if per_address[self._address] > cap:
                    log.warning("closing a connection from %s: more than %d open", self._address, cap)
                    transport.close()
                    return
            self._rearm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel()
            if self._address is not None:
                per_address[self._address] -= 1
                if per_address[self._address] <= 0:
                    del per_address[self._address]
                self._address = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._rearm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._rearm()

        def _cancel(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None
            self._timed_state = None

        def _rearm(self) -> None:
            """Start the deadline of the read now awaited; keep it while the same read goes on."""
            state = self.conn.their_state
            if state is self._timed_state or self.transport.is_closing():
                return
            self._cancel()
            if state in deadlines:
                self._timed_state = state
                self._timer = self.loop.call_later(deadlines[state], self._expired, state)

        def _expired(self, state: Any) -> None:
            self._timer = None
            if self.transport.is_closing() or self.conn.their_state is not state:
                self._timed_state = None
                self._rearm()
                return
            if state is h11.SEND_BODY and self.flow.read_paused:  # we stopped reading, not the client
                self._timer = self.loop.call_later(deadlines[state], self._expired, state)
                return
            what = "headers" if state is h11.IDLE else "body"
            log.info("disconnecting %s: request %s not received in %.0f s", self._address, what, deadlines[state])
            self.transport.close()

    return GuardedH11Protocol


def raise_fd_limit() -> None:
    """Use the hard limit on open files: every held connection costs one, and 1024 is a common soft limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        target = 65_536 if hard == resource.RLIM_INFINITY else min(hard, 65_536)
        if target > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
