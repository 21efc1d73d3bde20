"""HEALTHCHECK of the pve-steward image: ``GET /health`` when the server speaks HTTP.

Over stdio (the image's default) there is no port to probe and the container is healthy while its
process runs, so the check passes. Whether the server speaks HTTP, and where, is read by the server's
own code from the server's own command line (PID 1 in the container, or the arguments given here):
its flags, ``PVE_STEWARD_*`` variables and the TOML file (``--config`` or ``PVE_STEWARD_CONFIG``), with
the server's precedence, so a transport set in the file is seen too. It runs with the image's Python,
where pve_steward is installed. Exit 0 healthy, 1 unhealthy (Docker's convention).
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # a wildcard bind answers on loopback


def server_args(cmdline: Sequence[str]) -> list[str]:
    """The arguments after the ``pve-steward`` program in a command line (``python .../pve-steward demo``)."""
    args = list(cmdline)
    for i, arg in enumerate(args):
        if Path(arg).name == "pve-steward":
            return args[i + 1 :]
    return args


def probe_target(argv: Sequence[str]) -> tuple[str, int] | None:
    """(host, port) to probe, or None when the server speaks stdio (or the command serves nothing).

    Raises ValueError (the server's own configuration message) when the settings are invalid: then the
    server did not start either.
    """
    from pve_steward.cli import DEMO_REFUSES, build_parser, settings_from

    args = build_parser().parse_args(server_args(argv))
    command = getattr(args, "command", None)
    if command == "demo":
        if args.stdio:
            return None
        settings = settings_from(args, reset=DEMO_REFUSES, transport="http")
    elif command in (None, "serve"):
        settings = settings_from(args)
    else:
        return None  # check, tools, docs, audit: one-shot commands with no port
    if settings.transport != "http":
        return None
    return WILDCARDS.get(settings.http_host, settings.http_host), settings.http_port


def server_argv() -> list[str]:
    """The server's command line: PID 1 in the container (the image's ENTRYPOINT, exec form)."""
    try:
        with open("/proc/1/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def check(host: str, port: int) -> tuple[bool, str]:
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/health"
    try:
        with urllib.request.urlopen(url, timeout=4) as response:
            body = json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return False, f"{url}: {exc}"
    ok = body.get("status") == "ok"
    return ok, f"{url}: {body}"


def main(argv: Sequence[str]) -> int:
    try:
        target = probe_target(argv or server_argv())
    except ValueError as exc:  # ConfigError and friends: the server's configuration is invalid
        print(f"unhealthy: {exc}")
        return 1
    if target is None:
        print("stdio transport: nothing to probe")
        return 0
    ok, detail = check(*target)
    print(detail)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
