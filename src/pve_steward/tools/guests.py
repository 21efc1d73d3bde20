"""Guest read tools: a filtered, paginated list (with config fields on request), one or several guests in
detail (config parsed, secrets redacted)."""

from __future__ import annotations

import fnmatch
from typing import Annotated, Any, Literal

from pydantic import Field

from pve_steward.errors import PveError, PveNotFound
from pve_steward.models import Model, PageInfo, Untrusted, UntrustedValues, iso, untrusted
from pve_steward.pve.guestconfig import Volume, parse_guest_config, redact
from pve_steward.pve.ids import NodeName, VmId
from pve_steward.pve.visibility import GUESTS
from pve_steward.pveio.client import ApiPath, api_path, gather
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext
from pve_steward.tools.fetch import LOCATOR_AGE, GuestRef, guest_index, guest_path, guest_ref, located
from pve_steward.tools.guestfields import FIELD_PAGE, MAX_FIELDS, ConfigKey, config_fields, within_budget
from pve_steward.tools.privileges import unsettled, visibility_from

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
    config: UntrustedValues | None = Field(
        None,
        description="the config fields asked for (fields=...), secrets redacted; absent when none were asked or "
        "the guest's config could not be read (incomplete says which)",
        exclude_if=lambda v: v is None,  # a page of 500 rows without fields carried 500 '"config":null'
    )


class GuestList(Model):
    page: PageInfo
    items: list[GuestRow]
    fields: list[str] | None = Field(None, description="the config fields each row carries, as asked")
    incomplete: list[str] = Field(
        default_factory=list,
        description="guests PVE's list hides from this token (the total counts only those it sees), and config "
        "reads that failed (their rows carry no config)",
    )


async def _visible_guest_rows(t: ToolContext) -> tuple[list[dict[str, Any]], list[str]]:
    """The guests' rows, and whether PVE's list may have hidden some from this token: it lists a guest only
    with VM.Audit on /vms/<id> and says nothing of the others (pve/visibility.py GUESTS), so a short list
    proves no absence. Read beside it: the token's own privilege map and the ACL tree (design record 261206-55)."""
    got = await gather(
        t.client,
        [
            ("rows", api_path("cluster", "resources"), {"type": "vm"}),
            ("permissions", api_path("access", "permissions"), {}),
            ("acl", api_path("access", "acl"), {}),
        ],
    )
    rows = got["rows"]
    if isinstance(rows, PveError):
        raise rows
    vis, _ = visibility_from(got["permissions"], got["acl"])
    whole = vis.whole(GUESTS)
    if whole is False:
        hidden = [f"guests: partial list: {GUESTS.reason()}"]
    elif whole is None:
        why = unsettled(vis)
        hidden = [f"guests: may be a partial list: PVE lists each only with {GUESTS.needs()}; cannot tell: {why}"]
    else:
        hidden = []
    return [r for r in rows if r.get("type") in ("qemu", "lxc")], hidden


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
    fields: Annotated[list[ConfigKey], Field(min_length=1, max_length=MAX_FIELDS)] | None = None,
) -> GuestList:
    """Compact guest rows, filtered server-side and paginated so large clusters do not flood the model.

    ``fields``: these keys of each listed guest's config too (one read per guest of the page, concurrent and
    bounded, secrets redacted), so a question about many guests takes one call, not one get_guest each; the
    page is then at most FIELD_PAGE rows, shorter where the values would pass the answer's size budget."""
    rows, hidden = await _visible_guest_rows(t)
    chosen: list[dict[str, Any]] = []
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
        chosen.append(r)
    order = sorted(range(len(items)), key=lambda i: items[i].vmid)
    window = order[offset : offset + (min(limit, FIELD_PAGE) if fields else limit)]
    page = [items[i] for i in window]
    incomplete: list[str] = []
    if fields:
        values, failed = await config_fields(t.client, [chosen[i] for i in window], fields)
        kept = within_budget(values)
        page = [row.model_copy(update={"config": v}) for row, v in zip(page[:kept], values[:kept], strict=True)]
        incomplete = [f"config of {r.vmid}: {failed[r.vmid]}" for r in page if r.vmid in failed]
    incomplete = hidden + incomplete
    end = offset + len(page)
    nxt = end if end < len(items) else None
    return GuestList(
        page=PageInfo(total=len(items), offset=offset, returned=len(page), next_offset=nxt),
        items=page,
        fields=fields,
        incomplete=incomplete,
    )


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


