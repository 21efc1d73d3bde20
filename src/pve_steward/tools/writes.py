"""Write operations: guest power, snapshots, backup now, migration, HA migrate/relocate.

Each is a two-phase write (see :mod:`twophase`): the first call previews and returns a token,
the second executes it. The node, guest type and name are always resolved by the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from pve_steward.analysis.backups import vzdump_refusals
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.migration.ha_rules import ha_allowed_nodes, ha_blocked_nodes
from pve_steward.analysis.migration.storage import storage_on
from pve_steward.analysis.migration.targets import maintenance_nodes
from pve_steward.analysis.planner.guest_move import plan_guest_move
from pve_steward.analysis.planner.ha_placement import together
from pve_steward.analysis.snapshotfeature import rollback_refusals, snapshot_refusals, taken_after
from pve_steward.errors import PveError, PvePermissionError, PveUnavailable
from pve_steward.pve.guestconfig import GuestConfig, parse_guest_config
from pve_steward.pve.ids import NodeName, SnapshotName, StorageId, VmId
from pve_steward.pveio.client import ApiPath, api_path, gather, ha_sid
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import snapshot as snapshot_seg
from pve_steward.pveio.client import storage as storage_seg
from pve_steward.pveio.client import vmid as vmid_seg
from pve_steward.security.guard import Refused, guarded
from pve_steward.security.sanitise import quote_name
from pve_steward.security.tiers import Tier
from pve_steward.tools.collect import collect
from pve_steward.tools.context import ToolContext
from pve_steward.tools.fetch import GuestRef, guest_path, resolve_guest
from pve_steward.tools.hastatus import ha_accepts
from pve_steward.tools.twophase import (
    Check,
    Plan,
    TargetRef,
    WriteResult,
    fingerprint,
    privilege_check,
    sentence,
    two_phase,
)

Token = Annotated[str, Field(min_length=20, max_length=4096, pattern=r"^[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+$")]
WaitTimeout = Annotated[int, Field(ge=5, le=3600)]
ShutdownTimeout = Annotated[int, Field(ge=10, le=3600)]


@dataclass
class Guest:
    ref: GuestRef
    cfg: GuestConfig
    status: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict)  # the config as read (what the parsed model leaves out)

    @property
    def kind(self) -> str:
        return "VM" if self.ref.type == "qemu" else "CT"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.ref.vmid} {quote_name(self.cfg.name)} on {quote_name(self.ref.node)}"

    @property
    def sid(self) -> str:
        """Its HA resource id, whether or not HA manages it."""
        return f"{'vm' if self.ref.type == 'qemu' else 'ct'}:{self.ref.vmid}"

    @property
    def running(self) -> bool:
        return self.status.get("status") == "running"

    @property
    def paused(self) -> bool:
        return self.status.get("qmpstatus") in ("paused", "suspended")

    def target(self) -> TargetRef:
        return TargetRef(vmid=self.ref.vmid, name=self.cfg.name, type=self.ref.type, node=self.ref.node)

    def state(self, *extra: object) -> str:
        return fingerprint(
            self.ref.node,
            self.cfg.digest,
            self.status.get("status"),
            self.status.get("qmpstatus"),
            self.cfg.lock,
            *extra,
        )


async def load_guest(t: ToolContext, vmid: int) -> Guest:
    ref = await resolve_guest(t.client, vmid)
    raw: dict[str, Any] = await t.client.get(guest_path(ref, "config"))
    status: dict[str, Any] = await t.client.get(guest_path(ref, "status", "current"))
    return Guest(ref, parse_guest_config(raw, vmid, ref.type), status, raw)


def lock_check(g: Guest, allow: str | None = None) -> Check:
    if g.cfg.lock and g.cfg.lock != allow:
        return Check(
            check="no config lock",
            ok=False,
            detail=f"{g.label} is locked ('{g.cfg.lock}'); PVE refuses this while the lock is set",
        )
    return Check(check="no config lock", ok=True, detail="not locked")


def _ha_routed(g: Guest, action: str) -> bool:
    """qemu-server API2/Qemu.pm vm_start, vm_stop, vm_shutdown (pve-container API2/LXC/Status.pm alike) hand an
    HA-managed guest to the HA manager (ha-manager set --state started / crm-command stop <timeout>): the request's
    task (hastart, hastop) only queues it; the LRM's own task does the work."""
    return bool((g.status.get("ha") or {}).get("managed")) and action in ("start", "stop", "shutdown")


