"""A short-lived cache of the names the cluster knows (nodes, guests, storages, backup jobs, snapshots).

Completions are asked for on every keystroke and the node check runs before every tool call that
names a node; both need names, not fresh figures. Each list is read once and kept for a few
seconds (``ttl``), so a burst of requests costs one API read, and a renamed or new object is seen
soon after. A failed read is not cached: the caller decides what an unknown answer means.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pve_steward.pveio.client import ProxmoxClient, api_path
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import vmid as vmid_seg

TTL_SECONDS = 5.0


@dataclass(frozen=True)
class KnownGuest:
    vmid: int
    type: str
    node: str
    name: str


@dataclass
class InventoryCache:
    ttl: float = TTL_SECONDS
    clock: Callable[[], float] = time.monotonic
    _entries: dict[Any, tuple[float, Any]] = field(default_factory=dict)

    async def _cached(self, key: Any, read: Callable[[], Awaitable[Any]]) -> Any:
        now = self.clock()
        hit = self._entries.get(key)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        value = await read()
        self._entries[key] = (now, value)
        return value

    async def nodes(self, client: ProxmoxClient) -> list[str]:
        """Every cluster member (GET /nodes lists all of them to any user; Nodes.pm index)."""

        async def read() -> list[str]:
            rows: list[dict[str, Any]] = await client.get(api_path("nodes"))
            return sorted(str(r["node"]) for r in rows if r.get("node"))

        result: list[str] = await self._cached("nodes", read)
        return result

    async def guests(self, client: ProxmoxClient) -> dict[int, KnownGuest]:
        """The guests this token may see, by vmid (GET /cluster/resources type=vm)."""

        async def read() -> dict[int, KnownGuest]:
            rows: list[dict[str, Any]] = await client.get(api_path("cluster", "resources"), type="vm")
            return {
                int(r["vmid"]): KnownGuest(int(r["vmid"]), str(r["type"]), str(r["node"]), str(r.get("name") or ""))
                for r in rows
                if r.get("type") in ("qemu", "lxc") and r.get("vmid") is not None and r.get("node")
            }

        result: dict[int, KnownGuest] = await self._cached("guests", read)
        return result

    async def storages(self, client: ProxmoxClient) -> list[str]:
        async def read() -> list[str]:
            rows: list[dict[str, Any]] = await client.get(api_path("cluster", "resources"), type="storage")
            return sorted({str(r["storage"]) for r in rows if r.get("storage")})

        result: list[str] = await self._cached("storages", read)
        return result

    async def backup_jobs(self, client: ProxmoxClient) -> list[str]:
        async def read() -> list[str]:
            rows: list[dict[str, Any]] = await client.get(api_path("cluster", "backup"))
            return sorted(str(r["id"]) for r in rows if r.get("id"))

        result: list[str] = await self._cached("backup_jobs", read)
        return result

    async def snapshots(self, client: ProxmoxClient, vmid: int) -> list[str]:
        """One guest's snapshot names ('current', PVE's marker for the live state, left out)."""

        async def read() -> list[str]:
            ref = (await self.guests(client)).get(vmid)
            if ref is None:
                return []
            path = api_path("nodes", node_seg(ref.node), ref.type, vmid_seg(ref.vmid), "snapshot")
            rows: list[dict[str, Any]] = await client.get(path)
            return sorted(str(r["name"]) for r in rows if r.get("name") and r.get("name") != "current")

        result: list[str] = await self._cached(("snapshots", vmid), read)
        return result
