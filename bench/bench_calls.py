"""API calls of a health check's collection, per area and in full, on a generated cluster.

Issue #18's cost bound: a full health check on the 1,000-guest scenario stays within 1.3x the calls it made
before the new checks plus a per-node constant. Printed: the calls of the full check, and for each area the
calls it adds over the reads every check makes (version, status, resources, storage).

    python bench/bench_calls.py [--guests 1000] [--nodes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pvesim
from pve_steward.config import load_settings
from pve_steward.pveio.client import ApiPath, ProxmoxerClient
from pve_steward.tools.collect import ALL_AREAS, collect
from pvesim.generator import generate
from pvesim.server import SimServer


class Counting:
    """A client that counts the reads it passes on."""

    def __init__(self, inner: ProxmoxerClient) -> None:
        self.inner, self.reads = inner, 0

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        self.reads += 1
        return await self.inner.get(path, **params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def calls(settings: Any, areas: list[str]) -> int:
    client = Counting(ProxmoxerClient(settings))
    await collect(client, 1e12, areas)  # type: ignore[arg-type]
    return client.reads


async def main(guests: int, nodes: int) -> None:
    data = generate(nodes=nodes, guests=guests, seed=1)
    with SimServer(pvesim.build_cluster(data, speed=500.0)) as sim, tempfile.TemporaryDirectory() as tmp:
        token_id, secret = sim.token("auditor@pve!mcp")
        settings = load_settings(
            url=sim.address,
            token_id=token_id,
            token_secret=secret,
            fingerprint=sim.fingerprint,
            audit_log=Path(tmp) / "audit.jsonl",
            token_store=str(Path(tmp) / "tokens.sqlite3"),
            retries=0,
            read_cache_ttl=0,
        )
        base = await calls(settings, [])
        print(f"{guests} guests on {nodes} nodes, auditor token")
        print(f"{'every check (common reads)':<28}{base:6d}")
        for area in ALL_AREAS:
            print(f"  + {area:<24}{await calls(settings, [area]) - base:6d}")
        print(f"{'full health check':<28}{await calls(settings, list(ALL_AREAS)):6d}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--guests", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.guests, args.nodes))
