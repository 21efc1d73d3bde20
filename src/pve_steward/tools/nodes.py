"""Node read tools: the node list, and one node's status, disks, ZFS pools, updates, repositories,
certificates and subscription: typed views of what an operator opens node by node in the GUI."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pve_steward.models import Model, Untrusted, iso
from pve_steward.pve.ids import NodeName
from pve_steward.pve.values import integer
from pve_steward.pveio.client import api_path
from pve_steward.pveio.client import node as node_seg
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext

DAY = 86400


class NodeRow(Model):
    name: Untrusted
    online: bool
    subscription_level: str | None = Field(None, description="c, b, s, p for community..premium; null when none")
    cpu_fraction: float | None = None
    cpus: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    rootfs_used_bytes: int | None = None
    rootfs_total_bytes: int | None = None
    uptime_s: int | None = None
    ssl_fingerprint: str | None = None


class NodeList(Model):
    items: list[NodeRow]
    online: int
    offline: list[Untrusted]


@guarded(toolset="cluster")
async def list_nodes(t: ToolContext) -> NodeList:
    """GET /nodes: every cluster node with its load (figures only for online nodes we may audit)."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("nodes"))
    items = [
        NodeRow(
            name=r["node"],
            online=r.get("status") == "online",
            subscription_level=r.get("level") or None,
            cpu_fraction=r.get("cpu"),
            cpus=integer(r.get("maxcpu")),
            mem_used_bytes=integer(r.get("mem")),
            mem_total_bytes=integer(r.get("maxmem")),
            rootfs_used_bytes=integer(r.get("disk")),
            rootfs_total_bytes=integer(r.get("maxdisk")),
            uptime_s=integer(r.get("uptime")),
            ssl_fingerprint=r.get("ssl_fingerprint") or None,
        )
        for r in sorted(rows, key=lambda r: str(r.get("node")))
    ]
    return NodeList(items=items, online=sum(n.online for n in items), offline=[n.name for n in items if not n.online])


class NodeStatus(Model):
    node: Untrusted
    pve_version: str | None = None
    kernel: str | None = None
    cpu_model: str | None = None
    cpus: int | None = None
    cpu_fraction: float | None = None
    loadavg: list[float] = Field(default_factory=list)
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    rootfs_used_bytes: int | None = None
    rootfs_total_bytes: int | None = None
    uptime_s: int | None = None
    ksm_shared_bytes: int | None = None


@guarded(toolset="cluster")
async def node_status(t: ToolContext, node: NodeName) -> NodeStatus:
    """Detailed status of one node (memory, swap, load, kernel, CPU model)."""
    st: dict[str, Any] = await t.client.get(api_path("nodes", node_seg(node), "status"))
    mem, swap, root = st.get("memory") or {}, st.get("swap") or {}, st.get("rootfs") or {}
    cpuinfo = st.get("cpuinfo") or {}
    kernel = (st.get("current-kernel") or {}).get("release")
    return NodeStatus(
        node=node,
        pve_version=st.get("pveversion"),
        kernel=kernel,
        cpu_model=cpuinfo.get("model"),
        cpus=cpuinfo.get("cpus"),
        cpu_fraction=st.get("cpu"),
        loadavg=[float(x) for x in st.get("loadavg") or []],
        mem_used_bytes=mem.get("used"),
        mem_total_bytes=mem.get("total"),
        swap_used_bytes=swap.get("used"),
        swap_total_bytes=swap.get("total"),
        rootfs_used_bytes=root.get("used"),
        rootfs_total_bytes=root.get("total"),
        uptime_s=st.get("uptime"),
        ksm_shared_bytes=(st.get("ksm") or {}).get("shared"),
    )


class Disk(Model):
    devpath: str
    type: str | None = Field(None, description="ssd, hdd, nvme, usb or unknown")
    size_bytes: int | None = None
    model: Untrusted | None = None
    serial: Untrusted | None = None
    health: str | None = Field(None, description="SMART overall health (PASSED, OK, FAILED, UNKNOWN)")
    wearout_left_percent: int | None = Field(None, description="SSD life left (100 = new); null for HDDs")
    used_by: Untrusted | None = Field(None, description="what uses the disk (ZFS, LVM, partitions, mounted...)")


