"""Backup read tools: jobs, which guests a job covers, backup archives, guests no job covers.

The judgement (stale, failed, unverified...) lives in ``diagnose_backups``; these are the
typed views an operator drills into afterwards.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from pve_steward.analysis.backups import job_covers, visible_pools
from pve_steward.analysis.schedule import interval_seconds
from pve_steward.analysis.vzdumptarget import job_enabled
from pve_steward.errors import PveError
from pve_steward.models import Model, PageInfo, Untrusted, iso, untrusted
from pve_steward.pve.ids import BackupJobId, VmId
from pve_steward.pve.storagecfg import is_shared
from pve_steward.pve.volumeaccess import backups_hidden
from pve_steward.pveio.client import api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import storage as storage_seg
from pve_steward.security.guard import Refused, guarded
from pve_steward.tools.context import ToolContext

MAX_PAGE = 500


def _ok(value: Any) -> Any:
    """A read every row of the answer depends on: its failure is the tool's failure."""
    if isinstance(value, PveError):
        raise value
    return value


class BackupJob(Model):
    id: Untrusted
    enabled: bool
    schedule: str | None
    interval_hours: float | None = Field(None, description="longest gap between two runs; null if not understood")
    next_run: str | None = None
    storage: Untrusted | None = Field(
        description="the job's storage; null: each node's vzdump default (/etc/vzdump.conf's storage or dumpdir, "
        "else 'local'), which the health check reads"
    )
    mode: str | None
    selection: str = Field(description="all, all except ..., vmids ..., or pool ...")
    node: Untrusted | None = Field(None, description="only guests on this node")
    retention: str | None = Field(
        None,
        description="the job's own prune-backups; when unset vzdump uses the storage's, then /etc/vzdump.conf's, "
        "then keeps all (diagnose_backups judges that chain; PBS datastores prune with their own prune jobs)",
    )
    comment: Untrusted | None = None


def _job(r: dict[str, Any]) -> BackupJob:
    if r.get("pool"):  # VZDump.pm get_included_guests reads the pool first
        selection = f"pool {r['pool']}"
    elif r.get("vmid"):
        selection = f"vmids {r['vmid']}"
    elif int(r.get("all", 0) or 0):
        selection = f"all except {r['exclude']}" if r.get("exclude") else "all"
    else:
        selection = "none"
    prune = r.get("prune-backups")
    retention = ",".join(f"{k}={v}" for k, v in sorted(prune.items())) if isinstance(prune, dict) else prune
    interval = interval_seconds(r.get("schedule"))
    return BackupJob(
        id=str(r.get("id")),
        enabled=job_enabled(r),
        schedule=r.get("schedule"),
        interval_hours=round(interval / 3600, 1) if interval else None,
        next_run=iso(r.get("next-run")),
        storage=r.get("storage"),
        mode=r.get("mode"),
        selection=selection,
        node=r.get("node"),
        retention=retention or None,
        comment=untrusted(r.get("comment")),
    )


class BackupJobs(Model):
    items: list[BackupJob]
    disabled: list[str]


