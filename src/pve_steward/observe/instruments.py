"""The Prometheus instruments themselves (see metrics.py), imported on first use.

prometheus_client costs about 13 ms and 1 MiB of every start (issue 17); a stdio server that never
serves ``/metrics`` and has not yet answered a tool call has no use for it.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry(auto_describe=True)

TOOL_CALLS = Counter(
    "pve_steward_tool_calls",
    "Tool calls by operation and outcome (ok, denied, refused, invalid, failed, busy, crashed, task_failed)",
    ["operation", "outcome"],
    registry=REGISTRY,
)
TOOL_LATENCY = Histogram(
    "pve_steward_tool_call_duration_seconds",
    "Duration of tool calls by operation",
    ["operation"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
IN_FLIGHT = Gauge("pve_steward_tool_calls_in_flight", "Tool calls running now", registry=REGISTRY)
FINDINGS = Counter(
    "pve_steward_findings",
    "Findings in the reports returned, by code and severity",
    ["code", "severity"],
    registry=REGISTRY,
)
BUSY = Counter(
    "pve_steward_admission_busy",
    "Heavy calls answered busy (no slot within --busy-wait), by operation",
    ["operation"],
    registry=REGISTRY,
)
TOKENS = Counter(
    "pve_steward_confirmation_tokens",
    "Confirmation tokens by event: issued, confirmed, refused (reason: expired, replayed, mismatch, invalid, "
    "store_unavailable, other)",
    ["event", "reason"],
    registry=REGISTRY,
)
API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)  # PVE and PBS requests alike


def _api_series(service: str, api: str) -> tuple[Counter, Histogram]:
    """The request counter and duration histogram of one API (PVE's, and PBS's in series of their own)."""
    requests = Counter(
        f"pve_steward_{service}_requests",
        f"{api} requests by endpoint class (first path word), method and HTTP status (error: no answer)",
        ["endpoint", "method", "status"],
        registry=REGISTRY,
    )
    duration = Histogram(
        f"pve_steward_{service}_request_duration_seconds",
        f"Duration of {api} requests by endpoint class",
        ["endpoint"],
        buckets=API_BUCKETS,
        registry=REGISTRY,
    )
    return requests, duration


PVE_REQUESTS, PVE_LATENCY = _api_series("pve", "PVE API")
PBS_REQUESTS, PBS_LATENCY = _api_series("pbs", "Proxmox Backup Server API")


class _AppCollector(Collector):
    """Read-cache and admission counters of the app contexts that served calls (read at scrape time)."""

    def __init__(self) -> None:
        self._apps: dict[int, weakref.ref[Any]] = {}  # by id: app contexts are dataclasses, not hashable

    def track(self, app: Any) -> None:
        key = id(app)
        if key not in self._apps:
            self._apps[key] = weakref.ref(app, lambda _ref: self._apps.pop(key, None))

    def collect(self) -> Iterable[Metric]:
        reads = CounterMetricFamily(
            "pve_steward_read_cache",
            "Reads of read-only tools: hit (answered from the cache), joined (shared an identical request in "
            "flight), miss (sent to PVE)",
            labels=["result"],
        )
        joined = CounterMetricFamily(
            "pve_steward_admission_joined",
            "Heavy calls that shared a run already going (the same work; their pages may differ)",
        )
        continued = CounterMetricFamily(
            "pve_steward_admission_continued",
            "Later pages of a diagnosis answered from the run of its first page (no run, no read)",
        )
        hits = shared = misses = admitted = followed = 0
        budgets: set[int] = set()  # several clusters share one admission budget: count it once
        for ref in list(self._apps.values()):
            app = ref()
            stats = getattr(getattr(app, "reads", None), "stats", None)
            if stats is not None:
                hits, shared, misses = hits + stats.hits, shared + stats.joined, misses + stats.requests
            admission = getattr(app, "admission", None)
            if admission is not None and id(admission) not in budgets:
                budgets.add(id(admission))
                admitted += getattr(admission, "joined", 0)
                followed += getattr(admission, "continued", 0)
        for result, value in (("hit", hits), ("joined", shared), ("miss", misses)):
            reads.add_metric([result], value)
        joined.add_metric([], admitted)
        continued.add_metric([], followed)
        yield reads
        yield joined
        yield continued

    def describe(self) -> Iterable[Metric]:
        return []


APPS = _AppCollector()
REGISTRY.register(APPS)


def render(others: Iterable[list[Metric]] = ()) -> bytes:
    """The exposition text of every pve-steward series, this process's plus ``others``' (the diagnostics
    process's families, worker/link.py): one series per name and labels, their values added."""
    extra = [family for families in others for family in families]
    if not extra:
        return generate_latest(REGISTRY)
    return generate_latest(_Merged([*REGISTRY.collect(), *extra]))


class _Merged:
    """Families of several processes as one registry: same family, same labels -> one sample, summed
    (a counter or histogram bucket adds up; a ``_created`` time is the earliest)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, Metric] = {}
        values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], Any]] = {}
        for family in self.families:
            merged.setdefault(family.name, copy.copy(family))  # its samples are replaced below
            samples = values.setdefault(family.name, {})
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                before = samples.get(key)
                if before is None:
                    samples[key] = sample
                elif sample.name.endswith("_created"):
                    samples[key] = before._replace(value=min(before.value, sample.value))
                else:
                    samples[key] = before._replace(value=before.value + sample.value)
        for name, family in merged.items():
            family.samples = list(values[name].values())
            yield family
