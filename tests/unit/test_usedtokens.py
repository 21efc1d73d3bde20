"""Single use that survives restarts, processes and replicas: the used-token stores, against real backends."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pve_steward.security.tokens import TokenRefused, TokenSigner
from pve_steward.security.usedtokens import (
    MemoryStore,
    RedisStore,
    SqliteStore,
    StoreUnavailable,
    open_store,
)
from tests.httpserver import free_port
from tests.redisserver import redis_server

KEY = b"k" * 32
PARAMS = {"vmid": 100}
TARGET = {"vmid": 100, "node": "pve1", "type": "qemu"}


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


def _confirm(signer: TokenSigner, token: str, now: float) -> None:
    payload = signer.check(token, "guest_reset", PARAMS, now)
    signer.check_target(payload, TARGET, "s1")
    signer.consume(payload)


def test_sqlite_store_refuses_a_token_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "used.sqlite3"
    now = time.time()
    first = TokenSigner(KEY, store=SqliteStore(path))
    token = first.issue("guest_reset", PARAMS, TARGET, "s1", now)
    _confirm(first, token, now)
    first.store.close()
    restarted = TokenSigner(KEY, store=SqliteStore(path))  # a new process would open the same file
    with pytest.raises(TokenRefused, match="already used"):
        _confirm(restarted, token, now + 1)


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


def test_two_redis_stores_share_single_use(redis_url: str) -> None:
    now = time.time()
    replica_a = TokenSigner(KEY, store=RedisStore(redis_url))
    replica_b = TokenSigner(KEY, store=RedisStore(redis_url))
    token = replica_a.issue("guest_reset", PARAMS, TARGET, "s1", now)
    _confirm(replica_a, token, now)
    with pytest.raises(TokenRefused, match="already used"):
        _confirm(replica_b, token, now + 1)


def test_redis_key_expires_with_the_token(redis_url: str) -> None:
    import redis

    store = RedisStore(redis_url)
    assert store.claim("ttl-check", time.time() + 60)
    ttl_ms = redis.Redis.from_url(redis_url).pttl("pve-steward:used-token:ttl-check")
    assert 50_000 < ttl_ms <= 60_000


def test_unreachable_redis_fails_closed() -> None:
    signer = TokenSigner(KEY, store=RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5))
    now = time.time()
    token = signer.issue("guest_reset", PARAMS, TARGET, "s1", now)
    with pytest.raises(TokenRefused, match=r"cannot be reached.*fail closed"):
        signer.check(token, "guest_reset", PARAMS, now)
    payload = signer.peek(token)
    assert payload is not None
    with pytest.raises(TokenRefused, match="fail closed"):
        signer.consume(payload)


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
