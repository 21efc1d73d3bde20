"""A real redis-server on a free port for the shared used-token store's tests: without persistence by default,
or with an append-only file (``appendonly=True``); it can be paused (SIGSTOP), resumed and restarted."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.httpserver import free_port


class RedisServer:
    """One redis-server process; ``restart`` keeps its port and directory (and so its append-only file)."""

    def __init__(self, workdir: Path, *, appendonly: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (Debian package redis-server; .ci/run installs it)")
        self.binary, self.workdir, self.appendonly = binary, workdir, appendonly
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly else ["--appendonly", "no"]
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence]
        self.proc = subprocess.Popen(
            [*args, "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    pass
                assert self.proc is not None
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: the socket still accepts connections (the kernel's backlog) and nothing answers."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)


@contextmanager
def running_redis(workdir: Path, *, appendonly: bool = False) -> Iterator[RedisServer]:
    """A started RedisServer, stopped at the end. Skips (with the reason) only when the binary is absent."""
    server = RedisServer(workdir, appendonly=appendonly).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """Start redis-server without persistence, yield its URL, stop it."""
    with running_redis(workdir) as server:
        yield server.url
