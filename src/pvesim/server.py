"""Run pvesim over HTTPS: a self-signed certificate made at start, uvicorn in a thread.

PVE sends its error message as the HTTP reason phrase (proxmoxer reads it from there), which
ASGI cannot express; :class:`ReasonH11Protocol` lets the app set it through a private header
that is stripped before the response leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import secrets
import signal
import tempfile
import threading
import time
import typing
import weakref
from pathlib import Path
from typing import Any, Self

import h11
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from uvicorn.protocols.http.h11_impl import H11Protocol

try:  # the dev extra: pvesim then parses HTTP in C
    import uvicorn.protocols.http.httptools_impl as _httptools
except ImportError:
    _httptools = None  # type: ignore[assignment]

from pvesim.app import REASON_HEADER, DroppedConnection, Simulator, create_app
from pvesim.faults import Faults
from pvesim.state import Cluster

_REASON = REASON_HEADER.encode()


def _reason(headers: Any) -> tuple[bytes | None, list[tuple[bytes, bytes]]]:
    """The reason phrase the app put in its private header (None: none), and the headers without it."""
    reason = None
    kept = []
    for name, value in headers:
        if name.lower() == _REASON:
            reason = value
        else:
            kept.append((name, value))
    return reason, kept


class ReasonH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with the reason phrase taken from the app's private header."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        original = self.conn.send

        def send(event: Any) -> bytes | None:
            if isinstance(event, h11.Response):
                reason, headers = _reason(event.headers)
                if reason is not None:
                    event = h11.Response(
                        status_code=event.status_code, headers=headers, reason=reason, http_version=event.http_version
                    )
            return original(event)  # type: ignore[no-any-return]

        self.conn.send = send  # type: ignore[method-assign,assignment]


class _DropFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedConnection) and "DroppedConnection" not in record.getMessage()


def make_certificate(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path, str]:
    """Write a self-signed cert + key; return their paths and the SHA-256 fingerprint (PVE style)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "pvesim"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pvesim PVE Cluster Manager CA"),
        ]
    )
    now = dt.datetime.now(dt.UTC)
    alt: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.DNSName("pvesim")]
    try:
        alt.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        alt.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "pvesim.pem", directory / "pvesim.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest().upper()
    return cert_path, key_path, ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


class _StatusLine:
    """A connection's transport that writes PVE's reason phrase into the status line uvicorn's httptools protocol
    writes with the standard one (``HTTP/1.1 500 Internal Server Error`` becomes PVE's ``HTTP/1.1 500 <why>``)."""

    def __init__(self, transport: Any, status: int, reason: bytes) -> None:
        self._transport = transport
        self._start: bytes | None = b"HTTP/1.1 %d " % status
        self._reason = reason

    def write(self, data: bytes) -> None:
        if self._start is not None and data.startswith(self._start):
            data = self._start + self._reason + data[data.index(b"\r\n") :]
            self._start = None  # the status line is written once
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


if _httptools is not None:

    class _ReasonCycle(_httptools.RequestResponseCycle):
        """uvicorn's httptools request cycle, with the reason phrase taken from the app's private header."""

        async def send(self, message: Any) -> None:
            if message["type"] != "http.response.start" or self.response_started:
                return await super().send(message)
            reason, headers = _reason(message.get("headers", []))
            if reason is None:
                return await super().send(message)
            message = {**message, "headers": headers}
            transport = self.transport
            self.transport = typing.cast(asyncio.Transport, _StatusLine(transport, message["status"], reason))
            try:
                await super().send(message)
            finally:
                self.transport = transport

    class ReasonHttpToolsProtocol(_httptools.HttpToolsProtocol):
        """uvicorn's httptools protocol (its parser in C: a third of pvesim's CPU went to h11's in Python), with
        PVE's reason phrases. Each request's cycle becomes a :class:`_ReasonCycle` before its task first runs."""

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            if type(self.cycle) is _httptools.RequestResponseCycle:
                self.cycle.__class__ = _ReasonCycle


def _protocol() -> type:
    """httptools' protocol where it is installed (the dev extra), else h11's: the same answers, byte for byte."""
    return ReasonHttpToolsProtocol if _httptools is not None else ReasonH11Protocol


