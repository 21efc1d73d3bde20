"""Storage read tools: storages with per-node usage, one storage's content, replication jobs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from pve_steward.errors import PveError
from pve_steward.models import Model, PageInfo, Untrusted, iso, untrusted
from pve_steward.pve.ids import NodeName, StorageId, VmId
from pve_steward.pve.storagecfg import is_shared
from pve_steward.pve.values import flag, integer
from pve_steward.pve.volumeaccess import content_hidden
from pve_steward.pveio.client import api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import storage as storage_seg
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext

MAX_PAGE = 500


class StorageOnNode(Model):
    node: Untrusted
    active: bool
    total_bytes: int | None = None
    used_bytes: int | None = None
    avail_bytes: int | None = None
    used_fraction: float | None = None


class StorageRow(Model):
    storage: Untrusted
    type: str
    content: list[str]
    shared: bool
    enabled: bool
    restricted_to: list[Untrusted] | None = Field(None, description="the only nodes it is configured on; null = all")
    usage: list[StorageOnNode] = Field(description="one row per node that reports it (one for shared storage)")


class StorageList(Model):
    items: list[StorageRow]
    incomplete: list[str] = Field(default_factory=list, description="reads that failed; usage may be partial")


def _fraction(used: Any, total: Any) -> float | None:
    return round(int(used) / int(total), 4) if used is not None and total else None


@guarded(toolset="storage")
async def list_storage(
    t: ToolContext, content: Literal["images", "rootdir", "backup", "iso", "vztmpl"] | None = None
) -> StorageList:
    """GET /storage plus every online node's storage status, read concurrently."""
    got = await gather(t.client, [("config", api_path("storage"), {}), ("nodes", api_path("nodes"), {})])
    if isinstance(got["config"], PveError):
        raise got["config"]
    config: list[dict[str, Any]] = got["config"]
    nodes: list[dict[str, Any]] = [] if isinstance(got["nodes"], PveError) else got["nodes"]
    incomplete = [f"nodes: {got['nodes'].message}"] if isinstance(got["nodes"], PveError) else []
    online = sorted(str(n["node"]) for n in nodes if n.get("status") == "online")
    incomplete += [f"{n['node']}: offline, usage not read" for n in nodes if n.get("status") != "online"]
    status = await gather(t.client, [(n, api_path("nodes", node_seg(n), "storage"), {}) for n in online])
    per: dict[str, list[StorageOnNode]] = {}
    for n in online:
        rows = status[n]
        if isinstance(rows, PveError):
            incomplete.append(f"storage status on {n}: {rows.message}")
            continue
        for r in rows:
            # pve-storage Storage.pm storage_info lists every storage on every node, enabled 0 (and zeros) where
            # it is disabled or the node is not in its nodes list: no usage there, not an outage
            if not flag(r.get("enabled", 1)):
                continue
            per.setdefault(str(r["storage"]), []).append(
                StorageOnNode(
                    node=n,
                    active=bool(r.get("active")),
                    total_bytes=r.get("total"),
                    used_bytes=r.get("used"),
                    avail_bytes=r.get("avail"),
                    used_fraction=_fraction(r.get("used"), r.get("total")),
                )
            )
    items = []
    for c in sorted(config, key=lambda c: str(c.get("storage"))):
        kinds = [k for k in str(c.get("content", "")).split(",") if k]
        if content and content not in kinds:
            continue
        shared = is_shared(c)
        usage = per.get(str(c["storage"]), [])
        if shared and usage:
            usage = [next((u for u in usage if u.active), usage[0])]
        items.append(
            StorageRow(
                storage=str(c["storage"]),
                type=str(c.get("type")),
                content=kinds,
                shared=shared,
                enabled=not flag(c.get("disable", 0)),
                restricted_to=str(c["nodes"]).split(",") if c.get("nodes") else None,
                usage=usage,
            )
        )
    return StorageList(items=items, incomplete=incomplete)


class Volume(Model):
    volid: Untrusted
    content: str
    format: str | None = None
    size_bytes: int | None = None
    vmid: int | None = None
    created: str | None = None
    protected: bool | None = None
    verified: str | None = Field(None, description="PBS verification state (ok, failed) when known")
    notes: Untrusted | None = None


class StorageContent(Model):
    storage: Untrusted
    node: Untrusted
    page: PageInfo
    items: list[Volume]
    partial: Untrusted | None = Field(
        None, description="why PVE may have left volumes out of this list for this token's privileges"
    )


