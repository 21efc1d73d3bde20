"""PVE's request pipeline, as pveproxy runs it, and its answers in pveproxy's form.

The order is pve-manager PVE/HTTPServer.pm ``auth_handler`` then ``rest_handler``: authenticate the
token (401), find the method (501), refuse a path parameter given twice with two values (400), refuse a
token where the method takes none (403), check permissions from the schema (403), proxy to the node
(595 when it is unreachable), validate parameters (400, ``PVE::RESTHandler::handle``), run the handler.

The answer's form is pve-http-server's: ``PVE::APIServer::Formatter::Standard`` writes ``{"data": ...}``
with ``errors`` when there are parameter errors, ``message`` on an error status, ``total`` and ``changes``
when the handler set them (``set_result_attrib``); ``AnyEvent.pm response`` puts the message's first line
in the status line. A failed login and a failed proxy connection answer with no body at all.
"""

from __future__ import annotations

import http
from dataclasses import dataclass
from typing import Any

from pvesim import api
from pvesim.apischema import ParamError, PermissionDenied, check_permissions, validate

# AnyEvent::HTTP's pseudo-statuses: the proxy's own failures, with ``$!`` or its text as the reason, no body
PROXY_STATUSES = frozenset({595, 596, 597, 598, 599})


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: status, the status line's reason phrase, and the JSON body (None: no body)."""

    status: int
    reason: str
    body: dict[str, Any] | None
    download: api.Download | None = None  # a file streamed instead of a JSON body


def _status_message(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def status_line(status: int, message: str) -> tuple[int, str]:
    """pve-http-server AnyEvent.pm ``response``: the message or the status's phrase, only its first line; a
    carriage return left in it turns the answer into a 400 'Bad Request'."""
    text = message or _status_message(status)
    first = text.split("\n", 1)[0]
    if "\r" in first:
        return 400, "Bad Request"
    return status, first


def error_answer(status: int, message: str, errors: dict[str, str] | None = None, fmt: str = "json") -> Answer:
    """An error as PVE's formatter sends it: ``{"data": null, "errors"?: {...}, "message": "..."}``."""
    if status in PROXY_STATUSES:
        return Answer(status, status_line(status, message)[1], None)
    body: dict[str, Any] = {"data": None}
    if errors:
        body["errors"] = errors
    message = message or _status_message(status)
    if fmt == "extjs":  # Standard.pm prepare_response_data: ExtJS wants 'success', not the HTTP status
        body.update(message=message, status=status, success=0)
        return Answer(200, "OK", body)
    body["message"] = message
    code, reason = status_line(status, message)
    return Answer(code, reason, body if code == status else None)


def data_answer(result: Any, fmt: str = "json") -> Answer:
    """A handler's result: its data, with ``total`` and ``changes`` where it set them (truthy only)."""
    body: dict[str, Any]
    if isinstance(result, api.Download):  # AnyEvent.pm send_file_start: the file, not the formatter's JSON
        return Answer(200, "OK", None, result)
    if isinstance(result, api.Result):
        body = {"data": result.data}
        if result.total:
            body["total"] = result.total
        if result.changes:
            body["changes"] = result.changes
    else:
        body = {"data": result}
    if fmt == "extjs":
        body["success"] = 1
    return Answer(200, "OK", body)


def no_ticket(authorization: str | None) -> Answer:
    """HTTPServer.pm auth_handler dies; AnyEvent.pm answers ``HTTP::Response->new(401, $err)``: the reason
    only, no body ('No ticket' without credentials, 'Authentication failed!' for a token it refuses)."""
    token = authorization is not None and authorization.startswith("PVEAPIToken=")
    return Answer(401, "Authentication failed!" if token else "No ticket", None)


def unknown_format(fmt: str, rel_uri: str) -> Answer:
    """AnyEvent.pm handle_api2_request: a format without a formatter (only json and extjs here)."""
    return Answer(501, f"no formatter for uri {rel_uri}, {fmt}", None)


def run(sim: Any, method: str, path: str, params: dict[str, Any], authorization: str | None, fmt: str) -> Answer:
    """One API request through PVE's pipeline, under the simulator's lock (the caller holds it)."""
    token = sim.authenticate(authorization)
    if token is None:
        return no_ticket(authorization)
    match = sim.schema.match(method, path)
    handler = api.ROUTES.get((method, match[0].path)) if match else None
    if match is None or handler is None:
        return error_answer(501, f"Method '{method} {path}' not implemented", fmt=fmt)
    spec, path_params = match
    conflicts = {
        name: "duplicate parameter (already defined in URI) with conflicting values!"
        for name, value in params.items()
        if name in path_params and str(value) != path_params[name]
    }
    if conflicts:
        return error_answer(400, "Parameter verification failed.\n", conflicts, fmt)
    params = {**params, **path_params}
    rule = sim.faults.error_for(method, path)
    if rule is not None:
        return error_answer(rule.status, rule.message.rstrip("\n") + "\n", fmt=fmt)
    if not spec.spec.get("allowtoken", 1):
        return error_answer(403, f"URI '{path}' not available with API token, need proper ticket.\n", fmt=fmt)
    try:
        check_permissions(spec.spec.get("permissions"), token, params, sim.cluster.access)
    except PermissionDenied as exc:
        return error_answer(403, str(exc), fmt=fmt)
    node = path_params.get("node")
    if spec.proxied and node is not None:
        target = sim.cluster.nodes.get(node)
        if target is None:  # PVE::Cluster::remote_node_ip
            why = f"failed to get address info for: {node}: Name or service not known"
            return error_answer(500, f"hostname lookup '{node}' failed - {why}\n", fmt=fmt)
        if not target.online:  # AnyEvent::HTTP cannot connect: 595 with $! as the reason
            return error_answer(595, "No route to host", fmt=fmt)
    try:
        valid = validate(spec, params)
        result = handler(api.Call(sim.cluster, token, valid, spec))
    except ParamError as exc:
        return error_answer(400, "Parameter verification failed.\n", exc.errors, fmt)
    except api.ApiError as exc:
        return error_answer(exc.status, exc.wire_message, exc.errors, fmt)
    return data_answer(result, fmt)
