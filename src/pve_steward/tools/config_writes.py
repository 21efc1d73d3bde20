"""Configuration writes: guest tags, notes and start-on-boot, clearing a stuck lock, HA requested
state, enabling or disabling backup and replication jobs, stopping a running task.

All go through the same two-phase runner as the power and migration writes. Guest config
changes pass the config ``digest`` from the preview, so PVE itself refuses them if anyone changed
the guest in between; every change is read back before it is reported as done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

from pve_steward.analysis.backups import job_covers
from pve_steward.analysis.guesttags import stored_tags, tag_refusal
from pve_steward.analysis.vzdumptarget import job_enabled
from pve_steward.errors import PveError
from pve_steward.pve.ids import BackupJobId, ReplicationJobId, Upid, VmId, parse_upid
from pve_steward.pve.tasks import task_running
from pve_steward.pveio.client import api_path, gather
from pve_steward.pveio.client import backup_job as backup_job_seg
from pve_steward.pveio.client import ha_sid as ha_sid_seg
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import replication_job as replication_seg
from pve_steward.pveio.client import upid as upid_seg
from pve_steward.security.guard import Refused, guarded
from pve_steward.security.sanitise import quote_name
from pve_steward.security.tiers import Tier
from pve_steward.tools.context import ToolContext
from pve_steward.tools.fetch import guest_path
from pve_steward.tools.hastatus import ha_accepts
from pve_steward.tools.twophase import (
    Check,
    Plan,
    TargetRef,
    WriteResult,
    fingerprint,
    privilege_check,
    sentence,
    toggle_check,
    two_phase,
)
from pve_steward.tools.writes import Guest, Token, WaitTimeout, load_guest, lock_check, write_params

Tag = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_][a-zA-Z0-9_\-+.]{0,63}$")]
Notes = Annotated[str, Field(max_length=8192)]
WAIT_SYNC = 60


def _sync_plan(
    target: TargetRef,
    state: str,
    effect: str,
    risks: list[str],
    checks: list[Check],
    execute: Callable[[], Awaitable[Any]],
    verify: Callable[[], Awaitable[str | None]],
) -> Plan:
    """A write PVE applies before answering (no task): one effect, read back by ``verify``."""
    return Plan(
        target=target,
        state=state,
        summary=sentence(effect),
        effects=[effect],
        risks=risks,
        checks=checks,
        execute=execute,
        follow="sync",
        verify=verify,
    )


def _norm(key: str, value: Any) -> Any:
    """Config values as compared after a write (PVE may reorder tags)."""
    if value is None or value == "":
        return None
    if key == "tags":
        return sorted(x for x in str(value).replace(",", ";").split(";") if x)
    return str(value)


async def _config_plan(
    t: ToolContext, g: Guest, changes: dict[str, Any], effect: str, risks: list[str], readback: dict[str, str | None]
) -> Plan:
    """A config change of the guest the caller loaded: privilege, lock, passed digest, and a read-back of
    ``readback`` keys."""
    checks = [await privilege_check(t, f"/vms/{g.ref.vmid}", ["VM.Config.Options"]), lock_check(g)]
    digest = g.cfg.digest

    async def execute() -> Any:
        return await t.client.call("PUT", guest_path(g.ref, "config"), digest=digest, **changes)

    async def verify() -> str | None:
        raw: dict[str, Any] = await t.client.get(guest_path(g.ref, "config"))
        wrong = [k for k, v in readback.items() if _norm(k, raw.get(k)) != _norm(k, v)]
        return f"{', '.join(wrong)} still differ(s) in the guest config" if wrong else None

    return _sync_plan(g.target(), g.state(), effect, risks, checks, execute, verify)


def _tag_rules(old: list[str], new: list[str], options: Any, perms: Any) -> tuple[Check, list[str]]:
    """PVE's tag permissions (analysis/guesttags.py): a check, and a risk where the rules are not readable."""
    name = "PVE's tag rules allow it"
    if isinstance(options, PveError) or isinstance(perms, PveError):
        failed = options if isinstance(options, PveError) else perms
        return Check(check=name, ok=False, detail=f"not provable: {failed.message}"), []
    held = {p for p, on in (perms.get("/") or {}).items() if on}
    if "Sys.Modify" in held:
        return Check(check=name, ok=True, detail="token holds Sys.Modify on /: any tag"), []
    refused, unknown = tag_refusal(old, new, options, "Sys.Audit" in held)
    if refused:
        return Check(check=name, ok=False, detail=refused), []
    doubt = [
        f"PVE refuses tag(s) {', '.join(unknown)} if datacenter.cfg restricts tags (its rules need Sys.Audit on / "
        "to read)"
    ]
    return Check(check=name, ok=True, detail="every changed tag may be set"), doubt if unknown else []


