"""Several clusters: the ``[clusters.NAME]`` tables of the config file as per-cluster settings.

Each cluster gets the server's settings with its own connection (URL, API token, certificate pin)
and its PBS table in place, so everything built from settings (client, read cache, version gate,
inventory) is built once per cluster by the composition root. A cluster's ``max_tier`` is a
ceiling under the server's ``--tier``: its writes above it are not offered for it and are refused.
The first table in the file is the default cluster (resources, and completions before a cluster is
chosen, use it). With two or more, every tool takes the :class:`ClusterArgument`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import WithJsonSchema

from pve_steward.config import Settings
from pve_steward.security.tiers import Tier

Check = Callable[[dict[str, Any]], str | None]  # a tool's arguments -> what is wrong with them, or None


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


@dataclass(frozen=True)
class ClusterArgument:
    """The ``cluster`` argument every tool takes when several clusters are configured.

    A write tool's enum lists only the clusters whose tier ceiling allows it; naming another is
    refused with a sentence that names the cluster and its ceiling.
    """

    tiers: dict[str, Tier]  # name -> the highest tier allowed on it, in configuration order

    def names(self, tier: Tier) -> list[str]:
        return [name for name, allowed in self.tiers.items() if allowed.allows(tier)]

    def parameter(self, tier: Tier, *, required: bool) -> inspect.Parameter:
        schema = {
            "type": "string",
            "enum": self.names(tier),
            "description": "The cluster to act on (list_clusters shows every configured cluster)",
        }
        return inspect.Parameter(
            "cluster",
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if required else None,
            annotation=Annotated[str | None, WithJsonSchema(schema)],
        )

    def problem(self, what: str, chosen: Any, tier: Tier | None) -> str | None:
        """Why ``chosen`` cannot be used by ``what`` (an operation needing ``tier``; None: it takes no cluster)."""
        listed = ", ".join(self.tiers)
        if tier is None:
            return None if chosen is None else f"{what} does not take 'cluster': it answers for every cluster"
        if chosen is None or chosen == "":
            return f"{what} needs the parameter 'cluster', one of: {listed}"
        if not isinstance(chosen, str) or chosen not in self.tiers:
            shown = repr(chosen) if len(repr(chosen)) <= 60 else repr(chosen)[:57] + "..."
            return f"unknown cluster {shown}; 'cluster' must be one of: {listed}"
        allowed = self.tiers[chosen]
        if not allowed.allows(tier):
            return (
                f"{what} needs tier {tier.value}, and cluster '{chosen}' allows at most {allowed.value} "
                f"(max_tier of [clusters.{chosen}]); it can run on: {', '.join(self.names(tier)) or 'no cluster'}"
            )
        return None

    def check(self, what: str, inner: Check, tier_of: Callable[[dict[str, Any]], Tier | None]) -> Check:
        """``inner`` (the tool's own argument check) on the other arguments, then the cluster's."""

        def check(arguments: dict[str, Any]) -> str | None:
            rest = {k: v for k, v in arguments.items() if k != "cluster"}
            return inner(rest) or self.problem(what_of(rest), arguments.get("cluster"), tier_of(rest))

        def what_of(rest: dict[str, Any]) -> str:
            return f"action '{rest['action']}'" if what == "action" else what

        return check