def _ha_note(g: Guest, action: str, timeout: int) -> list[str]:
    """What the HA manager does with a routed request (pve-ha-manager Manager.pm update_crm_commands sets the
    resource's state to 'stopped' for a stop; Resources/PVEVM.pm shutdown passes forceStop, PVECT.pm does not)."""
    if not _ha_routed(g, action):
        return []
    if action == "start":
        return [
            f"{g.kind} {g.ref.vmid} is HA-managed: its HA requested state becomes 'started' and the HA manager "
            "starts it"
        ]
    how = "hard-stops it" if action == "stop" else f"shuts it down (up to {timeout} s)"
    forced = (
        f"; a VM still running after {timeout} s is forced off" if action == "shutdown" and g.ref.type == "qemu" else ""
    )
    return [
        f"{g.kind} {g.ref.vmid} is HA-managed: its HA requested state becomes 'stopped' (it stays down until set to "
        f"'started') and the HA manager {how}{forced}"
    ]


async def _common(t: ToolContext, g: Guest, priv: str) -> list[Check]:
    return [await privilege_check(t, f"/vms/{g.ref.vmid}", [priv]), lock_check(g)]


# ---------------------------------------------------------------- power


async def _shutdown_via(t: ToolContext, g: Guest) -> str:
    """How PVE will ask the guest to shut down, promised only as far as it holds.

    qemu-server PVE/QemuServer.pm _do_vm_stop: guest-shutdown through the agent only when the config
    enables it and it answers guest-ping (qga_check_running); otherwise an ACPI power-button event.
    """
    if g.ref.type != "qemu":
        return "the container's init system"
    if not g.cfg.agent_enabled or not g.running:
        return "an ACPI power-button event"
    try:
        await t.client.get(guest_path(g.ref, "agent", "info"))
    except (PvePermissionError, PveUnavailable):
        return "the guest agent if it answers when the task runs (it could not be asked now), else an ACPI event"
    except PveError:
        return "an ACPI power-button event (the guest agent is enabled in the config but does not answer)"
    return "the guest agent (it answers)"


# the lock a start goes ahead with: qemu-server QemuServer.pm vm_start resumes a hibernated VM ('suspended');
# pve-container API2/LXC/Status.pm vm_start skips check_lock for 'mounted'
_START_DESPITE = {"qemu": "suspended", "lxc": "mounted"}
# qemu-server src/PVE/API2/Qemu.pm vm_shutdown, vm_reboot: die "VM is paused - cannot shutdown" (vm_is_paused($vmid, 1))
_NO_CLEAN_SHUTDOWN = ("paused", "prelaunch", "suspended")


def _not_paused(g: Guest) -> list[Check]:
    """PVE refuses a clean shutdown or reboot of a VM whose QEMU is paused (it would power off on resume)."""
    if g.ref.type != "qemu":
        return []
    qmp = g.status.get("qmpstatus")
    paused = g.running and qmp in _NO_CLEAN_SHUTDOWN
    detail = f"QEMU is {qmp}: PVE refuses ('VM is paused - cannot shutdown'); resume it first" if paused else "no"
    return [Check(check="VM is not paused", ok=not paused, detail=detail)]


