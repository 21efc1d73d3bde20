"""Where used confirmation-token nonces are kept, so a token confirms one execution, ever.

A nonce is claimed with one atomic insert: the first claim wins, every later one (another call,
a restarted process, a second process on the host, a replica on another host) is refused.

- ``sqlite`` (default): a WAL-mode SQLite file in the state dir; restarts and every process on
  the host that points at the same file share it. ``INSERT`` on a primary key is the atomic step.
- ``redis://`` / ``rediss://``: for replicas on several hosts; ``SET key 1 NX PX ttl`` is the step.
- ``memory``: this process only (tests, one-shot tools); says so in its description.

Every store fails closed: when it cannot be reached, a claim raises :class:`StoreUnavailable`
and the write is refused, never run unguarded.

A nonce stays recorded until the token's expiry plus :data:`SKEW_MARGIN` (a replica whose clock is
behind still sees the token as valid for that long). In Redis, that moment and the token's expiry are
judged by Redis' own clock (``TIME``, shared by every replica), not by the claiming replica's; a token
already expired by it is refused (:class:`ClaimExpired`). The server calls a store only through
:func:`call`: off the event loop, with a deadline, and with at most :data:`MAX_WAITING` calls held by a
store that does not answer, so a hung Redis refuses writes and slows nothing else (design record 261206-59).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

import anyio.to_thread

from pve_steward.pveio.redisurl import is_redis

log = logging.getLogger(__name__)
KEY_PREFIX = "pve-steward:used-token:"
SKEW_MARGIN = 300.0  # seconds a used nonce outlives its token: the clock skew between replicas we tolerate
MAX_WAITING = 8  # store calls that may wait on an unanswering store at once; more are refused at once
DEFAULT_TIMEOUT = 3.0
R = TypeVar("R")

# SET NX, then the key's end by Redis' clock; a token Redis' clock already sees expired is refused (-1).
# PEXPIREAT (Redis 2.6+) rather than SET ... PXAT (6.2+). TIME before a write needs effects replication,
# the default since Redis 5 (replicate_commands is a no-op there, the switch before it).
CLAIM_SCRIPT = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(ARGV[1]) <= now then return -1 end
if redis.call('SET', KEYS[1], '1', 'NX') then
  redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]))
  return 1
end
return 0
"""


class StoreUnavailable(ValueError):
    """The used-token store cannot be reached; writes are refused until it can."""


class ClaimExpired(ValueError):
    """The store's own clock says the token expired: it is refused whatever the claiming replica's clock says."""


_WAITING: weakref.WeakKeyDictionary[object, threading.BoundedSemaphore] = weakref.WeakKeyDictionary()
_WAITING_LOCK = threading.Lock()


async def call(store: UsedTokenStore, fn: Callable[[], R], timeout: float) -> R:
    """Run one store call in a worker thread, within ``timeout`` seconds (else :class:`StoreUnavailable`).

    The event loop never waits on the store; a store that does not answer holds at most MAX_WAITING threads
    (their sockets time out on their own), and calls beyond those are refused at once: fail closed, fast.
    """
    with _WAITING_LOCK:
        slots = _WAITING.setdefault(store, threading.BoundedSemaphore(MAX_WAITING))
    if not slots.acquire(blocking=False):
        raise StoreUnavailable(
            f"the used-token store ({store.description}) is not answering ({MAX_WAITING} calls wait)"
        )

    def run() -> R:
        try:
            return fn()
        finally:
            slots.release()

    try:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except TimeoutError:
        raise StoreUnavailable(
            f"the used-token store ({store.description}) did not answer within {timeout:g} s"
        ) from None


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
            self._used = {n: until for n, until in self._used.items() if until >= now}
            if nonce in self._used:
                return False
            self._used[nonce] = expires_at + SKEW_MARGIN
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
                    (nonce, expires_at + SKEW_MARGIN),
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
    """Redis shared by replicas on several hosts; a key per nonce that ends, by Redis' clock, after the token."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        import redis  # imported here: only deployments that choose Redis need the server

        self.description = "redis " + _without_password(url)
        try:
            self._redis = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        except ValueError as exc:
            raise StoreUnavailable(f"invalid used-token store URL {_without_password(url)}: {exc}") from exc
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._claim = self._redis.register_script(CLAIM_SCRIPT)

    def claim(self, nonce: str, expires_at: float) -> bool:
        try:
            done = int(self._claim(keys=[KEY_PREFIX + nonce], args=[int(expires_at * 1000), int(SKEW_MARGIN * 1000)]))
        except self._errors as exc:
            raise StoreUnavailable(f"the used-token store ({self.description}) cannot be reached: {exc}") from exc
        if done < 0:
            raise ClaimExpired("the token expired by the used-token store's clock")
        return done == 1

    def persistence(self) -> bool | None:
        """Whether Redis keeps its keys across a restart (append-only file on); None when it cannot be asked."""
        try:
            info = self._redis.info("persistence")
        except self._errors:
            return None
        return bool(int(info.get("aof_enabled", 0))) if isinstance(info, dict) else None

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


def open_store(spec: str | None, state_dir: Path, timeout: float = DEFAULT_TIMEOUT) -> UsedTokenStore:
    """``None``/``sqlite`` -> state dir file; a path or ``sqlite:///path``; ``redis://...``; ``memory``."""
    if spec is None or spec == "sqlite":
        return SqliteStore(state_dir / "used-tokens.sqlite3")
    if spec == "memory":
        return MemoryStore()
    if is_redis(spec):
        store = RedisStore(spec, timeout)
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


def sharing_problems(store: UsedTokenStore, *, key_file: bool, replicas: int) -> list[str]:
    """What keeps this store from holding single use for servers that share a confirmation key (warnings).

    A ValueError, refusing the start, when ``replicas`` says several servers share the key and the store is
    one they cannot share, or a Redis that forgets used tokens when it restarts (no append-only file).
    """
    if replicas > 1 and not key_file:
        raise ValueError(
            f"replicas = {replicas} needs confirm_key_file: a token previewed on one replica must verify on the others"
        )
    if not isinstance(store, RedisStore):
        if replicas > 1:
            raise ValueError(
                f"replicas = {replicas}, but used tokens are kept in {store.description}, which only this host "
                "sees: each replica would accept a token another one already used. Give them one Redis "
                "(--token-store redis://host:6379/0, with appendonly yes)"
            )
        if key_file:
            return [
                f"confirm_key_file is set and used tokens are kept in {store.description}: a server sharing this "
                "key file on a store of its own accepts tokens this one already used. Replicas need one shared "
                "Redis (--token-store redis://host:6379/0); --replicas N makes this a start error"
            ]
        return []
    persistent = store.persistence()
    if persistent is None:
        return [f"cannot read whether {store.description} keeps used tokens across a restart (INFO persistence)"]
    if persistent:
        return []
    problem = (
        f"{store.description} runs without an append-only file (appendonly no): when it restarts, every used "
        "token can confirm again until it expires. Start Redis with --appendonly yes --appendfsync always"
    )
    if replicas > 1:
        raise ValueError(f"replicas = {replicas}: {problem}")
    return [problem]
