"""A syslog receiver owned by a test: RFC 6587 octet-counted frames of RFC 5424 messages over TCP or TLS."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA BOM MSG (RFC 5424 section 6)
RFC5424 = re.compile(
    rb"^<(?P<pri>\d{1,3})>1 (?P<time>\S+) (?P<host>\S+) (?P<app>\S+) (?P<proc>\S+) (?P<msgid>\S+) "
    rb"(?P<sd>-|(?:\[(?:[^\]\\]|\\.)*\])+) \xef\xbb\xbf(?P<msg>.*)$",
    re.DOTALL,
)


@dataclass
class Message:
    pri: int
    app: str
    msgid: str
    sd: str
    record: dict[str, Any]


@dataclass
class SyslogReceiver:
    port: int = 0
    tls: ssl.SSLContext | None = None
    messages: list[Message] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)  # each message as received, without the octet count

    def start(self) -> SyslogReceiver:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", self.port))
        self._sock.listen()
        self.port = self._sock.getsockname()[1]
        self._stop = False
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and close every connection (a receiver that goes away)."""
        self._stop = True
        for sock in [self._sock, *self._conns]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept(); close() alone does not
            sock.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self.tls is not None:
                try:
                    conn = self.tls.wrap_socket(conn, server_side=True)
                except (OSError, ssl.SSLError) as exc:
                    self.problems.append(f"TLS handshake: {exc}")
                    continue
            self._conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
                while b" " in buf:
                    length, _, rest = buf.partition(b" ")
                    if not length.isdigit():
                        self.problems.append(f"bad frame length {length[:20]!r}")
                        return
                    if len(rest) < int(length):
                        break
                    self._parse(rest[: int(length)])
                    buf = rest[int(length) :]

    def store(self, path: Path) -> Path:
        """Write what was received as a file receiver would (one message per line, like rsyslog's omfile)."""
        path.write_bytes(b"".join(m + b"\n" for m in self.raw))
        return path

    def _parse(self, raw: bytes) -> None:
        self.raw.append(raw)
        m = RFC5424.match(raw)
        if m is None:
            self.problems.append(f"not RFC 5424: {raw[:80]!r}")
            return
        self.messages.append(
            Message(
                pri=int(m["pri"]),
                app=m["app"].decode(),
                msgid=m["msgid"].decode(),
                sd=m["sd"].decode(),
                record=json.loads(m["msg"]),
            )
        )

    def wait_for(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return [m.record for m in self.messages]