async def _power_plan(t: ToolContext, vmid: int, action: str, **options: Any) -> Plan:
    g = await load_guest(t, vmid)
    checks = await _common(t, g, "VM.PowerMgmt")
    if action == "start" and g.cfg.lock == _START_DESPITE.get(g.ref.type):
        checks[1] = lock_check(g, allow=g.cfg.lock)
    effects: list[str] = []
    risks: list[str] = []
    params: dict[str, Any] = {}
    if action == "start":
        checks.append(
            Check(check="guest is stopped", ok=not g.running, detail="no, it is running" if g.running else "stopped")
        )
        if g.cfg.template:
            checks.append(Check(check="not a template", ok=False, detail=f"{g.label} is a template; clone it"))
        effects.append(f"start {g.label}" + (" from its hibernated state" if g.cfg.lock == "suspended" else ""))
    elif action == "shutdown":
        checks.append(Check(check="guest is running", ok=g.running, detail=str(g.status.get("status"))))
        checks += _not_paused(g)
        timeout = int(options["timeout"])
        params["timeout"] = timeout
        how = await _shutdown_via(t, g)
        effects.append(f"ask {g.label} to shut down cleanly via {how}, waiting up to {timeout} s")
        risks.append(
            "services in the guest stop; if the guest ignores the request the task fails after the timeout "
            "(it is not forced off)"
        )
    elif action == "reboot":
        checks.append(Check(check="guest is running", ok=g.running, detail=str(g.status.get("status"))))
        checks += _not_paused(g)
        effects.append(f"reboot {g.label} cleanly")
        risks.append("services in the guest are interrupted during the reboot")
    elif action == "stop":
        checks.append(Check(check="guest is running", ok=g.running or g.paused, detail=str(g.status.get("status"))))
        effects.append(f"hard power-off {g.label} immediately (like pulling the plug)")
        risks.append("unsaved data in the guest is lost and its filesystems may need a check; prefer guest_shutdown")
    elif action == "reset":
        checks.append(Check(check="guest is running", ok=g.running, detail=str(g.status.get("status"))))
        effects.append(f"hard reset {g.label} (like pressing the reset button)")
        risks.append("unsaved data in the guest is lost; prefer guest_reboot")
    elif action == "suspend":
        checks.append(
            Check(
                check="guest is running and not paused",
                ok=g.running and not g.paused,
                detail=str(g.status.get("qmpstatus") or g.status.get("status")),
            )
        )
        effects.append(f"pause {g.label} (its memory stays on {g.ref.node})")
        risks.append("the guest stops answering until resumed; network connections may time out")
        if g.ref.type == "lxc":
            risks.append("container suspend (freeze) is experimental in PVE")
    elif action == "resume":
        resumable = g.paused or g.cfg.lock == "suspended"
        checks = [
            await privilege_check(t, f"/vms/{vmid}", ["VM.PowerMgmt"]),
            lock_check(g, allow="suspended"),
            Check(
                check="guest is paused or hibernated",
                ok=resumable,
                detail=str(g.status.get("qmpstatus") or g.status.get("status")),
            ),
        ]
        effects.append(f"resume {g.label}")
    routed = _ha_routed(g, action)
    if routed:  # the HA manager's API takes the request, or refuses it (analysis/harequest.py)
        checks.append(await ha_accepts(t, g.sid, "started" if action == "start" else None))
    effects += _ha_note(g, action, int(options.get("timeout") or 0))
    if routed and action == "shutdown" and g.ref.type == "qemu":
        risks[-1] = "services in the guest stop; the HA manager forces the VM off if it ignores the request"

    async def execute() -> Any:
        return await t.client.call("POST", guest_path(g.ref, "status", action), **params)

    return Plan(
        target=g.target(),
        state=g.state(),
        summary=sentence(effects[0]),
        effects=effects,
        risks=risks,
        checks=checks,
        execute=execute,
        follow="ha" if routed else "task",
        ha_task_types=((("qm" if g.ref.type == "qemu" else "vz") + action,) if routed else ()),
    )


def write_params(vmid: int, **extra: Any) -> dict[str, Any]:
    return {"vmid": vmid, **{k: v for k, v in extra.items() if v is not None}}


@guarded(toolset="guests", tier=Tier.OPERATOR)
async def guest_start(
    t: ToolContext, vmid: VmId, confirm_token: Token | None = None, wait: bool = True, wait_timeout: WaitTimeout = 300
) -> WriteResult:
    """Start a stopped guest."""
    return await two_phase(
        t, write_params(vmid), lambda: _power_plan(t, vmid, "start"), confirm_token, wait, wait_timeout
    )


@guarded(toolset="guests", tier=Tier.OPERATOR, destructive=True)
async def guest_shutdown(
    t: ToolContext,
    vmid: VmId,
    timeout: ShutdownTimeout = 180,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 600,
) -> WriteResult:
    """Clean shutdown (never forced)."""
    return await two_phase(
        t,
        write_params(vmid, timeout=timeout),
        lambda: _power_plan(t, vmid, "shutdown", timeout=timeout),
        confirm_token,
        wait,
        max(wait_timeout, timeout + 30),
    )


@guarded(toolset="guests", tier=Tier.OPERATOR, destructive=True, idempotent=False)
async def guest_reboot(
    t: ToolContext, vmid: VmId, confirm_token: Token | None = None, wait: bool = True, wait_timeout: WaitTimeout = 600
) -> WriteResult:
    """Clean reboot."""
    return await two_phase(
        t, write_params(vmid), lambda: _power_plan(t, vmid, "reboot"), confirm_token, wait, wait_timeout
    )


