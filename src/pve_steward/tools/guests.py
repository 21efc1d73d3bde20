"""Guest read tools: a filtered, paginated list, and one guest in detail (config parsed, secrets redacted)."""

from __future__ import annotations

import fnmatch
from typing import Annotated, Any, Literal

from pydantic import Field

from pve_steward.errors import PveError
from pve_steward.models import Model, PageInfo, Untrusted, UntrustedValues, iso, untrusted
from pve_steward.pve.guestconfig import Volume, parse_guest_config, redact
from pve_steward.pve.ids import NodeName, VmId
from pve_steward.pveio.client import gather
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext
from pve_steward.tools.fetch import GuestRef, guest_path, located, vm_resources

MAX_PAGE = 500


class GuestRow(Model):
    vmid: int
    name: Untrusted
    type: Literal["qemu", "lxc"]
    node: Untrusted
    status: str
    cpu_fraction: float | None = None
    mem_bytes: int | None = None
    maxmem_bytes: int | None = None
    uptime_s: int | None = None
    tags: list[Untrusted] = Field(default_factory=list)
    lock: str | None = None
    ha_state: str | None = None
    template: bool = False


class GuestList(Model):
    page: PageInfo
    items: list[GuestRow]


@guarded(toolset="guests")
async def list_guests(
    t: ToolContext,
    node: NodeName | None = None,
    type: Literal["qemu", "lxc"] | None = None,
    status: Literal["running", "stopped", "paused", "unknown"] | None = None,
    tag: Annotated[str, Field(max_length=64)] | None = None,
    name: Annotated[str, Field(max_length=128)] | None = None,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50,
) -> GuestList:
    """Compact guest rows, filtered server-side and paginated so large clusters do not flood the model."""
    rows = await vm_resources(t.client)
    items: list[GuestRow] = []
    for r in rows:
        tags = [x for x in str(r.get("tags", "")).replace(",", ";").split(";") if x]
        if node and r.get("node") != node:
            continue
        if type and r.get("type") != type:
            continue
        if status and r.get("status") != status:
            continue
        if tag and tag not in tags:
            continue
        guest_name = str(r.get("name") or "")
        if name and not fnmatch.fnmatchcase(
            guest_name.lower(), f"*{name.lower()}*" if "*" not in name else name.lower()
        ):
            continue
        items.append(
            GuestRow(
                vmid=int(r["vmid"]),
                name=guest_name,
                type=r["type"],
                node=r["node"],
                status=str(r.get("status", "unknown")),
                cpu_fraction=r.get("cpu"),
                mem_bytes=r.get("mem"),
                maxmem_bytes=r.get("maxmem"),
                uptime_s=r.get("uptime"),
                tags=tags,
                lock=r.get("lock") or None,
                ha_state=r.get("hastate") or None,
                template=bool(r.get("template")),
            )
        )
    items.sort(key=lambda g: g.vmid)
    page = items[offset : offset + limit]
    nxt = offset + limit if offset + limit < len(items) else None
    return GuestList(page=PageInfo(total=len(items), offset=offset, returned=len(page), next_offset=nxt), items=page)


class GuestDetail(Model):
    vmid: int
    name: Untrusted
    type: Literal["qemu", "lxc"]
    node: Untrusted
    status: str
    qmp_status: str | None = None
    uptime_s: int | None = None
    cpu_fraction: float | None = None
    mem_bytes: int | None = None
    memory_mib: int
    vcpus: int
    cpu_type: Untrusted | None = Field(None, description="the config's cpu type; a custom model's name is cluster text")
    onboot: bool
    agent_enabled: bool
    template: bool
    lock: str | None = None
    tags: list[Untrusted]
    ha_managed: bool
    ha_state: str | None = None
    volumes: list[Volume]
    local_devices: list[str] = Field(description="config keys of host devices (hostpci0, usb1, ...)")
    mapped_devices: dict[str, Untrusted] = Field(description="config key -> cluster mapping name")
    snapshots: int | None = None
    description: Untrusted | None = None
    config: UntrustedValues | None = Field(None, description="raw config with secrets redacted (include_config=true)")
    digest: str | None = None
    incomplete: list[str] = Field(default_factory=list)