@guarded(toolset="backups")
async def list_backup_jobs(t: ToolContext) -> BackupJobs:
    """GET /cluster/backup with schedules read into intervals."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "backup"))
    items = sorted((_job(r) for r in rows), key=lambda j: j.id)
    return BackupJobs(items=items, disabled=[j.id for j in items if not j.enabled])


class CoveredGuest(Model):
    vmid: int
    name: Untrusted
    node: Untrusted


class BackupJobDetail(Model):
    job: BackupJob
    covers_total: int = Field(description="how many guests the job covers")
    covers: list[CoveredGuest] = Field(description="the first `limit` guests it covers, by vmid")
    unknown: list[int] = Field(
        default_factory=list, description="guests whose coverage depends on pool membership the token cannot see"
    )


@guarded(toolset="backups")
async def get_backup_job(
    t: ToolContext, id: BackupJobId, limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 100
) -> BackupJobDetail:
    """One backup job and exactly which guests it covers (pool, vmid list, all/exclude, node filter; templates too)."""
    got = await gather(
        t.client,
        [("jobs", api_path("cluster", "backup"), {}), ("guests", api_path("cluster", "resources"), {})],
    )
    jobs: list[dict[str, Any]] = _ok(got["jobs"])
    guests: list[dict[str, Any]] = _ok(got["guests"])
    row = next((r for r in jobs if str(r.get("id")) == id), None)
    if row is None:
        known = ", ".join(sorted(str(r.get("id")) for r in jobs)) or "none"
        raise Refused(f"no backup job '{id}'; jobs: {known}")
    covers, unknown = [], []
    pools = visible_pools(guests)
    for g in sorted((g for g in guests if g.get("type") in ("qemu", "lxc")), key=lambda g: int(g.get("vmid", 0))):
        verdict = job_covers(row, int(g["vmid"]), g.get("node"), g.get("pool"), pools)
        if verdict is None:
            unknown.append(int(g["vmid"]))
        elif verdict:
            covers.append(CoveredGuest(vmid=int(g["vmid"]), name=str(g.get("name", g["vmid"])), node=str(g["node"])))
    return BackupJobDetail(job=_job(row), covers_total=len(covers), covers=covers[:limit], unknown=unknown[:limit])


class Backup(Model):
    volid: Untrusted
    storage: Untrusted
    vmid: int | None
    created: str | None
    age_hours: float | None
    size_bytes: int | None = None
    node: Untrusted | None = Field(None, description="the node holding it, for storage that is local to each node")
    protected: bool = False
    verified: str | None = Field(
        None, description="PBS verification: ok or failed; null if no verify job has checked it (not a failure)"
    )
    notes: Untrusted | None = None


class BackupList(Model):
    page: PageInfo
    items: list[Backup]
    storages_read: list[Untrusted]
    incomplete: list[str] = Field(
        default_factory=list,
        description="backup storages that could not be read, or whose list PVE shortens for this token's privileges",
    )


@guarded(toolset="backups")
async def list_backups(
    t: ToolContext,
    vmid: VmId | None = None,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50,
) -> BackupList:
    """Backup archives on every backup storage, newest first: shared storage read once, node-local storage on
    every online node that has it (each node's directory holds its own archives)."""
    got = await gather(
        t.client,
        [
            ("config", api_path("storage"), {}),
            ("nodes", api_path("nodes"), {}),
            ("permissions", api_path("access", "permissions"), {}),  # is each storage's list whole? (volumeaccess)
        ],
    )
    config: list[dict[str, Any]] = _ok(got["config"])
    nodes: list[dict[str, Any]] = _ok(got["nodes"])
    perms = got["permissions"]
    online = sorted(str(n["node"]) for n in nodes if n.get("status") == "online")
    reads: list[tuple[str, Any, dict[str, Any]]] = []
    incomplete: list[str] = []
    for s in config:
        if "backup" not in str(s.get("content", "")).split(",") or int(s.get("disable", 0) or 0):
            continue
        allowed = str(s["nodes"]).split(",") if s.get("nodes") else online
        where = [n for n in online if n in allowed]
        if not where:
            incomplete.append(f"{s['storage']}: no online node has it")
            continue
        hidden = backups_hidden(perms, str(s["storage"]), vmid)
        if hidden:
            incomplete.append(f"{s['storage']}: partial list: {hidden}")
        params: dict[str, Any] = {"content": "backup"}
        if vmid is not None:
            params["vmid"] = vmid
        shared = is_shared(s)  # a backup storage every node sees alike: read once
        for n in where[:1] if shared else where:
            key = str(s["storage"]) if shared else f"{s['storage']}@{n}"
            reads.append(
                (key, api_path("nodes", node_seg(n), "storage", storage_seg(str(s["storage"])), "content"), params)
            )
    contents = await gather(t.client, reads)
    now = t.now()
    rows: list[Backup] = []
    for key, result in sorted(contents.items()):
        sid, _, node = key.partition("@")
        if isinstance(result, PveError):
            incomplete.append(f"{key}: {result.message}")
            continue
        for r in result:
            created = r.get("ctime")
            rows.append(
                Backup(
                    volid=str(r["volid"]),
                    storage=sid,
                    node=node or None,
                    vmid=int(r["vmid"]) if r.get("vmid") is not None else None,
                    created=iso(created),
                    age_hours=round((now - created) / 3600, 1) if created else None,
                    size_bytes=r.get("size"),
                    protected=bool(r.get("protected")),
                    verified=(r.get("verification") or {}).get("state"),
                    notes=untrusted(r.get("notes")),
                )
            )
    rows.sort(key=lambda b: (b.age_hours if b.age_hours is not None else float("inf"), b.volid))
    page = rows[offset : offset + limit]
    end = offset + len(page)
    return BackupList(
        page=PageInfo(total=len(rows), offset=offset, returned=len(page), next_offset=end if end < len(rows) else None),
        items=page,
        storages_read=sorted({k.split("@", 1)[0] for k, v in contents.items() if not isinstance(v, PveError)}),
        incomplete=incomplete,
    )


class UncoveredGuest(Model):
    vmid: int
    name: Untrusted | None
    type: str | None


class UncoveredGuests(Model):
    count: int
    items: list[UncoveredGuest]


@guarded(toolset="backups")
async def guests_without_backup_job(t: ToolContext) -> UncoveredGuests:
    """GET /cluster/backup-info/not-backed-up: guests no backup job selects (PVE's own computation)."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "backup-info", "not-backed-up"))
    items = [UncoveredGuest(vmid=int(r["vmid"]), name=r.get("name"), type=r.get("type")) for r in rows]
    items.sort(key=lambda g: g.vmid)
    return UncoveredGuests(count=len(items), items=items)