@guarded(toolset="guests", tier=Tier.ADMIN, destructive=True)
async def guest_stop(
    t: ToolContext, vmid: VmId, confirm_token: Token | None = None, wait: bool = True, wait_timeout: WaitTimeout = 300
) -> WriteResult:
    """Hard power-off (admin tier)."""
    return await two_phase(
        t, write_params(vmid), lambda: _power_plan(t, vmid, "stop"), confirm_token, wait, wait_timeout
    )


@guarded(toolset="guests", tier=Tier.ADMIN, destructive=True, idempotent=False)
async def guest_reset(
    t: ToolContext, vmid: VmId, confirm_token: Token | None = None, wait: bool = True, wait_timeout: WaitTimeout = 300
) -> WriteResult:
    """Hard reset of a VM (admin tier)."""

    async def plan() -> Plan:
        p = await _power_plan(t, vmid, "reset")
        if p.target.type != "qemu":
            raise Refused(f"guest_reset is for VMs; {vmid} is a container (use guest_reboot)")
        return p

    return await two_phase(t, write_params(vmid), plan, confirm_token, wait, wait_timeout)


@guarded(toolset="guests", tier=Tier.OPERATOR, destructive=True)
async def guest_suspend(
    t: ToolContext, vmid: VmId, confirm_token: Token | None = None, wait: bool = True, wait_timeout: WaitTimeout = 300
) -> WriteResult:
    """Pause a running guest (memory stays on the node)."""
    return await two_phase(
        t, write_params(vmid), lambda: _power_plan(t, vmid, "suspend"), confirm_token, wait, wait_timeout
    )


@guarded(toolset="guests", tier=Tier.OPERATOR)
async def guest_resume(
    t: ToolContext, vmid: VmId, confirm_token: Token | None = None, wait: bool = True, wait_timeout: WaitTimeout = 300
) -> WriteResult:
    """Resume a paused or hibernated guest."""
    return await two_phase(
        t, write_params(vmid), lambda: _power_plan(t, vmid, "resume"), confirm_token, wait, wait_timeout
    )


# ---------------------------------------------------------------- snapshots


async def _snapshot_rows(t: ToolContext, g: Guest) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = await t.client.get(guest_path(g.ref, "snapshot"))
    return [r for r in rows if r.get("name") != "current"]


async def _snapshots(t: ToolContext, g: Guest) -> list[str]:
    return [str(r["name"]) for r in await _snapshot_rows(t, g)]


async def _rollback_support(t: ToolContext, g: Guest, name: str, rows: list[dict[str, Any]]) -> Check:
    """What PVE's rollback checks before it stops the guest (analysis/snapshotfeature.py rollback_refusals): the
    snapshot's volumes, and the snapshots taken after it, read as PVE keeps them (config?snapshot=)."""
    later = taken_after(name, rows)
    reads = [(f"snapshot:{n}", guest_path(g.ref, "config"), {"snapshot": n}) for n in [name, *later]]
    got = await gather(t.client, [*reads, ("storage", api_path("storage"), {})])
    failed = next((v for v in got.values() if isinstance(v, PveError)), None)
    if failed is not None:
        return Check(check="PVE can roll back to it", ok=False, detail=f"not provable: {failed.message}")
    answers: dict[str, Any] = dict(got)
    configs = {n: parse_guest_config(answers[f"snapshot:{n}"], g.ref.vmid, g.ref.type) for n in [name, *later]}
    storages = {str(s.get("storage")): s for s in answers["storage"]}
    refused = rollback_refusals(g.cfg.template, configs.pop(name), configs, storages)
    if refused:
        return Check(check="PVE can roll back to it", ok=False, detail="; ".join(refused))
    return Check(check="PVE can roll back to it", ok=True, detail="no volume holds a newer snapshot that blocks it")


async def _snapshot_support(t: ToolContext, g: Guest, with_ram: bool) -> Check:
    storages: list[dict[str, Any]] = await t.client.get(api_path("storage"))
    types = {str(s["storage"]): str(s.get("type")) for s in storages}
    refused = snapshot_refusals(g.cfg, g.raw, types, with_ram)
    if refused:
        return Check(check="PVE can snapshot it", ok=False, detail="; ".join(refused))
    return Check(check="PVE can snapshot it", ok=True, detail="every disk is on snapshot-capable storage")


