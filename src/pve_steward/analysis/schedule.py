"""PVE calendar events (``pve-calendar-event``): how often does a job run?

Used to derive "stale" thresholds from a backup or replication job's schedule. Supports the
subset PVE jobs use: special words (hourly, daily, weekly, ...), weekday lists and ranges
(``mon..fri``, ``sat,sun``) and ``[hour:]minute`` specs with lists, ranges and repetitions
(``*/15``, ``8..17/2``, ``0,30``). Anything else (dates, seconds) returns None: the caller
falls back to its default.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise

_DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_SPECIAL = {
    "minutely": 60,
    "hourly": 3600,
    "daily": 86400,
    "weekly": 7 * 86400,
    "monthly": 31 * 86400,
    "quarterly": 92 * 86400,
    "semiannually": 183 * 86400,
    "yearly": 366 * 86400,
    "annually": 366 * 86400,
}


def _values(spec: str, lo: int, hi: int) -> set[int] | None:
    out: set[int] = set()
    for part in spec.split(","):
        m = re.fullmatch(r"(\*|\d+)(?:\.\.(\d+))?(?:/(\d+))?", part.strip())
        if not m:
            return None
        start = lo if m.group(1) == "*" else int(m.group(1))
        end = int(m.group(2)) if m.group(2) else (hi if m.group(1) == "*" or m.group(3) else start)
        step = int(m.group(3)) if m.group(3) else 1
        if not (lo <= start <= hi and lo <= end <= hi) or step < 1:
            return None
        out.update(range(start, end + 1, step))
    return out


def _weekdays(spec: str) -> set[int] | None:
    out: set[int] = set()
    for part in spec.split(","):
        m = re.fullmatch(r"([a-z]{3})(?:\.\.([a-z]{3}))?", part.strip())
        if not m or m.group(1) not in _DAYS or (m.group(2) and m.group(2) not in _DAYS):
            return None
        a = _DAYS.index(m.group(1))
        b = _DAYS.index(m.group(2)) if m.group(2) else a
        out.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return out


@lru_cache(maxsize=512)
def interval_seconds(schedule: str | None) -> float | None:
    """The longest gap between two runs, in seconds; None when the schedule is not understood."""
    if not schedule:
        return None
    text = schedule.strip().lower()
    if text in _SPECIAL:
        return float(_SPECIAL[text])
    days: set[int] = set(range(7))
    parts = text.split()
    if len(parts) == 2:
        wd = _weekdays(parts[0])
        if wd is None:
            return None
        days, time_spec = wd, parts[1]
    elif len(parts) == 1:
        wd = _weekdays(parts[0])
        if wd is not None:
            days, time_spec = wd, "0:0"
        else:
            time_spec = parts[0]
    else:
        return None
    if ":" in time_spec:
        hour_spec, minute_spec = time_spec.split(":", 1)
    else:
        hour_spec, minute_spec = "*", time_spec
    hours, minutes = _values(hour_spec, 0, 23), _values(minute_spec, 0, 59)
    if not hours or not minutes:
        return None
    runs = sorted(d * 1440 + h * 60 + m for d in days for h in hours for m in minutes)
    gaps = [b - a for a, b in pairwise(runs)] + [runs[0] + 7 * 1440 - runs[-1]]
    return float(max(gaps) * 60)
