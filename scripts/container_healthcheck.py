"""HEALTHCHECK of the pve-steward image: ``GET /health`` when the server speaks HTTP.

Over stdio (the image's default) there is no port to probe and the container is healthy while its
process runs, so the check passes. The transport and port are read the way pve-steward reads them:
flags (from the server's command line, PID 1 in the container, or given as arguments here) over
``PVE_STEWARD_*`` environment variables over defaults; ``demo`` serves HTTP unless ``--stdio``.
Exit 0 healthy, 1 unhealthy (Docker's convention). Standard library only: it runs in the image.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

DEFAULT_PORT = 8765


def probe_target(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """The port to probe, or None when the server speaks stdio."""
    transport = env.get("PVE_STEWARD_TRANSPORT", "stdio")
    port = int(env.get("PVE_STEWARD_HTTP_PORT", DEFAULT_PORT))
    args = list(argv)
    if "demo" in args:
        transport = "stdio" if "--stdio" in args else "http"
    for i, arg in enumerate(args):
        key, sep, value = arg.partition("=")
        if not sep:
            value = args[i + 1] if i + 1 < len(args) else ""
        if key == "--transport":
            transport = value
        elif key == "--http-port":
            port = int(value)
    return port if transport == "http" else None


def server_argv() -> list[str]:
    """The server's command line: PID 1 in the container (the image's ENTRYPOINT, exec form)."""
    try:
        with open("/proc/1/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def check(port: int) -> tuple[bool, str]:
    url = f"http://127.0.0.1:{port}/health"
    try:
        with urllib.request.urlopen(url, timeout=4) as response:
            body = json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return False, f"{url}: {exc}"
    ok = body.get("status") == "ok"
    return ok, f"{url}: {body}"


def main(argv: Sequence[str]) -> int:
    port = probe_target(argv or server_argv(), os.environ)
    if port is None:
        print("stdio transport: nothing to probe")
        return 0
    ok, detail = check(port)
    print(detail)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
