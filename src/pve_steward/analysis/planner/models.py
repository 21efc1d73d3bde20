"""What a plan says: steps, blockers, HA hand-off, target capacity (the tools' output models)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pve_steward.analysis.findings import Finding
from pve_steward.analysis.migration.model import Basis, Migratability
from pve_steward.analysis.planner.ceph_steps import CephDaemonCheck, CephStep
from pve_steward.models import Model, Untrusted

Verdict = Literal["EVACUATION_READY", "EVACUATION_PARTIAL", "EVACUATION_BLOCKED"]
Downtime = Literal["none", "restart", "full"]


class Step(Model):
    order: int
    vmid: int
    name: Untrusted  # guest name
    type: Literal["qemu", "lxc"]
    target: Untrusted  # target node
    mode: Literal["live", "offline", "restart"]
    downtime: Downtime = Field(
        description="none: live or already stopped; restart: container restart; "
        "full: a running guest is stopped for the move"
    )
    memory_bytes: int = Field(description="configured memory reserved on the target (0 for stopped guests)")
    copy_bytes: int = Field(0, description="local disk data copied")
    with_local_disks: bool = False
    reason: Untrusted  # our sentence naming the target node: marked whole
    basis: Basis = Field(
        "config", description="config: from config + storage config; config+pve: PVE's precondition agreed too"
    )
    phase: Literal["keep_running", "rest"] = Field(
        "rest", description="keep_running: a production guest (phase 2); rest: everything else (phase 3)"
    )


class Blocker(Model):
    vmid: int
    name: Untrusted
    code: str
    detail: Untrusted  # our sentence quoting cluster names, HA and task error text: marked whole


class HAGuest(Model):
    vmid: int
    name: Untrusted
    sid: str
    state: str | None = Field(description="requested HA state (started, stopped, disabled)")
    crm_state: str | None = Field(None, description="the CRM's service state (started, stopped, error, ...)")
    moved_by_ha: bool = Field(
        True, description="false when HA maintenance leaves it on the node (error, or requested stopped/disabled)"
    )
    memory_bytes: int
    constraints: list[Untrusted] = Field(default_factory=list, description="HA rules or groups that restrict placement")
    problems: list[Untrusted] = Field(default_factory=list, description="what would stall HA maintenance")
    action: Untrusted | None = Field(None, description="what the operator does for a guest HA leaves behind")
    ha_targets: list[Untrusted] = Field(
        default_factory=list,
        description="where HA maintenance will place it: one node when HA's scheduler makes that provable, else "
        "every node it may choose (room is kept on each)",
    )
    ha_target_provable: bool = Field(False, description="true when HA's choice is one known node")


class TargetCapacity(Model):
    node: Untrusted
    total_bytes: int
    committed_before_bytes: int = Field(description="max(used memory, configured memory of its running guests)")
    headroom_bytes: int
    reserved_bytes: int = Field(0, description="kept for what HA maintenance moves here (phase 1)")
    planned_bytes: int = Field(description="configured memory of the guests this plan sends here")
    free_after_bytes: int
    guests_added: int


PhaseName = Literal["ha", "keep_running", "rest", "stop_for_window"]


class PlanPhase(Model):
    """One phase of the plan, in the order an operator runs them."""

    name: PhaseName = Field(
        description="ha: what HA maintenance moves (first); keep_running: production guests that must keep "
        "running; rest: everything else; stop_for_window: what to stop (or leave stopped) when room is short"
    )
    title: str
    vmids: list[int]
    memory_bytes: int = Field(description="configured memory of the phase's running guests")
    note: str | None = None


class ReservedRoom(Model):
    """Room kept on a node for what HA maintenance moves there: no planned migration takes it."""

    node: Untrusted
    vmids: list[int]
    memory_bytes: int
    why: str


class StopCandidate(Model):
    """A guest to stop (or leave stopped) for the maintenance window, non-production first."""

    vmid: int
    name: Untrusted
    node: Untrusted | None = Field(None, description="where it runs now")
    memory_bytes: int = Field(description="memory this frees on its node, or no longer needs on a target")
    why: str
    production: bool
    signals: list[Untrusted] = Field(
        default_factory=list, description="what made it production or not: tags, pool, name, onboot, the request"
    )


class OnbootStart(Model):
    """A guest that starts by itself when a node boots (onboot=1; pve-manager startall)."""

    vmid: int
    name: Untrusted
    node: Untrusted
    when: Literal["node_returns", "target_boots"] = Field(
        description="node_returns: it stays on the maintained node and starts when that node boots; target_boots: "
        "planned offline to another node, it starts when that node next boots"
    )


class AddressClash(Model):
    """A guest that will start (OnbootStart) whose configured address is in use by a running guest."""

    kind: Literal["ip", "mac"]
    address: str
    vmid: int
    other_vmid: int
    other_node: Untrusted | None = None


class StaleBackup(Model):
    """A guest of the node whose newest backup is older than its backup jobs' schedule allows (or missing)."""

    vmid: int
    name: Untrusted
    age_hours: float | None = Field(description="null: no backup found on any readable backup storage")
    policy_hours: float