@guarded(toolset="storage")
async def storage_content(
    t: ToolContext,
    node: NodeName,
    storage: StorageId,
    content: Literal["images", "rootdir", "backup", "iso", "vztmpl"] | None = None,
    vmid: VmId | None = None,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 100,
) -> StorageContent:
    """GET /nodes/{node}/storage/{storage}/content, filtered by PVE, newest first, paginated."""
    params: dict[str, Any] = {}
    if content:
        params["content"] = content
    if vmid is not None:
        params["vmid"] = vmid
    got = await gather(
        t.client,
        [
            ("rows", api_path("nodes", node_seg(node), "storage", storage_seg(storage), "content"), params),
            ("permissions", api_path("access", "permissions"), {}),  # is the list whole? (pve/volumeaccess.py)
        ],
    )
    if isinstance(got["rows"], PveError):
        raise got["rows"]
    rows: list[dict[str, Any]] = got["rows"]
    partial = content_hidden(got["permissions"], storage, content, vmid)
    rows = sorted(rows, key=lambda r: (-(r.get("ctime") or 0), str(r.get("volid"))))
    page = rows[offset : offset + limit]
    items = [
        Volume(
            volid=str(r["volid"]),
            content=str(r.get("content")),
            format=r.get("format"),
            size_bytes=r.get("size"),
            vmid=int(r["vmid"]) if r.get("vmid") is not None else None,
            created=iso(r.get("ctime")),
            protected=bool(r["protected"]) if "protected" in r else None,
            verified=(r.get("verification") or {}).get("state"),
            notes=untrusted(r.get("notes")),
        )
        for r in page
    ]
    end = offset + len(items)
    return StorageContent(
        storage=storage,
        node=node,
        page=PageInfo(
            total=len(rows), offset=offset, returned=len(items), next_offset=end if end < len(rows) else None
        ),
        items=items,
        partial=untrusted(partial),
    )


class ReplicationJob(Model):
    id: str
    guest: int
    source: Untrusted | None
    target: Untrusted
    schedule: str
    enabled: bool
    last_sync: str | None = None
    next_sync: str | None = None
    duration_s: float | None = None
    fail_count: int | None = None
    error: Untrusted | None = None
    comment: Untrusted | None = None


class ReplicationJobs(Model):
    items: list[ReplicationJob]
    failing: list[str]
    incomplete: list[str] = Field(default_factory=list)


async def _guest_nodes(t: ToolContext, incomplete: list[str]) -> dict[int, str]:
    """Each guest's current node: its job state lives there (ReplicationState.pm job_status runs on the node
    the guest is on; a job's ``source`` can still name the old node after an HA recovery)."""
    try:
        rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "resources"), type="vm")
    except PveError as exc:
        incomplete.append(f"guest locations (/cluster/resources): {exc.message}; used each job's source")
        return {}
    out: dict[int, str] = {}
    for r in rows:
        vmid = integer(r.get("vmid"))
        if vmid is not None and r.get("node"):
            out[vmid] = str(r["node"])
    return out


@guarded(toolset="storage")
async def list_replication_jobs(t: ToolContext, vmid: VmId | None = None) -> ReplicationJobs:
    """GET /cluster/replication joined with the replication state of each guest's current node."""
    jobs: list[dict[str, Any]] = await t.client.get(api_path("cluster", "replication"))
    if vmid is not None:
        jobs = [j for j in jobs if integer(j.get("guest")) == vmid]
    incomplete: list[str] = []
    where = await _guest_nodes(t, incomplete) if jobs else {}
    nodes = {where.get(integer(j.get("guest")) or 0) or j.get("source") for j in jobs}
    sources = sorted(str(n) for n in nodes if n)
    states = await gather(t.client, [(n, api_path("nodes", node_seg(n), "replication"), {}) for n in sources])
    by_id: dict[str, dict[str, Any]] = {}
    for n in sources:
        rows = states[n]
        if isinstance(rows, PveError):
            incomplete.append(f"replication state on {n}: {rows.message}")
            continue
        by_id.update({str(r["id"]): r for r in rows})
    items = []
    for j in sorted(jobs, key=lambda j: str(j["id"])):
        st = by_id.get(str(j["id"]), {})
        items.append(
            ReplicationJob(
                id=str(j["id"]),
                guest=int(j["guest"]),
                source=j.get("source"),
                target=str(j.get("target")),
                schedule=str(j.get("schedule") or "*/15"),  # unset: ReplicationConfig.pm's default
                enabled=not int(j.get("disable", 0)),
                last_sync=iso(st.get("last_sync")) if st.get("last_sync") else None,
                next_sync=iso(st.get("next_sync")) if st.get("next_sync") else None,
                duration_s=st.get("duration"),
                fail_count=st.get("fail_count"),
                error=st.get("error"),
                comment=untrusted(j.get("comment")),
            )
        )
    return ReplicationJobs(
        items=items, failing=[i.id for i in items if i.error or (i.fail_count or 0) > 0], incomplete=incomplete
    )
