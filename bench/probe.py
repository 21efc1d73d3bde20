"""A cheap-call latency probe in its own process: another user's client beside the heavy load.

Calls `get_guest` on the guests of ``--vmids`` in turn, a pause between calls, until its standard input
closes (or, with `--count`, until that many calls are made), and prints one JSON line per call: the monotonic start
time (system-wide on Linux, so the bench can keep the calls made while its load ran), the latency in
seconds, and whether the call failed (a refusal is a different, cheaper path: the bench counts them).
Run from the process that makes the load, the probe would also time that process's own work on
the load's answers (50 large answers parsed on the event loop the probe awaits on).

    python bench/probe.py URL --vmids N[,N...] [--count N] [--pause 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from mcp import Client


async def probe(url: str, vmids: list[int], count: int | None, pause: float) -> None:
    stop = asyncio.Event()
    if count is None:  # until the bench closes our standard input
        loop = asyncio.get_running_loop()
        loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not sys.stdin.buffer.read1(4096) else None)
    made = 0
    async with Client(url) as c:
        while not stop.is_set() and (count is None or made < count):
            started = time.monotonic()
            result = await c.call_tool("guests", {"action": "get_guest", "vmid": vmids[made % len(vmids)]})
            print(json.dumps([started, time.monotonic() - started, result.is_error]), flush=True)
            made += 1
            await asyncio.sleep(pause)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("url")
    ap.add_argument("--vmids", required=True, help="guests the cluster has, comma-separated: asked for in turn")
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--pause", type=float, default=0.02)
    args = ap.parse_args()
    asyncio.run(probe(args.url, [int(v) for v in args.vmids.split(",")], args.count, args.pause))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
