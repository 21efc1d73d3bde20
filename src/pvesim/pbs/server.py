"""Run the PBS simulator over HTTPS on its own port, the way pvesim runs (self-signed cert, uvicorn thread)."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from pvesim.pbs.app import create_app
from pvesim.pbs.state import PbsState, build, load
from pvesim.server import ReasonH11Protocol, make_certificate


class PbsServer:
    """A running PBS simulator: ``with PbsServer(state) as pbs: pbs.address, pbs.fingerprint, pbs.token(...)``."""

    def __init__(self, state: PbsState, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = state
        self.host = host
        self.port = port
        self._tmp = tempfile.TemporaryDirectory(prefix="pbssim-")
        self.cert_path, self.key_path, self.fingerprint = make_certificate(Path(self._tmp.name), host)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"https://{self.address}"

    def start(self) -> PbsServer:
        config = uvicorn.Config(
            create_app(self.state),
            host=self.host,
            port=self.port,
            http=ReasonH11Protocol,
            ssl_certfile=str(self.cert_path),
            ssl_keyfile=str(self.key_path),
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="pbssim", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the PBS simulator failed to start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None and self._server.started:
            server = self._server
            server.should_exit = True

            def abort_idle() -> None:
                for conn in list(server.server_state.connections):
                    transport = getattr(conn, "transport", None)
                    if transport is not None:
                        transport.abort()

            server.servers[0].get_loop().call_soon_threadsafe(abort_idle)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None  # stopping twice (a test stops it early) is fine
        self._tmp.cleanup()

    def __enter__(self) -> PbsServer:
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def token(self, tokenid: str) -> tuple[str, str]:
        """(full token id, secret) of a scenario token."""
        t = self.state.tokens[tokenid]
        return t.full_id, t.secret


def start_pbs(scenario: str | dict[str, Any] = "demo", port: int = 0) -> PbsServer:
    """Build a PBS scenario and start it on a free port (the caller stops it)."""
    data = load(scenario) if isinstance(scenario, str) else scenario
    return PbsServer(build(data), port=port).start()
