"""Benchmark: the whole health analysis of a 10,000-guest cluster vs plain json.loads of its payload.

Both are timed in the same run on the same payload (best of N), so the ratio is stable across
machines. Target: analysis <= 2x json.loads.

    python bench/bench_analysis.py [--guests 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from payload import cluster_payload

from proxmox_ops_mcp.analysis.data import ClusterData
from proxmox_ops_mcp.analysis.health import AREAS, diagnose
from proxmox_ops_mcp.analysis.thresholds import Thresholds


def to_data(loaded: dict) -> ClusterData:  # type: ignore[type-arg]
    fields = dict(loaded)
    fields["configs"] = {int(k): v for k, v in loaded["configs"].items()}
    return ClusterData(**fields)


def best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """Best of `repeat` runs with the garbage collector paused (as timeit does), for both sides alike."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--guests", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--target", type=float, default=2.0)
    args = ap.parse_args()
    _cluster, payload = cluster_payload(args.guests, nodes=args.nodes)
    text = json.dumps(payload)
    thresholds = Thresholds()
    t_json = best(lambda: json.loads(text), args.repeat)
    loaded = json.loads(text)
    report = diagnose(to_data(loaded), thresholds, limit=None)
    t_analysis = best(lambda: diagnose(to_data(loaded), thresholds, limit=None), args.repeat)
    ratio = t_analysis / t_json
    print(f"guests:            {args.guests}")
    print(f"payload:           {len(text) / 1e6:.1f} MB")
    print(f"json.loads:        {t_json * 1000:.0f} ms")
    print(f"health analysis:   {t_analysis * 1000:.0f} ms  ({report.summary})")
    print(f"ratio:             {ratio:.2f}x  (target <= {args.target}x: {'met' if ratio <= args.target else 'MISSED'})")
    print("where the time goes (each on a fresh snapshot, best of the same runs):")
    print(f"  {'config parsing':<16}{best(lambda: to_data(loaded).parsed, args.repeat) * 1000:6.0f} ms")
    for area, analyze in AREAS.items():
        print(f"  {area:<16}{area_time(loaded, analyze, thresholds, args.repeat) * 1000:6.0f} ms")
    return 0


def area_time(loaded: dict, analyze, thresholds: Thresholds, repeat: int) -> float:  # type: ignore[type-arg,no-untyped-def]
    """One area on fresh snapshots whose configs are already parsed: the area's own time, best of runs."""
    times = []
    for _ in range(repeat):
        data = to_data(loaded)
        _ = data.parsed, data.guests, data.nodes
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            analyze(data, thresholds)
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return min(times)


if __name__ == "__main__":
    raise SystemExit(main())
