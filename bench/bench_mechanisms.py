"""What each mechanism buys at the default settings (issue 43, item 1): the server with one left out, beside the
server as it ships, in one run.

pvesim serves as PVE's nodes do (three pveproxy and three pvedaemon workers per node, a cost per request:
pvesim/bound.py), in its own process. Two settings:

- **stdio**: one client, one call at a time, as a desktop client runs the server. A session of calls a user
  makes (a health check, a few guests, the guest list, the backups, an evacuation plan, the same guests again)
  on the demo and on a 2,000-guest cluster. Printed: the session's time, the requests PVE served, the server's
  CPU time and its peak memory.
- **team**: the HTTP server a team shares. Four users each start a different health check at once while a
  fifth reads guests one after another (probe.py). Printed: the cheap calls' median and p99 latency while the
  checks run, the checks' time, and the peak memory of all the server's processes.

Each variant changes one mechanism: the diagnostics process (opt-in: ``--diagnostics-process``), the urgency
of cheap calls (precedence, the lane, the board the child follows), the request pool's priorities, admission's
budget of heavy calls (``--heavy-calls 64``), the read cache (``--read-cache-ttl 0``), the libcurl transport,
orjson. The ones that are not settings are left out by bench/variants/sitecustomize.py. A variant of a
mechanism the server no longer has is skipped.

    python bench/bench_mechanisms.py [--only stdio|team] [--guests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procmem import _children
from simproc import SimProcess, free_port, wait_healthy

from pve_steward.config import Settings
from pvesim.bound import Bound
from pvesim.generator import generate
from pvesim.scenario import load_scenario

HERE = Path(__file__).resolve().parent
VARIANTS = HERE / "variants"
BOUND = Bound().model_dump()  # bench_bound's PVE: pvesim's defaults


@dataclass(frozen=True)
class Variant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    without: str = ""  # bench/variants/sitecustomize.py
    team_only: bool = False

    def environment(self) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(VARIANTS), os.environ.get("PYTHONPATH", "")) if p)
        extra = {"PYTHONPATH": path, "STEWARD_BENCH_WITHOUT": self.without} if self.without else {}
        return {**self.env, **extra}


def variants() -> list[Variant]:
    fields = Settings.model_fields
    out = [Variant("as shipped")]
    if "diagnostics_process" in fields:
        on = not fields["diagnostics_process"].default  # the setting opts in (design record 261206-60)
        name = "with diagnostics process" if on else "no diagnostics process"
        out.append(Variant(name, {"PVE_STEWARD_DIAGNOSTICS_PROCESS": str(on).lower()}, team_only=True))
    if _importable("pve_steward.pveio.urgency"):
        out.append(Variant("no urgency", without="urgency"))
    if _has_priorities():
        out.append(Variant("no priorities", without="priorities"))
    out.append(Variant("no admission budget", {"PVE_STEWARD_HEAVY_CALLS": "64"}))
    out.append(Variant("no read cache", {"PVE_STEWARD_READ_CACHE_TTL": "0"}))
    if _importable("pve_steward.pveio.curltransport"):
        out.append(Variant("no libcurl", without="curl"))
    if _importable("orjson") and _importable("pve_steward.pveio.pvejson"):
        out.append(Variant("no orjson", without="orjson"))
    return out


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _has_priorities() -> bool:
    from pve_steward.pveio import requestpool

    return hasattr(requestpool, "BACKGROUND")


def sim_state(sim: SimProcess) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the simulator's self-signed certificate: a local benchmark
        answer = requests.post(
            f"https://{sim.address}/_sim/state", json={}, headers={"X-Pvesim-Control": sim.control}, verify=False
        )
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def _status(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def tree(pid: int) -> list[int]:
    return [pid, *(p for kid in _children(pid) for p in tree(kid))]


def peak_mib(pid: int) -> float:
    """Peak resident memory of the server and every process it started (VmHWM summed), MiB."""
    return sum(_status(p, "VmHWM:") for p in tree(pid)) / 1024


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def server_pid() -> int:
    """The stdio server the MCP client just started (this process's child running pve_steward)."""
    for kid in _children(os.getpid()):
        if b"pve_steward" in Path(f"/proc/{kid}/cmdline").read_bytes():
            return kid
    raise RuntimeError("no server process")


def session(guests: list[int], node: str) -> list[tuple[str, dict[str, Any]]]:
    """What one user asks, one call at a time."""
    calls: list[tuple[str, dict[str, Any]]] = [("diagnostics", {"action": "check_cluster_health"})]
    calls += [("guests", {"action": "get_guest", "vmid": v}) for v in guests]
    calls += [("guests", {"action": "list_guests"}), ("diagnostics", {"action": "diagnose_backups"})]
    calls += [("planning", {"action": "plan_node_evacuation", "node": node, "allow_offline": True})]
    calls += [("guests", {"action": "get_guest", "vmid": v}) for v in guests]
    return calls


async def stdio_session(sim: SimProcess, state: Path, variant: Variant, calls: list[Any]) -> dict[str, float]:
    env = sim.server_env(state, "root@pam!pvesim", **variant.environment())
    server = StdioServerParameters(command=sys.executable, args=["-m", "pve_steward", "serve"], env=env)
    async with Client(server, read_timeout_seconds=600) as client:
        pid = server_pid()
        before, cpu = sim_state(sim)["requests"], cpu_seconds(pid)
        started = time.perf_counter()
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, args, result.content[0].text if result.content else "")
        wall = time.perf_counter() - started
        return {
            "wall": wall,
            "requests": sim_state(sim)["requests"] - before,
            "cpu": cpu_seconds(pid) - cpu,
            "peak": peak_mib(pid),
        }


