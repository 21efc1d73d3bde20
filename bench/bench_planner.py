"""Benchmark: plan the evacuation of a node holding 1,000 guests, pvesim adding 20 ms per request.

pvesim runs in its own process (as a real cluster would). Printed:
- the API calls the planner's read phase makes (counted by the simulator), its wall time, the lower
  bound ceil(calls / concurrency) x latency and their ratio (target <= 1.3). The read phase runs
  ``--repeat`` times on one client, as a long-running server would: the first run also opens the
  connections (printed), the ratio uses the best run (shared 2-core machines are noisy);
- the time inside a request against the time a worker spends between two (this client's share), for
  both runs. pvesim answers each request when its latency is up, counted from arrival, with its own
  work for it inside that time (as a node's several pveproxy workers would); what its one process
  does outside the app (TLS, HTTP parsing, writing the answer) still queues when 16 arrive at once,
  and keeps the speed-up below 16x whatever the client does;
- the same read phase one request at a time (target: concurrent >= 15x faster);
- the planning itself, and the whole MCP tool call (which adds the SDK's output-schema validation
  of a ~1,000-step plan on both ends).

    python bench/bench_planner.py [--guests-on-node 1000] [--latency 0.02] [--concurrency N] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import requests
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simproc import SimProcess

from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.config import Settings
from pve_steward.pveio.client import ProxmoxerClient, api_path
from pve_steward.server import build_server
from pve_steward.serving.listen import settle_heap
from pve_steward.tools.collect import BACKUP_AGE, collect
from pvesim.generator import generate

NODE = "pve01"


def request_count(sim: SimProcess) -> int:
    r = requests.get(
        f"https://{sim.address}/_sim/state", headers={"X-Pvesim-Control": sim.control}, verify=False, timeout=30
    )
    return int(r.json()["requests"])


def settings_for(sim: SimProcess, concurrency: int, tmp: Path) -> Settings:
    return sim.settings(
        tmp,
        "operator@pve!mcp",
        audit_log=tmp / f"audit-{concurrency}.jsonl",
        concurrency=concurrency,
        timeout=60,
        audit_reads=False,
        granular_tools=True,  # the planner's own tool, with its full output schema
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Span = tuple[int, float, float]  # worker thread, start, end of one request


def record_requests(client: ProxmoxerClient) -> list[Span]:
    """Time every request the client sends, per worker thread (the instance's own ``_send``, wrapped)."""
    spans: list[Span] = []
    send = client._send

    def timed(method: str, path: Any, params: dict[str, Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return send(method, path, params)
        finally:
            spans.append((threading.get_ident(), t0, time.perf_counter()))

    client._send = timed  # type: ignore[method-assign]
    return spans


def split(spans: list[Span]) -> tuple[float, float]:
    """Mean seconds inside a request (latency, simulator, TLS, proxmoxer) and mean seconds a worker spends
    between two of its requests (the client: answer taken, next read handed over)."""
    inside = statistics.fmean(end - start for _, start, end in spans)
    by_worker: dict[int, list[Span]] = {}
    for span in spans:
        by_worker.setdefault(span[0], []).append(span)
    gaps = [b[1] - a[2] for runs in map(sorted, by_worker.values()) for a, b in itertools.pairwise(runs)]
    return inside, statistics.fmean(gaps) if gaps else 0.0


def read_phase(sim: SimProcess, client: ProxmoxerClient) -> tuple[float, int, Any, float, float, list[Span]]:
    """Wall time, API calls, the data, the CPU seconds this process and pvesim's spent on it, the requests."""
    spans = record_requests(client)
    before = request_count(sim)

    async def timed() -> tuple[float, Any, float, float]:
        # timed on a running loop, as the server runs it: asyncio.run's own start and end (a new loop,
        # its executor's shutdown) are not part of the read phase
        sim_cpu, own_cpu = cpu_seconds(sim.proc.pid), time.process_time()
        t0 = time.perf_counter()
        data = await collect(client, time.time(), ["migration", "ha", BACKUP_AGE], node=NODE, preconditions=True)
        wall = time.perf_counter() - t0
        return wall, data, time.process_time() - own_cpu, cpu_seconds(sim.proc.pid) - sim_cpu

    wall, data, own_cpu, sim_cpu = asyncio.run(timed())
    del client._send  # the class's own again
    return wall, request_count(sim) - before - 1, data, own_cpu, sim_cpu, spans


async def tool_call(sim: SimProcess, concurrency: int, tmp: Path) -> tuple[float, dict[str, Any]]:
    mcp = build_server(settings_for(sim, concurrency, tmp), check_version_on_start=False)
    async with Client(mcp) as client:
        t0 = time.perf_counter()
        args = {"node": NODE, "allow_offline": True, "limit": 1000}  # the whole plan in one answer
        result = await client.call_tool("plan_node_evacuation", args)
        wall = time.perf_counter() - t0
    assert not result.is_error, result.content[0].text
    return wall, result.structured_content or {}


def main() -> int:
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")  # the control endpoint only
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--guests-on-node", type=int, default=1000)
    ap.add_argument("--guests", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--concurrency", type=int, default=Settings.model_fields["concurrency"].default)
    ap.add_argument("--repeat", type=int, default=3, help="concurrent read phases on one client (best is used)")
    ap.add_argument("--skip-sequential", action="store_true")
    args = ap.parse_args()
    scenario = generate(nodes=args.nodes, guests=args.guests, seed=1, concentrate=args.guests_on_node, node_memory="2T")
    sim = SimProcess(scenario, latency=args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            settle_heap()  # as `pve-steward serve` does once built
            client = ProxmoxerClient(settings_for(sim, args.concurrency, tmp))
            runs = [read_phase(sim, client) for _ in range(max(1, args.repeat))]
            client.close()
            first = runs[0][0]
            wall, calls, data, own_cpu, sim_cpu, spans = min(runs, key=lambda r: r[0])
            inside, between = split(spans)
            t0 = time.perf_counter()
            plan = plan_evacuation(data, NODE, allow_offline=True, backups_read=True)
            planning = time.perf_counter() - t0
            bound = math.ceil(calls / args.concurrency) * args.latency
            ratio = wall / bound
            print(f"{NODE} holds {args.guests_on_node} guests; {args.nodes} nodes, {args.guests} guests in all")
            print(f"plan:            {plan.summary}")
            print(f"latency:         {args.latency * 1000:.0f} ms per request, concurrency {args.concurrency}")
            print(f"API calls:       {calls}")
            print(
                f"read phase:      {wall:.2f} s  (best of {len(runs)}; the first, opening connections: {first:.2f} s)"
            )
            print(f"lower bound:     {bound:.2f} s  (ceil(calls / concurrency) x latency)")
            print(f"ratio:           {ratio:.2f}  (target <= 1.3: {'met' if ratio <= 1.3 else 'MISSED'})")
            print(
                f"CPU per request: client {own_cpu / calls * 1000:.2f} ms (proxmoxer, requests, collector: this"
                f" process), pvesim {sim_cpu / calls * 1000:.2f} ms"
            )
            print(
                f"CPU floor:       {own_cpu:.2f} s on one core (the client's GIL); {own_cpu + sim_cpu:.2f} s in all"
                f" on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (load stretches the read phase)"
            )
            print(
                f"per request:     {inside * 1000:.1f} ms inside it (latency, pvesim serving {args.concurrency} at"
                f" once, TLS, proxmoxer); {between * 1000:.2f} ms between a worker's requests (this client)"
            )
            print(f"planning:        {planning * 1000:.0f} ms")
            tool_wall, _ = asyncio.run(tool_call(sim, args.concurrency, tmp))
            print(f"MCP tool call:   {tool_wall:.2f} s  (reads + planning + SDK output validation, both ends)")
            if not args.skip_sequential:
                seq_client = ProxmoxerClient(settings_for(sim, 1, tmp))
                asyncio.run(seq_client.get(api_path("version")))  # its connection opened, like the best run's
                seq_wall, seq_calls, *_, seq_spans = read_phase(sim, seq_client)
                seq_client.close()
                speedup = seq_wall / wall
                print(
                    f"sequential:      {seq_wall:.2f} s for {seq_calls} calls, one request at a time"
                    f" ({split(seq_spans)[0] * 1000:.1f} ms inside each)"
                )
                print(f"speed-up:        {speedup:.1f}x  (target >= 15x: {'met' if speedup >= 15 else 'MISSED'})")
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
