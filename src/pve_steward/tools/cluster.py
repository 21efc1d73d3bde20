"""Cluster-level read tools: overview, membership, datacenter options, token permissions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pve_steward.errors import PveError
from pve_steward.models import Model, Untrusted
from pve_steward.pveio.client import api_path, gather
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext


class NodeSummary(Model):
    name: Untrusted
    online: bool
    cpu_fraction: float | None = Field(None, description="CPU utilisation 0..1")
    cpus: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    uptime_s: int | None = None
    guests_running: int = 0
    guests_total: int = 0


class GuestCounts(Model):
    total: int = 0
    running: int = 0
    stopped: int = 0
    qemu: int = 0
    lxc: int = 0
    templates: int = 0


class ClusterOverview(Model):
    """Quorum, nodes with load, guest counts, PVE version."""

    cluster_name: Untrusted | None = Field(None, description="None for a single node outside a cluster")
    quorate: bool | None = None
    pve_version: str | None = None
    nodes: list[NodeSummary]
    guests: GuestCounts
    storages: int = Field(0, description="distinct storages visible")
    ha_resources: int | None = None
    incomplete: list[str] = Field(default_factory=list, description="reads that failed; figures may be partial")


@guarded(toolset="cluster")
async def cluster_overview(t: ToolContext) -> ClusterOverview:
    """One-call overview; reads run concurrently."""
    got = await gather(
        t.client,
        [
            ("status", api_path("cluster", "status"), {}),
            ("resources", api_path("cluster", "resources"), {}),
            ("version", api_path("version"), {}),
            ("ha", api_path("cluster", "ha", "resources"), {}),
        ],
    )
    incomplete = [f"{key}: {val.message}" for key, val in got.items() if isinstance(val, PveError)]
    if isinstance(got["resources"], PveError) and isinstance(got["status"], PveError):
        raise got["resources"]
    status: list[dict[str, Any]] = [] if isinstance(got["status"], PveError) else got["status"]
    resources: list[dict[str, Any]] = [] if isinstance(got["resources"], PveError) else got["resources"]
    cluster = next((r for r in status if r.get("type") == "cluster"), None)
    nodes: dict[str, NodeSummary] = {}
    for row in status:
        if row.get("type") == "node":
            nodes[row["name"]] = NodeSummary(name=row["name"], online=bool(row.get("online")))
    counts = GuestCounts()
    storages: set[str] = set()
    for r in resources:
        if r.get("type") == "node":
            n = nodes.setdefault(r["node"], NodeSummary(name=r["node"], online=r.get("status") == "online"))
            n.online = r.get("status") == "online"
            n.cpu_fraction = r.get("cpu")
            n.cpus = int(r["maxcpu"]) if r.get("maxcpu") is not None else None
            n.mem_used_bytes, n.mem_total_bytes = r.get("mem"), r.get("maxmem")
            n.uptime_s = r.get("uptime")
        elif r.get("type") in ("qemu", "lxc"):
            counts.total += 1
            counts.qemu += r["type"] == "qemu"
            counts.lxc += r["type"] == "lxc"
            if r.get("template"):
                counts.templates += 1
                continue
            running = r.get("status") == "running"
            counts.running += running
            counts.stopped += r.get("status") == "stopped"
            host = nodes.setdefault(r["node"], NodeSummary(name=r["node"], online=True))
            host.guests_total += 1
            host.guests_running += running
        elif r.get("type") == "storage":
            storages.add(r["storage"])
    version = got["version"]
    return ClusterOverview(
        cluster_name=cluster.get("name") if cluster else None,
        quorate=bool(cluster.get("quorate")) if cluster else (None if not status else True),
        pve_version=None if isinstance(version, PveError) else version.get("version"),
        nodes=sorted(nodes.values(), key=lambda n: n.name),
        guests=counts,
        storages=len(storages),
        ha_resources=None if isinstance(got["ha"], PveError) else len(got["ha"]),
        incomplete=incomplete,
    )


class Member(Model):
    name: Untrusted
    nodeid: int | None = None
    ip: str | None = None
    online: bool


class ClusterMembership(Model):
    """Corosync's view: cluster name, config version, quorum, members."""

    cluster_name: Untrusted | None = Field(None, description="None for a standalone node")
    config_version: int | None = None
    quorate: bool | None = None
    expected_nodes: int | None = None
    members: list[Member]
    offline: list[Untrusted]