@guarded(toolset="guests", tier=Tier.OPERATOR)
async def guest_set_tags(
    t: ToolContext, vmid: VmId, tags: Annotated[list[Tag], Field(max_length=32)], confirm_token: Token | None = None
) -> WriteResult:
    """Replace a guest's tags (an empty list removes them all); PVE stores them as datacenter.cfg's tag-style says."""
    wanted = sorted(set(tags), key=str.lower)

    async def plan() -> Plan:
        g = await load_guest(t, vmid)
        got = await gather(
            t.client,
            [
                ("options", api_path("cluster", "options"), {}),
                ("perms", api_path("access", "permissions"), {"path": "/"}),
            ],
        )
        options = got["options"] if isinstance(got["options"], dict) else {}
        stored = stored_tags(wanted, options)
        before = ", ".join(map(quote_name, g.cfg.tags)) or "none"
        after = ", ".join(stored) or "none"
        changes: dict[str, Any] = {"tags": ";".join(wanted)} if wanted else {"delete": "tags"}
        p = await _config_plan(
            t,
            g,
            changes,
            f"set the tags of {g.label} from [{before}] to [{after}]",
            ["tags drive filters, backup and HA selection in some setups; check nothing selects by them"],
            {"tags": ";".join(stored) or None},
        )
        check, doubt = _tag_rules(list(g.cfg.tags), wanted, got["options"], got["perms"])
        p.checks.append(check)
        p.risks += doubt
        return p

    return await two_phase(t, write_params(vmid, tags=wanted), plan, confirm_token, False, WAIT_SYNC)


@guarded(toolset="guests", tier=Tier.OPERATOR, destructive=True)
async def guest_set_notes(t: ToolContext, vmid: VmId, notes: Notes, confirm_token: Token | None = None) -> WriteResult:
    """Replace a guest's notes (its description); the old text is shown in the preview."""

    async def plan() -> Plan:
        g = await load_guest(t, vmid)
        old = g.cfg.description or ""
        changes: dict[str, Any] = {"description": notes} if notes else {"delete": "description"}
        return await _config_plan(
            t,
            g,
            changes,
            f"replace the notes of {g.label} ({len(old)} characters) with {len(notes)} characters"
            if old
            else f"give {g.label} notes of {len(notes)} characters (it has none)",
            [  # overwriting nothing is no risk
                f"the current notes ({len(old)} characters) are overwritten; read them with get_guest first "
                "if they may matter"
            ]
            if old
            else [],
            {"description": notes or None},
        )

    return await two_phase(t, write_params(vmid, notes=notes), plan, confirm_token, False, WAIT_SYNC)


@guarded(toolset="guests", tier=Tier.OPERATOR)
async def guest_set_onboot(
    t: ToolContext, vmid: VmId, enabled: bool, confirm_token: Token | None = None
) -> WriteResult:
    """Start the guest when its node boots (or not)."""

    async def plan() -> Plan:
        g = await load_guest(t, vmid)
        p = await _config_plan(
            t,
            g,
            {"onboot": 1 if enabled else 0},
            f"{'enable' if enabled else 'disable'} start on boot for {g.label}",
            [] if enabled else ["after a node reboot this guest stays off until someone starts it"],
            {"onboot": "1" if enabled else "0"},
        )
        p.checks.append(toggle_check(g.cfg.onboot, enabled, on="on", off="off"))
        return p

    return await two_phase(t, write_params(vmid, enabled=enabled), plan, confirm_token, False, WAIT_SYNC)


async def _tasks_holding(t: ToolContext, g: Guest) -> list[str]:
    rows: list[dict[str, Any]] = await t.client.get(
        api_path("nodes", node_seg(g.ref.node), "tasks"), vmid=g.ref.vmid, source="active"
    )
    return [str(r.get("upid")) for r in rows if task_running(r)]