class _Server(uvicorn.Server):
    """uvicorn's server, stopped as soon as asked: its own loop looks at ``should_exit`` every 0.1 s, and a
    test suite stops hundreds of simulators; a stopped simulator also drops requests still in flight
    (``force_exit``) rather than wait for a slow fault to finish."""

    _stop: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._stop = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):  # on_tick refreshes the Date header once a second
                    await self._stop.wait()

    def stop_now(self) -> None:
        """Called on the server's loop: close every connection and leave the main loop at once."""
        self.should_exit = self.force_exit = True
        for conn in list(self.server_state.connections):
            transport = getattr(conn, "transport", None)
            if transport is not None:  # clients keep TLS connections alive; a graceful close would wait
                transport.abort()
        if self._stop is not None:
            self._stop.set()


_LIVE: weakref.WeakSet[HttpsSim] = weakref.WeakSet()  # simulators whose temporary directory exists


def stop_on_sigterm() -> None:
    """Remove every simulator's temporary directory (its certificate and private key) on SIGTERM, then end as
    SIGTERM does.

    Python's default action for SIGTERM (``docker stop``, systemd, a client ending the server it started) ends
    the process at once, and the directories stayed behind in the temp folder. The process still ends at once
    here, with SIGTERM's status: unwinding instead could wait for ever on a thread blocked reading stdin. uvicorn
    takes SIGTERM over while it serves and raises it again once it has stopped, which lands here too. Only the
    main thread can set a handler; elsewhere this does nothing.
    """

    def remove_then_end(signum: int, frame: object) -> None:
        for sim in list(_LIVE):
            sim.remove_files()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, remove_then_end)


class HttpsSim:
    """A simulator app served over HTTPS by uvicorn in a thread, with a self-signed certificate made at start.

    Subclasses give :meth:`config` (their app and uvicorn's settings) and ``thread_name``.
    """

    thread_name = "sim"

    def __init__(self, host: str, port: int, prefix: str) -> None:
        self.host = host
        self.port = port
        self._tmp = tempfile.TemporaryDirectory(prefix=prefix)
        _LIVE.add(self)
        self.cert_path, self.key_path, self.fingerprint = make_certificate(Path(self._tmp.name), host)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def config(self) -> uvicorn.Config:
        raise NotImplementedError

    def _tls(self) -> dict[str, Any]:
        """uvicorn settings every simulator shares: this certificate, PVE's reason phrases, no lifespan."""
        return {
            "host": self.host,
            "port": self.port,
            "http": _protocol(),
            "ssl_certfile": str(self.cert_path),
            "ssl_keyfile": str(self.key_path),
            "lifespan": "off",
            "access_log": False,
            # libuv's loop where it is installed (the dev extra): it serves a request with less of this one
            # process's CPU, which a real node spreads over pveproxy's workers (issue 17); else asyncio's
            "loop": "auto",
        }

    def start(self) -> Self:
        self._server = _Server(self.config())
        self._thread = threading.Thread(target=self._server.run, name=self.thread_name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.thread_name} failed to start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def wait(self) -> None:
        """Block until the server stops (the CLI, after :meth:`start`); Ctrl-C interrupts it."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def stop(self) -> None:
        """Stop serving; stopping twice (a test stops it early) is fine."""
        if self._server is not None and self._server.started:
            self._server.servers[0].get_loop().call_soon_threadsafe(self._server.stop_now)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
        self.remove_files()

    def remove_files(self) -> None:
        """Remove the temporary directory with the certificate and key (stop does; so does SIGTERM, see
        :func:`stop_on_sigterm`)."""
        self._tmp.cleanup()
        _LIVE.discard(self)

    def __enter__(self) -> Self:
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SimServer(HttpsSim):
    """A running simulator: ``with SimServer(cluster) as sim: sim.url, sim.fingerprint, sim.token(...)``."""

    thread_name = "pvesim"

    def __init__(
        self,
        cluster: Cluster,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Faults | None = None,
        log_level: str = "warning",
    ) -> None:
        self.sim = Simulator(cluster, faults, control_secret=secrets.token_hex(16))
        self.log_level = log_level
        super().__init__(host, port, "pvesim-")

    @property
    def cluster(self) -> Cluster:
        return self.sim.cluster

    @property
    def control_secret(self) -> str:
        return self.sim.control_secret

    def config(self) -> uvicorn.Config:
        logging.getLogger("uvicorn.error").addFilter(_DropFilter())
        return uvicorn.Config(
            create_app(self.sim),
            **self._tls(),
            log_level=self.log_level,
            timeout_keep_alive=30,
            limit_concurrency=2048,
        )

    def token(self, tokenid: str) -> tuple[str, str]:
        """(full token id, secret) of a scenario token."""
        t = self.cluster.tokens[tokenid]
        return t.full_id, t.secret
