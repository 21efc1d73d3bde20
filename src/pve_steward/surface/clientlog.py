"""Protocol logging for both protocol eras (``logging/setLevel`` is deprecated by 2026-07-28, SEP-2577).

The server's own log goes to stderr (stdlib ``logging``), for the operator. A client may also see
the records written while *its* request runs, as ``notifications/message``:

- handshake era (2025-11-25 and older): the client opts in with ``logging/setLevel``; the level is
  kept for its connection, and records at or above it are sent, tied to the request;
- 2026-07-28: there is no ``logging/setLevel``; a request opts in through its ``_meta`` log level
  and the SDK sends only what that request asked for (``ServerSession.send_log_message``).

Nothing is sent to a client that did not opt in. Only the message text is sent (no traceback,
no arguments beyond what the message already names), so secrets stay out as they do in stderr.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import EmptyResult, LoggingLevel, SetLevelRequestParams

log = logging.getLogger(__name__)
STATE_KEY = "pve_steward.log_level"
# MCP (syslog) levels -> the stdlib level a record needs to be sent at that setting.
THRESHOLD: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def mcp_level(levelno: int) -> LoggingLevel:
    if levelno >= logging.CRITICAL:
        return "critical"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warning"
    return "info" if levelno >= logging.INFO else "debug"


@dataclass
class _Sink:
    threshold: int
    records: list[tuple[LoggingLevel, str, str]] = field(default_factory=list)


_SINK: ContextVar[_Sink | None] = ContextVar("pve_steward_client_log", default=None)


class _ToClient(logging.Handler):
    """Collects this request's records for the client that asked for them (a no-op otherwise)."""

    def emit(self, record: logging.LogRecord) -> None:
        sink = _SINK.get()
        if sink is not None and record.levelno >= sink.threshold:
            sink.records.append((mcp_level(record.levelno), record.name, record.getMessage()))


_HANDLER = _ToClient()
logging.getLogger("pve_steward").addHandler(_HANDLER)


def _connection_state(session: Any) -> dict[str, Any] | None:
    # The per-connection scratch dict (mcp.server.connection.Connection.state); the session is per request.
    connection = getattr(session, "_connection", None)
    state = getattr(connection, "state", None)
    return state if isinstance(state, dict) else None


def requested_level(context: Any) -> str | None:
    """The level a handshake-era client set with logging/setLevel on this connection, if any."""
    try:
        session = context.request_context.session
    except (AttributeError, ValueError, LookupError):
        return None
    state = _connection_state(session)
    level = state.get(STATE_KEY) if state else None
    return level if isinstance(level, str) else None


@asynccontextmanager
async def forwarded(context: Any) -> AsyncIterator[None]:
    """Send the records written during this request to a client that opted in with logging/setLevel."""
    level = requested_level(context)
    if level is None:
        yield
        return
    sink = _Sink(THRESHOLD.get(level, logging.WARNING))
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)
        session = context.request_context.session
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            for level_name, logger, message in sink.records:
                try:
                    await session.send_log_message(level_name, message, logger, related_request_id=context.request_id)
                except Exception as exc:  # a client gone away must not turn the call's answer into an error
                    log.debug("could not send a log record to the client: %s", exc)
                    break


def register_logging(mcp: MCPServer[Any]) -> None:
    """Serve logging/setLevel (handshake era): remember the level for this connection; answer {}."""

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        state = _connection_state(ctx.session)
        if state is not None:
            state[STATE_KEY] = params.level
        log.debug("client set protocol log level %s", params.level)
        return EmptyResult()

    mcp._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
