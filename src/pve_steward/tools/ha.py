"""HA read tools: the HA manager's live status, HA resources, and the rules (PVE 9) or groups (PVE 8)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from pve_steward.errors import PveError, PveNotFound
from pve_steward.models import Model, Untrusted, untrusted
from pve_steward.pveio.client import api_path
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext

_LRM = re.compile(r"^\S+ \((?P<state>[^,]+),")


class Lrm(Model):
    node: Untrusted
    state: str = Field(description="active, idle, maintenance mode, old timestamp - dead?, ...")


class HaService(Model):
    sid: str
    node: Untrusted
    state: str = Field(description="what the HA manager is doing: started, stopped, fence, error, migrate...")
    requested: str | None = Field(None, description="the configured request state")


class HaStatus(Model):
    quorate: bool | None
    master: Untrusted | None = Field(None, description="node running the active CRM")
    lrms: list[Lrm]
    services: list[HaService]
    fencing: str | None = Field(None, description="PVE 9: armed or disarmed")
    attention: list[str] = Field(description="services in error/fence/recovery and LRMs not active or idle")


@guarded(toolset="ha")
async def ha_status(t: ToolContext) -> HaStatus:
    """GET /cluster/ha/status/current, read into quorum, CRM master, LRMs and services."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "ha", "status", "current"))
    quorum = next((r for r in rows if r.get("type") == "quorum"), {})
    master = next((r for r in rows if r.get("type") == "master"), None)
    fencing = next((r for r in rows if r.get("type") == "fencing"), None)
    lrms = []
    for r in rows:
        if r.get("type") == "lrm":
            m = _LRM.match(str(r.get("status", "")))
            lrms.append(Lrm(node=str(r.get("node")), state=m.group("state") if m else str(r.get("status"))))
    services = [
        HaService(
            sid=str(r.get("sid")),
            node=str(r.get("node")),
            state=str(r.get("crm_state") or r.get("state")),
            requested=r.get("request_state"),
        )
        for r in rows
        if r.get("type") == "service"
    ]
    attention = [f"{s.sid}: {s.state}" for s in services if s.state in ("error", "fence", "recovery", "freeze")]
    attention += [f"lrm {x.node}: {x.state}" for x in lrms if x.state not in ("active", "idle")]
    return HaStatus(
        quorate=bool(quorum.get("quorate")) if quorum else None,
        master=master.get("node") if master else None,
        lrms=sorted(lrms, key=lambda x: x.node),
        services=sorted(services, key=lambda s: s.sid),
        fencing=fencing.get("armed-state") if fencing else None,
        attention=attention,
    )


class HaResource(Model):
    sid: str
    vmid: int
    state: str = Field(description="requested state: started, stopped, disabled, ignored")
    group: Untrusted | None = None
    max_restart: int | None = None
    max_relocate: int | None = None
    failback: bool | None = None
    comment: Untrusted | None = None


class HaResources(Model):
    items: list[HaResource]


@guarded(toolset="ha")
async def list_ha_resources(t: ToolContext) -> HaResources:
    """GET /cluster/ha/resources: which guests HA manages and how."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "ha", "resources"))
    items = [
        HaResource(
            sid=str(r["sid"]),
            vmid=int(str(r["sid"]).split(":", 1)[1]),
            state=str(r.get("state", "started")),
            group=r.get("group"),
            max_restart=r.get("max_restart"),
            max_relocate=r.get("max_relocate"),
            failback=bool(r["failback"]) if "failback" in r else None,
            comment=untrusted(r.get("comment")),
        )
        for r in rows
    ]
    return HaResources(items=sorted(items, key=lambda r: r.sid))


class HaRule(Model):
    name: Untrusted
    kind: str = Field(description="node-affinity, resource-affinity (PVE 9 rules) or group (PVE 8)")
    resources: list[str] = Field(default_factory=list)
    nodes: list[Untrusted] = Field(default_factory=list, description="node[:priority] entries")
    strict: bool | None = Field(None, description="only these nodes (restricted group / strict rule)")
    affinity: str | None = Field(None, description="positive or negative (resource-affinity rules)")
    enabled: bool = Field(True, description="false when disabled or not applied because of feasibility errors")
    comment: Untrusted | None = None


class HaRules(Model):
    items: list[HaRule]
    source: list[str] = Field(description="what was read: rules (PVE 9) and/or groups (PVE 8)")
    incomplete: list[str] = Field(default_factory=list)


def _split(value: Any) -> list[str]:
    return [x for x in str(value or "").split(",") if x]


@guarded(toolset="ha")
async def list_ha_rules(t: ToolContext) -> HaRules:
    """HA placement constraints: the rules on PVE 9, the groups on PVE 8.

    PVE 9's rules index already shows groups not yet migrated (as ``ha-group-<name>`` rules) and its groups
    index answers 500 once they are migrated (pve-ha-manager API2/HA/Rules.pm, API2/HA/Groups.pm), so groups
    are read only where the rules endpoint does not exist.
    """
    incomplete: list[str] = []
    try:
        rules: list[dict[str, Any]] = await t.client.get(api_path("cluster", "ha", "rules"))
    except PveNotFound:  # PVE 8: no rules endpoint (501)
        pass
    else:
        items = [
            HaRule(
                name=str(r.get("rule")),
                kind=str(r.get("type")),
                resources=_split(r.get("resources")),
                nodes=_split(r.get("nodes")),
                strict=bool(int(r["strict"])) if r.get("strict") is not None else None,
                affinity=r.get("affinity"),
                enabled=not int(r.get("disable", 0) or 0) and not r.get("errors"),
                comment=untrusted(r.get("comment")),
            )
            for r in rules
        ]
        return HaRules(items=items, source=["rules"], incomplete=incomplete)
    groups: list[dict[str, Any]] = await t.client.get(api_path("cluster", "ha", "groups"))
    try:  # a group's members are the resources naming it (HA/Groups.pm migrate_groups_to_rules reads them so)
        resources: list[dict[str, Any]] = await t.client.get(api_path("cluster", "ha", "resources"))
    except PveError as exc:
        resources = []
        incomplete.append(f"resources: {exc.message}")
    members: dict[str, list[str]] = {}
    for r in resources:
        if r.get("group"):
            members.setdefault(str(r["group"]), []).append(str(r.get("sid")))
    items = [
        HaRule(
            name=str(g.get("group")),
            kind="group",
            resources=sorted(members.get(str(g.get("group")), [])),
            nodes=_split(g.get("nodes")),
            strict=bool(int(g.get("restricted", 0) or 0)),
            comment=untrusted(g.get("comment")),
        )
        for g in groups
    ]
    return HaRules(items=items, source=["groups"], incomplete=incomplete)
