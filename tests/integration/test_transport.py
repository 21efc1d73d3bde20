"""proxmoxer's HTTPS transport (requests' urllib3, one TLS context: client.py _adapter) against pvesim: TLS
choices, bodies, failures.

A TCP relay stands between the client and the simulators, so the server behind one address can
change (a certificate replaced by another with a different key) while the client keeps its pin.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pvesim
from pve_steward.config import load_settings
from pve_steward.errors import PveTlsError
from pve_steward.pveio.client import ProxmoxerClient, api_path, node, vmid
from pve_steward.pveio.readcache import ReadCache
from pvesim.server import SimServer


class Relay:
    """Forwards TCP connections on a local port to ``target``; ``switch`` drops them and changes it."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self._listener.accept()
            except OSError:
                return
            outbound = socket.create_connection(self.target)
            with self._lock:
                self._open += [inbound, outbound]
            for a, b in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def switch(self, target: tuple[str, int]) -> None:
        with self._lock:
            self.target = target
            self._drop()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        for s in self._open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # the pipes see the end and close both sides
        self._open.clear()


@pytest.fixture
def two_sims() -> Iterator[tuple[SimServer, SimServer]]:
    first, second = pvesim.start_scenario("demo"), pvesim.start_scenario("demo")
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()


@pytest.fixture
def client_for(tmp_path: Path) -> Iterator[Callable[..., ProxmoxerClient]]:
    """Makes clients for a simulator's token at an address; closes every one at the end of the test."""
    made: list[ProxmoxerClient] = []

    def make(sim: SimServer, address: str, token: str = "monitor@pve!mcp", **extra: object) -> ProxmoxerClient:
        token_id, secret = sim.token(token)
        values = {"url": address, "token_id": token_id, "token_secret": secret, "retries": 0, **extra}
        made.append(ProxmoxerClient(load_settings(audit_log=tmp_path / "audit.jsonl", **values)))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.mark.anyio
async def test_a_pinned_client_sends_nothing_to_a_server_whose_key_changed(
    two_sims: tuple[SimServer, SimServer], client_for: Callable[..., ProxmoxerClient]
) -> None:
    first, second = two_sims
    relay = Relay(("127.0.0.1", first.port))
    client = client_for(first, f"127.0.0.1:{relay.port}", fingerprint=first.fingerprint)
    try:
        assert (await client.get(api_path("version")))["version"]
        relay.switch(("127.0.0.1", second.port))  # same address, another certificate and key
        before = second.sim.requests
        with pytest.raises(PveTlsError) as refused:
            await client.get(api_path("version"))
        assert "fingerprint mismatch" in str(refused.value)
        assert refused.value.presented == second.fingerprint  # named as PVE shows it (pvenode cert info)
        assert second.sim.requests == before  # refused after the handshake: no request, so no token, reached it
    finally:
        relay.close()


@pytest.mark.anyio
async def test_the_ca_file_verifies_and_a_foreign_ca_is_refused(
    two_sims: tuple[SimServer, SimServer], client_for: Callable[..., ProxmoxerClient]
) -> None:
    first, second = two_sims
    trusted = client_for(first, first.address, ca_file=first.cert_path)
    foreign = client_for(first, first.address, ca_file=second.cert_path)
    assert (await trusted.get(api_path("version")))["version"]
    before = first.sim.requests
    with pytest.raises(PveTlsError, match="certificate not trusted"):
        await foreign.get(api_path("version"))
    assert first.sim.requests == before


@pytest.mark.anyio
async def test_writes_carry_their_body_and_reads_after_them_reuse_the_connection(
    two_sims: tuple[SimServer, SimServer], client_for: Callable[..., ProxmoxerClient]
) -> None:
    sim, _ = two_sims
    client = client_for(sim, sim.address, fingerprint=sim.fingerprint)
    writer = client_for(sim, sim.address, "root@pam!pvesim", fingerprint=sim.fingerprint, tier="admin")
    guest, where = next((g.vmid, g.node) for g in sim.cluster.guests.values() if g.type == "qemu")
    path = api_path("nodes", node(where), "qemu", vmid(guest), "config")
    await writer.call("PUT", path, description="set through the transport")
    config = await client.get(path)
    assert config["description"] == "set through the transport"
    await writer.call("PUT", path, delete="description")  # a second write on the same handle: no body left over
    assert "description" not in await client.get(path)


@pytest.mark.anyio
async def test_the_read_cache_keeps_the_body_pve_sent(
    two_sims: tuple[SimServer, SimServer], client_for: Callable[..., ProxmoxerClient]
) -> None:
    sim, _ = two_sims
    inner = client_for(sim, sim.address, fingerprint=sim.fingerprint)
    cache = ReadCache(inner, ttl=60)
    first = await cache.get(api_path("cluster", "resources"))
    first.clear()  # a caller changing its answer changes no one else's
    again = await cache.get(api_path("cluster", "resources"))
    assert again and cache.stats.requests == 1 and cache.stats.hits == 1
    assert again == await inner.get(api_path("cluster", "resources"))
    (kept,) = cache._entries.values()
    assert kept.wrapped and json.loads(kept.encoded)["data"] == again  # PVE's own body, not ours encoded again


@pytest.mark.anyio
async def test_a_foreign_fingerprint_is_refused_and_every_connection_shares_one_tls_context(
    two_sims: tuple[SimServer, SimServer], client_for: Callable[..., ProxmoxerClient]
) -> None:
    """The pin refuses a server with another certificate before any request; the pool's connections share the
    one TLS context (urllib3 made one per connection, loading the system's CAs into each: design record
    261206-60)."""
    import asyncio

    first, second = two_sims
    pinned = client_for(first, first.address, fingerprint=first.fingerprint, concurrency=8)
    foreign = client_for(first, first.address, fingerprint=second.fingerprint)
    before = first.sim.requests
    with pytest.raises(PveTlsError, match="fingerprint mismatch") as refused:
        await foreign.get(api_path("version"))
    assert refused.value.presented == first.fingerprint and first.sim.requests == before
    await asyncio.gather(*(pinned.get(api_path("nodes", node(n), "status")) for n in ("pve1", "pve2", "pve3") * 4))
    manager = pinned._api([])._store["session"].get_adapter(first.url).poolmanager
    opened = [c for pool in manager.pools._container.values() for c in list(pool.pool.queue) if c is not None]
    shared = manager.connection_pool_kw["ssl_context"]
    assert shared is not None and len(opened) > 1 and all(c.ssl_context is shared for c in opened)
