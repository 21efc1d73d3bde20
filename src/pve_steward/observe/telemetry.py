"""OpenTelemetry traces over OTLP/HTTP, behind ``--otel-endpoint`` (optional extra ``pve-steward[otel]``).

The MCP SDK already opens a span per request (``tools/call <name>``) through the OpenTelemetry API;
without an SDK installed those spans cost nothing. With ``--otel-endpoint`` this module installs the
OpenTelemetry SDK's tracer provider with a batching OTLP/HTTP exporter, and client.py adds one span per
PVE API request (method, endpoint class, status) as a child of the tool call: the request runs in a
worker thread, so the pool carries the caller's context across (requestpool.RequestPool).

Span names and attributes carry path templates (``/nodes/{id}/qemu/{id}/config``: API words kept, every
identifier replaced), never cluster names, parameters or secrets.
"""

from __future__ import annotations

import atexit
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace

from pve_steward import __version__

log = logging.getLogger(__name__)
TRACER = trace.get_tracer("pve-steward", __version__)


def setup_tracing(endpoint: str | None, service_name: str) -> bool:
    """Install the SDK's tracer provider exporting to ``endpoint`` (the collector's OTLP/HTTP base URL).

    Collector credentials go in OTEL_EXPORTER_OTLP_HEADERS, which the exporter reads itself (never a flag,
    never logged)."""
    if not endpoint:
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ValueError(
            "otel_endpoint needs the OpenTelemetry SDK: install pve-steward[otel] "
            "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": service_name, "service.version": __version__}))
    exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # flush what is batched when the server stops
    log.info("exporting traces to %s", endpoint)
    return True


@contextmanager
def pve_request_span(method: str, endpoint: str, service: str = "PVE") -> Iterator[Any]:
    """One span per API request ("pve GET ...", "pbs GET ..." for the backup server); the caller sets the
    status attribute when it knows it."""
    with TRACER.start_as_current_span(
        f"{service.lower()} {method} {endpoint}",
        kind=trace.SpanKind.CLIENT,
        attributes={"http.request.method": method, "pve.endpoint": endpoint, "proxmox.service": service},
    ) as span:
        yield span
