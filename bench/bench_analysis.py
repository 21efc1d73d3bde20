"""Benchmark: the whole health analysis of a 10,000-guest cluster vs plain json.loads of its payload.

The payload is what one health check reads: pvesim serves the generated cluster in its own process
and the collector reads it over HTTPS (bench/collected.py). json.loads takes the response bodies as
one document (a call per body, as the client makes them, costs more: printed too, not the target's).
Both are timed in the same run, in alternating rounds (best of N each), so the ratio is stable across
machines and across slow spells of a shared one. Shown for growth and for where the time goes: issue 17's
target (analysis <= 2x json.loads) was withdrawn by issue 43, since at 10,000 guests the analysis is some 4 %
of a check, which PVE's own serving bounds (bench_bound.py). ``--target`` still judges a ratio on request.

    python bench/bench_analysis.py [--guests 10000] [--nodes 50] [--repeat 9]
"""

from __future__ import annotations

import argparse
import gc
import json
import time

from collected import Collected, collected

from pve_steward.analysis.health import AREAS, diagnose


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
    ap.add_argument("--target", type=float, default=None, help="judge the ratio against this (no default target)")
    args = ap.parse_args()
    got = collected(args.guests, args.nodes)
    report = diagnose(got.fresh(), got.thresholds, limit=None)
    t_json, t_analysis, t_each = ratio_times(got, args.repeat)
    ratio = t_analysis / t_json
    print(f"guests:            {args.guests}")
    print(f"payload:           {len(got.text) / 1e6:.1f} MB in {len(got.bodies)} responses")
    failed = [m.what for m in got.data.missing if not m.optional]  # an incomplete snapshot times less work
    print(f"reads failed:      {len(failed)}{': ' + ', '.join(failed[:5]) if failed else ''}")
    print(f"json.loads:        {t_json * 1000:.0f} ms  (one call per response: {t_each * 1000:.0f} ms)")
    print(f"health analysis:   {t_analysis * 1000:.0f} ms  ({report.summary})")
    judged = "  (for growth: the 2x target was withdrawn, issue 43)"
    if args.target is not None:
        judged = f"  (target <= {args.target}x: {'MET' if ratio <= args.target else 'MISSED'})"
    print(f"ratio:             {ratio:.2f}x{judged}")
    print("where the time goes (each on a fresh snapshot, best of the same runs):")
    print(f"  {'config parsing':<16}{best(lambda: got.fresh().parsed, args.repeat) * 1000:6.0f} ms")
    for area, analyze in AREAS.items():
        print(f"  {area:<16}{area_time(got, analyze, args.repeat) * 1000:6.0f} ms")
    return 0


def ratio_times(got: Collected, repeat: int) -> tuple[float, float, float]:
    """json.loads of the payload, the health analysis of the snapshot, and json.loads per response."""
    text, bodies = got.text, got.bodies
    t_json, t_analysis, t_each = best_interleaved(
        [
            lambda: json.loads(text),
            lambda: diagnose(got.fresh(), got.thresholds, limit=None),
            lambda: [json.loads(b) for b in bodies],
        ],
        repeat,
    )
    return t_json, t_analysis, t_each


def area_time(got: Collected, analyze, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """One area on fresh snapshots whose configs are already parsed: the area's own time, best of runs."""
    times = []
    for _ in range(repeat):
        data = got.fresh()
        _ = data.parsed, data.guests, data.nodes
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            analyze(data, got.thresholds)
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return min(times)


if __name__ == "__main__":
    raise SystemExit(main())