class MaintenanceReadiness(Model):
    """What else the window touches: what starts by itself afterwards, address clashes, HA's shutdown policy,
    backups older than their policy."""

    onboot_on_return: list[OnbootStart] = Field(default_factory=list)
    address_clashes: list[AddressClash] = Field(default_factory=list)
    ha_shutdown_policy: str | None = Field(None, description="datacenter.cfg ha: shutdown_policy (conditional default)")
    ha_policy_note: str | None = None
    stale_backups: list[StaleBackup] = Field(default_factory=list)
    not_provable: list[Untrusted] = Field(
        default_factory=list, description="what could not be judged, and why (a read failed or was not allowed)"
    )
    counts: dict[str, int] = Field(
        default_factory=dict, description="how many entries each list has in the whole plan (the tool lists `limit`)"
    )


class EvacuationPlan(Model):
    node: Untrusted
    verdict: Verdict
    summary: Untrusted  # counts, or why nothing can move (which may name nodes)
    steps: list[Step]
    blockers: list[Blocker]
    ha_guests: list[HAGuest]
    ha_recommendation: Untrusted | None = Field(None, description="our sentence; it names the node and guests")
    targets: list[TargetCapacity]
    excluded_targets: dict[str, str] = Field(
        default_factory=dict,
        description="node -> why it is not a target (node names follow PVE's hostname grammar; reasons are ours)",
    )
    findings: list[Finding] = Field(default_factory=list, description="every blocker and data gap, with codes")
    complete: bool = Field(description="false when some data could not be read")
    parameters: dict[str, object] = Field(default_factory=dict)
    steps_total: int | None = Field(None, description="steps in the whole plan (the tool lists a page of them)")
    next_offset: int | None = Field(None, description="pass as offset to list the next steps; null when done")
    blockers_total: int | None = Field(None, description="blockers in the whole plan")
    blocker_counts: dict[str, int] = Field(default_factory=dict, description="blockers per code, all of them")
    ceph_checks: list[CephDaemonCheck] = Field(
        default_factory=list, description="Ceph's ok-to-stop verdict for each OSD and monitor on the node"
    )
    ceph_steps: list[CephStep] = Field(
        default_factory=list, description="Ceph maintenance steps around the node's downtime (noout before/after)"
    )
    phases: list[PlanPhase] = Field(default_factory=list, description="the plan's phases, in order")
    reserved: list[ReservedRoom] = Field(
        default_factory=list, description="room kept for what HA maintenance moves; no planned migration takes it"
    )
    stop_for_window: list[StopCandidate] = Field(
        default_factory=list, description="what to stop (or leave stopped) for the window, non-production first"
    )
    stop_sufficient: bool | None = Field(
        None,
        description="null when no room is short; true when stopping the listed guests leaves room for everything "
        "else; false when even that leaves a guest (an HA one) without room",
    )
    stop_for_window_total: int | None = Field(None, description="guests to stop in the whole plan")
    readiness: MaintenanceReadiness | None = None


class GuestMove(Model):
    """Can guest X move to node Y (or anywhere), and how: the planner's logic for one guest."""

    vmid: int
    name: Untrusted
    node: Untrusted
    can_move: bool
    target: Untrusted | None = Field(None, description="the requested target, or the best one")
    mode: Literal["live", "offline", "restart"] | None = None
    downtime: Downtime | None = None
    with_local_disks: bool = False
    memory_bytes: int = Field(
        0,
        description="memory the move reserves on the target: a running guest's configured memory (plus HA "
        "affinity partners'), 0 for a stopped guest; given for a blocked guest too",
    )
    copy_bytes: int = 0
    target_free_before_bytes: int | None = None
    target_free_after_bytes: int | None = None
    ha_managed: bool = False
    blockers: list[Blocker] = Field(default_factory=list)
    notes: list[Untrusted] = Field(default_factory=list, description="our sentences; they quote cluster text")
    migratability: Migratability
    complete: bool = Field(True, description="false when data this answer stands on could not be read")
    unread: list[Untrusted] = Field(
        default_factory=list, description="every read that failed, including those this guest does not depend on"
    )
