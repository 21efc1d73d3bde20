"""Append-only, hash-chained audit log (JSON lines).

Every record carries ``seq``, ``prev`` (the previous record's hash) and ``hash`` (SHA-256 over
the record's canonical JSON without ``hash``). A record is written with flush + fsync before the
tool returns; records appended at the same moment share one write and one fsync (group commit), so
fifty concurrent calls wait for one or two fsyncs, not for fifty in a row. If the process died
mid-write, the incomplete tail is cut off by the next append (and that is itself recorded), so a
crash loses at most the records being written and never corrupts earlier ones.

Several processes may write one log (two stdio servers, one per desktop client, share the default
file): each commit holds the file's ``flock`` from reading the chain's head to the fsync, so the
records of every process form one chain, never a fork. ``verify`` walks the chain and names the
first broken record.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import queue
import re
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import anyio
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)
GENESIS = "0" * 64
CLIENT_MAX = 160  # characters of the client's self-declared name/version kept in a record
_SECRET_PARAM = re.compile(r"(password|secret|passwd|token_secret|api_token|authorization)", re.IGNORECASE)


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(_canonical(body)).hexdigest()


def redact_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as they may be logged: secrets removed, confirmation tokens reduced to a fingerprint."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key == "confirm_token" and isinstance(value, str):
            out[key] = "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]
        elif _SECRET_PARAM.search(key):
            out[key] = "***redacted***"
        elif isinstance(value, BaseModel):
            out[key] = value.model_dump(mode="json")
        else:
            out[key] = value
    return out


class AuditLogBusy(ValueError):
    """The audit log stayed locked by another process past ``LOCK_WAIT``, or its forwarding queue is taken."""


LOCK_WAIT = 10.0  # seconds an append waits for another process's commit before it fails (writes then refuse)
TAIL_CHUNK = 65_536  # bytes read back from the end at a time to find the chain's head


class _Writer:
    """The one appender of a file in this process. Each commit takes the file's exclusive ``flock``, re-reads
    the chain's head when another process has appended since, writes, fsyncs and lets go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._fd_closer = weakref.finalize(self, os.close, self.fd)
        self.prev, self.seq, self.end = GENESIS, 0, -1  # the head as of our last look (end -1: never looked)
        with self._locked():
            self.cut = self._read_head()
        self.checked = False
        self.forward: Forward | None = None
        self.queue: list[_Pending] = []  # records waiting for the next commit (guarded by queue_lock)
        self.queue_lock = threading.Lock()
        self.fsyncs = 0  # commits made (tests, bench): fewer than records when appends overlap
        self._inbox: queue.SimpleQueue[_Posted | None] | None = None  # the event loop's records (post)
        self._inbox_lock = threading.Lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the exclusive lock of the file at the path (other processes' commits), waiting ``LOCK_WAIT`` at
        most: polled, since ``flock`` has no timeout and a stopped process must not hold every write of the
        others. A log moved aside (rotated by hand) is not written on: the file now at the path is opened."""
        deadline, pause = time.monotonic() + LOCK_WAIT, 0.0005
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise AuditLogBusy(
                        f"the audit log {self.path} has been locked by another process for over {LOCK_WAIT:g} s; "
                        "nothing was recorded. Find the process that holds it (a stopped pve-steward?) or give "
                        "this server its own file with --audit-log PATH (env PVE_STEWARD_AUDIT_LOG)"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.01)
                continue
            if not self._moved():
                break
            self._reopen()  # closing the old descriptor let its lock go
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _moved(self) -> bool:
        try:
            return os.stat(self.path).st_ino != os.fstat(self.fd).st_ino
        except FileNotFoundError:
            return True

    def _reopen(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._fd_closer()
        self.fd, self.end = fd, -1
        self._fd_closer = weakref.finalize(self, os.close, fd)

    def _read_head(self) -> int:
        """Under the lock: bring ``prev``/``seq`` to the file's last record when another process appended since
        our last commit, cutting a torn or unreadable tail left by a crash; return the bytes cut."""
        size = os.fstat(self.fd).st_size
        if size == self.end:
            return 0  # nobody appended since our last commit: the head we hold is the file's
        prev, seq, keep = _tail_record(self.fd, size)
        if keep != size:
            os.ftruncate(self.fd, keep)
            os.fsync(self.fd)
        self.prev, self.seq, self.end = prev, seq, keep
        return size - keep

    def append(self, *pending: _Pending) -> None:
        """Group commit: queue ``pending``, then take the lock; whoever holds it writes and fsyncs everything
        queued by then, so appends that arrived during one fsync share the next. Returns once each of
        ``pending`` is committed (or failed), in chain order."""
        with self.queue_lock:
            self.queue.extend(pending)
        with self.lock:
            if any(p.record is None and p.error is None for p in pending):
                with self.queue_lock:
                    batch, self.queue = self.queue, []
                try:
                    with self._locked():
                        cut = self._read_head()
                        if cut:  # another process died mid-write: say so in the chain, before our records
                            batch.insert(0, _Pending(_recovered(cut)))
                            log.warning("audit log %s: cut %d bytes of a record left by a crash", self.path, cut)
                        self._commit(batch)
                except (OSError, AuditLogBusy) as exc:
                    for mine in batch:
                        if mine.record is None and mine.error is None:
                            mine.error = exc.with_traceback(None)

    def _commit(self, batch: list[_Pending]) -> None:
        """Chain, write and fsync ``batch`` (both locks are held): a record that cannot be serialized fails
        alone, outside the chain; a failed write or fsync fails every record in the batch."""
        prev, seq, now = self.prev, self.seq, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        done: list[_Pending] = []
        lines: list[bytes] = []
        for pending in batch:
            try:
                record = {"seq": seq + 1, "time": now, **_bounded(pending.fields), "prev": prev}
                record["hash"] = record_hash(record)
                line = _canonical(record) + b"\n"
            except Exception as exc:  # handed to the caller whose record it is (without the frames that hold us)
                pending.error = exc.with_traceback(None)
                continue
            seq, prev = record["seq"], record["hash"]
            pending.record = record
            done.append(pending)
            lines.append(line)
        end: int | None = None
        try:
            end = os.lseek(self.fd, 0, os.SEEK_END)
            _write_all(self.fd, b"".join(lines))
        except OSError as exc:
            if end is not None:  # a part written (a full disk) would break the chain for every later record
                _cut_back(self.fd, end)
            for pending in done:
                pending.error = exc.with_traceback(None)
            return
        try:
            # written: the chain goes on from here even if the fsync fails
            self.prev, self.seq, self.end = prev, seq, end + sum(map(len, lines))
            os.fsync(self.fd)
            self.fsyncs += 1
        except OSError as exc:
            for pending in done:
                pending.error = exc.with_traceback(None)
            return
        if self.forward is not None:
            for i, line in enumerate(lines):
                try:
                    self.forward.enqueue(line)  # under the lock: the forwarded order is the chain's order
                except Exception as exc:  # this record and the later ones did not leave the box: their callers hear it
                    for pending in done[i:]:
                        pending.error = exc.with_traceback(None)
                    return

    def post(self, posted: _Posted) -> None:
        """Hand an event loop's record to this log's own committing thread (started on first use).

        One thread per log, not one of anyio's worker threads per record (fifty records at once took
        forty threads), and it commits everything posted meanwhile at once."""
        with self._inbox_lock:
            if self._inbox is None:
                inbox: queue.SimpleQueue[_Posted | None] = queue.SimpleQueue()
                threading.Thread(
                    target=_committing, args=(weakref.ref(self), inbox), name="audit-commit", daemon=True
                ).start()
                weakref.finalize(self, inbox.put, None)  # the thread ends with its writer
                self._inbox = inbox
        self._inbox.put(posted)


_Posted = tuple[dict[str, Any], asyncio.AbstractEventLoop, "asyncio.Future[dict[str, Any]]"]


def _committing(writer: weakref.ref[_Writer], inbox: queue.SimpleQueue[_Posted | None]) -> None:
    """The committing thread of one log: the records posted meanwhile are appended in one commit, and each
    caller's future is settled on its own event loop."""
    while _commit_posted(writer, inbox):
        pass


