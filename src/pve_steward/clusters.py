"""Several clusters: the ``[clusters.NAME]`` tables of the config file as per-cluster settings.

Each cluster gets the server's settings with its own connection (URL, API token, certificate pin)
and its PBS table in place, so everything built from settings (client, read cache, version gate,
inventory) is built once per cluster by the composition root. A cluster's ``max_tier`` is a
ceiling under the server's ``--tier``: its writes above it are not offered for it and are refused.
The first table in the file is the default cluster (resources, prompts and completions use it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pve_steward.config import Settings
from pve_steward.security.tiers import Tier


def lower(a: Tier, b: Tier) -> Tier:
    """The lower of two tiers."""
    return a if a.rank <= b.rank else b


@dataclass(frozen=True)
class ClusterTarget:
    """One configured cluster: its name, its settings and its tier ceiling."""

    name: str
    settings: Settings  # the server's settings with this cluster's connection (the server's tier kept)
    max_tier: Tier

    @property
    def tier(self) -> Tier:
        """What may run on this cluster: the server's tier, capped by the cluster's ceiling."""
        return lower(self.settings.tier, self.max_tier)

    @property
    def client_settings(self) -> Settings:
        """Settings for this cluster's client: a read-only ceiling makes the client itself refuse writes."""
        return self.settings.model_copy(update={"tier": self.tier})


def cluster_targets(settings: Settings) -> list[ClusterTarget]:
    """The configured clusters in file order (empty with the single-cluster settings)."""
    targets = []
    for name, cluster in settings.clusters.items():
        update: dict[str, Any] = {
            "url": cluster.url,
            "token_id": cluster.token_id,
            "token_secret": cluster.token_secret,
            "token_secret_file": cluster.token_secret_file,
            "fingerprint": cluster.fingerprint,
            "ca_file": cluster.ca_file,
            "insecure": cluster.insecure,
            "clusters": {},
        }
        own = settings.model_copy(update=update)
        for key, value in (cluster.pbs or {}).items():  # PBS settings are validated like the top-level ones
            type(settings).__pydantic_validator__.validate_assignment(own, f"pbs_{key}", value)
        targets.append(ClusterTarget(name, own, cluster.max_tier))
    return targets


def registration_tier(settings: Settings, targets: list[ClusterTarget]) -> Tier:
    """The highest tier any cluster allows (the server's own tier without cluster tables)."""
    if not targets:
        return settings.tier
    best = max((t.tier for t in targets), key=lambda tier: tier.rank)
    return lower(settings.tier, best)