@guarded(toolset="guests", tier=Tier.OPERATOR, idempotent=False)
async def snapshot_create(
    t: ToolContext,
    vmid: VmId,
    name: SnapshotName,
    description: Annotated[str, Field(max_length=1024)] | None = None,
    include_ram: bool = False,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 600,
) -> WriteResult:
    """Take a snapshot."""

    async def plan() -> Plan:
        g = await load_guest(t, vmid)
        existing = await _snapshots(t, g)
        checks = await _common(t, g, "VM.Snapshot")
        checks.append(
            Check(
                check="name is free",
                ok=name not in existing,
                detail=f"snapshot '{name}' already exists" if name in existing else "free",
            )
        )
        checks.append(await _snapshot_support(t, g, include_ram))
        if include_ram:
            checks.append(
                Check(
                    check="RAM can be saved",
                    ok=g.ref.type == "qemu" and g.running,
                    detail="RAM state needs a running VM",
                )
            )
        effects = [f"snapshot {g.label} as '{name}'" + (" including RAM" if include_ram else "")]
        risks = ["snapshots grow as the guest writes and slow some storage; delete it when no longer needed"]
        if include_ram:
            risks.append("the VM pauses while its RAM is written to disk")
        params: dict[str, Any] = {"snapname": name, "description": description or "taken by pve-steward"}
        if include_ram:
            params["vmstate"] = True

        async def execute() -> Any:
            return await t.client.call("POST", guest_path(g.ref, "snapshot"), **params)

        return Plan(
            target=g.target(),
            state=g.state(*existing),
            summary=f"Snapshot {g.label} as '{name}'",
            effects=effects,
            risks=risks,
            checks=checks,
            execute=execute,
        )

    return await two_phase(
        t,
        write_params(vmid, name=name, description=description, include_ram=include_ram),
        plan,
        confirm_token,
        wait,
        wait_timeout,
    )


async def _snapshot_plan(t: ToolContext, vmid: int, name: str, action: str) -> Plan:
    g = await load_guest(t, vmid)
    rows = await _snapshot_rows(t, g)
    existing = [str(r["name"]) for r in rows]
    checks = await _common(t, g, "VM.Snapshot.Rollback" if action == "rollback" else "VM.Snapshot")
    checks.append(
        Check(
            check="snapshot exists",
            ok=name in existing,
            detail="exists"
            if name in existing
            else f"no snapshot '{name}' (have: {', '.join(map(quote_name, existing)) or 'none'})",
        )
    )
    if action == "delete":
        effects = [f"delete snapshot '{name}' of {g.label}"]
        risks = ["irreversible: the guest can no longer be rolled back to this point"]
        path = guest_path(g.ref, "snapshot", snapshot_seg(name))
        method = "DELETE"
    else:
        if name in existing:
            checks.append(await _rollback_support(t, g, name, rows))
        effects = [f"roll {g.label} back to snapshot '{name}'"]
        risks = [
            "irreversible: every change since the snapshot (disks and config) is lost",
            "the guest is stopped unless the snapshot includes RAM",
        ]
        path = guest_path(g.ref, "snapshot", snapshot_seg(name), "rollback")
        method = "POST"

    async def execute() -> Any:
        return await t.client.call(method, path)  # type: ignore[arg-type]

    return Plan(
        target=g.target(),
        state=g.state(*existing),
        summary=sentence(effects[0]),
        effects=effects,
        risks=risks,
        checks=checks,
        execute=execute,
    )


@guarded(toolset="guests", tier=Tier.ADMIN, destructive=True)
async def snapshot_delete(
    t: ToolContext,
    vmid: VmId,
    name: SnapshotName,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 600,
) -> WriteResult:
    """Delete a snapshot (admin tier)."""
    return await two_phase(
        t,
        write_params(vmid, name=name),
        lambda: _snapshot_plan(t, vmid, name, "delete"),
        confirm_token,
        wait,
        wait_timeout,
    )


@guarded(toolset="guests", tier=Tier.ADMIN, destructive=True, idempotent=False)
async def snapshot_rollback(
    t: ToolContext,
    vmid: VmId,
    name: SnapshotName,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 600,
) -> WriteResult:
    """Roll back to a snapshot (admin tier)."""
    return await two_phase(
        t,
        write_params(vmid, name=name),
        lambda: _snapshot_plan(t, vmid, name, "rollback"),
        confirm_token,
        wait,
        wait_timeout,
    )


# ---------------------------------------------------------------- backup