def _commit_posted(writer: weakref.ref[_Writer], inbox: queue.SimpleQueue[_Posted | None]) -> bool:
    """One commit of everything posted by the time the first record is taken; False to stop. Its own frame,
    as requestpool's workers: the idle thread keeps nothing of the last batch (the writer and its flock)."""
    first = inbox.get()
    if first is None:
        return False
    posted, ending = [first], False
    while not inbox.empty():
        more = inbox.get()
        if more is None:
            ending = True
            break
        posted.append(more)
    target = writer()
    if target is None:
        return False
    pending = [_Pending(fields) for fields, _loop, _future in posted]
    try:
        target.append(*pending)
    except Exception as exc:  # a forwarder that raised, say: no caller is left waiting, the thread goes on
        log.exception("audit log %s: a commit failed", target.path)
        for mine in pending:
            if mine.record is None and mine.error is None:
                mine.error = exc.with_traceback(None)  # the caller's error keeps no frame that holds the writer
    for (_fields, loop, future), mine in zip(posted, pending, strict=True):
        with contextlib.suppress(RuntimeError):  # its event loop has closed: nobody waits for this record
            loop.call_soon_threadsafe(_settle, future, mine)
    return not ending


def _settle(future: asyncio.Future[dict[str, Any]], pending: _Pending) -> None:
    if future.done():
        return
    if pending.error is not None:
        future.set_exception(pending.error)
    elif pending.record is None:
        future.set_exception(RuntimeError("the audit record was neither written nor failed"))
    else:
        future.set_result(pending.record)


