"""Append-only, hash-chained audit log (JSON lines).

Every record carries ``seq``, ``prev`` (the previous record's hash) and ``hash`` (SHA-256 over
the record's canonical JSON without ``hash``). A record is written with flush + fsync before the
tool returns. If the process died mid-write, the incomplete tail is cut off when the log is next
opened (and that is itself recorded), so a crash loses at most the record being written and
never corrupts earlier ones. ``verify`` walks the chain and names the first broken record.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

GENESIS = "0" * 64
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


class AuditLog:
    """Thread-safe appender; one instance per process and file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._prev, self._seq, truncated = self._recover()
        if truncated:
            self.append(
                {
                    "event": "audit_recovered",
                    "outcome": "ok",
                    "detail": f"cut {truncated} bytes of an incomplete record left by a crash",
                }
            )

    def _recover(self) -> tuple[str, int, int]:
        if not self.path.exists():
            return GENESIS, 0, 0
        with self.path.open("rb+") as fh:
            data = fh.read()
            cut = 0
            if data and not data.endswith(b"\n"):
                keep = data.rfind(b"\n") + 1
                cut = len(data) - keep
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())
                data = data[:keep]
        lines = data.splitlines()
        if not lines:
            return GENESIS, 0, cut
        last = json.loads(lines[-1])
        return str(last["hash"]), int(last["seq"]), cut

    def append(self, fields: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            record = {
                "seq": self._seq + 1,
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **fields,
                "prev": self._prev,
            }
            record["hash"] = record_hash(record)
            line = _canonical(record) + b"\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._prev = record["hash"]
            self._seq = record["seq"]
            return record


class VerifyResult(BaseModel):
    ok: bool
    records: int
    head: str | None = None  # hash of the last valid record: keep it elsewhere to detect a cut tail later
    first_bad_line: int | None = None
    problem: str | None = None


def verify(path: Path, anchor: str | None = None) -> VerifyResult:
    """Check the whole chain; report the first record that does not fit.

    A hash chain cannot show that records were cut from the end. ``anchor`` (a ``head`` noted
    earlier, e.g. shipped to a log server) closes that gap: it must be found in the chain.
    """
    result = _walk(path)
    if result.ok and anchor is not None and not _contains(path, anchor):
        return result.model_copy(
            update={
                "ok": False,
                "problem": f"anchor {anchor[:16]}... is not in the log: records were removed from its end "
                "(or the anchor belongs to another log)",
            }
        )
    return result


def _contains(path: Path, record_hash_: str) -> bool:
    with path.open("rb") as fh:
        return any(json.loads(raw).get("hash") == record_hash_ for raw in fh)


def _walk(path: Path) -> VerifyResult:
    prev = GENESIS
    count = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                return VerifyResult(
                    ok=False,
                    records=count,
                    first_bad_line=lineno,
                    problem="incomplete last record (crash during a write)",
                )
            try:
                record = json.loads(raw)
            except ValueError:
                return VerifyResult(ok=False, records=count, first_bad_line=lineno, problem="not valid JSON")
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
