"""Half-open connections: does ``/health`` still answer while 1,100 clients hold half-sent requests?

Starts pvesim and the server (HTTP, loopback only) in their own processes, opens ``--connections``
TCP connections that each send half a request line and then nothing, and times ``GET /health``
from another loopback address while they are held. Two shapes: every half-open connection from
one address (127.0.0.2; the per-address cap applies), and spread over several addresses below the
cap (only the header deadline helps). The server starts with the soft open-files limit most
hosts give a service (1024, ``--server-fd-limit``), where holding every connection for ever runs
out of descriptors. After the measurement the bench waits out the header deadline once and counts
the connections the server still holds. Everything is bounded: the sockets are closed and both
processes stopped at the end, whatever happens. Loopback only.

    python bench/bench_halfopen.py [--connections 1100] [--sources 5] [--server-fd-limit 1024]
"""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simproc import SimProcess

import pvesim

TARGET_S = 1.0
HALF = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: "


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def open_half(port: int, count: int, sources: list[str]) -> list[socket.socket]:
    held: list[socket.socket] = []
    for i in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(sources[i % len(sources)], 0))
            s.sendall(HALF)
            held.append(s)
        except OSError:
            break  # refused or out of descriptors: hold what we have
    return held


def health_seconds(port: int) -> float | None:
    started = time.perf_counter()
    try:
        ok = httpx2.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    except httpx2.HTTPError:
        return None
    return time.perf_counter() - started if ok else None


def still_open(held: list[socket.socket]) -> int:
    alive = 0
    for s in held:
        s.setblocking(False)
        try:
            alive += s.recv(1) != b""
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    return alive


def shape(port: int, count: int, sources: list[str], wait_out: float) -> bool:
    held = open_half(port, count, sources)
    try:
        took = health_seconds(port)
        alive = still_open(held)
        time.sleep(wait_out)
        later = still_open(held)
    finally:
        for s in held:
            s.close()
    answer = "no answer" if took is None else f"{took * 1000:.0f} ms"
    met = took is not None and took < TARGET_S
    print(
        f"{len(held)} half-open from {len(sources)} address(es), {alive} held by the server: "
        f"/health {answer} -> {'MET' if met else 'MISSED'} (target < {TARGET_S:.0f} s); "
        f"{later} still held {wait_out:.0f} s later"
    )
    return met


def limit_fds(soft: int) -> None:
    """In the server's process, before exec: the soft open-files limit of a typical service."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard), hard))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, default=1100)
    ap.add_argument("--sources", type=int, default=5, help="addresses for the spread shape (127.0.0.2 ...)")
    ap.add_argument("--server-fd-limit", type=int, default=1024, help="the server's soft open-files limit")
    ap.add_argument("--header-timeout", type=float, default=10.0, help="the server's --http-header-timeout")
    args = ap.parse_args()
    raise_fd_limit(args.connections + 256)

    sim = SimProcess(pvesim.load_scenario("demo"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.TemporaryDirectory(prefix="halfopen-bench-")
    env = sim.server_env(
        Path(tmp.name),
        PVE_STEWARD_TRANSPORT="http",
        PVE_STEWARD_HTTP_HOST="127.0.0.1",
        PVE_STEWARD_HTTP_PORT=str(port),
        PVE_STEWARD_HTTP_HEADER_TIMEOUT=str(args.header_timeout),
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "pve_steward", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: limit_fds(args.server_fd_limit),  # noqa: PLW1509 - the bench has no threads here
    )
    try:
        for _ in range(150):
            if health_seconds(port) is not None:
                break
            time.sleep(0.2)
        print(
            f"server on 127.0.0.1:{port} (soft open-files limit {args.server_fd_limit}); "
            f"half-open connections send {len(HALF)} bytes, then nothing"
        )
        wait_out = args.header_timeout + 2
        one = shape(port, args.connections, ["127.0.0.2"], wait_out)
        spread = shape(port, args.connections, [f"127.0.0.{i + 2}" for i in range(args.sources)], wait_out)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        sim.stop()
        tmp.cleanup()
    return 0 if one and spread else 1


if __name__ == "__main__":
    sys.exit(main())