class NodeDisks(Model):
    node: Untrusted
    items: list[Disk]
    failing: list[str] = Field(description="devices whose SMART health is not PASSED/OK")
    worn: list[str] = Field(description="SSDs with 10 % or less of their life left")


@guarded(toolset="cluster")
async def node_disks(t: ToolContext, node: NodeName) -> NodeDisks:
    """GET /nodes/{node}/disks/list, with SMART health and wear read into plain fields."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("nodes", node_seg(node), "disks", "list"))
    items = [
        Disk(
            devpath=str(r.get("devpath")),
            type=r.get("type"),
            size_bytes=integer(r.get("size")),
            model=r.get("model"),
            serial=r.get("serial"),
            health=r.get("health"),
            wearout_left_percent=integer(r.get("wearout")),
            used_by=r.get("used") or None,
        )
        for r in rows
    ]
    return NodeDisks(
        node=node,
        items=items,
        failing=[d.devpath for d in items if d.health and d.health.upper() not in ("PASSED", "OK")],
        worn=[d.devpath for d in items if d.wearout_left_percent is not None and d.wearout_left_percent <= 10],
    )


class ZfsPool(Model):
    name: Untrusted
    health: str
    size_bytes: int | None = None
    alloc_bytes: int | None = None
    free_bytes: int | None = None
    used_fraction: float | None = None
    fragmentation_percent: int | None = None


class NodeZfs(Model):
    node: Untrusted
    pools: list[ZfsPool]
    degraded: list[Untrusted] = Field(description="pools whose health is not ONLINE")


@guarded(toolset="cluster")
async def node_zfs_pools(t: ToolContext, node: NodeName) -> NodeZfs:
    """GET /nodes/{node}/disks/zfs: pool health and fill level."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("nodes", node_seg(node), "disks", "zfs"))
    pools = []
    for r in rows:
        size, alloc = integer(r.get("size")), integer(r.get("alloc"))
        pools.append(
            ZfsPool(
                name=str(r.get("name")),
                health=str(r.get("health", "UNKNOWN")),
                size_bytes=size,
                alloc_bytes=alloc,
                free_bytes=integer(r.get("free")),
                used_fraction=round(alloc / size, 4) if size and alloc is not None else None,
                fragmentation_percent=integer(r.get("frag")),
            )
        )
    return NodeZfs(node=node, pools=pools, degraded=[p.name for p in pools if p.health != "ONLINE"])


class PackageUpdate(Model):
    package: str
    current: str | None
    new: str
    origin: str | None = None
    priority: str | None = None


class NodeUpdates(Model):
    node: Untrusted
    count: int
    proxmox_packages: int = Field(description="updates from Proxmox's repositories")
    kernel_update: bool = Field(description="a new kernel is pending (a reboot will be needed)")
    items: list[PackageUpdate]