@guarded(toolset="guests")
async def get_guest(t: ToolContext, vmid: VmId, include_config: bool = False) -> GuestDetail:
    """One guest: where it runs, its parsed config and live status. The node is resolved by the server."""

    async def read(ref: GuestRef) -> dict[str, Any]:
        got = await gather(
            t.client,
            [
                ("config", guest_path(ref, "config"), {}),
                ("status", guest_path(ref, "status", "current"), {}),
                ("snapshots", guest_path(ref, "snapshot"), {}),
            ],
        )
        if isinstance(got["config"], PveError):
            raise got["config"]
        return got

    ref, got = await located(t.client, vmid, read)
    raw: dict[str, Any] = got["config"]
    cfg = parse_guest_config(raw, vmid, ref.type)
    status: dict[str, Any] = {} if isinstance(got["status"], PveError) else got["status"]
    snaps = (
        None
        if isinstance(got["snapshots"], PveError)
        else sum(1 for s in got["snapshots"] if s.get("name") != "current")
    )
    ha = status.get("ha") or {}
    return GuestDetail(
        vmid=vmid,
        name=cfg.name,
        type=ref.type,
        node=ref.node,
        status=str(status.get("status", ref.status)),
        qmp_status=status.get("qmpstatus"),
        uptime_s=status.get("uptime"),
        cpu_fraction=status.get("cpu"),
        mem_bytes=status.get("mem"),
        memory_mib=cfg.memory_mib,
        vcpus=cfg.vcpus,
        cpu_type=cfg.cpu_type,
        onboot=cfg.onboot,
        agent_enabled=cfg.agent_enabled,
        template=cfg.template,
        lock=cfg.lock,
        tags=list(cfg.tags),
        ha_managed=bool(ha.get("managed")),
        ha_state=ha.get("state") or ref.hastate,
        volumes=cfg.volumes,
        local_devices=list(cfg.local_devices),
        mapped_devices=cfg.mapped_devices,
        snapshots=snaps,
        description=untrusted(cfg.description),
        config=redact(raw) if include_config else None,
        digest=cfg.digest,
        incomplete=[f"{k}: {v.message}" for k, v in got.items() if isinstance(v, PveError)],
    )


class Snapshot(Model):
    name: Untrusted
    parent: Untrusted | None = None
    created: str | None = None
    age_days: float | None = None
    with_ram: bool = Field(description="includes the running memory state (vmstate)")
    description: Untrusted | None = None


class SnapshotList(Model):
    vmid: int
    node: Untrusted
    current_parent: Untrusted | None = Field(None, description="the snapshot the running state derives from")
    items: list[Snapshot] = Field(description="oldest first")


@guarded(toolset="guests")
async def list_snapshots(t: ToolContext, vmid: VmId) -> SnapshotList:
    """A guest's snapshots with age and parent chain; the node is resolved by the server."""

    async def read(ref: GuestRef) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = await t.client.get(guest_path(ref, "snapshot"))
        return rows

    ref, rows = await located(t.client, vmid, read)
    now = t.now()
    current = next((r for r in rows if r.get("name") == "current"), {})
    items = [
        Snapshot(
            name=str(r["name"]),
            parent=r.get("parent"),
            created=iso(r.get("snaptime")),
            age_days=round((now - r["snaptime"]) / 86400, 1) if r.get("snaptime") else None,
            with_ram=bool(r.get("vmstate")),
            description=untrusted(r.get("description")),
        )
        for r in rows
        if r.get("name") != "current"
    ]
    items.sort(key=lambda s: (s.created or "", s.name))
    return SnapshotList(vmid=vmid, node=ref.node, current_parent=current.get("parent"), items=items)