async def _vzdump_check(t: ToolContext, g: Guest, cfg: dict[str, Any], mode: str, protected: bool) -> Check:
    """What vzdump's task would refuse for this guest (analysis/backups.py vzdump_refusals): the node's vzdump
    defaults for the storage (its prune-backups folded in), the guest's backups there, its HA resource."""
    sid, node = str(cfg["storage"]), node_seg(g.ref.node)
    reads: list[tuple[str, ApiPath, dict[str, Any]]] = [
        ("defaults", api_path("nodes", node, "vzdump", "defaults"), {"storage": sid}),
        (
            "backups",
            api_path("nodes", node, "storage", storage_seg(sid), "content"),
            {"content": "backup", "vmid": g.ref.vmid},
        ),
    ]
    if mode == "stop":
        reads.append(("ha", api_path("cluster", "ha", "resources"), {}))
    got = await gather(t.client, reads)
    failed = next((v for v in got.values() if isinstance(v, PveError)), None)
    if failed is not None:
        return Check(check="vzdump will back it up", ok=False, detail=f"not provable: {failed.message}")
    answers: dict[str, Any] = dict(got)
    sids = (f"vm:{g.ref.vmid}", f"ct:{g.ref.vmid}")  # HA Config.pm vm_is_ha_managed looks at both
    res = next((r for r in answers.get("ha") or [] if r.get("sid") in sids), None)
    may_allocate = protected and (await privilege_check(t, f"/storage/{sid}", ["Datastore.Allocate"])).ok
    refused = vzdump_refusals(
        g.ref.type,
        mode,
        protected,
        answers["defaults"].get("prune-backups"),
        answers["backups"],
        cfg,
        may_allocate,
        None if res is None else str(res.get("state") or "started"),
    )
    if refused:
        return Check(check="vzdump will back it up", ok=False, detail="; ".join(refused))
    return Check(check="vzdump will back it up", ok=True, detail="no backup limit, protection cap or HA rule stops it")


@guarded(toolset="backups", tier=Tier.OPERATOR, idempotent=False)
async def backup_now(
    t: ToolContext,
    vmid: VmId,
    storage: StorageId,
    mode: Literal["snapshot", "suspend", "stop"] = "snapshot",
    protected: bool = False,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 3600,
) -> WriteResult:
    """Back up one guest now to a chosen storage (never prunes older backups)."""

    async def plan() -> Plan:
        g = await load_guest(t, vmid)
        storages: list[dict[str, Any]] = await t.client.get(api_path("storage"))
        cfg = next((s for s in storages if s.get("storage") == storage), None)
        checks = [
            await privilege_check(t, f"/vms/{vmid}", ["VM.Backup"]),
            await privilege_check(t, f"/storage/{storage}", ["Datastore.AllocateSpace"]),
            lock_check(g),
        ]
        if cfg is None:
            checks.append(Check(check="storage exists", ok=False, detail=f"no storage '{storage}' visible"))
        else:
            backup_ok = "backup" in str(cfg.get("content", "")).split(",")
            checks.append(Check(check="storage takes backups", ok=backup_ok, detail=f"content is {cfg.get('content')}"))
            on_node = storage_on(ClusterData(now=0, storage_config=storages), storage, g.ref.node)
            checks.append(
                Check(
                    check=f"storage available on {g.ref.node}",
                    ok=on_node,
                    detail="available" if on_node else f"'{storage}' is not enabled on {g.ref.node}",
                )
            )
            if backup_ok and on_node:
                checks.append(await _vzdump_check(t, g, cfg, mode, protected))
        effects = [f"back up {g.label} to {storage} ({mode} mode)" + (", protected" if protected else "")]
        risks = []
        if mode == "stop" and g.running:
            risks.append("stop mode shuts the guest down for the backup and starts it again: downtime")
        elif mode == "suspend" and g.running:
            risks.append("suspend mode pauses the guest during parts of the backup")
        else:
            risks.append("the backup adds I/O load on the node and the storage while it runs")
        params = {
            "vmid": str(vmid),
            "storage": storage,
            "mode": mode,
            "remove": False,
            "notes-template": "{{guestname}} (pve-steward)",
            "protected": protected or None,
        }

        async def execute() -> Any:
            return await t.client.call("POST", api_path("nodes", node_seg(g.ref.node), "vzdump"), **params)

        return Plan(
            target=g.target(),
            state=g.state(),
            summary=sentence(effects[0]),
            effects=effects,
            risks=risks,
            checks=checks,
            execute=execute,
        )

    return await two_phase(
        t, write_params(vmid, storage=storage, mode=mode, protected=protected), plan, confirm_token, wait, wait_timeout
    )


