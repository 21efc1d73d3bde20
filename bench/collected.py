"""One health check's payload as the collector reads it from pvesim over HTTPS, and what it made of it.

The analysis benchmarks time exactly this: ``json.loads`` of the response bodies PVE sent, against the
health analysis of the ClusterData the collector built from them. A payload rendered apart from the
collector (pvesim.payload) left reads out, per-node capability lists and RRD data among them, and with
them the checks that read them: one of those cost more than any check it kept (design record 261205-44).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from simproc import SimProcess

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.health import AREAS
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pveio.client import ApiPath, ProxmoxerClient
from pve_steward.tools.collect import collect
from pve_steward.tools.runs import thresholds
from pvesim.generator import generate


@dataclasses.dataclass
class Collected:
    data: ClusterData
    bodies: list[bytes]  # every response body, as PVE sent it ({"data": ...})
    thresholds: Thresholds

    @functools.cached_property
    def text(self) -> str:
        """The payload as one JSON document (one json.loads call: the cheaper, stricter denominator)."""
        return "[" + ",".join(b.decode() for b in self.bodies) + "]"

    def fresh(self) -> ClusterData:
        """The collected snapshot without anything an analysis derived from it (lookups, parsed configs)."""
        return dataclasses.replace(self.data, memo=defaultdict(dict))


def collected(guests: int, nodes: int, seed: int = 1) -> Collected:
    """A generated cluster served by pvesim in its own process, read once as check_cluster_health reads it."""
    sim = SimProcess(generate(nodes=nodes, guests=guests, seed=seed))
    try:
        return collected_from(sim)
    finally:
        sim.stop()


def collected_from(sim: SimProcess) -> Collected:
    with tempfile.TemporaryDirectory(prefix="collected-") as tmp:
        settings = sim.settings(Path(tmp), token_store=str(Path(tmp) / "tokens.sqlite3"), timeout=120)
        t = thresholds(settings)
        bodies: list[bytes] = []
        client = ProxmoxerClient(settings)
        try:
            with _Bodies(bodies):
                data = asyncio.run(  # the arguments of tools/runs.py run_check
                    collect(
                        client,
                        time.time(),
                        list(AREAS),
                        agent_probe_limit=t.agent_probe_limit,
                        pending_probe_limit=int(t.get("pending_probe_limit")),
                    )
                )
        finally:
            client.close()
    return Collected(data, bodies, t)


class _Bodies:
    """Records the body of every answered read (the client's one door to the API)."""

    def __init__(self, into: list[bytes]) -> None:
        self._into = into
        self._lock = threading.Lock()
        self._orig = ProxmoxerClient._request_with_body

    def __enter__(self) -> None:
        orig, into, lock = self._orig, self._into, self._lock

        def request(client: ProxmoxerClient, method: str, path: ApiPath, params: dict[str, Any]) -> Any:
            result, body = orig(client, method, path, params)
            assert body is not None, f"{method} {path}: no body recorded"
            with lock:
                into.append(body)
            return result, body

        ProxmoxerClient._request_with_body = request  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        ProxmoxerClient._request_with_body = self._orig  # type: ignore[method-assign]
