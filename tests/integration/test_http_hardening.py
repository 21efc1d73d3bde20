"""Slow or greedy HTTP clients cannot hold the server: header deadline and per-address connection cap.

The server runs as a real subprocess (uvicorn with our protocol); nothing here measures time: a
test waits for the server to close a socket, with a generous bound only to fail instead of hang.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx2

from pvesim.server import SimServer
from tests.httpserver import free_port, server_env

from .test_http import http_server

WAIT = 60.0  # far beyond the configured deadlines: only a server that never closes reaches it


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closes the connection (EOF or reset); False if it is still open at WAIT."""
    sock.settimeout(WAIT)
    try:
        while chunk := sock.recv(4096):
            if b"HTTP/1.1" in chunk:  # an answer (e.g. 408) followed by the close is fine too
                continue
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_client_that_never_finishes_its_headers_is_disconnected(demo_sim: SimServer, tmp_path: Path) -> None:
    port = free_port()
    env = server_env(demo_sim, tmp_path, PVE_STEWARD_HTTP_HEADER_TIMEOUT="1")
    with http_server(env, port) as base:
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            assert _closed_by_server(slow)
        assert httpx2.get(f"{base}/health").status_code == 200


def test_a_client_that_never_finishes_its_body_is_disconnected(demo_sim: SimServer, tmp_path: Path) -> None:
    port = free_port()
    env = server_env(demo_sim, tmp_path, PVE_STEWARD_HTTP_BODY_TIMEOUT="1")
    with http_server(env, port) as base:
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"jsonrpc"'
            )
            assert _closed_by_server(slow)
        assert httpx2.get(f"{base}/health").status_code == 200


def test_connections_beyond_the_per_address_cap_are_closed(demo_sim: SimServer, tmp_path: Path) -> None:
    port = free_port()
    env = server_env(
        demo_sim,
        tmp_path,
        PVE_STEWARD_HTTP_MAX_CONNECTIONS_PER_CLIENT="3",
        PVE_STEWARD_HTTP_HEADER_TIMEOUT="300",  # the held connections idle from the start: not closed for that
    )
    with http_server(env, port) as base:
        held = [socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) for _ in range(3)]
        try:
            with socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) as extra:
                extra.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                extra.settimeout(WAIT)
                try:  # closed unanswered (an answered one would be closed too, when its keep-alive ends)
                    answer = extra.recv(4096)
                except ConnectionResetError:
                    answer = b""
                assert answer == b"", answer
            # another address is not affected, and the held ones are still served
            assert httpx2.get(f"{base}/health").status_code == 200
            held[0].sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            held[0].settimeout(WAIT)
            assert held[0].recv(4096).startswith(b"HTTP/1.1 200")
        finally:
            for s in held:
                s.close()