def _detail_reads(ref: GuestRef) -> list[tuple[str, ApiPath, dict[str, Any]]]:
    """What a guest's detail reads, each once: its config, its live status, its snapshots."""
    key = str(ref.vmid)
    return [
        (f"config:{key}", guest_path(ref, "config"), {}),
        (f"status:{key}", guest_path(ref, "status", "current"), {}),
        (f"snapshots:{key}", guest_path(ref, "snapshot"), {}),
    ]


def _detail(ref: GuestRef, got: dict[str, Any], include_config: bool) -> GuestDetail:
    """One guest from its reads (the config's read succeeded); the failed others are said in ``incomplete``."""
    key = str(ref.vmid)
    raw: dict[str, Any] = got[f"config:{key}"]
    cfg = parse_guest_config(raw, ref.vmid, ref.type)
    status: dict[str, Any] = {} if isinstance(got[f"status:{key}"], PveError) else got[f"status:{key}"]
    rows = got[f"snapshots:{key}"]
    snaps = None if isinstance(rows, PveError) else sum(1 for s in rows if s.get("name") != "current")
    ha = status.get("ha") or {}
    failed = {k.split(":", 1)[0]: v for k, v in got.items() if k.endswith(f":{key}") and isinstance(v, PveError)}
    return GuestDetail(
        vmid=ref.vmid,
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
        incomplete=[f"{k}: {v.message}" for k, v in failed.items()],
    )


@guarded(toolset="guests")
async def get_guest(t: ToolContext, vmid: VmId, include_config: bool = False) -> GuestDetail:
    """One guest: where it runs, its parsed config and live status. The node is resolved by the server."""

    async def read(ref: GuestRef) -> dict[str, Any]:
        got = await gather(t.client, _detail_reads(ref))
        if isinstance(got[f"config:{vmid}"], PveError):
            raise got[f"config:{vmid}"]
        return got

    ref, got = await located(t.client, vmid, read)
    return _detail(ref, got, include_config)


MAX_GUESTS = 20  # vmids per get_guests call


class GuestDetails(Model):
    items: list[GuestDetail] = Field(description="the guests found, in the order asked")
    not_found: list[int] = Field(
        description="vmids no guest visible to this token has (it does not exist, or the token lacks VM.Audit on "
        "/vms/<vmid>: PVE lists a guest only with it)"
    )
    unread: dict[str, str] = Field(
        default_factory=dict, description="vmid -> why its config could not be read (the guest is not in items)"
    )
    not_listed: list[int] = Field(
        default_factory=list,
        description="guests read but left out to keep the answer within its size limit: ask for them again",
    )


@guarded(toolset="guests")
async def get_guests(
    t: ToolContext,
    vmids: Annotated[list[VmId], Field(min_length=1, max_length=MAX_GUESTS)],
    include_config: bool = False,
) -> GuestDetails:
    """Several guests in detail in one call, as get_guest gives one: one index of the guests for all of them,
    then each guest's reads once, all concurrent through the client's bounded pool (design record 261206-56)."""
    wanted = list(dict.fromkeys(vmids))
    index = await guest_index(t.client, max_age=LOCATOR_AGE)
    refs = {v: guest_ref(index[v]) for v in wanted if v in index}
    got = await gather(t.client, [r for ref in refs.values() for r in _detail_reads(ref)])
    moved = [v for v, ref in refs.items() if isinstance(got[f"config:{v}"], PveNotFound)]
    if moved:  # gone from the node the index names (moved since, or deleted): look again in a fresh index
        fresh = await guest_index(t.client)
        for v in moved:
            if v in fresh and (fresh[v]["node"], fresh[v]["type"]) != (refs[v].node, refs[v].type):
                refs[v] = guest_ref(fresh[v])
                got.update(await gather(t.client, _detail_reads(refs[v])))
    details: list[GuestDetail] = []
    unread: dict[str, str] = {}
    for v, ref in refs.items():
        config = got[f"config:{v}"]
        if isinstance(config, PveError):
            unread[str(v)] = config.message
        else:
            details.append(_detail(ref, got, include_config))
    kept = _within_limit(details)
    return GuestDetails(
        items=details[:kept],
        not_found=[v for v in wanted if v not in refs],
        unread=unread,
        not_listed=[d.vmid for d in details[kept:]],
    )


DETAILS_BUDGET = 90_000  # bytes of one get_guests answer (tests/integration/test_answer_size.py: 100 KB)


def _within_limit(details: list[GuestDetail]) -> int:
    """How many of the details (at least one) fit the answer's size limit."""
    used = 0
    for i, d in enumerate(details):
        used += len(d.model_dump_json())
        if used > DETAILS_BUDGET and i:
            return i
    return len(details)


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