@guarded(toolset="guests", tier=Tier.ADMIN, destructive=True)
async def guest_unlock(t: ToolContext, vmid: VmId, confirm_token: Token | None = None) -> WriteResult:
    """Clear a stuck config lock, only when no task of the guest is still running.

    PVE lets only a root@pam password session skip a lock, never an API token (what this server uses): the
    preview says what holds the lock and gives the node's command instead of a token."""

    async def plan() -> Plan:
        g = await load_guest(t, vmid)
        running = await _tasks_holding(t, g)
        cli = f"{'qm' if g.ref.type == 'qemu' else 'pct'} unlock {vmid}"
        checks = [
            Check(
                check="guest is locked",
                ok=bool(g.cfg.lock),
                detail=f"lock '{g.cfg.lock}'" if g.cfg.lock else "not locked",
            ),
            Check(
                check="no task of the guest running",
                ok=not running,
                detail="none running" if not running else f"still running: {', '.join(running)} (it holds the lock)",
            ),
            # qemu-server/pve-container refuse skiplock unless the caller is root@pam itself, and a token is
            # 'root@pam!name' there: 'API tokens are always a subset of their user' (proxmox/qemu-server issue 10)
            Check(
                check="PVE lets this caller skip the lock",
                ok=False,
                detail=f"PVE lets only root@pam, logged in with its password, skip a lock; an API token cannot, not "
                f"even root@pam's ('Only root may use this option'). Run on {quote_name(g.ref.node)}: {cli}",
            ),
        ]
        risks = [
            f"the '{g.cfg.lock}' lock protects an operation that did not finish: check its state first "
            "(half-done migration, backup or snapshot; a 'suspended' guest has its RAM saved)"
        ]
        digest = g.cfg.digest

        async def execute() -> Any:
            return await t.client.call("PUT", guest_path(g.ref, "config"), delete="lock", skiplock=1, digest=digest)

        async def verify() -> str | None:
            raw: dict[str, Any] = await t.client.get(guest_path(g.ref, "config"))
            return f"still locked ('{raw['lock']}')" if raw.get("lock") else None

        effect = f"remove the '{g.cfg.lock}' lock from {g.label}"
        return _sync_plan(g.target(), g.state(*running), effect, risks, checks, execute, verify)

    return await two_phase(t, write_params(vmid), plan, confirm_token, False, WAIT_SYNC)


HaState = Literal["started", "stopped", "disabled", "ignored"]


@guarded(toolset="ha", tier=Tier.OPERATOR, destructive=True)
async def ha_set_state(
    t: ToolContext,
    vmid: VmId,
    state: HaState,
    confirm_token: Token | None = None,
    wait: bool = True,
    wait_timeout: WaitTimeout = 600,
) -> WriteResult:
    """Set the requested HA state of an HA-managed guest; the HA manager then starts or stops it."""

    async def plan() -> Plan:
        g = await load_guest(t, vmid)
        sid = g.sid
        try:
            res: dict[str, Any] = await t.client.get(api_path("cluster", "ha", "resources", ha_sid_seg(sid)))
        except PveError as exc:
            raise Refused(f"{vmid} is not HA-managed ({exc.message}); use the guest power actions") from None
        current = str(res.get("state", "started"))
        checks = [
            await privilege_check(t, "/", ["Sys.Console"]),
            Check(check="state changes", ok=current != state, detail=f"{current} -> {state}"),
            await ha_accepts(t, sid, state),
        ]
        power: str | None = None
        if state == "started" and not g.running:
            power = "start"
        elif state in ("stopped", "disabled") and g.running:
            power = "shutdown"
        effects = [f"set the requested HA state of {g.label} ({sid}) from {current} to {state}"]
        if power:
            effects.append(f"the HA manager will then {power} the guest")
        risks = {
            "started": [],
            "stopped": ["the guest is shut down and HA keeps it down (it is still HA-managed)"],
            "disabled": ["the guest is shut down and HA no longer recovers it"],
            "ignored": ["HA stops managing the guest: no recovery if its node fails"],
        }[state]
        digest = res.get("digest")

        async def execute() -> Any:
            params: dict[str, Any] = {"state": state}
            if digest:
                params["digest"] = digest
            return await t.client.call("PUT", api_path("cluster", "ha", "resources", ha_sid_seg(sid)), **params)

        async def verify() -> str | None:
            now: dict[str, Any] = await t.client.get(api_path("cluster", "ha", "resources", ha_sid_seg(sid)))
            return None if now.get("state") == state else f"requested state is {now.get('state')}"

        prefix = "qm" if g.ref.type == "qemu" else "vz"
        target = g.target()
        target.sid = sid
        return Plan(
            target=target,
            state=g.state(current, digest),
            summary=sentence(effects[0]),
            effects=effects,
            risks=risks,
            checks=checks,
            execute=execute,
            follow="ha",
            ha_task_types=(prefix + power,) if power else (),
            verify=verify,
        )

    return await two_phase(t, write_params(vmid, state=state), plan, confirm_token, wait, wait_timeout)


