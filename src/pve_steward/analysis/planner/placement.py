"""Capacity placement: each guest on the eligible target with the most room left (the N+1 arithmetic)."""

from __future__ import annotations

from pve_steward.analysis.capacity import NodeRoom, node_room
from pve_steward.analysis.catalog import Code, register_codes
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.visibility import NODE_FIGURES

GiB = 1024**3


register_codes(
    "migration",
    __name__,
    Code(
        "MIGRATE_CAPACITY",
        "warning",
        "No target has room",
        "No eligible target has the guest's configured memory free (plus headroom) after earlier placements.",
        "Free memory on a target, lower the headroom, or move fewer guests.",
    ),
)


class Placement:
    """Room per target, reduced as guests are placed; deterministic (most free memory, tie: node name)."""

    def __init__(self, data: ClusterData, targets: list[str], headroom_pct: float) -> None:
        self.rooms: dict[str, NodeRoom] = {t: node_room(data, t, headroom_pct) for t in targets}
        self.free = {t: r.free for t, r in self.rooms.items()}
        self.planned = dict.fromkeys(targets, 0)
        self.added = dict.fromkeys(targets, 0)
        # targets whose memory PVE does not show this token (pve/visibility.py): their room is not provable
        self.unseen = sorted(t for t in targets if data.sees(NODE_FIGURES, t) is not True)

    def unseen_room(self, candidates: list[str]) -> str | None:
        """Why room on some of ``candidates`` cannot be judged (no guest is called short of room then)."""
        nodes = [n for n in candidates if n in self.unseen]
        if not nodes:
            return None
        return (
            f"the memory of {', '.join(nodes)} is not visible to this token: PVE shows a node's figures only with "
            f"{NODE_FIGURES.needs('<node>')}"
        )

    @pve_rule(
        "capacity.offline-needs-no-memory",
        rule="An offline migration moves a stopped guest's config and disks without starting it, so the target needs "
        "no memory for it; a running guest needs its configured memory there.",
        pve="qemu-server src/PVE/QemuMigrate.pm phase2 (only a running VM is started on the target); "
        "pve-container src/PVE/LXC/Migrate.pm final_cleanup (restart only if it was running)",
        codes=("MIGRATE_CAPACITY",),
    )
    def choose(self, candidates: list[str], reserve: int) -> tuple[str | None, str]:
        """The target for a guest reserving ``reserve`` bytes, or None and why not."""
        options = [n for n in candidates if n in self.free]
        if not options:
            return None, "no eligible target"
        fitting = options if reserve == 0 else [n for n in options if self.free[n] >= reserve]
        if fitting:
            return min(fitting, key=lambda n: (-self.free[n], n)), ""
        biggest = max(options, key=lambda n: (self.free[n], n))
        return None, (
            f"needs {reserve / GiB:.1f} GiB; the most free on an eligible target is "
            f"{max(self.free[biggest], 0) / GiB:.1f} GiB on {biggest}"
        )

    def take(self, node: str, reserve: int) -> int:
        """Reserve on ``node``; returns the room it had before."""
        before = self.free[node]
        self.free[node] -= reserve
        self.planned[node] += reserve
        self.added[node] += 1
        return before
