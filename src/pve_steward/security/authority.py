"""Who may do what: the one decision every path that reaches a cluster asks first (design record 261206-58).

An identified caller (HTTP with OIDC or named static tokens, ``identity.py``) is a :class:`Principal`:
a namespaced id (``static:NAME`` or ``oidc:ISSUER#SUBJECT``, so an OIDC subject can never pass for a
static token's name) and the grants of the principals-file entries that matched it. A grant carries
every limit the file can give: a tier ceiling, the clusters, and allow/deny globs of operations.
An access (an operation on a cluster) is allowed when at least one grant allows all of it; grants are
never mixed (a group's admin on 'lab' and another group's read_only on 'prod' give no admin on 'prod').

:func:`refusal` is the decision. Tools (granular and meta, views' reads and confirmations included) ask
it through the guard; resources, resource templates, completion and prompts through :func:`admit`,
which also audits a refusal; each asks before anything is sent to the cluster (no version check, no
inventory read). Without identity (stdio, a single bearer token) there is no principal and nothing is
refused here.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from pve_steward.security.handlers import HANDLERS, spec_of
from pve_steward.security.tiers import Tier

if TYPE_CHECKING:
    from pve_steward.tools.context import AppContext

CLAIM = "pve_steward_principal"  # the AccessToken claim that carries the principal
EVERY_CLUSTER = "*"  # an operation about every cluster (list_clusters): it shows only those the caller may use


@dataclass(frozen=True)
class Grant:
    """What one principals-file entry gives: a tier ceiling, clusters (None: all), allowed/denied operations."""

    label: str  # which entry: "token carol", "user alice", "group pve-ops", "default_tier"
    tier: Tier
    clusters: tuple[str, ...] | None = None
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def refusal(self, name: str, op: str | None, tier: Tier, cluster: str | None) -> str | None:
        """Why this grant does not cover ``op`` (needing ``tier``) on ``cluster``; None when it does.
        ``op`` None asks about the cluster alone (a prompt that names one and reads nothing from it)."""
        if tier is not Tier.READ_ONLY and not self.tier.allows(tier):
            return f"{op} needs tier {tier.value}; {name} may use tier {self.tier.value} ({self.label})"
        if self.clusters is not None and cluster != EVERY_CLUSTER and cluster not in self.clusters:
            where = f"cluster '{cluster}'" if cluster is not None else "this server's cluster (it has no name)"
            allowed = ", ".join(self.clusters) or "none"
            return f"{name} may not use {where} ({self.label} allows clusters: {allowed})"
        if op is None:
            return None
        denied = next((glob for glob in self.deny if fnmatch.fnmatchcase(op, glob)), None)
        if denied is not None:
            return f"{op} is denied to {name} ({self.label}: deny_actions '{denied}')"
        if self.allow is not None and not any(fnmatch.fnmatchcase(op, glob) for glob in self.allow):
            return f"{op} is not among the operations {name} may use ({self.label}: allow_actions)"
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "tier": self.tier.value,
            "clusters": None if self.clusters is None else list(self.clusters),
            "allow": None if self.allow is None else list(self.allow),
            "deny": list(self.deny),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Grant:
        clusters, allow = raw.get("clusters"), raw.get("allow")
        return cls(
            label=str(raw["label"]),
            tier=Tier(raw["tier"]),
            clusters=None if clusters is None else tuple(clusters),
            allow=None if allow is None else tuple(allow),
            deny=tuple(raw.get("deny") or ()),
        )


@dataclass(frozen=True)
class Principal:
    """An identified caller: ``id`` is namespaced by its source; ``name`` is how sentences name it."""

    id: str
    name: str
    grants: tuple[Grant, ...]

    def refusal(self, op: str | None, tier: Tier, cluster: str | None) -> str | None:
        """None when one grant allows the access, else why not (every grant's reason when there are several)."""
        reasons = [grant.refusal(self.name, op, tier, cluster) for grant in self.grants]
        if not reasons or any(r is None for r in reasons):
            return None if reasons else f"{self.name} has no grant on this server"
        if len(reasons) == 1:
            return reasons[0]
        return f"no rule lets {self.name} do this: " + "; ".join(str(r) for r in reasons)

    def clusters(self, names: list[str]) -> list[str]:
        """The clusters of ``names`` that at least one grant reaches (in the given order)."""
        return [n for n in names if any(g.clusters is None or n in g.clusters for g in self.grants)]

    def offers(self, op: str, tier: Tier) -> bool:
        """Whether some grant allows ``op`` on some cluster (tools/list lists only what may run somewhere)."""
        return any(
            g.refusal(self.name, op, tier, cluster) is None
            for g in self.grants
            for cluster in ((None,) if g.clusters is None else g.clusters)
        )

    def claims(self) -> dict[str, Any]:
        return {CLAIM: {"id": self.id, "name": self.name, "grants": [g.as_dict() for g in self.grants]}}

    @classmethod
    def from_access(cls, access: AccessToken | None) -> Principal | None:
        raw = (access.claims or {}).get(CLAIM) if access is not None else None
        if not isinstance(raw, dict):
            return None
        return cls(str(raw["id"]), str(raw["name"]), tuple(Grant.from_dict(g) for g in raw["grants"]))


def current() -> Principal | None:
    """The principal of the request being served (None: nobody identified, e.g. stdio)."""
    return Principal.from_access(get_access_token())


def refusal(op: str | None, tier: Tier, cluster: str | None, principal: Principal | None = None) -> str | None:
    """The decision: why the caller may not run ``op`` (needing ``tier``) on ``cluster``; None when it may."""
    who = principal if principal is not None else current()
    return None if who is None else who.refusal(op, tier, cluster)


def tier_of(op: str | None) -> Tier:
    """The tier an operation's handler declares (read_only for a name no handler has: nothing to run)."""
    handler = HANDLERS.get(op) if op is not None else None
    spec = spec_of(handler) if handler is not None else None
    return spec.tier if spec is not None else Tier.READ_ONLY


async def admit(app: AppContext, surface: str, op: str | None, detail: dict[str, Any] | None = None) -> str | None:
    """Ask :func:`refusal` for a path that is not a tool call (resource, completion, prompt) before it reads
    anything from ``app``'s cluster; a refusal is audited like the guard's (outcome ``denied``) and returned.
    ``op`` is the operation whose data the path shows (None: it names the cluster and reads nothing)."""
    principal = current()
    tier = tier_of(op)
    why = refusal(op, tier, app.cluster, principal)
    if why is None or principal is None:
        return None
    record: dict[str, Any] = {
        "event": "tool_call",
        "tool": op or surface,
        "write": tier is not Tier.READ_ONLY,
        "tier": tier.value,
        "via": surface,
        "principal": principal.id,
        "params": detail or {},
        "outcome": "denied",
        "reason": why,
    }
    if app.cluster is not None:
        record["cluster"] = app.cluster
    await app.audit.record(record)
    return why
