"""PVE calendar events (proxmox-time, ``PVE::CalendarEvent``): the systemd-like schedules of backup, replication and
realm-sync jobs, parsed and stepped to their next occurrences.

``[WEEKDAYS] [[YEARS-]MONTHS-DAYS] [HOURS:MINUTES[:SECONDS]]``, each part a list of values, ranges ``a..b`` and
repetitions ``start/step`` (``*`` for any); a bare ``*/15`` or ``0/5`` is minutes; the keywords minutely, hourly,
daily, weekly, monthly, yearly/annually, quarterly and semiannually stand for their expansions. Times are the
node's local time.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_KEYWORDS = {
    "minutely": "*:*",
    "hourly": "*:0",
    "daily": "0:0",
    "weekly": "mon 0:0",
    "monthly": "*-*-01 0:0",
    "yearly": "*-01-01 0:0",
    "annually": "*-01-01 0:0",
    "quarterly": "*-01,04,07,10-01 0:0",
    "semiannually": "*-01,07-01 0:0",
    "semi-annually": "*-01,07-01 0:0",
}


class CalendarError(ValueError):
    """An event PVE's parser refuses: its message is proxmox-time's."""


@dataclass(frozen=True)
class Event:
    weekdays: frozenset[int] | None
    years: frozenset[int] | None
    months: frozenset[int] | None
    days: frozenset[int] | None
    hours: tuple[int, ...]
    minutes: tuple[int, ...]
    seconds: tuple[int, ...]


def _values(text: str, low: int, high: int) -> frozenset[int] | None:
    """A component list: '*', 'a', 'a..b', 'a/step', '*/step', 'a..b/step', comma-separated; None is any."""
    if text == "*":
        return None
    out: set[int] = set()
    for item in text.split(","):
        m = re.fullmatch(r"(\*|\d+)(?:\.\.(\d+))?(?:/(\d+))?", item)
        if m is None:
            raise CalendarError(f"unable to parse calendar event - invalid value '{item}'")
        start = low if m.group(1) == "*" else int(m.group(1))
        end = int(m.group(2)) if m.group(2) else (high if m.group(3) else start)
        step = int(m.group(3)) if m.group(3) else 1
        if not low <= start <= high or not low <= end <= high or step < 1:
            raise CalendarError(f"unable to parse calendar event - value out of range '{item}'")
        out.update(range(start, end + 1, step))
    return frozenset(out)


def _weekdays(text: str) -> frozenset[int]:
    out: set[int] = set()
    for item in text.split(","):
        first, _, last = item.partition("..")
        if first not in _DAYS or (last and last not in _DAYS):
            raise CalendarError(f"unable to parse calendar event - invalid weekday '{item}'")
        a, b = _DAYS.index(first), _DAYS.index(last or first)
        out.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return frozenset(out)


def parse(spec: str) -> Event:
    """proxmox-time parse_calendar_event."""
    text = _KEYWORDS.get(spec.strip().lower(), spec.strip().lower())
    parts = text.split()
    weekdays = None
    if parts and re.fullmatch(r"[a-z.,]+", parts[0]):
        weekdays = _weekdays(parts.pop(0))
    years = months = days = None
    if parts and "-" in parts[0]:
        date = parts.pop(0).split("-")
        if len(date) == 3:
            years = _values(date.pop(0), 1970, 9999)
        if len(date) != 2:
            raise CalendarError("unable to parse calendar event - invalid date")
        months, days = _values(date[0], 1, 12), _values(date[1], 1, 31)
    time = parts.pop(0) if parts else "0:0"
    if parts:
        raise CalendarError(f"unable to parse calendar event - trailing data '{' '.join(parts)}'")
    fields = time.split(":")
    if len(fields) == 1:  # '*/15', '0/5': minutes of every hour
        fields = ["*", fields[0]]
    hours = _values(fields[0], 0, 23)
    minutes = _values(fields[1], 0, 59)
    seconds = _values(fields[2], 0, 59) if len(fields) > 2 else frozenset({0})
    return Event(
        weekdays,
        years,
        months,
        days,
        tuple(sorted(hours if hours is not None else range(24))),
        tuple(sorted(minutes if minutes is not None else range(60))),
        tuple(sorted(seconds if seconds is not None else range(60))),
    )


def next_events(event: Event, after: float, count: int, zone: str = "UTC") -> list[int]:
    """The ``count`` first occurrences strictly after ``after`` (proxmox-time compute_next_event, repeated)."""
    tz = ZoneInfo(zone)
    start = dt.datetime.fromtimestamp(after, tz)
    day = start.date()
    out: list[int] = []
    for _ in range(366 * 10):
        if _day_matches(event, day):
            for h in event.hours:
                for m in event.minutes:
                    for s in event.seconds:
                        when = dt.datetime(day.year, day.month, day.day, h, m, s, tzinfo=tz).timestamp()
                        if when > after:
                            out.append(int(when))
                            if len(out) >= count:
                                return out
        day += dt.timedelta(days=1)
    return out


def _day_matches(event: Event, day: dt.date) -> bool:
    if event.weekdays is not None and day.weekday() not in event.weekdays:
        return False
    if event.years is not None and day.year not in event.years:
        return False
    if event.months is not None and day.month not in event.months:
        return False
    return event.days is None or day.day in event.days
