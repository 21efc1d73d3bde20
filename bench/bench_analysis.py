"""Benchmark: the whole health analysis of a 10,000-guest cluster vs plain json.loads of its payload.

Both are timed in the same run on the same payload, in alternating rounds (best of N each), so the
ratio is stable across machines and across slow spells of a shared one. Target: analysis <= 2x
json.loads.

    python bench/bench_analysis.py [--guests 10000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import gc
import json
import time

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.health import AREAS, diagnose
from pve_steward.analysis.thresholds import Thresholds
from pvesim.payload import cluster_payload


def to_data(loaded: dict) -> ClusterData:  # type: ignore[type-arg]
    fields = dict(loaded)
    fields["configs"] = {int(k): v for k, v in loaded["configs"].items()}
    return ClusterData(**fields)


def best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """Best of `repeat` runs with the garbage collector paused (as timeit does), for both sides alike."""
    return min(_timed(fn) for _ in range(repeat))


def best_interleaved(fns, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    """Best of `repeat` rounds that run each function once, in turn: a slow spell of a shared
    machine then hits every side alike instead of whichever was being timed."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, samples in zip(fns, times, strict=True):
            samples.append(_timed(fn))
    return [min(samples) for samples in times]


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--guests", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--target", type=float, default=2.0)
    args = ap.parse_args()
    _cluster, payload = cluster_payload(args.guests, nodes=args.nodes)
    text = json.dumps(payload)
    thresholds = Thresholds()
    loaded = json.loads(text)
    report = diagnose(to_data(loaded), thresholds, limit=None)
    t_json, t_analysis = best_interleaved(
        [lambda: json.loads(text), lambda: diagnose(to_data(loaded), thresholds, limit=None)], args.repeat
    )
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