@guarded(toolset="cluster")
async def node_updates(t: ToolContext, node: NodeName) -> NodeUpdates:
    """GET /nodes/{node}/apt/update (the cached list; needs Sys.Modify on the node)."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("nodes", node_seg(node), "apt", "update"))
    items = sorted(
        (
            PackageUpdate(
                package=str(r.get("Package")),
                current=r.get("OldVersion") or None,
                new=str(r.get("Version")),
                origin=r.get("Origin"),
                priority=r.get("Priority"),
            )
            for r in rows
        ),
        key=lambda u: u.package,
    )
    return NodeUpdates(
        node=node,
        count=len(items),
        proxmox_packages=sum(1 for u in items if (u.origin or "").lower().startswith("proxmox")),
        kernel_update=any(u.package.startswith(("proxmox-kernel", "pve-kernel")) for u in items),
        items=items,
    )


class StandardRepo(Model):
    handle: str = Field(description="enterprise, no-subscription, test, ceph-...")
    name: str
    configured: bool
    enabled: bool | None = None


class NodeRepositories(Model):
    node: Untrusted
    standard: list[StandardRepo]
    enterprise_without_subscription: bool
    test_enabled: bool
    files: list[str]
    errors: list[Untrusted] = Field(default_factory=list, description="files APT could not parse")
    warnings: list[Untrusted] = Field(default_factory=list)


@guarded(toolset="cluster")
async def node_repositories(t: ToolContext, node: NodeName) -> NodeRepositories:
    """GET /nodes/{node}/apt/repositories, read against the node's subscription status."""
    base = api_path("nodes", node_seg(node))
    repos: dict[str, Any] = await t.client.get(base.join("apt", "repositories"))
    sub: dict[str, Any] = await t.client.get(base.join("subscription"))
    standard = [
        StandardRepo(
            handle=str(r.get("handle")),
            name=str(r.get("name")),
            configured="status" in r,
            enabled=None if "status" not in r else bool(r["status"]),
        )
        for r in repos.get("standard-repos") or []
    ]
    active = sub.get("status") == "active"
    enabled = {r.handle for r in standard if r.enabled}
    return NodeRepositories(
        node=node,
        standard=standard,
        enterprise_without_subscription="enterprise" in enabled and not active,
        test_enabled="test" in enabled,
        files=[str(f.get("path")) for f in repos.get("files") or []],
        errors=[f"{e.get('path')}: {e.get('error')}" for e in repos.get("errors") or []],
        warnings=[str(i.get("message")) for i in repos.get("infos") or [] if i.get("kind") == "warning"],
    )


class Certificate(Model):
    filename: str
    subject: Untrusted | None = None
    issuer: Untrusted | None = None
    not_after: str | None = None
    days_left: int | None = Field(None, description="negative when expired")
    san: list[Untrusted] = Field(default_factory=list)
    fingerprint: str | None = None
    key: str | None = Field(None, description="public key type and size")


class NodeCertificates(Model):
    node: Untrusted
    items: list[Certificate]
    expiring_within_30_days: list[str]


@guarded(toolset="cluster")
async def node_certificates(t: ToolContext, node: NodeName) -> NodeCertificates:
    """GET /nodes/{node}/certificates/info with days left (PEM bodies are left out)."""
    rows: list[dict[str, Any]] = await t.client.get(api_path("nodes", node_seg(node), "certificates", "info"))
    now = t.now()
    items = []
    for r in rows:
        after = integer(r.get("notafter"))
        key = " ".join(str(x) for x in (r.get("public-key-type"), r.get("public-key-bits")) if x)
        items.append(
            Certificate(
                filename=str(r.get("filename")),
                subject=r.get("subject"),
                issuer=r.get("issuer"),
                not_after=iso(after),
                days_left=None if after is None else int((after - now) // DAY),
                san=[str(x) for x in r.get("san") or []],
                fingerprint=r.get("fingerprint"),
                key=key or None,
            )
        )
    return NodeCertificates(
        node=node,
        items=items,
        expiring_within_30_days=[c.filename for c in items if c.days_left is not None and c.days_left <= 30],
    )


class NodeSubscription(Model):
    node: Untrusted
    status: str = Field(description="active, notfound, expired, invalid, new, suspended")
    level: str | None = None
    product: str | None = None
    next_due: str | None = None
    key_suffix: str | None = Field(None, description="last 4 characters of the key (never the full key)")
    message: Untrusted | None = None


@guarded(toolset="cluster")
async def node_subscription(t: ToolContext, node: NodeName) -> NodeSubscription:
    """GET /nodes/{node}/subscription; the subscription key is masked."""
    sub: dict[str, Any] = await t.client.get(api_path("nodes", node_seg(node), "subscription"))
    key = sub.get("key")
    return NodeSubscription(
        node=node,
        status=str(sub.get("status", "unknown")),
        level=sub.get("level") or None,
        product=sub.get("productname"),
        next_due=sub.get("nextduedate"),
        key_suffix=str(key)[-4:] if key else None,
        message=sub.get("message"),
    )