# ---------------------------------------------------------------- migration


@guarded(toolset="guests", tier=Tier.OPERATOR, destructive=True, idempotent=False)
async def guest_migrate(
    t: ToolContext,
    vmid: VmId,
    target: NodeName | None = None,
    allow_offline: bool = False,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 3600,
) -> WriteResult:
    """Migrate a guest; the mode comes from its migratability; HA-managed guests are refused (use ha_migrate)."""

    async def plan() -> Plan:
        data = await collect(t.client, t.now(), ["migration", "ha"], vmids=[vmid], preconditions=True)
        if vmid not in data.guests:
            raise Refused(f"no guest {vmid} is visible in this cluster")
        if target is not None and target not in data.nodes:
            raise Refused(f"no node '{target}' in this cluster")
        row = data.guests[vmid]
        guest_type: str = "lxc" if row.get("type") == "lxc" else "qemu"
        source = str(row["node"])
        ref = TargetRef(vmid=vmid, name=str(row.get("name") or vmid), type=guest_type, node=str(row["node"]))
        if data.ha_managed(vmid) is not None:
            raise Refused(
                f"{vmid} is HA-managed: the HA manager moves it. Use ha_migrate (or HA node maintenance "
                f"mode); a direct migration would only become an HA request"
            )
        move = plan_guest_move(data, vmid, target, allow_offline=allow_offline)
        checks = [await privilege_check(t, f"/vms/{vmid}", ["VM.Migrate"])]
        checks += [Check(check=b.code, ok=False, detail=b.detail) for b in move.blockers]
        running = row.get("status") == "running"
        if move.can_move and move.mode == "offline" and running:
            checks.append(
                Check(
                    check="no shutdown needed",
                    ok=False,
                    detail=f"{vmid} can only move offline: shut it down first (guest_shutdown), then migrate",
                )
            )
        chosen = move.target or target or ""
        kind = "VM" if ref.type == "qemu" else "CT"
        how = {"live": "live (no downtime)", "offline": "offline", "restart": "with a restart (downtime)"}.get(
            move.mode or "", ""
        )
        effects = [
            f"migrate {kind} {vmid} {quote_name(ref.name)} from {quote_name(ref.node)} to {chosen} {how}".strip()
        ]
        if move.with_local_disks:
            effects.append(f"copy {move.copy_bytes / 1024**3:.1f} GiB of local disks over the network")
        risks = [*move.notes]
        if move.mode == "restart":
            risks.append("the container is stopped, moved and started again")
        params: dict[str, Any] = {"target": chosen}
        if ref.type == "qemu" and running:
            params["online"] = True
            if move.with_local_disks:
                params["with-local-disks"] = True
        if ref.type == "lxc" and running:
            params["restart"] = True
        cfg = data.configs.get(vmid, {})
        pre = data.preconditions.get(vmid, {})
        state = fingerprint(
            ref.node,
            cfg.get("digest"),
            row.get("status"),
            row.get("lock"),
            chosen,
            move.mode,
            sorted(pre.get("local_resources") or []),
            len(pre.get("local_disks") or []),
        )

        async def execute() -> Any:
            return await t.client.call(
                "POST", api_path("nodes", node_seg(source), guest_type, vmid_seg(vmid), "migrate"), **params
            )

        summary = sentence(effects[0])
        return Plan(
            target=ref,
            state=state,
            summary=summary,
            effects=effects,
            risks=risks,
            checks=checks,
            execute=execute,
            extra={"target_node": chosen},
        )

    return await two_phase(
        t, write_params(vmid, target=target, allow_offline=allow_offline), plan, confirm_token, wait, wait_timeout
    )


# ---------------------------------------------------------------- HA


