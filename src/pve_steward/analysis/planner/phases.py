"""Phases 2 to 4 of an evacuation: the guests outside HA, into the room HA's moves leave.

Phase 2 places the running production guests, phase 3 the rest (running non-production guests, then stopped
guests, which need no memory on the target). Each phase first spreads its guests (largest first, onto the
target with the most room); when that leaves one without room, it is planned again best-fit (onto the target
with the least room that still holds it), which fits more into the same room, and the better of the two is
kept. Phase 4, only when room is short, names what to stop for the window: non-production guests first
(those of the node instead of moving them, then those running on the targets), so production guests can
move; production guests only when nothing else makes room; HA guests never.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pve_steward.analysis.capacity import room_freed
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.migration.model import Migratability
from pve_steward.analysis.planner.models import Downtime, Step, StopCandidate
from pve_steward.analysis.planner.placement import Placement
from pve_steward.analysis.planner.production import Class, Overrides, classify, stop_order

GiB = 1024**3


def downtime_of(running: bool, mode: str) -> Downtime:
    if not running or mode == "live":
        return "none"
    return "restart" if mode == "restart" else "full"


def memory_of(m: Migratability) -> int:
    """What a target must hold for the guest: its configured memory if it runs (an offline move needs none)."""
    return m.memory_bytes if m.status == "running" else 0


def step_for(m: Migratability, target: str, phase: str, reason: str) -> Step:
    tv = m.target(target)
    assert tv is not None and tv.mode is not None
    running = m.status == "running"
    return Step(
        order=0,
        vmid=m.vmid,
        name=m.name,
        type=m.type,
        target=target,
        mode=tv.mode,
        downtime=downtime_of(running, tv.mode),
        memory_bytes=memory_of(m),
        copy_bytes=m.local_disk_bytes,
        with_local_disks=bool(m.local_disk_bytes) and m.type == "qemu" and running and tv.mode == "live",
        reason=reason,
        basis=m.basis,
        phase=phase,
    )


@dataclass
class PhaseResult:
    steps: list[Step] = field(default_factory=list)
    unplaced: list[tuple[Migratability, str]] = field(default_factory=list)  # no room: (guest, why)


def _attempt(guests: list[Migratability], placement: Placement, phase: str, best_fit: bool) -> PhaseResult:
    out = PhaseResult()
    for m in guests:
        need = memory_of(m)
        target, why = placement.choose(m.movable_to(), need, best_fit=best_fit)
        if target is None:
            out.unplaced.append((m, why))
            continue
        before = placement.take(target, need)
        how = (
            "the tightest fit that holds it (room is short: best fit)"
            if best_fit and need
            else "the most free memory after HA's reserved room"
        )
        out.steps.append(step_for(m, target, phase, f"{target} has {how} ({before / GiB:.1f} GiB before this guest)"))
    return out


def place_phase(guests: list[Migratability], placement: Placement, phase: str) -> PhaseResult:
    """Place one phase's guests (running largest first, then stopped); on ``placement`` in place."""
    ordered = sorted(guests, key=lambda m: (m.status != "running", -m.memory_bytes, m.vmid))
    trial = placement.copy()
    spread = _attempt(ordered, trial, phase, best_fit=False)
    chosen, state = spread, trial
    if spread.unplaced:
        packed_state = placement.copy()
        packed = _attempt(ordered, packed_state, phase, best_fit=True)
        if _placed_memory(packed) > _placed_memory(spread):
            chosen, state = packed, packed_state
    placement.free, placement.planned, placement.added = state.free, state.planned, state.added
    return chosen


def _placed_memory(r: PhaseResult) -> int:
    return sum(s.memory_bytes for s in r.steps)


@dataclass
class Window:
    """Phase 4: what to stop for the window, and what it made room for."""

    stops: list[StopCandidate] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)  # production guests placed into room the stops freed
    dropped: set[int] = field(default_factory=set)  # planned moves replaced by stopping the guest
    unplaced: list[tuple[Migratability, str]] = field(default_factory=list)  # still without room
    ha_short: dict[str, int] = field(default_factory=dict)  # node -> bytes HA's moves still lack there
    sufficient: bool | None = None