@guarded(toolset="cluster")
async def cluster_membership(t: ToolContext) -> ClusterMembership:
    """GET /cluster/status: who is in the cluster, who is online, is there quorum."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "status"))
    cluster = next((r for r in rows if r.get("type") == "cluster"), None)
    members = sorted(
        (
            Member(name=r["name"], nodeid=r.get("nodeid"), ip=r.get("ip"), online=bool(r.get("online")))
            for r in rows
            if r.get("type") == "node"
        ),
        key=lambda m: m.name,
    )
    return ClusterMembership(
        cluster_name=cluster.get("name") if cluster else None,
        config_version=cluster.get("version") if cluster else None,
        quorate=bool(cluster.get("quorate")) if cluster else None,
        expected_nodes=cluster.get("nodes") if cluster else None,
        members=members,
        offline=[m.name for m in members if not m.online],
    )


class ClusterOptions(Model):
    """Datacenter options (datacenter.cfg) that change how operations behave."""

    migration_type: str | None = Field(None, description="secure (SSH tunnel) or insecure")
    migration_network: str | None = None
    ha_shutdown_policy: str | None = Field(None, description="what HA does with guests when a node shuts down")
    max_workers: int | None = Field(None, description="parallel jobs for bulk actions")
    bwlimit: str | None = None
    console: str | None = None
    keyboard: str | None = None
    allowed_tags: list[Untrusted] = Field(
        default_factory=list, description="tags a guest may be given (PVE's allowed-tags: registered and in use)"
    )
    other: dict[str, Untrusted] = Field(
        default_factory=dict, description="remaining options as PVE returns them (free text: description, ...)"
    )


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return ";".join(map(str, value))  # PVE's list separator in datacenter.cfg (tags, registered-tags)
    return str(value)


@guarded(toolset="cluster")
async def cluster_options(t: ToolContext) -> ClusterOptions:
    """GET /cluster/options, with the operationally relevant options pulled out."""
    opts: dict[str, Any] = await t.client.get(api_path("cluster", "options"))
    migration = opts.get("migration") or {}
    ha = opts.get("ha") or {}
    if isinstance(migration, str):
        migration = dict(kv.split("=", 1) for kv in migration.split(",") if "=" in kv)
    if isinstance(ha, str):
        ha = dict(kv.split("=", 1) for kv in ha.split(",") if "=" in kv)
    known = {"migration", "ha", "max_workers", "bwlimit", "console", "keyboard", "allowed-tags"}
    allowed = opts.get("allowed-tags") or []
    return ClusterOptions(
        migration_type=migration.get("type"),
        migration_network=migration.get("network"),
        ha_shutdown_policy=ha.get("shutdown_policy"),
        max_workers=int(opts["max_workers"]) if opts.get("max_workers") is not None else None,
        bwlimit=_flat(opts["bwlimit"]) if opts.get("bwlimit") else None,
        console=opts.get("console"),
        keyboard=opts.get("keyboard"),
        allowed_tags=[str(x) for x in (allowed if isinstance(allowed, list) else str(allowed).split(";")) if x],
        other={k: _flat(v) for k, v in sorted(opts.items()) if k not in known},
    )


class TokenPermissions(Model):
    """What the server's API token may do, per ACL path (privilege separation applied)."""

    token_id: str | None
    paths: dict[str, list[str]]
    can_write_guests: bool = Field(description="holds VM.PowerMgmt somewhere")


@guarded(toolset="cluster")
async def token_permissions(t: ToolContext) -> TokenPermissions:
    """Effective privileges of the configured API token (GET /access/permissions)."""
    perms: dict[str, dict[str, int]] = await t.client.get(api_path("access", "permissions"))
    paths = {path: sorted(p for p, on in privs.items() if on) for path, privs in sorted(perms.items())}
    return TokenPermissions(
        token_id=t.settings.token_id, paths=paths, can_write_guests=any("VM.PowerMgmt" in p for p in paths.values())
    )
