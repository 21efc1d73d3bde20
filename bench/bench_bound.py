"""Performance at PVE's bound: a health check at 10,000 guests and an evacuation plan against PVE's workers.

What bounds a check on a real cluster is PVE itself (issue 43, item 6): each node answers at most three API
calls at once (pveproxy's ``max_workers``), a node-local path asked of the entry node is forwarded to its
node's pveproxy, a protected one runs in that node's pvedaemon (three workers too). pvesim serves as PVE does
with ``faults.pveproxy`` (pvesim/bound.py, design record 261206-61), every handler ``--cost`` seconds and every
forward ``--proxy-cost``. pvesim runs in its own process, the server over stdio with its default settings,
one call at a time.

Printed per run, from pvesim's own account of what each node's workers did:
- the bound the run implies: no client can finish before the busiest pool's work divided by its workers.
  The work is what pvesim's workers were held for: the model's cost, or longer where pvesim's own work for a
  request took longer on this machine (the model's figure, handlers x cost + forwards x proxy cost, is printed
  beside it);
- the call's wall time against it (target <= 1.2x: our concurrency keeps the busiest node's workers busy,
  so it does not starve PVE);
- the mean wait of a request for a worker at each pool, against the mean time a worker held one there
  (target: at most that at every pool, so another user's request, the GUI's, waits about one request
  more: we do not flood PVE);
- with ``--sweep``, the same at concurrency 8, 24 and 32, to show where each side of the default lies.

With ``--out`` (default docs/performance.md; '-' prints only) the figures replace the file's "At PVE's bound"
section (bench_scale.py keeps it when it rewrites the rest).

    python bench/bench_bound.py [--guests 10000 --nodes 50] [--cost 0.04 --proxy-cost 0.01] [--sweep] [--out -]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import requests
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simproc import SimProcess

from pve_steward.config import Settings
from pvesim.bound import Bound
from pvesim.generator import generate

TARGET = 1.2
DEFAULT_CONCURRENCY = Settings.model_fields["concurrency"].default
ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- bench_bound.py -->", "<!-- /bench_bound.py -->"


def control(sim: SimProcess, action: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the simulator's self-signed certificate: a local benchmark
        answer = requests.post(
            f"https://{sim.address}/_sim/{action}",
            json={},
            headers={"X-Pvesim-Control": sim.control},
            verify=False,
            timeout=60,
        )
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


async def one_call(sim: SimProcess, state: Path, concurrency: int, tool: str, args: dict[str, Any]) -> float:
    """Start a stdio server, let it answer once (its start and first build not timed), then time the call."""
    env = sim.server_env(state, "root@pam!pvesim", PVE_STEWARD_CONCURRENCY=str(concurrency))
    server = StdioServerParameters(command=sys.executable, args=["-m", "pve_steward", "serve"], env=env)
    async with Client(server, read_timeout_seconds=600) as client:
        warm = await client.call_tool("cluster", {"action": "cluster_membership"})
        assert not warm.is_error, warm.content
        control(sim, "workers/reset")
        started = time.perf_counter()
        result = await client.call_tool(tool, args)
        wall = time.perf_counter() - started
    assert not result.is_error, result.content[0].text if result.content else result
    return wall


def run(sim: SimProcess, state: Path, concurrency: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    wall = asyncio.run(one_call(sim, state, concurrency, tool, args))
    report = control(sim, "state")["workers"]
    pools = report["pools"]
    work = {(p["node"], p["kind"]): p["work"] / p["workers"] for p in pools}
    real = {(p["node"], p["kind"]): p["busy"] / p["workers"] for p in pools}
    busiest = max(real, key=lambda k: real[k])
    waits = {(p["node"], p["kind"]): p["waited"] / p["served"] for p in pools if p["served"]}
    holds = {(p["node"], p["kind"]): p["busy"] / p["served"] for p in pools if p["served"]}
    worst_wait = max(waits, key=lambda k: waits[k] / holds[k] if holds[k] else 0.0)
    return {
        "concurrency": concurrency,
        "wall": wall,
        "bound": real[busiest],
        "modelled_bound": max(work.values()),
        "busiest": busiest,
        "utilisation": real[busiest] / wall,
        "worst_wait": waits[worst_wait],
        "worst_hold": holds[worst_wait],
        "worst_wait_pool": worst_wait,
        "cost": report["bound"]["cost"],
        "pools": sorted(pools, key=lambda p: -p["work"] / p["workers"])[:4],
    }


def show(name: str, r: dict[str, Any]) -> None:
    node, kind = r["busiest"]
    wnode, wkind = r["worst_wait_pool"]
    print(
        f"  concurrency {r['concurrency']:3d}: {r['wall']:6.2f} s; bound {r['bound']:6.2f} s ({node} {kind}; "
        f"{r['modelled_bound']:.2f} s as modelled), {r['wall'] / r['bound']:.2f}x; busiest pool busy "
        f"{r['utilisation'] * 100:.0f} %; a request waited {r['worst_wait'] * 1000:.1f} ms on average at "
        f"{wnode} {wkind}, where a worker held one {r['worst_hold'] * 1000:.1f} ms"
    )
    for p in r["pools"]:
        print(
            f"      {p['node']} {p['kind']}: {p['served']} holds, work {p['work']:.2f} s, held {p['busy']:.2f} s, "
            f"waited {p['waited']:.2f} s, peak {p['peak_waiting']} waiting"
        )


def verdicts(name: str, r: dict[str, Any]) -> list[str]:
    ratio = r["wall"] / r["bound"]
    starve = "MET" if ratio <= TARGET else "MISSED"
    flood = "MET" if r["worst_wait"] <= r["worst_hold"] else "MISSED"
    return [
        f"{starve}: {name} within {TARGET}x of the bound PVE implies ({ratio:.2f}x; not starving PVE)",
        f"{flood}: {name}: at every node a request waits for a worker no longer than a worker holds one "
        f"({r['worst_wait'] * 1000:.1f} ms <= {r['worst_hold'] * 1000:.1f} ms at the worst; not flooding PVE)",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--guests", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--evacuate-guests", type=int, default=1000, help="guests on the node the plan evacuates")
    ap.add_argument("--cost", type=float, default=Bound.model_fields["cost"].default)
    ap.add_argument("--proxy-cost", type=float, default=Bound.model_fields["proxy_cost"].default)
    ap.add_argument("--sweep", action="store_true", help="also at concurrency 8, 24 and 32")
    ap.add_argument("--out", default=str(ROOT / "docs" / "performance.md"), help="'-' prints only")
    args = ap.parse_args()
    began = time.time()
    bound = {"cost": args.cost, "proxy_cost": args.proxy_cost}
    others = [8, 24, 32] if args.sweep else []
    load = os.getloadavg()
    print(
        f"PVE modelled: 3 pveproxy and 3 pvedaemon workers per node, {args.cost * 1000:.0f} ms per handler, "
        f"{args.proxy_cost * 1000:.0f} ms per forward; load average at start {load[0]:.1f} on {os.cpu_count()} CPUs"
    )
    lines: list[str] = []
    table: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-bound-") as tmp:
        state = Path(tmp)
        sim = SimProcess(generate(nodes=args.nodes, guests=args.guests, seed=1), pveproxy=bound)
        try:
            name = f"health check at {args.guests:,} guests / {args.nodes} nodes"
            print(name)
            health = ("diagnostics", {"action": "check_cluster_health"})
            for concurrency in [DEFAULT_CONCURRENCY, *others]:
                r = run(sim, state, concurrency, *health)
                show(name, r)
                table.append((f"health check, {args.guests:,} guests / {args.nodes} nodes", r))
                if concurrency == DEFAULT_CONCURRENCY:
                    lines += verdicts(name, r)
        finally:
            sim.stop()
        scenario = generate(nodes=20, guests=2000, seed=1, concentrate=args.evacuate_guests, node_memory="2T")
        sim = SimProcess(scenario, pveproxy=bound)
        try:
            name = f"evacuation plan of a node with {args.evacuate_guests:,} guests (20 nodes, 2,000 guests)"
            print(name)
            plan = ("planning", {"action": "plan_node_evacuation", "node": "pve01", "allow_offline": True})
            for concurrency in [DEFAULT_CONCURRENCY, *others]:
                r = run(sim, state, concurrency, *plan)
                show(name, r)
                table.append((f"evacuation plan, {args.evacuate_guests:,} guests on the node", r))
                if concurrency == DEFAULT_CONCURRENCY:
                    lines += verdicts(name, r)
        finally:
            sim.stop()
    print("Targets (issue 43, item 6; default concurrency):")
    for line in lines:
        print(f"- {line}")
    if args.out != "-":
        write(Path(args.out), section(args, table, lines, began, load[0]))
    return 0


def section(
    args: argparse.Namespace, table: list[tuple[str, dict[str, Any]]], lines: list[str], began: float, load: float
) -> list[str]:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(began))
    rows = [
        "| run | concurrency | wall (s) | bound (s) | wall / bound | busiest pool | busy | longest wait / hold (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in table:
        node, kind = r["busiest"]
        wnode, wkind = r["worst_wait_pool"]
        rows.append(
            f"| {name} | {r['concurrency']} | {r['wall']:.1f} | {r['bound']:.1f} | {r['wall'] / r['bound']:.2f} | "
            f"{node} {kind} | {r['utilisation'] * 100:.0f} % | {wnode} {wkind}: {r['worst_wait'] * 1000:.0f} / "
            f"{r['worst_hold'] * 1000:.0f} |"
        )
    return [
        START,
        "## At PVE's bound",
        "",
        "Generated by `bench/bench_bound.py` (design record 261206-61); do not edit by hand. It replaces issue",
        "17's item 5 (the analysis within 2x `json.loads`), withdrawn by issue 43: what bounds a check on a real",
        "cluster is PVE itself.",
        "",
        f"Figures from **one run** on {when}, on {os.cpu_count()} CPUs, load average {load:.1f} at start (a shared",
        "machine). pvesim serves as PVE's nodes do (pvesim/bound.py): three pveproxy and three pvedaemon workers",
        f"per node, {args.cost * 1000:.0f} ms per handler, {args.proxy_cost * 1000:.0f} ms per forward to another",
        "node or to pvedaemon; the server runs over stdio with its default settings, one call at a time. The",
        "bound is the busiest pool's work divided by its workers: no client finishes sooner. The longest waits",
        "are at the pool where a request waited longest for a worker against how long a worker held one there:",
        "another user's request (the GUI's) waits about as long.",
        "",
        *rows,
        "",
        "Targets (issue 43, item 6; the default concurrency, 16 in all and 6 per node):",
        "",
        *(f"- {line}" for line in lines),
        END,
        "",
    ]


def write(path: Path, new: list[str]) -> None:
    """Replace the section between the markers (or add it at the end)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    start, end = text.find(START), text.find(END)
    before = text[:start] if start >= 0 else text.rstrip("\n") + "\n\n"
    after = text[end + len(END) :].lstrip("\n") if start >= 0 and end >= 0 else ""
    path.write_text(before + "\n".join(new) + after, encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
