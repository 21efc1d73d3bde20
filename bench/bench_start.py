"""Start cost: spawn -> first `tools/list` answer over stdio, and peak RSS, against a bare SDK server.

In paired, interleaved rounds (the order swaps each round) this spawns `pve-steward serve`
(stdio, pointed at a pvesim started once) and bench/bare_server.py (an SDK `MCPServer` with
one tool), sends initialize + tools/list as raw JSON-RPC lines, and times the `tools/list`
answer from the spawn. Peak RSS is the process's VmHWM read right after that answer.
Targets (issue 17): time <= 1.2x the bare server, peak RSS <= 1.1x.

`serve` keeps its tool list beside the audit log (surface.py): the rounds are starts of a configuration
that has started before, as a client starts the server for each session. The first start of a
configuration (a fresh state directory: it builds every tool for tools/list) is printed apart. The
package is byte-compiled first, as installing a wheel does, so no start pays for compiling sources.

    python bench/bench_start.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import compileall
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simproc import SimProcess

import pve_steward
from pvesim.generator import generate

HERE = Path(__file__).resolve().parent
TIME_TARGET, RSS_TARGET = 1.2, 1.1
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def _send(pipe: IO[str], message: dict[str, Any]) -> None:
    pipe.write(json.dumps(message) + "\n")
    pipe.flush()


def _answer(pipe: IO[str], wanted: int) -> dict[str, Any]:
    for line in pipe:
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == wanted:
            return message
    raise RuntimeError("the server closed stdout before answering")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_start(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds from spawn to the tools/list answer, peak RSS in MiB, number of tools)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _send(proc.stdin, INIT)
        _answer(proc.stdout, 1)
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        tools = _answer(proc.stdout, 2)["result"]["tools"]
        elapsed = time.perf_counter() - start
        rss = peak_rss_mib(proc.pid)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return elapsed, rss, len(tools)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    sim = SimProcess(generate(nodes=3, guests=30, seed=1))
    tmp = tempfile.TemporaryDirectory(prefix="bench-start-")
    try:
        compileall.compile_dir(str(Path(pve_steward.__file__).parent), quiet=1)
        token = next(t for t in sim.tokens if t.startswith("root@pam"))
        env = sim.server_env(Path(tmp.name), token)
        steward = [sys.executable, "-m", "pve_steward", "serve"]
        bare = [sys.executable, str(HERE / "bare_server.py")]
        one_start(steward, env), one_start(bare, env)  # warm the page cache, keep the tool list; not counted
        first = [one_start(steward, sim.server_env(Path(tmp.name) / f"fresh-{i}", token)) for i in range(3)]
        seconds, rss = statistics.median(r[0] for r in first), statistics.median(r[1] for r in first)
        print(f"first start of a configuration (no kept tool list): {seconds * 1000:.0f} ms, peak RSS {rss:.1f} MiB")
        runs: dict[str, list[tuple[float, float, int]]] = {"pve-steward": [], "bare SDK": []}
        for i in range(args.rounds):
            pair = [("pve-steward", steward), ("bare SDK", bare)]
            for name, command in pair if i % 2 == 0 else pair[::-1]:
                runs[name].append(one_start(command, env))
        report(runs)
    finally:
        sim.stop()
        tmp.cleanup()


def report(runs: dict[str, list[tuple[float, float, int]]]) -> None:
    med = {
        name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for name, rs in runs.items()
    }
    for name, (seconds, rss) in med.items():
        tools = runs[name][0][2]
        print(
            f"{name:12} spawn -> tools/list {seconds * 1000:7.0f} ms (median)  peak RSS {rss:6.1f} MiB  ({tools} tools)"
        )
    ours, bare = med["pve-steward"], med["bare SDK"]
    time_ratio, rss_ratio = ours[0] / bare[0], ours[1] / bare[1]
    ratios = [
        ours_t / bare_t for (ours_t, _, _), (bare_t, _, _) in zip(runs["pve-steward"], runs["bare SDK"], strict=True)
    ]
    spread = f"per-round ratios {min(ratios):.2f}..{max(ratios):.2f}"
    verdict = "MET" if time_ratio <= TIME_TARGET else "MISSED"
    print(f"time ratio {time_ratio:.2f}x ({spread}; target <= {TIME_TARGET}x): {verdict}")
    print(
        f"peak RSS ratio {rss_ratio:.2f}x (target <= {RSS_TARGET}x): {'MET' if rss_ratio <= RSS_TARGET else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
