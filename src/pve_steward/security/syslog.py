"""Audit records off the box: every record to a syslog receiver, through a durable on-disk queue.

Format: RFC 5424 messages (facility 13 "log audit", severity notice), MSGID ``audit``, structured
data ``[pve-steward@32473 seq=".." hash=".."]`` (32473 is the enterprise number RFC 5612 reserves
for documentation), and the record's canonical JSON line as MSG, so the receiver can check the
hash chain itself. Transport: TCP or TLS with octet-counting framing (RFC 6587 section 3.4.1,
``LEN SP MSG``, which allows newlines inside a message).

Durability: :meth:`SyslogForwarder.enqueue` appends the record to a queue file next to the audit
log (fsync'd, under the audit writer's lock, so queue order is chain order); one sender thread
sends from the queue's head and records how far it got in an offset file. A receiver that is down
costs nothing but delay: records wait in the file, survive restarts, and go first when it is back.
Delivery is what syslog over TCP can give (RFC 6587 has no acknowledgement): the sender checks
that the receiver has not closed the connection before each batch and reconnects, a crash between
sending and noting the offset sends a record again (receivers deduplicate by ``seq``/``hash``), and a
receiver that dies with records unread in its socket loses those; the local audit log stays complete,
and ``seq`` gaps on the receiver show any loss.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import select
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pve_steward.security.audit import AuditLog, AuditLogBusy

log = logging.getLogger(__name__)
PRI = 13 * 8 + 5  # facility 13 (log audit), severity 5 (notice)
APP = "pve-steward"
SD_ID = "pve-steward@32473"
CONNECT_TIMEOUT = 5.0
MAX_BACKOFF = 5.0


class SyslogTargetError(ValueError):
    """An --audit-syslog value that is not tcp://host:port or tls://host:port."""


@dataclass(frozen=True)
class SyslogTarget:
    scheme: Literal["tcp", "tls"]
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> SyslogTarget:
        parts = urlsplit(text)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("tcp", "tls") or not parts.hostname or port is None or parts.path not in ("", "/"):
            raise SyslogTargetError(
                f"audit_syslog must be tcp://host:port or tls://host:port (RFC 5424 over TCP or TLS), not {text!r}"
            )
        return cls("tls" if parts.scheme == "tls" else "tcp", parts.hostname, port)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def _sd_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def log_id(hostname: str, queue_path: Path) -> str:
    """Which audit log (so which chain) a record comes from: stable across restarts of one replica, distinct
    between replicas (their hostnames or log paths differ). ``audit verify --forwarded`` groups by it."""
    return hashlib.sha256(f"{hostname}\0{queue_path.resolve()}".encode()).hexdigest()[:16]


def frame(line: bytes, hostname: str, procid: int, log: str = "-") -> bytes:
    """One audit record (its canonical JSON line) as an octet-counted RFC 5424 message."""
    record = json.loads(line)
    stamp = str(record.get("time") or "-")
    seq, digest = _sd_escape(str(record.get("seq"))), _sd_escape(str(record.get("hash")))
    sd = f'[{SD_ID} seq="{seq}" hash="{digest}" log="{_sd_escape(log)}"]'
    head = f"<{PRI}>1 {stamp} {hostname or '-'} {APP} {procid} audit {sd} ".encode()
    message = head + b"\xef\xbb\xbf" + line.rstrip(b"\n")  # BOM: MSG is UTF-8 (RFC 5424 section 6.4)
    return str(len(message)).encode() + b" " + message


