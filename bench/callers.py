"""The heavy load of bench_heavy: N concurrent health checks, from a process of their own.

Fifty users' clients run on their own machines; here they share this machine's CPUs with the server,
so they run in their own process (at the priority bench_heavy gives it), never in the process that
times anything. Prints one JSON line when the calls start, then one with how each ended and when the
last did (monotonic times, system-wide on Linux, so bench_heavy keeps the probe's calls made meanwhile).

    python bench/callers.py URL [--checks 50] [--distinct]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from typing import Any

from mcp import Client

from pve_steward.analysis.health import AREAS

HEALTH = ("diagnostics", {"action": "check_cluster_health"})
DROPS = list(itertools.combinations(AREAS, 2))  # area pairs a distinct health check leaves out


def health(i: int, distinct: bool) -> tuple[str, dict[str, Any]]:
    if not distinct:
        return HEALTH
    # distinct work: every area but a different pair (a different page of one check now shares its run)
    left_out = DROPS[i % len(DROPS)]
    return (HEALTH[0], {**HEALTH[1], "areas": [a for a in AREAS if a not in left_out]})


async def call(url: str, tool: tuple[str, dict[str, Any]]) -> str:
    async with Client(url) as c:
        result = await c.call_tool(*tool)
        text = result.content[0].text if result.is_error and result.content else ""
        return ("busy" if "busy" in text else "error:" + text[:80]) if text else "ok"


async def run(url: str, checks: int, distinct: bool) -> None:
    print(json.dumps({"began": time.monotonic()}), flush=True)
    outcomes = await asyncio.gather(*(call(url, health(i, distinct)) for i in range(checks)))
    print(json.dumps({"ended": time.monotonic(), "outcomes": outcomes}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("url")
    ap.add_argument("--checks", type=int, default=50)
    ap.add_argument("--distinct", action="store_true")
    args = ap.parse_args()
    asyncio.run(run(args.url, args.checks, args.distinct))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
