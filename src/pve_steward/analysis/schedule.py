"""PVE calendar events (``pve-calendar-event``): how often does a job run?

Used to derive "stale" thresholds from a backup or replication job's schedule. The grammar is
proxmox-time's (proxmox-rs proxmox-time/src/calendar_event.rs, after systemd.time):
``[WEEKDAYS] [[YEARS-]MONTHS-DAYS] [HOURS:]MINUTES[:SECONDS] [UTC]`` or a special word (hourly, daily,
weekly, monthly, yearly, quarterly, semiannually, ...). Each part is ``*``, ``*/R`` or a list of
``V``, ``V..E``, ``V/R`` and ``V..E/R``; weekdays are names with ranges (``mon..fri``, ``sat,sun``).
Without a time the event is at 00:00:00; without seconds at second 0.

The answer is the longest gap between two runs over four years (a leap year among them), so monthly
events on a weekday (``sat *-1..7 15:00``) and month ends come out as they really fall.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

_DAY_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_WEEKDAYS = {name: i for i, full in enumerate(_DAY_NAMES) for name in (full, full[:3])}
# proxmox-time's special words, as the calendar events they stand for
_SPECIAL = {
    "minutely": "*:*:0",
    "hourly": "*:0:0",
    "daily": "0:0:0",
    "weekly": "mon 0:0:0",
    "monthly": "*-*-1 0:0:0",
    "yearly": "*-1-1 0:0:0",
    "annually": "*-1-1 0:0:0",
    "quarterly": "*-1,4,7,10-1 0:0:0",
    "semiannually": "*-1,7-1 0:0:0",
    "semi-annually": "*-1,7-1 0:0:0",
}
_COMP = re.compile(r"(\d+)(?:\.\.(\d+))?(?:/(\d+))?")
_WINDOW = (dt.date(2024, 1, 1), dt.date(2028, 1, 1))  # four years, 2024 a leap year

Values = frozenset[int] | None  # None: any value


@dataclass(frozen=True)
class _Event:
    weekdays: frozenset[int] | None
    years: Values
    months: Values
    days: Values
    hours: Values
    minutes: Values
    seconds: Values


class _Invalid(ValueError):
    """The text is not a calendar event proxmox-time would parse."""


def _values(spec: str, start: int, limit: int) -> Values:
    """One field's values below ``limit`` (proxmox-time parse_date_time_comp_list); None for ``*``."""
    if spec == "*":
        return None
    if spec.startswith("*/"):
        repeat = spec[2:]
        if not repeat.isdigit() or not 0 < int(repeat) < limit:  # '*/0' leaves '/0' unparsed
            raise _Invalid(spec)
        return frozenset(range(start, limit, int(repeat)))
    out: set[int] = set()
    for part in spec.split(","):
        m = _COMP.fullmatch(part)
        if not m or any(g is not None and int(g) >= limit for g in m.groups()):
            raise _Invalid(spec)
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else None
        if last is not None and first > last:
            raise _Invalid(spec)
        step = int(m.group(3)) if m.group(3) is not None else None
        if step is None:
            out.update(range(first, (last if last is not None else first) + 1))
        elif step == 0:  # DateTimeValue::Repeated with no repetition: the start alone
            out.add(first)
        else:
            out.update(range(first, (last if last is not None else limit - 1) + 1, step))
    return frozenset(out)


def _weekdays(spec: str) -> frozenset[int] | None:
    out: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.partition("..")
        if first not in _WEEKDAYS or (last and last not in _WEEKDAYS):
            return None
        a, b = _WEEKDAYS[first], _WEEKDAYS[last or first]
        out.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return frozenset(out)


def _parse(text: str) -> _Event | None:
    """A calendar event, as proxmox-time parses it; None when it does not parse."""
    try:
        return _parse_event(text)
    except _Invalid:
        return None


def _parse_event(text: str) -> _Event | None:
    text = _SPECIAL.get(text.strip().removesuffix("UTC").strip(), text.strip().removesuffix("UTC").strip())
    words = text.lower().split()
    weekdays = None
    if words and words[0][:1].isalpha():
        weekdays = _weekdays(words.pop(0))
        if weekdays is None:
            return None
    date: list[Values] = [None, None, None]
    if words and words[0].count("-") in (1, 2):
        fields = words.pop(0).split("-")
        fields = ["*"] * (3 - len(fields)) + fields
        date = [_values(fields[0], 0, 2200), _values(fields[1], 1, 13), _values(fields[2], 1, 32)]
    clock: list[Values] = [frozenset([0]), frozenset([0]), frozenset([0])]
    if words:
        parts = words.pop(0).split(":")
        if len(parts) > 3:
            return None
        hour, minute, second = (["*"] if len(parts) == 1 else []) + parts + ["0"] * (3 - max(len(parts), 2))
        clock = [_values(hour, 0, 24), _values(minute, 0, 60), _values(second, 0, 60)]
    elif weekdays is None and date == [None, None, None]:
        return None  # neither a weekday, a date nor a time
    if words:
        return None
    return _Event(weekdays, *date, *clock)


def _times(event: _Event) -> list[int]:
    """The seconds of a day at which the event fires (on a day it fires at all)."""
    hours = sorted(event.hours) if event.hours is not None else range(24)
    minutes = sorted(event.minutes) if event.minutes is not None else range(60)
    seconds = sorted(event.seconds) if event.seconds is not None else range(60)
    return [h * 3600 + m * 60 + s for h in hours for m in minutes for s in seconds]


def _fires_on(event: _Event, day: dt.date) -> bool:
    return (
        (event.years is None or day.year in event.years)
        and (event.months is None or day.month in event.months)
        and (event.days is None or day.day in event.days)
        and (event.weekdays is None or day.weekday() in event.weekdays)
    )


@lru_cache(maxsize=512)
def interval_seconds(schedule: str | None) -> float | None:
    """The longest gap between two runs, in seconds; None when the schedule does not parse or runs at most
    once in four years (a date of its own)."""
    event = _parse(schedule) if schedule else None
    if event is None:
        return None
    times = _times(event)
    first, end = _WINDOW
    days = [n for n in range(first.toordinal(), end.toordinal()) if _fires_on(event, dt.date.fromordinal(n))]
    if not times or len(days) * len(times) < 2:
        return None
    within = max((b - a for a, b in pairwise(times)), default=0)
    across = max(((b - a) * 86400 + times[0] - times[-1] for a, b in pairwise(days)), default=0)
    return float(max(within, across))
