"""Where used confirmation-token nonces are kept, so a token confirms one execution, ever.

A nonce is claimed with one atomic insert: the first claim wins, every later one (another call,
a restarted process, a second process on the host, a replica on another host) is refused.

- ``sqlite`` (default): a WAL-mode SQLite file in the state dir; restarts and every process on
  the host that points at the same file share it. ``INSERT`` on a primary key is the atomic step.
- ``redis://`` / ``rediss://``: for replicas on several hosts; ``SET key 1 NX PX ttl`` is the step.
- ``memory``: this process only (tests, one-shot tools); says so in its description.

Every store fails closed: when it cannot be reached, a claim raises :class:`StoreUnavailable`
and the write is refused, never run unguarded.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Protocol

from pve_steward.pveio.redisurl import is_redis

log = logging.getLogger(__name__)
KEY_PREFIX = "pve-steward:used-token:"


class StoreUnavailable(ValueError):
    """The used-token store cannot be reached; writes are refused until it can."""


class UsedTokenStore(Protocol):
    description: str

    def claim(self, nonce: str, expires_at: float) -> bool:
        """Atomically mark ``nonce`` used until ``expires_at``; False when it was already used."""
        ...

    def is_used(self, nonce: str) -> bool:
        """Whether ``nonce`` was already claimed (a read; the claim stays the only decision)."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """One process only: a restart or a second process would accept the token again."""

    description = "memory (this process only)"

    def __init__(self) -> None:
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def claim(self, nonce: str, expires_at: float) -> bool:
        now = time.time()
        with self._lock:
            self._used = {n: exp for n, exp in self._used.items() if exp >= now}
            if nonce in self._used:
                return False
            self._used[nonce] = expires_at
            return True

    def is_used(self, nonce: str) -> bool:
        with self._lock:
            return nonce in self._used

    def close(self) -> None:
        return None


class SqliteStore:
    """A WAL-mode SQLite file: shared by restarts and by every process on this host that opens it."""

    def __init__(self, path: Path) -> None:
        import sqlite3  # imported here: a server without write tools opens no store (0.9 MiB of every start)

        self.path = path
        self.description = f"sqlite {path}"
        self._lock = threading.Lock()
        self._errors = sqlite3.Error
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._db = sqlite3.connect(str(path), timeout=10.0, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # a claim survives a power cut once it returned
            self._db.execute("CREATE TABLE IF NOT EXISTS used (nonce TEXT PRIMARY KEY, expires_at REAL NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"cannot open the used-token store {path}: {exc}") from exc

    def claim(self, nonce: str, expires_at: float) -> bool:
        with self._lock:
            try:
                self._db.execute("DELETE FROM used WHERE expires_at < ?", (time.time(),))
                cur = self._db.execute(
                    "INSERT INTO used (nonce, expires_at) VALUES (?, ?) ON CONFLICT(nonce) DO NOTHING",
                    (nonce, expires_at),
                )
            except self._errors as exc:
                raise StoreUnavailable(f"the used-token store {self.path} failed: {exc}") from exc
            return cur.rowcount == 1

    def is_used(self, nonce: str) -> bool:
        with self._lock:
            try:
                row = self._db.execute("SELECT 1 FROM used WHERE nonce = ?", (nonce,)).fetchone()
            except self._errors as exc:
                raise StoreUnavailable(f"the used-token store {self.path} failed: {exc}") from exc
            return row is not None

    def close(self) -> None:
        with self._lock:
            self._db.close()


class RedisStore:
    """Redis shared by replicas on several hosts; a key per nonce that expires with the token."""

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        import redis  # imported here: only deployments that choose Redis need the server

        self.description = "redis " + _without_password(url)
        try:
            self._redis = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        except ValueError as exc:
            raise StoreUnavailable(f"invalid used-token store URL {_without_password(url)}: {exc}") from exc
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)

    def claim(self, nonce: str, expires_at: float) -> bool:
        ttl_ms = max(int((expires_at - time.time()) * 1000), 1000)
        try:
            return bool(self._redis.set(KEY_PREFIX + nonce, b"1", nx=True, px=ttl_ms))
        except self._errors as exc:
            raise StoreUnavailable(f"the used-token store ({self.description}) cannot be reached: {exc}") from exc

    def is_used(self, nonce: str) -> bool:
        try:
            return bool(self._redis.exists(KEY_PREFIX + nonce))
        except self._errors as exc:
            raise StoreUnavailable(f"the used-token store ({self.description}) cannot be reached: {exc}") from exc

    def close(self) -> None:
        self._redis.close()


def _without_password(url: str) -> str:
    """A Redis URL as it may be shown: any password replaced."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}{sep}{user + ':' if user else ''}***@{host}"


def open_store(spec: str | None, state_dir: Path) -> UsedTokenStore:
    """``None``/``sqlite`` -> state dir file; a path or ``sqlite:///path``; ``redis://...``; ``memory``."""
    if spec is None or spec == "sqlite":
        return SqliteStore(state_dir / "used-tokens.sqlite3")
    if spec == "memory":
        return MemoryStore()
    if is_redis(spec):
        store = RedisStore(spec)
        try:
            store.is_used("startup-check")
        except StoreUnavailable as exc:  # starting is fine (it may come back); every write is refused meanwhile
            log.error("%s; writes will be refused until it answers", exc)
        return store
    if spec.startswith("sqlite://"):
        return SqliteStore(Path(spec.removeprefix("sqlite://")))
    if "://" in spec:
        raise ValueError(
            f"token_store '{_without_password(spec)}' is not understood: use sqlite (default), a file path, "
            "sqlite:///path, redis://host:port/db, rediss://... or memory"
        )
    return SqliteStore(Path(spec))
