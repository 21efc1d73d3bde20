"""Single use that survives restarts, processes and replicas: the used-token stores, against real backends."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from pve_steward.security.tokens import TokenRefused, TokenSigner
from pve_steward.security.usedtokens import (
    KEY_PREFIX,
    MAX_WAITING,
    SKEW_MARGIN,
    MemoryStore,
    RedisStore,
    SqliteStore,
    StoreUnavailable,
    open_store,
    sharing_problems,
)
from tests.httpserver import free_port
from tests.redisserver import redis_server, running_redis

KEY = b"k" * 32
PARAMS = {"vmid": 100}
TARGET = {"vmid": 100, "node": "pve1", "type": "qemu"}


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


async def _confirm(signer: TokenSigner, token: str, now: float) -> None:
    payload = await signer.check(token, "guest_reset", PARAMS, now)
    signer.check_target(payload, TARGET, "s1")
    await signer.consume(payload)


@pytest.mark.anyio
async def test_sqlite_store_refuses_a_token_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "used.sqlite3"
    now = time.time()
    first = TokenSigner(KEY, store=SqliteStore(path))
    token = first.issue("guest_reset", PARAMS, TARGET, "s1", now)
    await _confirm(first, token, now)
    first.store.close()
    restarted = TokenSigner(KEY, store=SqliteStore(path))  # a new process would open the same file
    with pytest.raises(TokenRefused, match="already used"):
        await _confirm(restarted, token, now + 1)


CLAIM = """
import sys
from pathlib import Path
from pve_steward.security.usedtokens import SqliteStore
print(SqliteStore(Path(sys.argv[1])).claim(sys.argv[2], float(sys.argv[3])))
"""


def test_sqlite_store_is_shared_by_processes_on_the_host(tmp_path: Path) -> None:
    path = tmp_path / "used.sqlite3"
    expires = time.time() + 300

    def claim_in_new_process(nonce: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", CLAIM, str(path), nonce, str(expires)], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    assert claim_in_new_process("n-1") == "True"
    assert claim_in_new_process("n-1") == "False"  # another process, after the first one exited
    assert SqliteStore(path).claim("n-1", expires) is False
    assert SqliteStore(path).claim("n-2", expires) is True


@pytest.mark.anyio
async def test_two_redis_stores_share_single_use(redis_url: str) -> None:
    now = time.time()
    replica_a = TokenSigner(KEY, store=RedisStore(redis_url))
    replica_b = TokenSigner(KEY, store=RedisStore(redis_url))
    token = replica_a.issue("guest_reset", PARAMS, TARGET, "s1", now)
    await _confirm(replica_a, token, now)
    with pytest.raises(TokenRefused, match="already used"):
        await _confirm(replica_b, token, now + 1)


def test_a_redis_key_outlives_the_token_by_the_skew_margin_by_redis_clock(redis_url: str) -> None:
    import redis

    store = RedisStore(redis_url)
    assert store.claim("ttl-check", time.time() + 60)
    ttl_ms = redis.Redis.from_url(redis_url).pttl("pve-steward:used-token:ttl-check")
    assert (60 + SKEW_MARGIN - 10) * 1000 < ttl_ms <= (60 + SKEW_MARGIN) * 1000


@pytest.mark.anyio
async def test_a_replica_whose_clock_is_behind_does_not_accept_a_used_token_again(redis_url: str) -> None:
    """Issue 42: the claiming replica's clock set the key's life, so once it ended, a replica 60 s behind (which
    still sees the token valid) accepted it again. The key now lives until expiry + margin by Redis' clock
    (the clock of this host too: its PTTL is checked against that end, bracketed by reads of the clock)."""
    import redis

    replica_a = TokenSigner(KEY, ttl=30, store=RedisStore(redis_url))
    lagging = TokenSigner(KEY, ttl=30, store=RedisStore(redis_url))
    now = time.time()
    token = replica_a.issue("guest_reset", PARAMS, TARGET, "s1", now)
    payload = await replica_a.check(token, "guest_reset", PARAMS, now)
    await replica_a.consume(payload)
    before = time.time()
    ttl_ms = redis.Redis.from_url(redis_url).pttl(KEY_PREFIX + str(payload["n"]))
    after = time.time()
    ends_ms = int(payload["exp"] * 1000) + SKEW_MARGIN * 1000  # the token's expiry plus the skew margin
    assert ends_ms - after * 1000 - 1 <= ttl_ms <= ends_ms - before * 1000 + 1
    with pytest.raises(TokenRefused, match="already used"):
        await _confirm(lagging, token, time.time() - 60)


@pytest.mark.anyio
async def test_a_token_expired_by_redis_clock_is_refused_on_a_lagging_replica(redis_url: str) -> None:
    issuer = TokenSigner(KEY, ttl=10, store=RedisStore(redis_url))
    lagging = TokenSigner(KEY, ttl=10, store=RedisStore(redis_url))
    token = issuer.issue("guest_reset", PARAMS, TARGET, "s1", time.time() - 30)  # expired 20 s ago
    payload = await lagging.check(token, "guest_reset", PARAMS, time.time() - 60)  # its clock: still valid
    with pytest.raises(TokenRefused, match=r"expired .* by the clock the replicas share"):
        await lagging.consume(payload)


@pytest.mark.anyio
async def test_unreachable_redis_fails_closed() -> None:
    signer = TokenSigner(KEY, store=RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5))
    now = time.time()
    token = signer.issue("guest_reset", PARAMS, TARGET, "s1", now)
    with pytest.raises(TokenRefused, match=r"cannot be reached.*fail closed"):
        await signer.check(token, "guest_reset", PARAMS, now)
    payload = signer.peek(token)
    assert payload is not None
    with pytest.raises(TokenRefused, match="fail closed"):
        await signer.consume(payload)


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers: a hung Redis."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield int(listener.getsockname()[1])


@pytest.mark.anyio
async def test_a_hung_store_is_called_off_the_event_loop_and_refused_at_its_deadline() -> None:
    """Issue 42: store calls ran on the event loop, so a hung Redis stopped every request. Now the loop keeps
    running while a call waits, the call is refused at its deadline (fail closed), and calls beyond
    MAX_WAITING are refused at once."""
    with silent_server() as port:
        store = RedisStore(f"redis://127.0.0.1:{port}/0", timeout=30)
        signer = TokenSigner(KEY, store=store, store_timeout=1.0)
        token = signer.issue("guest_reset", PARAMS, TARGET, "s1", time.time())
        payload = signer.peek(token)
        assert payload is not None
        ticks: list[int] = []
        outcomes: list[str] = []

        async def consume() -> None:
            try:
                await signer.consume(payload)
            except TokenRefused as exc:
                outcomes.append(f"{len(ticks)} {exc}")

        async def tick() -> None:
            while len(outcomes) < MAX_WAITING + 1:
                ticks.append(1)
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            for _ in range(MAX_WAITING + 1):
                tg.start_soon(consume)
    refused_at_once = [o for o in outcomes if "calls wait" in o]
    at_deadline = [o for o in outcomes if "did not answer within 1 s" in o]
    assert len(refused_at_once) == 1 and len(at_deadline) == MAX_WAITING, outcomes
    assert all("fail closed" in o for o in outcomes)
    assert all(int(o.split()[0]) > 0 for o in at_deadline), "the event loop ran while the store hung"


def test_a_restarted_redis_with_an_append_only_file_remembers_used_tokens(tmp_path: Path) -> None:
    with running_redis(tmp_path, appendonly=True) as server:
        assert RedisStore(server.url).claim("before-restart", time.time() + 300)
        server.restart()
        store = RedisStore(server.url)
        assert store.persistence() is True
        assert store.claim("before-restart", time.time() + 300) is False


def test_replicas_refuse_a_store_they_cannot_share(tmp_path: Path) -> None:
    local = SqliteStore(tmp_path / "used.sqlite3")
    with pytest.raises(ValueError, match="needs confirm_key_file"):
        sharing_problems(local, key_file=False, replicas=2)
    with pytest.raises(ValueError, match="only this host sees"):
        sharing_problems(local, key_file=True, replicas=2)
    warned = sharing_problems(local, key_file=True, replicas=1)
    assert len(warned) == 1 and "accepts tokens this one already used" in warned[0]
    assert sharing_problems(local, key_file=False, replicas=1) == []
    with running_redis(tmp_path) as forgetful:
        store = RedisStore(forgetful.url)
        with pytest.raises(ValueError, match="appendonly no"):
            sharing_problems(store, key_file=True, replicas=2)
        assert "appendonly no" in sharing_problems(store, key_file=True, replicas=1)[0]
    (tmp_path / "aof").mkdir()
    with running_redis(tmp_path / "aof", appendonly=True) as kept:
        assert sharing_problems(RedisStore(kept.url), key_file=True, replicas=3) == []


def test_an_unreachable_redis_is_reported_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with caplog.at_level("ERROR"):
        open_store(url, tmp_path)
    assert "cannot be reached" in caplog.text and "writes will be refused" in caplog.text


def test_an_unusable_sqlite_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailable, match="cannot open the used-token store"):
        SqliteStore(blocker / "used.sqlite3")


def test_store_selection_and_password_never_shown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert isinstance(open_store(None, tmp_path), SqliteStore)
    assert (tmp_path / "used-tokens.sqlite3").exists()
    assert isinstance(open_store("memory", tmp_path), MemoryStore)
    assert isinstance(open_store(str(tmp_path / "x.db"), tmp_path), SqliteStore)
    assert isinstance(open_store(f"sqlite://{tmp_path / 'y.db'}", tmp_path), SqliteStore)
    store = open_store("redis://user:hunter2@127.0.0.1:1/0", tmp_path)
    assert "hunter2" not in store.description and "***" in store.description
    assert "cannot be reached" in caplog.text and "hunter2" not in caplog.text
    with pytest.raises(ValueError, match="not understood") as info:
        open_store("mongodb://u:hunter2@db/x", tmp_path)
    assert "hunter2" not in str(info.value)


def test_memory_store_is_single_use_in_process() -> None:
    store = MemoryStore()
    assert store.claim("a", time.time() + 10) and not store.claim("a", time.time() + 10)
    assert store.is_used("a") and not store.is_used("b")
