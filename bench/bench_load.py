"""Load: 50 concurrent MCP clients over streamable HTTP calling read tools against pvesim.

Both pvesim and the server run in their own processes. Printed: calls, throughput, p50/p99
latency, errors (target 0), and the server's resident memory after a warm-up round and after the
measured run (target: no growth beyond noise, 10 %).

    python bench/bench_load.py [--clients 50] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procmem import tree_rss_kib
from simproc import SimProcess, free_port, wait_healthy

import pvesim

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("cluster", {"action": "cluster_overview"}),
    ("guests", {"action": "list_guests", "limit": 20}),
    ("guests", {"action": "get_guest", "vmid": 100}),
    ("tasks", {"action": "list_tasks", "limit": 10}),
    ("ha", {"action": "ha_status"}),
    ("diagnostics", {"action": "explain_finding", "code": "BACKUP_STALE"}),
]


async def client_loop(url: str, deadline: float, latencies: list[float], errors: list[str], seed: int) -> None:
    rng = random.Random(seed)
    async with Client(url) as c:
        while time.monotonic() < deadline:
            tool, args = rng.choice(CALLS)
            started = time.perf_counter()
            try:
                result = await c.call_tool(tool, args)
                if result.is_error:
                    errors.append(f"{tool}: {result.content[0].text[:120]}")
            except Exception as exc:  # a transport failure is an error to count, not a crash of the bench
                errors.append(f"{tool}: {type(exc).__name__}: {exc}"[:160])
            latencies.append(time.perf_counter() - started)


async def run_clients(url: str, clients: int, seconds: float) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(*(client_loop(url, deadline, latencies, errors, i) for i in range(clients)))
    return latencies, errors, time.monotonic() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()

    sim = SimProcess(pvesim.load_scenario("demo"))
    port = free_port()
    tmp = tempfile.TemporaryDirectory(prefix="load-bench-")
    env = sim.server_env(Path(tmp.name), PVE_STEWARD_TRANSPORT="http", PVE_STEWARD_HTTP_PORT=str(port))
    server = subprocess.Popen(
        [sys.executable, "-m", "pve_steward", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_healthy(port, 30, poll=0.2)
        asyncio.run(run_clients(url, args.clients, 3.0))  # warm-up: imports, pools, caches
        before = tree_rss_kib(server.pid)
        latencies, errors, wall = asyncio.run(run_clients(url, args.clients, args.seconds))
        after = tree_rss_kib(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stderr:
            server.stderr.close()
        sim.stop()
        tmp.cleanup()

    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000
    growth = (after - before) / before * 100 if before else 0.0
    print(f"clients {args.clients}, {args.seconds:.0f} s, read tools over streamable HTTP against pvesim")
    print(f"calls {len(latencies)}  throughput {len(latencies) / wall:.0f}/s  p50 {p50:.0f} ms  p99 {p99:.0f} ms")
    print(f"errors {len(errors)} (target 0)")
    for line in sorted(set(errors))[:5]:
        print(f"  {line}")
    print(f"server RSS after warm-up {before / 1024:.0f} MiB, after the run {after / 1024:.0f} MiB ({growth:+.1f} %)")
    ok = not errors and growth < 10
    print(f"targets (0 errors, memory growth < 10 %): {'MET' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