def run_stdio(scenario: dict[str, Any], label: str, node: str, chosen: list[Variant]) -> None:
    sim = SimProcess(scenario, pveproxy=BOUND)
    guests = [int(g["vmid"]) for g in scenario["guests"] if g.get("status") == "running"][:5]
    calls = session(guests, node)
    print(f"stdio, one call at a time: {label} ({len(calls)} calls in turn)")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-mech-") as tmp:
            rows = []
            for variant in chosen:
                if variant.team_only:
                    continue
                r = asyncio.run(stdio_session(sim, Path(tmp) / variant.name.replace(" ", "-"), variant, calls))
                rows.append((variant.name, r))
            base = rows[0][1]
            for name, r in rows:
                print(
                    f"  {name:24} {r['wall']:6.2f} s ({r['wall'] / base['wall']:.2f}x)  {r['requests']:5d} requests "
                    f"({r['requests'] / base['requests']:.2f}x)  CPU {r['cpu']:5.2f} s "
                    f"({r['cpu'] / base['cpu']:.2f}x)  "
                    f"peak {r['peak']:5.1f} MiB ({r['peak'] / base['peak']:.2f}x)"
                )
    finally:
        sim.stop()


def start_http(sim: SimProcess, state: Path, variant: Variant) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = sim.server_env(
        state, "root@pam!pvesim", PVE_STEWARD_TRANSPORT="http", PVE_STEWARD_HTTP_PORT=str(port), **variant.environment()
    )
    server = subprocess.Popen([sys.executable, "-m", "pve_steward", "serve"], env=env, stderr=subprocess.DEVNULL)
    wait_healthy(port, 60)
    return server, f"http://127.0.0.1:{port}/mcp"


