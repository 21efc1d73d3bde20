"""Reads shared by several tools: resolving a guest to its node, and common cluster snapshots."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from pve_steward.errors import PveNotFound
from pve_steward.models import Model
from pve_steward.pve import ids
from pve_steward.pveio.client import ApiPath, ProxmoxClient, Segment, api_path
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import vmid as vmid_seg
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


async def guest_index(client: ProxmoxClient, *, max_age: float | None = None) -> dict[int, dict[str, Any]]:
    """vmid -> its /cluster/resources row: one read for any number of guests, the cached answer's index shared
    where the client keeps one (ReadCache.indexed)."""
    path = api_path("cluster", "resources")
    indexed = getattr(client, "indexed", None)
    if indexed is not None:
        found: dict[int, dict[str, Any]] = await indexed(path, _guests_by_vmid, max_age=max_age, type="vm")
        return found
    return _guests_by_vmid(await client.get(path, type="vm"))


async def resolve_guest(client: ProxmoxClient, vmid: int, *, max_age: float | None = None) -> GuestRef:
    """Find where a guest lives now; refuses clearly when it is not visible.

    Through the read cache, the index of the cached answer is shared (ReadCache.indexed); a write's
    fresh client reads PVE's current answer. ``max_age`` is for :func:`located`, which checks the node.
    """
    ids.check_vmid(vmid)
    row = (await guest_index(client, max_age=max_age)).get(vmid)
    if row is not None:
        return guest_ref(row)
    if max_age is not None and getattr(client, "indexed", None) is not None:
        return await resolve_guest(client, vmid)  # a guest newer than the kept index: look in a fresh one
    raise Refused(not_visible_guest(vmid))


def not_visible_guest(vmid: int) -> str:
    """Why a vmid has no guest to this token: PVE lists a guest only with VM.Audit on it (Cluster.pm resources)."""
    return (
        f"no guest {vmid} is visible in this cluster (it does not exist, or the API token lacks "
        f"VM.Audit on /vms/{vmid})"
    )


# How old the index of the guests may be when a read checks the node it names (located): a cheap call
# then neither waits for nor shares the interpreter with the decoding of /cluster/resources (641 KB at
# 2,000 guests, 5 ms with the lock held) every 1.5 s (issue 17, design record 261204-38).
LOCATOR_AGE = 60.0

T = TypeVar("T")


async def located(client: ProxmoxClient, vmid: int, read: Callable[[GuestRef], Awaitable[T]]) -> tuple[GuestRef, T]:
    """``read(ref)`` on the node an index of the guests up to LOCATOR_AGE old names; where PVE answers
    that the guest is not there (it moved or went away since), located again in a fresh index and read
    once more, so an answer never names a node the guest has left.

    ``read`` must raise PVE's error for a guest that is not on the node (PveNotFound: "Configuration
    file 'nodes/N/qemu-server/V.conf' does not exist", pve-guest-common src/PVE/AbstractConfig.pm
    load_config, for VMs and containers alike; pvesim's Call.guest). The ref's other fields (name, status, lock)
    may be as old as the index: callers take them from their own reads.
    """
    ref = await resolve_guest(client, vmid, max_age=LOCATOR_AGE)
    try:
        return ref, await read(ref)
    except PveNotFound:
        again = await resolve_guest(client, vmid)
        if (again.node, again.type) == (ref.node, ref.type):
            raise
        return again, await read(again)


def guest_path(ref: GuestRef, *rest: str | Segment) -> ApiPath:
    return api_path("nodes", node_seg(ref.node), ref.type, vmid_seg(ref.vmid), *rest)
