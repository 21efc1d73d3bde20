"""The optional Proxmox Backup Server connection (design record 261203-20), apart from the PBS reads
(tools/pbsread.py) so that making it at start imports no analysis module (issue 17)."""

from __future__ import annotations

from dataclasses import dataclass

from pve_steward.config import Settings
from pve_steward.pveio.client import ProxmoxClient, ProxmoxerClient


@dataclass(frozen=True)
class PbsLink:
    """The PBS connection: its client, and its address and pinned fingerprint to match PVE storages."""

    client: ProxmoxClient
    host: str
    fingerprint: str | None = None

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


def pbs_link(settings: Settings) -> PbsLink | None:
    """The PBS connection the settings describe, or None when no PBS is configured."""
    if not settings.pbs_url:
        return None
    client = ProxmoxerClient.for_pbs(settings)  # checks the settings; touches nothing on the network
    return PbsLink(client, settings.pbs_url, settings.pbs_fingerprint)
