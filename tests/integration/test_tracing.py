"""Traces over OTLP/HTTP (--otel-endpoint): a local collector receives the spans of a tool call.

The collector is a plain HTTP server that decodes what it is sent with OpenTelemetry's own protobuf
types, so the test sees exactly what a real collector would.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.httpserver import free_port, server_env, serving

pytestmark = pytest.mark.anyio


@contextmanager
def collector() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    spans: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource.resource.attributes}
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: a.value.string_value or a.value.int_value for a in span.attributes}
                        spans.append(
                            {
                                "name": span.name,
                                "trace": span.trace_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "id": span.span_id.hex(),
                                "attributes": attributes,
                                "service": service.get("service.name"),
                            }
                        )
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}", spans
    finally:
        server.shutdown()
        server.server_close()


async def test_a_tool_call_and_its_pve_requests_are_one_trace(demo_sim: Any, tmp_path: Path) -> None:
    with collector() as (endpoint, spans):
        port = free_port()
        env = server_env(
            demo_sim,
            tmp_path,
            PVE_STEWARD_OTEL_ENDPOINT=endpoint,
            PVE_STEWARD_OTEL_SERVICE_NAME="steward-test",
            PVE_STEWARD_GRANULAR_TOOLS="true",
            PVE_STEWARD_HTTP_PORT=str(port),
            OTEL_BSP_SCHEDULE_DELAY="100",
            PVE_STEWARD_DIAGNOSTICS_PROCESS="true",  # a heavy call's PVE spans come from its child process
            PVE_STEWARD_DIAGNOSTICS_PRIORITY="low",  # not SCHED_IDLE: on a busy host that child gets almost no CPU
        )
        with serving([sys.executable, "-m", "pve_steward", "serve"], port, env) as base:
            async with (
                httpx2.AsyncClient(timeout=30) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
            ):
                result = await c.call_tool("get_guest", {"vmid": 100})
                heavy = await c.call_tool("diagnose_backups", {})  # run by the diagnostics process (worker/)
            deadline = time.monotonic() + 60  # only against a hang: the spans are waited for
            while time.monotonic() < deadline and not (
                sum("tools/call" in s["name"] for s in spans) >= 2
                and any(s["attributes"].get("pve.endpoint") == "/cluster/backup" for s in spans)
            ):
                time.sleep(0.1)
    assert not result.is_error
    pve = [s for s in spans if s["name"].startswith("pve GET")]
    assert pve and all(s["service"] == "steward-test" for s in pve)
    call = next(s for s in spans if "tools/call" in s["name"])
    config = next(s for s in pve if s["attributes"]["pve.endpoint"] == "/nodes/{id}/qemu/{id}/config")
    assert config["trace"] == call["trace"]  # the worker thread carried the tool call's context
    assert config["attributes"]["http.response.status_code"] == "200"
    assert config["name"] == "pve GET /nodes/{id}/qemu/{id}/config"
    assert not any("pve1" in str(s["attributes"]) or "web" in str(s["attributes"]) for s in pve)
    assert not heavy.is_error
    backups_call = next(s for s in spans if "tools/call diagnose_backups" in s["name"])
    jobs = next(s for s in pve if s["attributes"]["pve.endpoint"] == "/cluster/backup")
    assert jobs["trace"] == backups_call["trace"] != call["trace"]  # the child's requests joined the call's trace