async def team_round(url: str, vmids: list[int], users: int) -> tuple[list[str], list[float], float]:
    """The users' distinct health checks at once (callers.py), the probe's cheap calls meanwhile (probe.py)."""
    probe = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "probe.py"),
        url,
        "--vmids",
        ",".join(map(str, vmids)),
        "--pause",
        "0.1",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert probe.stdin is not None and probe.stdout is not None
    await probe.stdout.readline()
    callers = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "callers.py"),
        url,
        "--checks",
        str(users),
        "--distinct",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await callers.communicate()
    began, end = (json.loads(line) for line in out.splitlines()[-2:])
    probe.stdin.close()
    probe_out, _ = await probe.communicate()
    samples = [json.loads(line) for line in probe_out.splitlines()]
    window = [lat for s, lat, _failed in samples if s >= began["began"] and s + lat <= end["ended"]]
    return end["outcomes"], window, end["ended"] - began["began"]


def run_team(scenario: dict[str, Any], label: str, users: int, chosen: list[Variant]) -> None:
    sim = SimProcess(scenario, pveproxy=BOUND)
    vmids = [int(g["vmid"]) for g in scenario["guests"] if g["type"] == "qemu" and g["status"] == "running"][:200]
    print(f"team over HTTP: {label}, {users} different health checks at once, a fifth user reading guests")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
            rows = []
            for variant in chosen:
                server, url = start_http(sim, Path(tmp) / variant.name.replace(" ", "-"), variant)
                try:
                    asyncio.run(team_round(url, vmids, 1))  # warm: tools built, the child started
                    outcomes, window, wall = asyncio.run(team_round(url, vmids, users))
                    rows.append((variant.name, outcomes, window, wall, peak_mib(server.pid)))
                finally:
                    server.terminate()
                    server.wait(timeout=30)
            rows_busy = admission_rows(sim, Path(tmp), vmids, 2 * users, chosen)
            base_p99 = _p99(rows[0][2])
            for name, outcomes, window, wall, peak in rows:
                p50, p99 = statistics.median(window) * 1000, _p99(window)
                done = sum(1 for o in outcomes if o == "ok")
                print(
                    f"  {name:24} cheap call p50 {p50:5.1f} ms p99 {p99:6.1f} ms ({p99 / base_p99:.2f}x) of "
                    f"{len(window)}; checks {wall:5.1f} s ({done}/{len(outcomes)} answered); peak {peak:5.1f} MiB"
                )
            for name, outcomes, wall, peak in rows_busy:
                busy = sum(1 for o in outcomes if o == "busy")
                print(
                    f"  {name:24} {len(outcomes)} different checks at once: {wall:5.1f} s, {busy} told busy, "
                    f"peak {peak:5.1f} MiB"
                )
    finally:
        sim.stop()


def admission_rows(
    sim: SimProcess, tmp: Path, vmids: list[int], users: int, chosen: list[Variant]
) -> list[tuple[str, list[str], float, float]]:
    """Admission's budget engages only past ``heavy_calls`` (4) different heavy calls at once: twice the users,
    with and without it (how the checks ended, their time, the peak memory)."""
    out = []
    for variant in (v for v in chosen if v.name in ("as shipped", "no admission budget")):
        server, url = start_http(sim, tmp / f"{variant.name.replace(' ', '-')}-{users}", variant)
        try:
            asyncio.run(team_round(url, vmids, 1))
            outcomes, _window, wall = asyncio.run(team_round(url, vmids, users))
            out.append((variant.name, outcomes, wall, peak_mib(server.pid)))
        finally:
            server.terminate()
            server.wait(timeout=30)
    return out


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000 if ordered else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["stdio", "team"], default=None)
    ap.add_argument("--guests", type=int, default=2000)
    ap.add_argument("--users", type=int, default=4)
    args = ap.parse_args()
    chosen = variants()
    print(f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; PVE modelled: {BOUND}")
    big = generate(nodes=20, guests=args.guests, seed=1)
    if args.only in (None, "stdio"):
        run_stdio(load_scenario("demo"), "the demo (22 guests)", "pve2", chosen)
        run_stdio(big, f"{args.guests:,} guests / 20 nodes", "pve02", chosen)
    if args.only in (None, "team"):
        run_team(big, f"{args.guests:,} guests / 20 nodes", args.users, chosen)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
