"""proxmoxer handles onto a pvesim instance (tests only; the server uses its own client module)."""

from __future__ import annotations

from typing import Any

from proxmoxer import ProxmoxAPI

from pvesim.server import SimServer


def api(sim: SimServer, token: str = "root@pam!pvesim", **kw: Any) -> Any:
    full, secret = sim.token(token)
    user, name = full.split("!")
    return ProxmoxAPI(
        sim.address, user=user, token_name=name, token_value=secret, verify_ssl=str(sim.cert_path), timeout=10, **kw
    )
