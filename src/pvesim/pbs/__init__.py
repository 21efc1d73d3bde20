"""A Proxmox Backup Server API simulator (HTTPS, PBS API tokens and privileges, scenarios), next to pvesim.

Like pvesim it never imports pve_steward: the server reads it over HTTPS with proxmoxer's PBS
service, exactly as it would read a real PBS (design record 261203-20).
"""

from __future__ import annotations

from typing import Any

from pvesim.pbs.server import PbsServer, start_pbs
from pvesim.pbs.state import build, load

__all__ = ["PbsServer", "attach", "build", "load", "start_pbs"]


def attach(cluster: Any, pbs: PbsServer) -> list[str]:
    """Make the simulated PVE cluster's PBS storages pin this simulator's certificate (as an admin does with
    ``pvesm set <storage> --fingerprint``) where they name one of its datastores; returns their ids."""
    colons = pbs.fingerprint.lower()
    attached = []
    for sid, storage in cluster.storages.items():
        if storage.type == "pbs" and storage.options.get("datastore") in pbs.state.datastores:
            storage.options["fingerprint"] = colons
            attached.append(sid)
    return attached