class _Freer:
    """The non-production guests whose stopping gives a target room: the node's own, planned there (stop
    instead of moving), then those running on it; in stop order."""

    def __init__(self, data: ClusterData, source: str, placement: Placement, steps: list[Step], ov: Overrides) -> None:
        self.data, self.source, self.placement = data, source, placement
        self.ov = ov
        self.planned: dict[str, list[Step]] = {}
        for s in steps:
            if s.memory_bytes and not classify(data, s.vmid, ov).production:
                self.planned.setdefault(str(s.target), []).append(s)
        self.stopped: dict[str, list[int]] = {}  # node -> guests stopped there (running on it)
        self.used: set[int] = set()
        self._residents: dict[str, list[tuple[int, Class]]] | None = None

    def residents(self, node: str) -> list[tuple[int, Class]]:
        """The node's running non-production guests outside HA, in stop order, not yet stopped."""
        if self._residents is None:  # one pass over the cluster's guests, at most once per plan
            by_node: dict[str, list[tuple[int, Class]]] = {}
            ha = self.data.ha_by_vmid
            for vmid, g in self.data.guests.items():
                if g.get("status") != "running" or g.get("template") or vmid in ha or g.get("node") == self.source:
                    continue
                cls = classify(self.data, vmid, self.ov)
                if not cls.production:
                    by_node.setdefault(str(g.get("node")), []).append((vmid, cls))
            memory = {v: int(g.get("maxmem") or 0) for v, g in self.data.guests.items()}
            self._residents = {
                n: sorted(rows, key=lambda vc: stop_order(vc[1], memory[vc[0]], vc[0])) for n, rows in by_node.items()
            }
        return [(v, c) for v, c in self._residents.get(node, []) if v not in self.used]

    def freeable(self, node: str) -> int:
        moved = sum(s.memory_bytes for s in self.planned.get(node, []) if s.vmid not in self.used)
        vmids = [v for v, _c in self.residents(node)]
        return moved + room_freed(self.data, node, self.stopped.get(node, []) + vmids) - self._freed_so_far(node)

    def _freed_so_far(self, node: str) -> int:
        return room_freed(self.data, node, self.stopped.get(node, []))

    def free_up(self, node: str, need: int, purpose: str) -> list[StopCandidate]:
        """Stop guests until ``node`` has ``need`` bytes free (or nothing is left to stop); the stops made."""
        out: list[StopCandidate] = []
        p = self.placement
        planned = sorted(
            (s for s in self.planned.get(node, []) if s.vmid not in self.used),
            key=lambda s: stop_order(classify(self.data, s.vmid, self.ov), s.memory_bytes, s.vmid),
        )
        for s in planned:
            if p.free[node] >= need:
                return out
            self.used.add(s.vmid)
            p.unplace(node, s.memory_bytes)
            cls = classify(self.data, s.vmid, self.ov)
            out.append(
                StopCandidate(
                    vmid=s.vmid,
                    name=s.name,
                    node=self.source,
                    memory_bytes=s.memory_bytes,
                    why=f"{cls.why}: stop it for the window instead of moving it, which frees "
                    f"{s.memory_bytes / GiB:.1f} GiB on the target that would have taken it {purpose}",
                    production=False,
                    signals=list(cls.signals) + _onboot(cls),
                )
            )
        for vmid, cls in self.residents(node):
            if p.free[node] >= need:
                return out
            before = self._freed_so_far(node)
            self.stopped.setdefault(node, []).append(vmid)
            self.used.add(vmid)
            gain = self._freed_so_far(node) - before
            p.release(node, gain)
            row = self.data.guests[vmid]
            out.append(
                StopCandidate(
                    vmid=vmid,
                    name=str(row.get("name") or vmid),
                    node=node,
                    memory_bytes=gain,
                    why=f"{cls.why}, running on a target: stopping it for the window frees {gain / GiB:.1f} GiB there "
                    f"{purpose}",
                    production=False,
                    signals=list(cls.signals) + _onboot(cls),
                )
            )
        return out


def _onboot(cls: Class) -> list[str]:
    return [] if cls.onboot is None else [f"onboot {int(cls.onboot)}"]


def stop_for_window(
    data: ClusterData,
    source: str,
    placement: Placement,
    steps: list[Step],
    unplaced: list[tuple[Migratability, str]],
    ha_short: dict[str, int],
    ov: Overrides,
) -> Window:
    """Phase 4 (see the module): only when a running guest lacks room, or HA's moves lack room on a node."""
    w = Window()
    if not unplaced and not ha_short:
        return w
    freer = _Freer(data, source, placement, steps, ov)
    for node, short in sorted(ha_short.items()):  # HA's moves first: they are never stopped
        if node in placement.free:
            w.stops += freer.free_up(node, 0, "for HA's moves there")
        if node not in placement.free or placement.free[node] < 0:
            w.ha_short[node] = -placement.free[node] if node in placement.free else short
    left: list[tuple[Migratability, str]] = []
    classes = {m.vmid: classify(data, m.vmid, ov) for m, _why in unplaced}
    for m, why in sorted(unplaced, key=lambda u: (not classes[u[0].vmid].production, -u[0].memory_bytes, u[0].vmid)):
        cls = classes[m.vmid]
        need = memory_of(m)
        if cls.production:
            options = [
                n for n in m.movable_to() if n in placement.free and placement.free[n] + freer.freeable(n) >= need
            ]
            if options:
                node = min(options, key=lambda n: (max(need - placement.free[n], 0), n))
                w.stops += freer.free_up(node, need, f"for production guest {m.vmid}")
                before = placement.take(node, need)
                w.steps.append(
                    step_for(
                        m,
                        node,
                        "keep_running",
                        f"{node} has room once the non-production guests listed to stop for the window are stopped "
                        f"({before / GiB:.1f} GiB before this guest)",
                    )
                )
                continue
        left.append((m, why))
        w.stops.append(
            StopCandidate(
                vmid=m.vmid,
                name=m.name,
                node=source,
                memory_bytes=need,
                why=(
                    f"{cls.why}; no target has room for it: it stays stopped on the node for the window"
                    if not cls.production
                    else f"{cls.why}, but no target has room even after stopping every non-production guest: it "
                    "stays stopped on the node for the window"
                ),
                production=cls.production,
                signals=list(cls.signals) + _onboot(cls),
            )
        )
    w.unplaced = left
    w.dropped = {s.vmid for s in w.stops if s.node == source and s.vmid not in {m.vmid for m, _ in left}}
    w.stops.sort(key=lambda s: (s.production, s.node != source))  # stable: the order chosen within each
    w.sufficient = not w.ha_short
    return w
