"""Start the HTTP transport the way a user can trust: bind the port first, then say where we listen.

The banner is printed only once the socket is bound (so it never announces a port another process
holds, and ``--http-port 0`` shows the real port); a port in use is one line with the flag to change.
"""

from __future__ import annotations

import errno
import gc
import socket
import sys
from collections.abc import Callable
from typing import Any, TextIO

from pve_steward.config import ConfigError, Settings


class PortUnavailable(ConfigError):
    """The HTTP port cannot be bound (in use, or not allowed)."""


def settle_heap() -> None:
    """Move what start-up built (modules, schemas, the registry) out of the garbage collector's way,
    and collect less often.

    None of it is ever garbage, yet every full collection walked it: about 4 % of a planner's read
    phase (bench/bench_planner.py, issue 17). ``gc.freeze`` keeps it out of later collections.
    """
    gc.freeze()
    # What the server allocates is mostly decoded JSON, which holds no cycles, yet at the default
    # 700 allocations per young collection a health check at 2,000 guests set off full collections
    # of 15-45 ms each, every one a pause for every thread, the event loop's too (issue 17).
    gc.set_threshold(50_000, 20, 20)


def bind_http(settings: Settings) -> socket.socket:
    """A listening socket on ``http_host:http_port``, or a one-line error naming ``--http-port``."""
    host, port = settings.http_host.strip("[]"), settings.http_port
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise PortUnavailable(f"cannot listen on '{settings.http_host}': {exc.strerror}; check --http-host") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortUnavailable(
                f"port {port} on {settings.http_host} is already in use; choose another with --http-port "
                "(or stop what listens there)"
            ) from None
        raise PortUnavailable(
            f"cannot listen on {settings.http_host}:{port}: {exc.strerror}; choose another with --http-port"
        ) from None
    return sock


def endpoint(settings: Settings, port: int) -> str:
    host = settings.http_host
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}/mcp"


def mode(settings: Settings) -> str:
    tools = "granular tools (one per operation)" if settings.granular_tools else "domain meta-tools"
    scope = f"; toolsets {', '.join(settings.toolsets)}" if settings.toolsets else ""
    return tools + scope


def serve_http(mcp: Any, settings: Settings, banner: Callable[[int], None]) -> None:
    """Build the app (refusing an unsafe bind), bind the port, print the banner, serve until stopped."""
    import uvicorn

    from pve_steward.serving.http import bind_warnings, build_http_app, guarded_protocol, raise_fd_limit

    raise_fd_limit()
    app = build_http_app(mcp, settings)
    for warning in bind_warnings(settings):
        print(f"pve-steward: warning: {warning}", file=sys.stderr, flush=True)
    sock = bind_http(settings)
    banner(int(sock.getsockname()[1]))
    # asyncio's own loop, whatever else is installed ("auto" would take uvloop, which the simulator's dev
    # extra brings): the loop the server is tested and measured on
    config = uvicorn.Config(app, log_level="warning", http=guarded_protocol(settings), loop="asyncio")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def say(lines: list[str], out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    stream.write("\n".join(lines) + "\n")
    stream.flush()