@dataclass
class _Pending:
    """One append waiting for a commit: its fields, then its record (or the commit's error)."""

    fields: dict[str, Any]
    record: dict[str, Any] | None = None
    error: Exception | None = None


_WRITERS: weakref.WeakValueDictionary[str, _Writer] = weakref.WeakValueDictionary()
_WRITERS_LOCK = threading.Lock()


def _writer_for(path: Path) -> _Writer:
    """Every AuditLog of one file in this process shares one writer (and its chain state)."""
    key = os.path.realpath(path)
    with _WRITERS_LOCK:
        writer = _WRITERS.get(key)
        if writer is None:
            writer = _Writer(path)
            _WRITERS[key] = writer
        return writer


def _tail_record(fd: int, size: int) -> tuple[str, int, int]:
    """The file's last record as (hash, seq, bytes to keep): an incomplete last line (a crash mid-write) and a
    complete one that is not a record (garbage a crash left) are not kept. Reads back from the end only."""
    keep, start, data = size, size, b""
    while True:  # read back until the last two line ends (or the start of the file) are in ``data``
        if data.count(b"\n") >= 3 or start == 0:
            break
        step = min(TAIL_CHUNK, start)
        start -= step
        data = os.pread(fd, step, start) + data
    if data and not data.endswith(b"\n"):
        keep = start + data.rfind(b"\n") + 1
        data = data[: keep - start]
    lines = data.split(b"\n")[:-1]  # records end in \n; \r inside garbage is not a line end
    if start > 0:
        lines = lines[1:]  # the first piece may be the end of a longer line
    last = _parse_tail(lines[-1]) if lines else None
    if lines and last is None:  # a complete line that is not a record: garbage written by a crash
        keep -= len(lines[-1]) + 1
        last = _parse_tail(lines[-2]) if len(lines) > 1 else None
    if last is None:
        return GENESIS, 0, keep
    return last[0], last[1], keep


def _recovered(cut: int) -> dict[str, Any]:
    detail = f"cut {cut} bytes of an incomplete record left by a crash"
    return {"event": "audit_recovered", "outcome": "ok", "detail": detail}


