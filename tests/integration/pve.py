"""proxmoxer handles onto a pvesim instance (tests only; the server uses its own client module)."""

from __future__ import annotations

from typing import Any

import requests
from proxmoxer import ProxmoxAPI

from pvesim.server import SimServer


def api(sim: SimServer, token: str = "root@pam!pvesim", **kw: Any) -> Any:
    full, secret = sim.token(token)
    user, name = full.split("!")
    return ProxmoxAPI(
        sim.address, user=user, token_name=name, token_value=secret, verify_ssl=str(sim.cert_path), timeout=10, **kw
    )


def control(sim: SimServer, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Drive pvesim's control API (out-of-band changes, faults), as another admin or a failure would."""
    with requests.Session() as session:
        session.trust_env = False
        response = session.post(
            f"{sim.url}/_sim/{action}",
            json=body or {},
            headers={"X-Pvesim-Control": sim.control_secret},
            verify=str(sim.cert_path),
            timeout=10,
        )
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result
