"""Run the PBS simulator over HTTPS on its own port, the way pvesim runs (self-signed cert, uvicorn thread)."""

from __future__ import annotations

from typing import Any

import uvicorn

from pvesim.pbs.app import create_app
from pvesim.pbs.state import PbsState, build, load
from pvesim.server import HttpsSim


class PbsServer(HttpsSim):
    """A running PBS simulator: ``with PbsServer(state) as pbs: pbs.address, pbs.fingerprint, pbs.token(...)``."""

    thread_name = "pbssim"

    def __init__(self, state: PbsState, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = state
        super().__init__(host, port, "pbssim-")

    def config(self) -> uvicorn.Config:
        return uvicorn.Config(create_app(self.state), **self._tls(), log_level="warning")

    def token(self, tokenid: str) -> tuple[str, str]:
        """(full token id, secret) of a scenario token."""
        t = self.state.tokens[tokenid]
        return t.full_id, t.secret


def start_pbs(scenario: str | dict[str, Any] = "demo", port: int = 0) -> PbsServer:
    """Build a PBS scenario and start it on a free port (the caller stops it)."""
    data = load(scenario) if isinstance(scenario, str) else scenario
    return PbsServer(build(data), port=port).start()