@guarded(toolset="backups", tier=Tier.ADMIN, destructive=True)
async def backup_job_set_enabled(
    t: ToolContext, id: BackupJobId, enabled: bool, confirm_token: Token | None = None
) -> WriteResult:
    """Enable or disable a scheduled backup job; the preview lists the guests it covers."""

    async def plan() -> Plan:
        got = await gather(
            t.client,
            [("jobs", api_path("cluster", "backup"), {}), ("guests", api_path("cluster", "resources"), {"type": "vm"})],
        )
        for value in got.values():
            if isinstance(value, PveError):
                raise value
        jobs: list[dict[str, Any]] = got["jobs"]  # type: ignore[assignment]
        job = next((j for j in jobs if str(j.get("id")) == id), None)
        if job is None:
            raise Refused(f"no backup job '{id}'; jobs: {', '.join(sorted(str(j.get('id')) for j in jobs)) or 'none'}")
        guests: list[dict[str, Any]] = [g for g in got["guests"] if g.get("type") in ("qemu", "lxc")]  # type: ignore[union-attr]
        covered = [int(g["vmid"]) for g in guests if job_covers(job, int(g["vmid"]), g.get("node"))]
        on = job_enabled(job)
        others = [j for j in jobs if j is not job and job_enabled(j)]
        orphaned = [
            v
            for v in covered
            if not any(
                job_covers(j, v, next((g.get("node") for g in guests if int(g["vmid"]) == v), None)) for j in others
            )
        ]
        checks = [
            await privilege_check(t, "/", ["Sys.Modify"]),
            toggle_check(on, enabled),
        ]
        effect = (
            f"{'enable' if enabled else 'disable'} backup job '{id}' ({job.get('schedule')}, {len(covered)} guests)"
        )
        risks = (
            []
            if enabled
            else [
                f"{len(orphaned)} guest(s) then have no enabled backup job: {', '.join(map(str, orphaned[:20]))}"
                if orphaned
                else "every guest it covers is also covered by another enabled job"
            ]
        )

        async def execute() -> Any:
            return await t.client.call(
                "PUT", api_path("cluster", "backup", backup_job_seg(id)), enabled=1 if enabled else 0
            )

        async def verify() -> str | None:
            rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "backup"))
            now = next((j for j in rows if str(j.get("id")) == id), {})
            return None if job_enabled(now) == enabled else "the job's enabled flag did not change"

        return _sync_plan(
            TargetRef(id=f"backup job {id}"), fingerprint(sorted(job.items())), effect, risks, checks, execute, verify
        )

    return await two_phase(t, {"id": id, "enabled": enabled}, plan, confirm_token, False, WAIT_SYNC)


async def _pve_major(t: ToolContext) -> int | None:
    """The cluster's PVE major release: the version check's answer, else GET /version; None if unknown."""
    version = t.app.pve_version
    if not version:
        try:
            version = str((await t.client.get(api_path("version"))).get("version") or "")
        except PveError:
            return None
    head = str(version).split(".", 1)[0]
    return int(head) if head.isdecimal() else None


def _replication_privilege(major: int | None, guest: int) -> tuple[str, str]:
    """What PUT /cluster/replication/{id} requires: VM.Replicate on the guest from PVE 9 (pve-manager
    PVE/API2/ReplicationConfig.pm update, c81fe5cc; the privilege is new in pve-access-control 9.0.3),
    Datastore.Allocate on /storage before (the 8.4 schema's check). Unknown release: PVE 9's rule."""
    if major is not None and major < 9:
        return "/storage", "Datastore.Allocate"
    return f"/vms/{guest}", "VM.Replicate"


