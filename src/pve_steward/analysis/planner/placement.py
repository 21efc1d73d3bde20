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
        self.reserved = dict.fromkeys(targets, 0)  # kept for HA's moves (phase 1)
        self.freed = dict.fromkeys(targets, 0)  # by guests stopped there for the window (phase 4)
        # targets whose memory PVE does not show this token (pve/visibility.py): their room is not provable
        self.unseen = sorted(t for t in targets if data.sees(NODE_FIGURES, t) is not True)

    def copy(self) -> Placement:
        other = object.__new__(Placement)
        other.rooms = self.rooms
        other.free, other.planned, other.added = dict(self.free), dict(self.planned), dict(self.added)
        other.reserved, other.freed = dict(self.reserved), dict(self.freed)
        other.unseen = self.unseen
        return other

    def reserve(self, node: str, memory: int) -> None:
        """Keep room for HA's moves: no planned migration takes it."""
        if node in self.free:
            self.free[node] -= memory
            self.reserved[node] += memory

    def release(self, node: str, memory: int) -> None:
        """Room a guest stopped there for the window gives back."""
        if node in self.free:
            self.free[node] += memory
            self.freed[node] += memory

    def unplace(self, node: str, memory: int) -> None:
        """Undo a planned move (the guest is stopped instead)."""
        self.free[node] += memory
        self.planned[node] -= memory
        self.added[node] -= 1

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
    def choose(self, candidates: list[str], reserve: int, best_fit: bool = False) -> tuple[str | None, str]:
        """The target for a guest reserving ``reserve`` bytes, or None and why not: the one with the most room
        (spreads the load), or with ``best_fit`` the one with the least room that still holds it (packs tightly,
        so large guests still find room when it is short)."""
        options = [n for n in candidates if n in self.free]
        if not options:
            return None, "no eligible target"
        fitting = options if reserve == 0 else [n for n in options if self.free[n] >= reserve]
        if fitting:
            if best_fit and reserve:
                return min(fitting, key=lambda n: (self.free[n], n)), ""
            return min(fitting, key=lambda n: (-self.free[n], n)), ""
        biggest = max(options, key=lambda n: (self.free[n], n))
        kept = f" ({self.reserved[biggest] / GiB:.1f} GiB there kept for HA's moves)" if self.reserved[biggest] else ""
        return None, (
            f"needs {reserve / GiB:.1f} GiB; the most free on an eligible target is "
            f"{max(self.free[biggest], 0) / GiB:.1f} GiB on {biggest}{kept}"
        )

    def take(self, node: str, reserve: int) -> int:
        """Reserve on ``node``; returns the room it had before."""
        before = self.free[node]
        self.free[node] -= reserve
        self.planned[node] += reserve
        self.added[node] += 1
        return before
