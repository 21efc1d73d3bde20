"""The Starlette application: PVE's request pipeline plus a control API for tests and demos.

The pipeline itself (the order of PVE's checks, and its answers in pveproxy's form) is
:mod:`pvesim.pipeline`; this module is the HTTP glue, the simulator's state and the control API.
Errors carry PVE's message both in the JSON body and as the HTTP reason phrase, which is where
proxmoxer reads it.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from pvesim import pipeline, tasks
from pvesim.access import AclEntry, Token
from pvesim.apischema import ApiSchema
from pvesim.bound import Bound, Workers
from pvesim.faults import Faults
from pvesim.jsonbody import DataResponse
from pvesim.state import Cluster

REASON_HEADER = "x-pvesim-reason"
log = logging.getLogger("pvesim")


class DroppedConnection(Exception):
    """Raised mid-response to make the server cut the connection (fault injection)."""


class Simulator:
    """State, schema and faults of one running simulator, safe to mutate from other threads."""

    def __init__(self, cluster: Cluster, faults: Faults | None = None, control_secret: str = "") -> None:
        self.cluster = cluster
        self.schema = ApiSchema(cluster.schema_version)
        self.faults = faults or Faults()
        self.control_secret = control_secret
        self.lock = threading.RLock()
        self.requests = 0
        self.failures_served = 0  # error answers and dropped connections, whatever the cause
        self.failure_log: list[tuple[int, str, str]] = []  # (status or 0 for a drop, method, path), newest last
        self.workers: Workers | None = None  # PVE's workers, while faults.pveproxy is set (bound.py)

    def workers_for(self, bound: Bound) -> Workers:
        """The pools of ``bound``: kept while it is the configured bound, new when another is set."""
        if self.workers is None or self.workers.bound is not bound:
            self.workers = Workers(bound, next(iter(self.cluster.nodes)))  # the node /cluster/status calls local
        return self.workers

    def placement(self, method: str, path: str) -> tuple[str | None, bool]:
        """Where PVE runs a request: the node it is proxied to (None: the node asked) and whether pvedaemon runs it."""
        match = self.schema.match(method, path)
        if match is None:
            return None, False
        spec, params = match
        return (params.get("node") if spec.proxied else None), bool(spec.spec.get("protected"))

    @contextmanager
    def mutate(self) -> Iterator[Cluster]:
        with self.lock:
            tasks.advance(self.cluster)
            yield self.cluster

    def authenticate(self, header: str | None) -> Token | None:
        if not header or not header.startswith("PVEAPIToken="):
            return None
        ident, _, secret = header[len("PVEAPIToken=") :].partition("=")
        token = self.cluster.tokens.get(ident)
        if token is None or not hmac.compare_digest(token.secret, secret):
            return None
        return token

    def request(
        self, method: str, path: str, params: dict[str, Any] | None = None, tokenid: str = "root@pam!pvesim"
    ) -> pipeline.Answer:
        """One API request in process, through the same pipeline as over HTTPS (tests, benches, coverage)."""
        token = self.cluster.tokens[tokenid]
        with self.lock:
            tasks.advance(self.cluster)
            return pipeline.run(
                self, method, path, dict(params or {}), f"PVEAPIToken={token.full_id}={token.secret}", "json"
            )


def error_response(status: int, message: str, errors: dict[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"data": None, "message": message + "\n"}
    if errors:
        body["errors"] = errors
    reason = message.replace("\r", " ").replace("\n", " ")[:200]
    return JSONResponse(body, status_code=status, headers={REASON_HEADER: reason})


class _DropResponse(Response):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"data": [', "more_body": True})
        raise DroppedConnection("connection dropped by fault injection")


async def _params(request: Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query_params)
    if request.method in ("POST", "PUT"):
        raw = await request.body()
        if raw:
            if request.headers.get("content-type", "").startswith("application/json"):
                params.update(json.loads(raw))
            else:
                params.update(parse_qsl(raw.decode(), keep_blank_values=True))
    return params


async def _until(due: float) -> None:
    """Sleep until the loop's clock reaches ``due`` (uvloop's millisecond timers may wake a little early)."""
    loop = asyncio.get_running_loop()
    while (wait := due - loop.time()) > 0:
        await asyncio.sleep(wait)


def answer_response(answer: pipeline.Answer) -> Response:
    """An answer on the wire: JSON when it has a body, the reason phrase as PVE's status line sends it (the
    text's UTF-8 bytes, carried through Starlette's latin-1 headers unchanged)."""
    reason = answer.reason.encode("utf-8").decode("latin-1")
    if answer.download is not None:
        headers = {REASON_HEADER: reason, **dict(answer.download.headers)}
        return Response(answer.download.body, status_code=200, media_type=answer.download.content_type, headers=headers)
    if answer.body is None:
        return Response(b"", status_code=answer.status, headers={REASON_HEADER: reason})
    return DataResponse(answer.body, status_code=answer.status, headers={REASON_HEADER: reason})


def create_app(sim: Simulator) -> Starlette:
    async def api2(request: Request) -> Response:
        path = "/" + request.path_params["path"].rstrip("/")
        bound = sim.faults.pveproxy
        if bound is not None:  # PVE's workers and costs (bound.py)
            node, protected = sim.placement(request.method, path)
            response = await sim.workers_for(bound).serve(node, protected, lambda: serve(request, path))
        else:
            response = await _latency(request, path)
        if isinstance(response, _DropResponse) or response.status_code >= 400:
            sim.failures_served += 1  # lets tests check that every failed read was reported
            status = 0 if isinstance(response, _DropResponse) else response.status_code
            sim.failure_log.append((status, request.method, "/" + request.path_params["path"]))
            del sim.failure_log[:-200]
        return response

    async def _latency(request: Request, path: str) -> Response:
        # the latency is when the answer is due, counted from the request's arrival: the simulator's own
        # work for it counts toward it, as a PVE node's several workers answer requests side by side
        # (pveproxy forks 3 by default), instead of this one process's work queueing on top (issue 17).
        # The request is handled on arrival, its answer held: a write shows before its answer does.
        due = asyncio.get_running_loop().time() + sim.faults.delay_for(path)
        try:
            response = await serve(request, path)
        except Exception:
            await _until(due)  # an error the app did not answer (Starlette's 500) is due like any answer
            raise
        await _until(due)
        return response

    async def serve(request: Request, path: str) -> Response:
        sim.requests += 1
        if sim.faults.drop_for(path):
            return _DropResponse()
        fmt = request.path_params["fmt"]
        if fmt not in ("json", "extjs"):
            return answer_response(pipeline.unknown_format(fmt, path))
        params = await _params(request)
        with sim.lock:
            tasks.advance(sim.cluster)
            answer = pipeline.run(sim, request.method, path, params, request.headers.get("authorization"), fmt)
        return answer_response(answer)

    def _authorized(request: Request) -> bool:
        return bool(sim.control_secret) and hmac.compare_digest(
            request.headers.get("x-pvesim-control", ""), sim.control_secret
        )

    async def control(request: Request) -> Response:
        if not _authorized(request):
            return JSONResponse({"error": "control secret required"}, status_code=401)
        action = request.path_params["action"]
        body = await request.json() if request.method in ("POST", "PUT") else {}
        try:
            with sim.mutate() as c:
                result = _control(sim, c, action, body)
        except (KeyError, ValueError, TypeError) as exc:
            return JSONResponse({"error": f"bad control request {action!r}: {exc}"}, status_code=400)
        return JSONResponse({"ok": True, **result})

    return Starlette(
        routes=[
            Route("/api2/{fmt}/{path:path}", api2, methods=["GET", "POST", "PUT", "DELETE"]),
            Route("/_sim/{action:path}", control, methods=["GET", "POST", "PUT"]),
        ]
    )


def _control(sim: Simulator, c: Cluster, action: str, body: dict[str, Any]) -> dict[str, Any]:
    """Control API: faults, node power, clock, task completion, out-of-band changes."""
    if action == "faults":
        sim.faults = Faults.model_validate(body)
    elif action == "speed":
        c.speed = float(body["speed"])
    elif action == "clock/advance":
        c.clock.advance(float(body["seconds"]))
    elif action == "tasks/finish-all":
        tasks.finish_all(c)
    elif action == "task-failures":
        c.options[tasks.FAILURE_HOOK_KEY] = list(body.get("rules", []))
    elif action.startswith("nodes/"):
        name = action.split("/", 1)[1]
        c.nodes[name].online = bool(body["online"])
    elif action.startswith("guests/"):
        vmid = int(action.split("/")[1])
        guest = c.guests[vmid]
        for key, value in body.get("set", {}).items():
            guest.config[key] = str(value)
        for key in body.get("delete", []):
            guest.config.pop(key, None)
        if "agent_responding" in body:
            guest.agent_responding = bool(body["agent_responding"])
    elif action.startswith("tokens/"):
        token = c.tokens[action.split("/", 1)[1]]
        token.set_acl([AclEntry(e["path"], e["role"], e.get("propagate", True)) for e in body["acl"]])
    elif action == "quorum":
        c.quorate = bool(body["quorate"])
    elif action == "workers/reset":  # a bench measures one run: the pools start counting afresh
        sim.workers = None
    elif action == "state":
        return {
            "workers": sim.workers.report() if sim.workers is not None else None,
            "requests": sim.requests,
            "guests": {g.vmid: {"node": g.node, "status": g.status, "lock": g.lock} for g in c.guests.values()},
            "running_tasks": sum(1 for t in c.tasks if t.running),
        }
    else:
        raise KeyError(action)
    return {}