@guarded(toolset="storage", tier=Tier.OPERATOR, destructive=True)
async def replication_set_enabled(
    t: ToolContext, job: ReplicationJobId, enabled: bool, confirm_token: Token | None = None
) -> WriteResult:
    """Enable or disable a storage replication job."""

    async def plan() -> Plan:
        rows: list[dict[str, Any]] = await t.client.get(api_path("cluster", "replication"))
        if not any(str(r.get("id")) == job for r in rows):
            raise Refused(
                f"no replication job '{job}'; jobs: {', '.join(sorted(str(r.get('id')) for r in rows)) or 'none'}"
            )
        # the list rows carry no digest (SectionConfig keeps it beside the ids); the job's own GET has it
        # (pve-manager PVE/API2/ReplicationConfig.pm read: $data->{digest} = $cfg->{digest})
        row: dict[str, Any] = await t.client.get(api_path("cluster", "replication", replication_seg(job)))
        on = not int(row.get("disable", 0) or 0)
        guest = int(job.split("-", 1)[0])  # PVE takes the guest from the id (parse_replication_job_id)
        path, privilege = _replication_privilege(await _pve_major(t), guest)
        checks = [
            await privilege_check(t, path, [privilege]),
            toggle_check(on, enabled),
        ]
        effect = f"{'enable' if enabled else 'disable'} replication job {job} (guest {guest} to {row.get('target')})"
        risks = (
            []
            if enabled
            else [
                f"the replica on {row.get('target')} ages from now on: after a failover, guest {guest} "
                "loses everything written since"
            ]
        )
        digest = row.get("digest")

        async def execute() -> Any:
            params: dict[str, Any] = {"delete": "disable"} if enabled else {"disable": 1}
            if digest:
                params["digest"] = digest
            return await t.client.call("PUT", api_path("cluster", "replication", replication_seg(job)), **params)

        async def verify() -> str | None:
            now: list[dict[str, Any]] = await t.client.get(api_path("cluster", "replication"))
            cur = next((r for r in now if str(r.get("id")) == job), {})
            return None if (not int(cur.get("disable", 0) or 0)) == enabled else "the job's disable flag did not change"

        return _sync_plan(
            TargetRef(vmid=guest, node=row.get("source"), id=f"replication job {job}"),
            fingerprint(sorted((k, v) for k, v in row.items() if k != "digest"), digest),
            effect,
            risks,
            checks,
            execute,
            verify,
        )

    return await two_phase(t, {"job": job, "enabled": enabled}, plan, confirm_token, False, WAIT_SYNC)


@guarded(toolset="tasks", tier=Tier.ADMIN, destructive=True)
async def task_stop(t: ToolContext, upid: Upid, confirm_token: Token | None = None) -> WriteResult:
    """Stop a running task (its work is left unfinished; locks it holds may stay)."""
    info = parse_upid(upid)
    base = api_path("nodes", node_seg(info.node), "tasks", upid_seg(upid))

    async def plan() -> Plan:
        status: dict[str, Any] = await t.client.get(base.join("status"))
        running = status.get("status") == "running"
        own = info.user == (t.settings.token_id or "")
        checks = [
            Check(
                check="task is running",
                ok=running,
                detail="running" if running else f"already ended: {status.get('exitstatus')}",
            ),
            Check(check="own task", ok=True, detail="started by this token")
            if own
            else await privilege_check(t, f"/nodes/{info.node}", ["Sys.Modify"]),
        ]
        effect = f"stop task {info.type} of {info.id or 'the node'} on {info.node} (started by {info.user})"
        risks = [
            "the task's work stops half done (a migration, backup or clone is left incomplete)",
            f"a lock the task holds on a guest can stay set; {t.refer('guest_unlock')} checks it, and clearing it "
            "needs qm unlock / pct unlock on the node",
        ]

        async def execute() -> Any:
            return await t.client.call("DELETE", base)

        async def verify() -> str | None:
            for _ in range(20):
                now: dict[str, Any] = await t.client.get(base.join("status"))
                if now.get("status") == "stopped":
                    return None
                await anyio.sleep(0.5)
            return "the task is still running"

        return _sync_plan(
            TargetRef(node=info.node, id=upid),
            fingerprint(status.get("status"), status.get("exitstatus")),
            effect,
            risks,
            checks,
            execute,
            verify,
        )

    return await two_phase(t, {"upid": upid}, plan, confirm_token, False, WAIT_SYNC)
