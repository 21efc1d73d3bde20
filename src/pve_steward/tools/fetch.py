"""Reads shared by several tools: resolving a guest to its node, and common cluster snapshots."""

from __future__ import annotations

from typing import Any, Literal

from pve_steward.client import ApiPath, ProxmoxClient, Segment, api_path
from pve_steward.client import node as node_seg
from pve_steward.client import vmid as vmid_seg
from pve_steward.models import Model
from pve_steward.pve import ids
from pve_steward.security.guard import Refused


class GuestRef(Model):
    """A guest as resolved by the server from /cluster/resources (never from what a model claims)."""

    vmid: int
    type: Literal["qemu", "lxc"]
    node: str
    name: str
    status: str
    template: bool = False
    lock: str | None = None
    hastate: str | None = None


async def vm_resources(client: ProxmoxClient) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = await client.get(api_path("cluster", "resources"), type="vm")
    return [r for r in rows if r.get("type") in ("qemu", "lxc")]


def guest_ref(row: dict[str, Any]) -> GuestRef:
    return GuestRef(
        vmid=int(row["vmid"]),
        type=row["type"],
        node=str(row["node"]),
        name=str(row.get("name") or row["vmid"]),
        status=str(row.get("status", "unknown")),
        template=bool(row.get("template")),
        lock=row.get("lock") or None,
        hastate=row.get("hastate") or None,
    )


def _guests_by_vmid(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """vmid -> its /cluster/resources row (the first, as PVE lists them), for guests only."""
    found: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row.get("type") in ("qemu", "lxc"):
            found.setdefault(int(row["vmid"]), row)
    return found


async def resolve_guest(client: ProxmoxClient, vmid: int) -> GuestRef:
    """Find where a guest lives now; refuses clearly when it is not visible.

    Through the read cache, the index of the cached answer is shared (ReadCache.indexed); a write's
    fresh client reads PVE's current answer.
    """
    ids.check_vmid(vmid)
    path = api_path("cluster", "resources")
    indexed = getattr(client, "indexed", None)
    if indexed is not None:
        guests: dict[int, dict[str, Any]] = await indexed(path, _guests_by_vmid, type="vm")
    else:
        guests = _guests_by_vmid(await client.get(path, type="vm"))
    row = guests.get(vmid)
    if row is not None:
        return guest_ref(row)
    raise Refused(
        f"no guest {vmid} is visible in this cluster (it does not exist, or the API token lacks "
        f"VM.Audit on /vms/{vmid})"
    )


def guest_path(ref: GuestRef, *rest: str | Segment) -> ApiPath:
    return api_path("nodes", node_seg(ref.node), ref.type, vmid_seg(ref.vmid), *rest)
