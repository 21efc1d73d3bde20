"""Prometheus metrics of one server process (served at ``/metrics`` on the HTTP transport).

The instruments live in one registry of their own (not prometheus_client's global one), so tests
and embedding applications see only pve-steward's series. They are incremented where the decision
is made: the guard (tool calls, outcomes, latency, findings, in-flight calls, busy answers, refused
tokens), the token signer (issued, confirmed) and the API clients (PVE's requests, and the backup
server's in series of their own). Read-cache and
admission counters already exist as plain numbers (``CacheStats``, ``Admission.joined``); a
collector reads them at scrape time from the app contexts seen by the guard.

Labels are bounded: operation names come from the registry, finding codes from ``analysis/codes.py``,
the endpoint class is the first word of an API path (``nodes``, ``cluster``), never a node or guest.

Only a process that serves ``/metrics`` counts (:func:`keep`, called by the HTTP transport): a stdio server has
no reader for them, and prometheus_client cost it a megabyte and every call's counting (issue 43).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from pve_steward.perobject import PerObject

if TYPE_CHECKING:  # what __getattr__ hands out, typed for the checker (no import at run time)
    from prometheus_client import Counter, Histogram

    from pve_steward.observe.instruments import APPS, BUSY, IN_FLIGHT, TOKENS, TOOL_CALLS, TOOL_LATENCY, render

__all__ = [
    "APPS",
    "BUSY",
    "CONTENT_TYPE",
    "IN_FLIGHT",
    "TOKENS",
    "TOOL_CALLS",
    "TOOL_LATENCY",
    "api_instruments",
    "count_findings",
    "endpoint_class",
    "keep",
    "kept",
    "render",
]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_INSTRUMENTS = frozenset({"APPS", "BUSY", "IN_FLIGHT", "TOKENS", "TOOL_CALLS", "TOOL_LATENCY"})
_KEPT: list[bool] = []  # one True once this process serves /metrics


def keep() -> None:
    """Count from now on in this process: it serves ``/metrics`` (serving/http.py)."""
    _KEPT[:] = [True]


def kept() -> bool:
    return bool(_KEPT)


class _Uncounted:
    """What an instrument is in a process that serves no ``/metrics``: every use does nothing."""

    def labels(self, *args: Any, **kwargs: Any) -> _Uncounted:
        return self

    def inc(self, *args: Any) -> None:
        return None

    dec = observe = track = inc


_UNCOUNTED = _Uncounted()


def __getattr__(name: str) -> Any:
    """The instruments (REGISTRY, TOOL_CALLS, ..., APPS, render) live in instruments.py, imported on first use."""
    if name.startswith("__"):  # what tools probe modules for (__path__, __wrapped__, ...): no import for it
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _INSTRUMENTS and not _KEPT:
        return _UNCOUNTED
    from pve_steward.observe import instruments

    try:
        return getattr(instruments, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def api_instruments(service: str) -> tuple[Counter, Histogram]:
    """The request counter and latency histogram of an API: PBS's own series, so a backup server's reads
    never show up as (or skew) the cluster's."""
    if not _KEPT:
        return _UNCOUNTED, _UNCOUNTED  # type: ignore[return-value]
    from pve_steward.observe import instruments

    if service == "PBS":
        return instruments.PBS_REQUESTS, instruments.PBS_LATENCY
    return instruments.PVE_REQUESTS, instruments.PVE_LATENCY


def endpoint_class(segments: tuple[str, ...]) -> str:
    """The first word of an API path: a fixed API word, never caller data (``api_path`` guarantees it)."""
    return segments[0] if segments else "root"


def count_findings(result: Any) -> None:
    """Count the findings of a returned report (nested reports included, each finding once).

    Tallied once per result object and added per code: fifty callers of one run return one report,
    and a labelled increment per finding per caller cost about 0.3 ms of the event loop each (issue 17).
    """
    if not _KEPT:
        return
    from pve_steward.observe.instruments import FINDINGS

    for (code, severity), count in _TALLIES.get(result, None, lambda: _tally(result)).items():
        FINDINGS.labels(code=code, severity=severity).inc(count)


_TALLIES: PerObject[dict[tuple[str, str], int]] = PerObject()


def _tally(result: Any) -> dict[tuple[str, str], int]:
    seen: set[int] = set()
    tally: dict[tuple[str, str], int] = {}
    for item in _findings(result, depth=0):
        if id(item) in seen:
            continue
        seen.add(id(item))
        key = (str(item.code), str(getattr(item.severity, "value", item.severity)))
        tally[key] = tally.get(key, 0) + 1
    return tally


def _findings(node: Any, depth: int) -> Iterator[Any]:
    if depth > 6:
        return
    if isinstance(node, BaseModel):
        for name in type(node).model_fields:
            value = getattr(node, name, None)
            if name == "findings" and isinstance(value, list):
                yield from (f for f in value if hasattr(f, "code") and hasattr(f, "severity"))
            elif isinstance(value, BaseModel | list | dict):
                yield from _findings(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            if isinstance(value, BaseModel):
                yield from _findings(value, depth + 1)
    elif isinstance(node, dict):
        for value in node.values():
            if isinstance(value, BaseModel):
                yield from _findings(value, depth + 1)