class SyslogForwarder:
    """The durable queue and its sender thread (one per audit log)."""

    def __init__(self, target: SyslogTarget, queue_path: Path, ca_file: Path | None = None) -> None:
        self.target = target
        self.queue_path = queue_path
        self.offset_path = queue_path.with_name(queue_path.name + ".offset")
        self._ssl = _tls_context(ca_file) if target.scheme == "tls" else None
        self._hostname = socket.gethostname()[:255]
        self._log_id = log_id(self._hostname, queue_path)
        self._lock = threading.Lock()  # queue file and offset
        self._wake = threading.Condition(self._lock)
        self._sock: socket.socket | None = None
        self.last_error: str | None = None
        self._closed = False
        self._probes = 0  # connection checks asked for (flush)
        self._probed = 0  # and done
        queue_path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(queue_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._hold_queue()
        self._cut_incomplete_tail()
        self._thread = threading.Thread(target=self._run, name="audit-syslog", daemon=True)
        self._thread.start()

    def _hold_queue(self) -> None:
        """One sender per queue, for this process's lifetime: the audit log takes several writers (audit.py), but
        two senders on one queue and offset would send records twice and out of order."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise AuditLogBusy(
                f"the audit log's syslog queue {self.queue_path} is in use by another pve-steward process; one server "
                "forwards a log. Stop the other process, or give this one its own file with --audit-log PATH "
                "(env PVE_STEWARD_AUDIT_LOG)"
            ) from None

    def _cut_incomplete_tail(self) -> None:
        """A crash mid-append leaves a partial line; the record is in the audit log's own recovery instead."""
        size = os.fstat(self._fd).st_size
        if size:
            data = os.pread(self._fd, size, 0)
            keep = data.rfind(b"\n") + 1
            if keep != size:
                os.ftruncate(self._fd, keep)
                os.fsync(self._fd)

    # --- the audit writer's side
    def enqueue(self, line: bytes) -> None:
        """Keep the record on disk (fsync) before anyone is told it was written; the sender takes it from there."""
        with self._lock:
            os.write(self._fd, line)
            os.fsync(self._fd)
            self._wake.notify_all()

    def backlog(self) -> int:
        """Bytes of records not yet sent."""
        with self._lock:
            return os.fstat(self._fd).st_size - self._offset()

    def flush(self, timeout: float) -> bool:
        """Wait until the receiver is connected now and every queued record was sent (True), or ``timeout``
        seconds passed (False). An empty queue proves nothing about a receiver that went away, so this asks
        the sender to check its connection (reconnecting if the receiver closed it) before answering."""
        with self._wake:
            self._probes += 1
            wanted = self._probes
            self._wake.notify_all()
            return self._wake.wait_for(
                lambda: self._probed >= wanted and os.fstat(self._fd).st_size == self._offset(), timeout
            )

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self._thread.join(timeout=CONNECT_TIMEOUT + 1)
        self._disconnect()
        os.close(self._fd)

    # --- the sender thread
    def _offset(self) -> int:
        try:
            return int(self.offset_path.read_text(encoding="ascii") or 0)
        except (OSError, ValueError):
            return 0

    def _set_offset(self, value: int) -> None:
        tmp = self.offset_path.with_name(self.offset_path.name + ".tmp")
        tmp.write_text(str(value), encoding="ascii")
        os.replace(tmp, self.offset_path)

    def _run(self) -> None:
        backoff = 0.2
        while True:
            with self._wake:
                self._wake.wait_for(
                    lambda: self._closed or self._probed < self._probes or os.fstat(self._fd).st_size > self._offset()
                )
                if self._closed:
                    return
                probe = self._probes
            try:
                self._drain()
                backoff = 0.2
                with self._wake:
                    self._probed = max(self._probed, probe)
                    self._wake.notify_all()
            except OSError as exc:
                self._disconnect()
                if self.last_error is None:
                    log.warning(
                        "audit syslog %s unreachable (%s); records are queued in %s", self.target, exc, self.queue_path
                    )
                self.last_error = str(exc)
                with self._wake:
                    self._wake.wait(backoff)
                    if self._closed:
                        return
                backoff = min(backoff * 2, MAX_BACKOFF)

    def _drain(self) -> None:
        """Send every queued record from the offset on; truncate the queue once it is all sent."""
        with self._lock:
            start = self._offset()
            data = os.pread(self._fd, os.fstat(self._fd).st_size - start, start)
        sock = self._connect()
        pos = start
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            sock.sendall(frame(line, self._hostname, os.getpid(), self._log_id))
            pos += len(line)
            with self._wake:
                self._set_offset(pos)
        with self._wake:
            if self.last_error is not None:
                log.warning("audit syslog %s reachable again; the queue was delivered", self.target)
                self.last_error = None
            if os.fstat(self._fd).st_size == pos:  # everything sent: start the file afresh
                os.ftruncate(self._fd, 0)
                os.fsync(self._fd)
                self._set_offset(0)
            self._wake.notify_all()

    def _connect(self) -> socket.socket:
        if self._sock is not None and not _closed_by_peer(self._sock):
            return self._sock
        self._disconnect()
        raw = socket.create_connection((self.target.host, self.target.port), timeout=CONNECT_TIMEOUT)
        try:
            sock = self._ssl.wrap_socket(raw, server_hostname=self.target.host) if self._ssl else raw
        except OSError:
            raw.close()
            raise
        self._sock = sock
        return sock

    def _disconnect(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the receiver closed (or reset) the connection; sending into it would lose the record.

    A syslog receiver sends nothing, so a readable socket is an end of stream, or TLS 1.3 session
    tickets sent after the handshake (read and dropped here; the connection is still good).
    """
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        sock.setblocking(False)
        try:
            return not sock.recv(4096)
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        finally:
            sock.settimeout(CONNECT_TIMEOUT)
    except (OSError, ValueError):
        return True


def _tls_context(ca_file: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class AuditUndeliverable(RuntimeError):
    """Audit delivery is required and the receiver does not take records now."""


def open_audit(
    path: Path,
    syslog: str | None = None,
    ca_file: Path | None = None,
    required: bool = False,
) -> AuditLog:
    """The audit log, forwarding every record to ``syslog`` when one is configured."""
    forwarder = None
    if syslog is not None:
        target = SyslogTarget.parse(syslog)
        queue = path.with_name(path.name + ".syslog-queue")
        key = os.path.realpath(queue)
        with _FORWARDERS_LOCK:  # one sender per queue file in a process, like one writer per audit log
            forwarder = _FORWARDERS.get(key)
            if forwarder is None or forwarder.target != target:
                if forwarder is not None:
                    forwarder.close()
                forwarder = _FORWARDERS[key] = SyslogForwarder(target, queue, ca_file)
    return AuditLog(path, forward=forwarder, required=required)


_FORWARDERS: dict[str, SyslogForwarder] = {}
_FORWARDERS_LOCK = threading.Lock()
