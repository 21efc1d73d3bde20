"""Streamable HTTP transport: loopback by default, with the SDK's DNS-rebinding protection on."""

from __future__ import annotations

from typing import Any

from mcp.server.transport_security import TransportSecuritySettings

from proxmox_ops_mcp.config import Settings

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def transport_security(settings: Settings) -> TransportSecuritySettings:
    hosts = LOOPBACK_HOSTS + list(settings.allowed_hosts)
    origins = (
        LOOPBACK_ORIGINS
        + [f"http://{h}" for h in settings.allowed_hosts]
        + [f"https://{h}" for h in settings.allowed_hosts]
    )
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def run_http(mcp: Any, settings: Settings) -> None:
    mcp.run(
        "streamable-http",
        host=settings.http_host,
        port=settings.http_port,
        transport_security=transport_security(settings),
        max_request_body_size=settings.max_request_bytes,
    )
