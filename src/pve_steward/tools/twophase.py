"""The two-phase write protocol every write goes through.

Phase 1 (no token): resolve the target on the server, check every precondition (privileges of
this token, guest state, locks, ...), and return a preview with a confirmation token bound to the
operation, its effect-bearing parameters, the resolved target and a fingerprint of the target's
state. Phase 2 (same parameters + token): re-resolve, refuse if anything changed, ask the human if
the client can be asked, consume the token, execute, and follow the PVE task to its real end.

Execution is audited write-ahead: an fsync'd ``write_executing`` record before the request goes
to PVE, a ``write_submitted`` record with the UPID as soon as PVE answers, and a ``write_outcome``
record (``ok``, ``failed``, ``running``, ``cancelled``, ``unknown``) in a ``finally``. From the
request on, the work is shielded from cancellation: a client that cancels cannot stop the
follow-up, so the task's real end is recorded. A kill -9 leaves an ``executing`` record without
an outcome, which ``pve-steward audit pending`` lists.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from mcp.server.elicitation import AcceptedElicitation
from pydantic import Field

from pve_steward.errors import PveError, PveUnavailable
from pve_steward.models import Model, Untrusted, iso
from pve_steward.pve.ids import parse_upid
from pve_steward.pveio.client import api_path
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import upid as upid_seg
from pve_steward.security import authority
from pve_steward.security.audit import redact_params
from pve_steward.security.confirm import Confirm, NotAsked
from pve_steward.security.guard import Refused
from pve_steward.security.tokens import binding_of
from pve_steward.tools.context import ToolContext

LOG_TAIL = 15


class TargetRef(Model):
    """What the write acts on, as resolved by the server."""

    vmid: int | None = None
    name: Untrusted | None = Field(None, description="guest name")
    type: Literal["qemu", "lxc"] | None = None
    node: Untrusted | None = None
    sid: str | None = None
    id: Untrusted | None = Field(None, description="a non-guest object: backup job, replication job or task")


# A preview's sentences are ours, but they quote cluster names (through security/sanitise.quote_name):
# marked whole, as analysis reports mark theirs (design records 261203-3, 261206-57).
class Check(Model):
    check: Untrusted  # what was checked: may name an ACL path with a storage or node in it
    ok: bool
    detail: Untrusted


class TaskOutcome(Model):
    upid: Untrusted
    node: Untrusted
    state: Literal["running", "ok", "warning", "failed"]
    exitstatus: Untrusted | None = None
    duration_s: float | None = None
    log_tail: list[Untrusted] = Field(default_factory=list)


class WriteResult(Model):
    operation: str
    status: Literal["preview", "completed", "failed", "running", "submitted", "unknown"] = Field(
        description="unknown: PVE has the request but its outcome could not be read; check, do not retry"
    )
    summary: Untrusted
    target: TargetRef
    effects: list[Untrusted] = Field(default_factory=list, description="what happens (or happened)")
    risks: list[Untrusted] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list, description="preconditions verified")
    error: Untrusted | None = Field(
        None, description="what PVE answered, or why the outcome could not be read (failed, unknown)"
    )
    confirm_token: str | None = Field(None, description="pass back unchanged, with the same parameters, to execute")
    expires_at: str | None = None
    task: TaskOutcome | None = None
    next_step: str = ""


@dataclass
class Plan:
    """What a write resolved to; built fresh on both phases."""

    target: TargetRef
    state: str  # fingerprint of everything the preview relied on
    summary: str
    effects: list[str]
    risks: list[str]
    checks: list[Check]
    execute: Callable[[], Awaitable[Any]]
    # task: execute returns a UPID to follow; ha: the HA manager starts a task of ``ha_task_types``
    # (or none when ``ha_task_types`` is empty); sync: PVE applied it before answering.
    follow: Literal["task", "ha", "sync"] = "task"
    ha_task_types: tuple[str, ...] = ("qmigrate", "vzmigrate", "qmrelocate")
    # Re-read after a sync or HA write: None when the effect is visible, else what is not.
    verify: Callable[[], Awaitable[str | None]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def sentence(text: str) -> str:
    """An effect line ("stop VM 100 ...") as a summary ("Stop VM 100 ...")."""
    return text[:1].upper() + text[1:]


def toggle_check(current: bool, wanted: bool, on: str = "enabled", off: str = "disabled") -> Check:
    """The precondition of an on/off write: it must change something."""
    word = {True: on, False: off}
    detail = f"already {word[wanted]}" if current == wanted else f"{word[current]} -> {word[wanted]}"
    return Check(check="setting changes", ok=current != wanted, detail=detail)


def fingerprint(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:24]


async def privilege_check(t: ToolContext, path: str, needed: list[str], any_of: bool = False) -> Check:
    """Does this token hold the privilege(s) on the path (PVE's effective permissions)?"""
    try:
        perms: dict[str, dict[str, int]] = await t.client.get(api_path("access", "permissions"), path=path)
    except PveError as exc:
        return Check(
            check=f"privileges on {path}", ok=False, detail=f"could not read the token's privileges: {exc.message}"
        )
    held = {p for p, on in (perms.get(path) or {}).items() if on}
    missing = [p for p in needed if p not in held]
    ok = (len(missing) < len(needed)) if any_of else not missing
    label = " or ".join(needed) if any_of else ", ".join(needed)
    if ok:
        return Check(check=f"privileges on {path}", ok=True, detail=f"token holds {label}")
    return Check(
        check=f"privileges on {path}",
        ok=False,
        detail=f"token lacks {label if any_of else ', '.join(missing)} on {path}",
    )


# vzdump: "INFO:  45% (1.8 GiB of 4.0 GiB) in 10s, read: ..." (PVE/VZDump/QemuServer.pm, archive_vma and
# archive_pbs); drive mirror: "drive-scsi0: transferred 1.0 GiB of 32.0 GiB (3.12%) in 2s"
# (qemu-server PVE/QemuServer/BlockJob.pm, monitor). Other task types log no percentage.
_PERCENT = re.compile(r"^INFO:\s+(\d{1,3})% \(|transferred .* \((\d{1,3}(?:\.\d+)?)%\)")


def task_percent(lines: list[str]) -> float | None:
    """The task's own progress, from the last log line that states a percentage; None when none does."""
    for line in reversed(lines):
        m = _PERCENT.search(line)
        if m:
            return min(float(m.group(1) or m.group(2)), 100.0)
    return None


class OutcomeUnknown(Exception):
    """PVE has the request, but reading how it went failed: the write must not be retried blindly."""

    def __init__(self, upid: str | None, cause: str) -> None:
        super().__init__(cause)
        self.upid = upid
        self.cause = cause


async def follow_task(t: ToolContext, node: str, upid: str, timeout: float) -> TaskOutcome:
    """Poll a task to its end (or the timeout), sending MCP progress while it runs.

    Progress carries a total only when the task itself reports a percentage (its log says so);
    otherwise the elapsed seconds are sent with no total, never an invented one.
    """
    base = api_path("nodes", node_seg(node), "tasks", upid_seg(upid))
    started = time.monotonic()
    delay = 0.2
    info = parse_upid(upid)
    seen = 0
    percent: float | None = None
    try:
        while True:
            status: dict[str, Any] = await t.client.get(base.join("status"))
            elapsed = time.monotonic() - started
            if status.get("status") == "stopped":
                break
            new: list[dict[str, Any]] = await t.client.get(base.join("log"), start=seen, limit=500)
            seen += len(new)
            latest = task_percent([str(line.get("t", "")) for line in new])
            percent = latest if latest is not None else percent
            if elapsed >= timeout:
                await _progress(t, percent, elapsed, f"{info.type} still running after {elapsed:.0f} s")
                return TaskOutcome(upid=upid, node=node, state="running", duration_s=round(elapsed, 1))
            await _progress(t, percent, elapsed, f"{info.type} running ({elapsed:.0f} s)")
            await anyio.sleep(delay)
            delay = min(delay * 1.5, 2.0)
        lines: list[dict[str, Any]] = await t.client.get(base.join("log"), start=0, limit=5000)
    except PveError as exc:
        raise OutcomeUnknown(upid, exc.message) from None
    exit_status = str(status.get("exitstatus", "unknown"))
    state: Literal["ok", "warning", "failed"] = (
        "ok" if exit_status == "OK" else "warning" if exit_status.startswith("WARNINGS") else "failed"
    )
    await _progress(
        t, 100.0 if percent is not None else None, time.monotonic() - started, f"{info.type} finished: {exit_status}"
    )
    return TaskOutcome(
        upid=upid,
        node=node,
        state=state,
        exitstatus=exit_status,
        duration_s=round(time.monotonic() - started, 1),
        log_tail=[str(line.get("t", "")) for line in lines][-LOG_TAIL:],
    )


async def _progress(t: ToolContext, percent: float | None, elapsed: float, message: str) -> None:
    if percent is None:
        await t.progress(round(elapsed, 1), None, message)
    else:
        await t.progress(percent, 100.0, message)


async def follow_ha(
    t: ToolContext, vmid: int, since: float, timeout: float, types: tuple[str, ...]
) -> TaskOutcome | None:
    """HA requests return no task: find the task the HA manager starts for the guest, then follow it."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            tasks: list[dict[str, Any]] = await t.client.get(api_path("cluster", "tasks"))
        except PveError as exc:
            raise OutcomeUnknown(None, exc.message) from None
        for task in tasks:
            if (
                task.get("type") in types
                and str(task.get("id")) == str(vmid)
                and int(task.get("starttime", 0)) >= int(since)
            ):
                remaining = max(timeout - (time.monotonic() - started), 1.0)
                return await follow_task(t, str(task["node"]), str(task["upid"]), remaining)
        await t.progress(round(time.monotonic() - started, 1), None, "waiting for the HA manager to start the move")
        await anyio.sleep(0.5)
    return None


def cluster_of(t: ToolContext) -> str:
    """The cluster a token is bound to: the PVE address and the API token id acting on it."""
    return f"{t.settings.url}|{t.settings.token_id}"


def principal_of(t: ToolContext) -> str | None:
    """Who is calling, when the transport identified someone: the namespaced principal id (``static:NAME`` or
    ``oidc:ISSUER#SUBJECT``), so an OIDC subject never confirms a static token's preview; None otherwise."""
    principal = authority.current()
    return None if principal is None else principal.id


def _asked(t: ToolContext) -> NotAsked | None:
    """What the resolver said when it did not ask the human, if that is what happened."""
    human = t.human
    if isinstance(human, AcceptedElicitation) and isinstance(human.data, NotAsked):
        return human.data
    return None


def _check_human(t: ToolContext) -> None:
    """Refuse unless the human confirmed, or could not be asked (the token round trip is then the confirmation)."""
    human = t.human
    if human is not None and not isinstance(human, AcceptedElicitation):
        raise Refused(f"the user {getattr(human, 'action', 'did not confirm')} the action; nothing was changed")
    if isinstance(human, AcceptedElicitation):
        if isinstance(human.data, Confirm) and not human.data.confirm:
            raise Refused("the user did not confirm the action; nothing was changed")
        not_asked = _asked(t)
        if t.can_elicit and not_asked is not None:
            # The client can be asked, so it must have been: a token that did not fit this call asked nothing.
            raise Refused(f"the user was not asked to confirm ({not_asked.reason}); preview again")
        t.audit_fields["human"] = "confirmed" if not_asked is None else "not asked: " + not_asked.reason


async def two_phase(
    t: ToolContext,
    params: dict[str, Any],
    resolve: Callable[[], Awaitable[Plan]],
    confirm_token: str | None,
    wait: bool,
    wait_timeout: float,
) -> WriteResult:
    op = t.op.name
    signer = t.app.signer
    now = t.now()
    binding = binding_of(cluster_of(t), principal_of(t), t.app.cluster)
    t.audit_fields["phase"] = "preview" if confirm_token is None else "execute"
    payload = None if confirm_token is None else await signer.check(confirm_token, op, params, now, binding)
    plan = await resolve()
    target = plan.target.model_dump(exclude_none=True)  # plain strings: the audit and the token bind the values
    t.audit_fields["target"] = target
    if payload is not None:
        signer.check_target(payload, target, plan.state)
    failed = [c for c in plan.checks if not c.ok]
    if failed:
        raise Refused(f"{op} refused: " + "; ".join(f"{c.check}: {c.detail}" for c in failed))
    base = {
        "operation": op,
        "summary": plan.summary,
        "target": plan.target,
        "effects": plan.effects,
        "risks": plan.risks,
        "checks": plan.checks,
    }
    if payload is None or confirm_token is None:
        asked = _asked(t)
        call = asked.call if asked is not None else None
        token = signer.issue(op, params, target, plan.state, now, summary=plan.summary, binding=binding, call=call)
        return WriteResult(
            **base,
            status="preview",
            confirm_token=token,
            expires_at=iso(now + signer.ttl),
            next_step=(
                f"Nothing has changed yet. Show this preview to the user; only if they agree, call {t.refer(op)} "
                f"again with exactly the same parameters and this confirm_token (valid {signer.ttl} s, once)."
            ),
        )
    _check_human(t)
    await signer.consume(payload)
    t.audit_fields["token_nonce"] = payload["n"]
    return await execute_audited(t, plan, base, params, confirm_token, wait, wait_timeout)


async def execute_audited(
    t: ToolContext,
    plan: Plan,
    base: dict[str, Any],
    params: dict[str, Any],
    confirm_token: str,
    wait: bool,
    wait_timeout: float,
) -> WriteResult:
    """Write-ahead audit around the request and its follow-up; see the module docstring."""
    write_id = secrets.token_hex(8)
    fingerprint_ = redact_params({"confirm_token": confirm_token})["confirm_token"]
    await t.app.audit.record(
        {
            "event": "write_executing",
            "write_id": write_id,
            "operation": t.op.name,
            "params": redact_params(params),
            "target": plan.target.model_dump(exclude_none=True),  # plain strings, ints: JSON as they are
            "token": fingerprint_,
            "principal": principal_of(t),
            "cluster": {"url": t.settings.url, "pve_token": t.settings.token_id}
            | ({"name": t.app.cluster} if t.app.cluster is not None else {}),
            "client": t.client_identity,
        },
    )
    end: dict[str, Any] = {"outcome": "cancelled"}  # until the request is on its way
    try:
        with anyio.CancelScope(shield=True):
            result = await _execute(t, plan, base, wait, wait_timeout, write_id, end)
        end["outcome"] = _OUTCOME[result.status]
        try:
            await anyio.lowlevel.checkpoint()  # a cancel that arrived during the shielded part lands here
        except anyio.get_cancelled_exc_class():
            end["client_cancelled"] = True
            raise
        return result
    finally:
        await t.app.audit.record({"event": "write_outcome", "write_id": write_id, "operation": t.op.name, **end})


_OUTCOME = {
    "completed": "ok",
    "failed": "failed",
    "running": "running",
    "submitted": "running",
    "unknown": "unknown",
    "preview": "unknown",
}


def _unknown(base: dict[str, Any], upid: str | None, cause: str) -> WriteResult:
    what = "task in `task`" if upid else "no task id yet"
    check = "check with get_task" if upid else "check with list_tasks and get_guest"
    return WriteResult(
        **base,
        status="unknown",
        task=TaskOutcome(upid=upid, node=parse_upid(upid).node, state="running") if upid else None,
        error=cause,
        next_step=f"Submitted, outcome unknown, {what} (see `error`); {check}; do not retry.",
    )


async def _execute(
    t: ToolContext,
    plan: Plan,
    base: dict[str, Any],
    wait: bool,
    wait_timeout: float,
    write_id: str,
    end: dict[str, Any],
) -> WriteResult:
    since = time.time() - 2
    end["outcome"] = "unknown"  # from here on PVE may have the request
    try:
        answer = await plan.execute()
    except PveUnavailable as exc:  # no answer: the request may or may not have reached PVE
        end["error"] = exc.message
        return _unknown(base, None, f"the request got no answer: {exc.message}")
    except PveError as exc:  # PVE answered with an error: it did not take the request
        end.update(outcome="failed", error=exc.message)
        raise
    try:
        return await _follow(t, plan, base, answer, since, wait, wait_timeout, write_id, end)
    except OutcomeUnknown as exc:
        end["error"] = exc.cause
        t.audit_fields["task_state"] = "unknown"
        return _unknown(base, exc.upid or end.get("upid"), f"reading its status failed: {exc.cause}")


async def _follow(
    t: ToolContext,
    plan: Plan,
    base: dict[str, Any],
    answer: Any,
    since: float,
    wait: bool,
    wait_timeout: float,
    write_id: str,
    end: dict[str, Any],
) -> WriteResult:
    if plan.follow == "sync" or (plan.follow == "ha" and not plan.ha_task_types):
        try:
            problem = await plan.verify() if plan.verify else None
        except PveError as exc:
            raise OutcomeUnknown(None, exc.message) from None
        t.audit_fields["task_state"] = "failed" if problem else "ok"
        if problem:
            end["error"] = problem
            return WriteResult(
                **base,
                status="failed",
                error=problem,
                next_step="PVE accepted the request but the change is not visible (`error`); check before retrying.",
            )
        return WriteResult(**base, status="completed", next_step="Done; the change was read back from PVE.")
    outcome: TaskOutcome | None
    if plan.follow == "task":
        upid = str(answer)
        t.audit_fields["upid"] = end["upid"] = upid
        await t.app.audit.record({"event": "write_submitted", "write_id": write_id, "upid": upid})
        if not wait:
            return WriteResult(
                **base,
                status="submitted",
                task=TaskOutcome(upid=upid, node=parse_upid(upid).node, state="running"),
                next_step=f"Follow it with {t.refer('get_task')}.",
            )
        outcome = await follow_task(t, parse_upid(upid).node, upid, wait_timeout)
    else:
        t.audit_fields["ha_request"] = answer
        outcome = (
            await follow_ha(t, int(plan.target.vmid or 0), since, wait_timeout, plan.ha_task_types) if wait else None
        )
        if outcome is None:
            return WriteResult(
                **base,
                status="submitted",
                next_step=(
                    "The HA manager accepted the request; watch it with "
                    f"{t.refer('list_tasks')} or {t.refer('diagnose_ha')}."
                ),
            )
        t.audit_fields["upid"] = end["upid"] = outcome.upid
    t.audit_fields["task_state"] = outcome.state
    t.audit_fields["exitstatus"] = end["exitstatus"] = outcome.exitstatus
    status: Literal["completed", "failed", "running"] = (
        "running" if outcome.state == "running" else "failed" if outcome.state == "failed" else "completed"
    )
    steps = {
        "completed": f"Done. Verify with {t.refer('get_guest')} if needed.",
        "failed": "The PVE task FAILED: nothing may have changed. Read log_tail and fix the cause before retrying.",
        "running": f"Still running after the wait timeout; follow it with {t.refer('get_task')}.",
    }
    return WriteResult(**base, status=status, task=outcome, next_step=steps[status])