async def _ha_plan(t: ToolContext, vmid: int, node: str, action: Literal["migrate", "relocate"]) -> Plan:
    data = await collect(t.client, t.now(), ["ha"])
    row = data.guests.get(vmid)
    if row is None:
        raise Refused(f"no guest {vmid} is visible in this cluster")
    res = data.ha_managed(vmid)
    if res is None:
        raise Refused(f"{vmid} is not HA-managed; use guest_migrate")
    sid = str(res["sid"])
    service = next((s for s in data.ha_status if s.get("type") == "service" and s.get("sid") == sid), {})
    state = str(service.get("crm_state") or service.get("state") or "")
    ref = TargetRef(vmid=vmid, name=str(row.get("name") or vmid), type=row["type"], node=str(row["node"]), sid=sid)
    allowed = ha_allowed_nodes(data, sid)
    # the CRM refuses a target a negative-affinity partner holds, and one not HA-online (maintenance): it logs
    # and does nothing (pve-ha-manager Manager.pm queue_resource_motion, update_crm_commands)
    apart = ha_blocked_nodes(data, sid).get(node, [])
    away = node in maintenance_nodes(data)
    checks = [
        await privilege_check(t, "/", ["Sys.Console"]),
        Check(
            check="target is another node",
            ok=node != ref.node,
            detail=f"{sid} already runs on {node}" if node == ref.node else f"{ref.node} -> {node}",
        ),
        Check(
            check="target online",
            ok=bool(data.nodes.get(node, {}).get("online")),
            detail="online" if data.nodes.get(node, {}).get("online") else f"{node} is offline or unknown",
        ),
        Check(
            check="HA state allows a move",
            ok=state not in ("error", "fence", "recovery"),
            detail=f"HA state is {state or 'unknown'}",
        ),
        Check(
            check="HA rules allow the target",
            ok=allowed is None or node in allowed,
            detail="no strict rule" if allowed is None else f"allowed nodes: {', '.join(allowed)}",
        ),
        Check(
            check="no negative resource affinity on the target",
            ok=not apart,
            detail=f"kept apart from {', '.join(apart)}, which are on {node}" if apart else "none",
        ),
        Check(
            check="target not in HA maintenance",
            ok=not away,
            detail=f"{node} is in HA maintenance mode" if away else "not in maintenance",
        ),
    ]
    kind = "VM" if ref.type == "qemu" else "CT"
    # a service that is not running moves offline, whichever the command (pve-ha-manager LRM.pm + Resources/PVEVM.pm
    # migrate; qemu-server migrate_vm: "VM isn't running. Doing offline migration instead"; PVECT.pm never online)
    if row.get("status") != "running":
        verb = "move (offline: it is not running)"
    elif action == "migrate" and ref.type == "qemu":
        verb = "live-migrate"
    else:
        verb = "relocate (stop, move, start)"
    effects = [
        f"ask the HA manager to {verb} {kind} {vmid} {quote_name(ref.name)} ({sid}) "
        f"from {quote_name(ref.node)} to {node}"
    ]
    peers = sorted(together(data).get(sid, frozenset()) - {sid})
    if peers:  # queue_resource_motion moves positive-affinity partners along (the answer's comigrated-resources)
        effects.append(f"the HA manager moves its positive resource-affinity partners {', '.join(peers)} to {node} too")
    risks = ["the HA manager carries it out; it may refuse or move the guest again later (rules, failback)"]
    if verb.startswith("relocate"):
        risks.append("relocation stops the guest for the move: downtime")

    async def execute() -> Any:
        return await t.client.call("POST", api_path("cluster", "ha", "resources", ha_sid(sid), action), node=node)

    return Plan(
        target=ref,
        state=fingerprint(ref.node, state, res.get("state"), res.get("digest")),
        summary=sentence(effects[0]),
        effects=effects,
        risks=risks,
        checks=checks,
        execute=execute,
        follow="ha",
    )


@guarded(toolset="ha", tier=Tier.OPERATOR, destructive=True, idempotent=False)
async def ha_migrate(
    t: ToolContext,
    vmid: VmId,
    node: NodeName,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 3600,
) -> WriteResult:
    """Ask the HA manager to migrate an HA-managed guest."""
    return await two_phase(
        t, write_params(vmid, node=node), lambda: _ha_plan(t, vmid, node, "migrate"), confirm_token, wait, wait_timeout
    )


@guarded(toolset="ha", tier=Tier.OPERATOR, destructive=True, idempotent=False)
async def ha_relocate(
    t: ToolContext,
    vmid: VmId,
    node: NodeName,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 3600,
) -> WriteResult:
    """Ask the HA manager to relocate (stop, move, start) an HA-managed guest."""
    return await two_phase(
        t, write_params(vmid, node=node), lambda: _ha_plan(t, vmid, node, "relocate"), confirm_token, wait, wait_timeout
    )