def _cut_back(fd: int, end: int) -> None:
    """Take back what a failed write left after ``end`` (best effort: a file that cannot even be truncated
    shows the partial line to `audit verify`, which names it)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, end)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _parse_tail(raw: bytes) -> tuple[str, int] | None:
    try:
        record = json.loads(raw)
        return str(record["hash"]), int(record["seq"])
    except (ValueError, TypeError, KeyError):
        return None


class Forward(Protocol):
    """Where records go besides the file (security/syslog.py): durable once ``enqueue`` returns."""

    def enqueue(self, line: bytes) -> None: ...

    def flush(self, timeout: float) -> bool: ...


class AuditLog:
    """Thread-safe appender. In a process, one shared writer per file; across processes, one commit at a time
    (the file's ``flock``), each continuing the chain from the file's last record.

    ``forward`` receives every record, in chain order, right after it is on disk; with ``required``,
    :meth:`delivery_problem` tells a write to stay away while forwarded records are not being taken.
    """

    def __init__(self, path: Path, forward: Forward | None = None, required: bool = False) -> None:
        self.path = path
        self._w = _writer_for(path)
        if forward is not None:
            self._w.forward = forward
        self.required = required
        if self._w.cut:
            cut, self._w.cut = self._w.cut, 0
            self.append(_recovered(cut))
            log.warning("audit log %s: cut %d bytes of an incomplete record left by a crash", path, cut)
        self._check_at_open()

    def _check_at_open(self) -> None:
        """Say loudly, at start, when the chain is already broken or writes have no recorded outcome."""
        if self._w.checked:
            return
        self._w.checked = True
        result = verify(self.path)
        if not result.ok:
            log.error(
                "AUDIT LOG %s IS BROKEN at line %s: %s. Keep a copy for investigation; `pve-steward audit verify` "
                "shows it. New records continue the chain from its last record.",
                self.path,
                result.first_bad_line,
                result.problem,
            )
        open_writes = pending(self.path)
        if open_writes:
            log.warning(
                "audit log %s: %d write(s) were started and have no recorded outcome (a crash or kill during the "
                "write); list them with `pve-steward audit pending` and check each on the cluster",
                self.path,
                len(open_writes),
            )

    def append(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Append one record and return it once it is on disk (records appended at the same moment
        share one write and one fsync: see ``_Writer.append``)."""
        mine = _Pending(fields)
        self._w.append(mine)
        if mine.error is not None:
            raise mine.error
        assert mine.record is not None
        return mine.record

    async def record(self, fields: dict[str, Any]) -> None:
        """:meth:`append` from the event loop, in the log's committing thread (its fsync held the loop and
        every call on it up to 20 ms, issue 17); shielded, so a cancelled call still leaves its record."""
        loop = asyncio.get_running_loop()
        committed: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._w.post((fields, loop, committed))
        with anyio.CancelScope(shield=True):
            await committed

    def delivery_problem(self, timeout: float = 3.0) -> str | None:
        """With required delivery: why records are not reaching the receiver now (None: they are)."""
        forward = self._w.forward
        if not self.required or forward is None:
            return None
        if forward.flush(timeout):
            return None
        why = getattr(forward, "last_error", None) or "it does not take them"
        return (
            f"audit delivery is required (--audit-required) and the audit receiver {getattr(forward, 'target', '')} "
            f"has not taken the queued records within {timeout:g} s ({why}); writes are refused until it does"
        )


class NoAudit(AuditLog):
    """The audit log of the diagnostics process (worker/child.py), which has nothing to record.

    The front end's guard records every call before and after handing it over; the child runs read
    operations only. A record reaching here is a bug, and it fails loudly rather than fork the chain.
    """

    def __init__(self) -> None:  # no file: the front end writes the log
        self.path = Path("/dev/null")
        self.required = False

    def append(self, fields: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the diagnostics process keeps no audit log; the front end's guard records calls")

    async def record(self, fields: dict[str, Any]) -> None:
        self.append(fields)

    def delivery_problem(self, timeout: float = 3.0) -> str | None:
        return None


def _bounded(fields: dict[str, Any]) -> dict[str, Any]:
    """Client-supplied identity is cut to a bounded length (a client names itself; it could send megabytes)."""
    client = fields.get("client")
    if isinstance(client, str) and len(client) > CLIENT_MAX:
        return {**fields, "client": client[:CLIENT_MAX] + "...[cut]"}
    return fields


class PendingWrite(BaseModel):
    """A write whose ``executing`` record has no outcome record: it may or may not have run."""

    write_id: str
    line: int
    time: str | None = None
    operation: str | None = None
    target: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    upid: str | None = Field(None, description="set when PVE answered the request before the process stopped")


class VerifyResult(BaseModel):
    ok: bool
    records: int
    head: str | None = None  # hash of the last valid record: keep it elsewhere to detect a cut tail later
    first_bad_line: int | None = None
    problem: str | None = None
    pending: list[PendingWrite] = Field(
        default_factory=list, description="writes with an 'executing' record and no outcome (crash or kill)"
    )


def verify(path: Path, anchor: str | None = None) -> VerifyResult:
    """Check the whole chain; report the first record that does not fit.

    A hash chain cannot show that records were cut from the end. ``anchor`` (a ``head`` noted
    earlier, e.g. shipped to a log server) closes that gap: it must be found in the chain.
    """
    size = _settled_size(path)
    result = _walk(path, size).model_copy(update={"pending": pending(path, size)})
    if result.ok and anchor is not None and not _contains(path, anchor, size):
        return result.model_copy(
            update={
                "ok": False,
                "problem": f"anchor {anchor[:16]}... is not in the log: records were removed from its end "
                "(or the anchor belongs to another log)",
            }
        )
    return result


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON parsers disagree on which of two equal keys wins; a record with one is refused, not guessed."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def pending(path: Path, size: int | None = None) -> list[PendingWrite]:
    """Writes started (``write_executing``) with no ``write_outcome``: check each one on the cluster."""
    open_: dict[str, PendingWrite] = {}
    if not path.exists():
        return []
    if size is None:
        size = _settled_size(path)
    with path.open("rb") as fh:
        for lineno, raw in _numbered(fh, size):
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(record, dict) or not isinstance(record.get("write_id"), str):
                continue
            wid = record["write_id"]
            event = record.get("event")
            if event == "write_executing":
                open_[wid] = PendingWrite(
                    write_id=wid,
                    line=lineno,
                    time=record.get("time"),
                    operation=record.get("operation"),
                    target=record.get("target"),
                    params=record.get("params"),
                )
            elif event == "write_submitted" and wid in open_:
                open_[wid].upid = record.get("upid")
            elif event == "write_outcome":
                open_.pop(wid, None)
    return list(open_.values())


def _settled_size(path: Path) -> int:
    """The log's size between two commits (under a shared ``flock``): every byte before it belongs to a
    complete commit, or to one whose process died mid-write. Read up to it, another process's append going
    on meanwhile is not mistaken for a torn record."""
    fd = os.open(path, os.O_RDONLY)
    try:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return os.fstat(fd).st_size  # a stopped writer: read what is there (a torn end is named)
                time.sleep(0.001)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)  # and with it the shared lock


def _numbered(fh: IO[bytes], size: int) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of the first ``size`` bytes of ``fh``."""
    left = size
    for lineno, raw in enumerate(fh, start=1):
        if left <= 0:
            return
        yield lineno, raw[:left]
        left -= len(raw)


def _contains(path: Path, record_hash_: str, size: int) -> bool:
    with path.open("rb") as fh:
        return any(json.loads(raw).get("hash") == record_hash_ for _lineno, raw in _numbered(fh, size))


def _walk(path: Path, size: int) -> VerifyResult:
    with path.open("rb") as fh:
        return _walk_lines(_numbered(fh, size))


def _walk_lines(numbered: Iterable[tuple[int, bytes]]) -> VerifyResult:
    """Verify one chain given as (line number, raw canonical line ending in newline) pairs."""
    prev = GENESIS
    count = 0
    for lineno, raw in numbered:
        if not raw.endswith(b"\n"):
            return VerifyResult(
                ok=False,
                records=count,
                first_bad_line=lineno,
                problem="incomplete last record (crash during a write)",
            )
        try:
            record = json.loads(raw, object_pairs_hook=_no_duplicate_keys)
        except _DuplicateKey as exc:
            return VerifyResult(
                ok=False, records=count, first_bad_line=lineno, problem=f"duplicate key '{exc}' in the record"
            )
        except ValueError:
            return VerifyResult(ok=False, records=count, first_bad_line=lineno, problem="not valid JSON")
        if not isinstance(record, dict):
            return VerifyResult(ok=False, records=count, first_bad_line=lineno, problem="not a JSON object")
        if _canonical(record) + b"\n" != raw:
            return VerifyResult(
                ok=False,
                records=count,
                first_bad_line=lineno,
                problem="not in canonical form (key order, spacing or escaping differ from what the server "
                "writes): the line was rewritten",
            )
        if record.get("prev") != prev:
            return VerifyResult(
                ok=False,
                records=count,
                first_bad_line=lineno,
                problem="chain broken: 'prev' does not match the previous record's hash "
                "(a record was deleted, inserted or reordered)",
            )
        if record.get("seq") != count + 1:
            return VerifyResult(
                ok=False,
                records=count,
                first_bad_line=lineno,
                problem=f"sequence gap: expected seq {count + 1}, found {record.get('seq')}",
            )
        if record_hash(record) != record.get("hash"):
            return VerifyResult(
                ok=False, records=count, first_bad_line=lineno, problem="hash mismatch: the record was edited"
            )
        prev = record["hash"]
        count += 1
    return VerifyResult(ok=True, records=count, head=None if count == 0 else prev)


def verify_forwarded(path: Path) -> dict[str, list[VerifyResult]]:
    """Check a forwarded stream (what a syslog receiver stored: one RFC 5424 message per line, with or
    without the octet count) chain by chain: records are grouped by sending host and audit log (the
    ``log`` id syslog.py ``frame`` puts in the structured data: one per replica), and a record with
    ``seq`` 1 starts a new chain for that log (a replica that lost its state directory starts over; that
    is shown as a second chain, not hidden). Keys are ``host/log``."""
    chains: dict[tuple[str, str], list[list[tuple[int, bytes]]]] = {}
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            parsed = _forwarded_record(raw)
            if parsed is None:
                continue
            source, line = parsed
            mine = chains.setdefault(source, [[]])
            if mine[-1] and _starts_chain(line):
                mine.append([])
            mine[-1].append((lineno, line))
    return {f"{host}/{log}": [_walk_lines(chain) for chain in runs] for (host, log), runs in sorted(chains.items())}


def _starts_chain(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False  # left to the chain check, which names the line
    return isinstance(record, dict) and record.get("seq") == 1 and record.get("prev") == GENESIS


_LOG_ID = re.compile(rb' log="([0-9a-f]{1,64}|-)"')


def _forwarded_record(raw: bytes) -> tuple[tuple[str, str], bytes] | None:
    """((hostname, log id), the record's canonical JSON line) from one stored syslog message; None if it is
    not one of ours."""
    text = raw.rstrip(b"\r\n")
    head, sep, body = text.partition(b"\xef\xbb\xbf")  # the BOM before our UTF-8 MSG
    if not sep:
        return None
    fields = head.split(b" ")
    if fields and fields[0].isdigit():  # octet-counted framing kept by the receiver
        fields = fields[1:]
    if len(fields) < 6 or not fields[0].startswith(b"<") or fields[3] != b"pve-steward":
        return None
    found = _LOG_ID.search(head)
    log = found.group(1).decode() if found else "-"
    return (fields[2].decode("utf-8", "replace"), log), body + b"\n"
