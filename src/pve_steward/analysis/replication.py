"""Storage replication (pvesr): failing jobs, lag beyond a multiple of the schedule, disabled jobs."""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.schedule import interval_seconds
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.values import integer


@pve_rule(
    "replication.first-sync",
    rule="A job's state starts at last_sync=0, last_try=0, fail_count=0; last_sync is set only when a run "
    "succeeds, fail_count grows on each failure, so last_sync=0 without failures means the first run is pending.",
    pve="pve-guest-common src/PVE/ReplicationState.pm extract_job_state + record_job_end",
    codes=("REPLICATION_STALE",),
)
def _first_sync_pending(state: Row) -> bool:
    return not integer(state.get("last_sync")) and not integer(state.get("fail_count"))


@pve_rule(
    "replication.paused-target",
    rule="A failed job is retried (next_sync = last_try + 5 min x fail_count, 30 min beyond 3) only while its "
    "target is an online cluster member; otherwise next_sync is 0, get_next_job never picks it and fail_count "
    "stops growing until the target is back (never, for a node that left the cluster).",
    pve="pve-guest-common src/PVE/ReplicationState.pm job_status + get_next_job",
    codes=("REPLICATION_PAUSED",),
)
def _paused(data: ClusterData, target: str, st: Row) -> tuple[str, bool] | None:
    """Why PVE stopped retrying a failed job, and whether it never resumes; None while it is retried."""
    nodes = data.nodes
    if nodes and target not in nodes:
        return f"target {target} is not a cluster member", True
    if nodes and not nodes[target].get("online"):
        return f"target {target} is offline", False
    if integer(st.get("next_sync")) == 0:  # PVE's own verdict, when our view of the members differs
        return "PVE schedules no retry (next_sync 0)", False
    return None


@check(
    "replication",
    codes=[
        Code(
            "REPLICATION_FAILING",
            "warning",
            "Replication failing",
            "A job has fail_count > 0 and PVE still retries it (its target is an online member; else "
            "REPLICATION_PAUSED); critical at replication_fail_critical (3) or more.",
            "Read the job's error and fix the target or storage.",
        ),
        Code(
            "REPLICATION_PAUSED",
            "warning",
            "Replication paused: target offline or gone",
            "A job has failed and its target is offline or not a cluster member (or its state says next_sync 0): "
            "PVE retries a failed job only while the target is an online member, so the job does not run and "
            "fail_count stops growing. Critical when the target is not a cluster member: it never resumes.",
            "Bring the target node back online and the job resumes. If the node left the cluster, delete the job: "
            "DELETE /cluster/replication/{id} with force=1 (drops it at once) or keep=1 (leaves the target's "
            "copies), i.e. pvesr delete <id> --force.",
        ),
        Code(
            "REPLICATION_NOT_SCHEDULED",
            "warning",
            "Replication job never run by PVE",
            "No node reports the job although every node that could answered: its guest does not exist (or sits "
            "on a node that left the cluster), or its target is the node the guest is on. PVE's scheduler skips "
            "such a job, so it never syncs, and a removal mark cannot remove a job whose guest is gone.",
            "Delete the job: DELETE /cluster/replication/{id} with force=1 (pvesr delete <id> --force) when its guest "
            "is gone; a job to the guest's own node can be deleted normally. Create a job to another node if the "
            "guest should be replicated.",
        ),
        Code(
            "REPLICATION_STALE",
            "warning",
            "Replication lagging",
            "now - last_sync exceeds replication_lag_factor (4) x the schedule interval, or the job never synced "
            "and its first sync failed. A job whose first sync is still pending is not stale.",
            "Check the job's schedule and errors.",
        ),
        Code(
            "REPLICATION_DISABLED",
            "info",
            "Replication job disabled",
            "A job has disable=1.",
            "Enable it with replication_set_enabled if the replica should stay current, or delete the job.",
        ),
        Code(
            "REPLICATION_PENDING_REMOVAL",
            "info",
            "Replication job marked for removal",
            "remove_job is set: PVE retries the removal every minute (next_sync 1) until it succeeds; meanwhile a VM "
            "cannot migrate to that job's target (containers can). Warning when the removal has failed "
            "(fail_count > 0): it is retried without end and the job never goes away.",
            "Nothing to fix while it runs: PVE removes the job on its next run. If the removal keeps failing "
            "(target unreachable), fix the error or drop the job: DELETE /cluster/replication/{id} with force=1 "
            "(removes the entry without cleanup) or keep=1 (skips the target, removes only the local snapshots).",
        ),
    ],
    thresholds=[
        Threshold(
            "replication_lag_factor", 4, "stale beyond this many schedule intervals since the last sync", minimum=1
        ),
        Threshold("replication_fail_critical", 3, "failed runs in a row that are critical", minimum=1, integer=True),
    ],
    anchors=[
        "cv4pve-diag:WC0009=REPLICATION_DISABLED",
        "cv4pve-diag:CN0004=REPLICATION_FAILING",
        "check_pve:replication=REPLICATION_FAILING",
    ],
    pve="pve-guest-common src/PVE/ReplicationState.pm extract_job_state + record_job_end",
)
def analyze_replication(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    state: dict[str, Row] = {}
    for rows in data.replication_state.values():
        for row in rows:
            state[str(row.get("id"))] = row
    for job in sorted(data.replication_jobs, key=lambda j: str(j.get("id"))):
        jid = str(job.get("id"))
        guest = integer(job.get("guest")) or 0
        subject = Subject(
            kind="replication_job",
            id=jid,
            name=str((data.guests.get(guest) or {}).get("name") or ""),
            node=(data.guests.get(guest) or {}).get("node"),
        )
        st = state.get(jid)
        never = _never_scheduled(data, job) if st is None else None
        if never is not None:
            out.append(
                finding(
                    "REPLICATION_NOT_SCHEDULED",
                    subject,
                    f"replication job {jid} is never run by PVE: {never}",
                    {"target": job.get("target"), "guest": job.get("guest"), "cause": never},
                )
            )
            continue
        if job.get("remove_job"):
            out.append(_removal(subject, job, st))
            continue
        if integer(job.get("disable")):
            out.append(
                finding(
                    "REPLICATION_DISABLED", subject, f"replication job {jid} is disabled", {"target": job.get("target")}
                )
            )
            continue
        if st is None:
            continue  # its node's status was not readable: DATA_INCOMPLETE covers it
        fails = integer(st.get("fail_count")) or 0
        if fails:
            out.append(_failing(data, t, subject, job, st, fails))
        if _first_sync_pending(st):
            continue
        interval = interval_seconds(str(job.get("schedule") or "*/15")) or 900.0
        last = integer(st.get("last_sync")) or 0
        lag = data.now - last if last else None
        limit = t.get("replication_lag_factor") * interval
        if lag is None or lag > limit:
            out.append(
                finding(
                    "REPLICATION_STALE",
                    subject,
                    f"replication {jid} last synced "
                    + (f"{lag / 3600:.1f} h ago" if lag is not None else "never")
                    + f" (limit {limit / 3600:.1f} h)",
                    {
                        "lag_seconds": round(lag) if lag is not None else None,
                        "limit_seconds": limit,
                        "schedule": job.get("schedule"),
                    },
                )
            )
    return out


@pve_rule(
    "replication.never-scheduled",
    rule="The scheduler and the status API see only jobs whose guest exists and is on the local node, and skip a "
    "job whose target is that node unless it is marked for removal ('never sync to local node'): such a job "
    "never runs, and with its guest gone not even a removal mark takes it away.",
    pve="pve-guest-common src/PVE/ReplicationState.pm job_status",
    codes=("REPLICATION_NOT_SCHEDULED",),
)
def _never_scheduled(data: ClusterData, job: Row) -> str | None:
    """Why no node reports the job, when every node that would have answered; None if a read is missing."""
    if not data.resources or not data.replication_state:
        return None  # nothing to judge by
    vmid = integer(job.get("guest"))
    row = data.guests.get(vmid) if vmid is not None else None
    if row is None:
        return f"guest {job.get('guest')} does not exist"
    node = str(row.get("node") or "")
    if data.nodes and node not in data.nodes:
        return f"guest {vmid} is on {node}, which is not a cluster member"
    if node in data.replication_state and not job.get("remove_job") and str(job.get("target")) == node:
        return f"its target {node} is the node guest {vmid} is on"
    return None


def _failing(data: ClusterData, t: Thresholds, subject: Subject, job: Row, st: Row, fails: int) -> Finding:
    """A failed job: paused by PVE when its target is gone or offline, else failing (critical at the threshold)."""
    jid, target = str(job.get("id")), str(job.get("target"))
    evidence = {"fail_count": fails, "error": st.get("error"), "target": job.get("target")}
    paused = _paused(data, target, st)
    if paused is not None:
        cause, never = paused
        return finding(
            "REPLICATION_PAUSED",
            subject,
            f"replication {jid} to {target} is paused after {fails} failed runs: {cause}; "
            f"last error: {st.get('error', '?')}",
            {**evidence, "cause": cause, "next_sync": st.get("next_sync")},
            severity=Severity.CRITICAL if never else None,
        )
    sev = Severity.CRITICAL if fails >= t.get("replication_fail_critical") else Severity.WARNING
    return finding(
        "REPLICATION_FAILING",
        subject,
        f"replication {jid} to {target} failed {fails} times: {st.get('error', '?')}",
        evidence,
        severity=sev,
    )


@pve_rule(
    "replication.removal-retried",
    rule="A job marked for removal gets next_sync 1 (run every minute, 'todo: consider fail_count?'); a failed "
    "removal (remove_job full and the target unreachable) raises fail_count and is retried without end; only "
    "DELETE with force=1 (drop the entry) or keep=1 (remove_job local: the target is skipped) ends it.",
    pve="pve-guest-common src/PVE/ReplicationState.pm job_status + src/PVE/Replication.pm replicate; "
    "pve-manager PVE/API2/ReplicationConfig.pm delete",
    codes=("REPLICATION_PENDING_REMOVAL",),
)
def _removal(subject: Subject, job: Row, st: Row | None) -> Finding:
    """A job marked for removal: info while PVE removes it, warning with the error once removal has failed."""
    jid = str(job.get("id"))
    fails = integer((st or {}).get("fail_count")) or 0
    evidence = {"remove_job": job.get("remove_job"), "target": job.get("target")}
    if not fails:
        return finding("REPLICATION_PENDING_REMOVAL", subject, f"replication job {jid} is marked for removal", evidence)
    error = (st or {}).get("error")
    return finding(
        "REPLICATION_PENDING_REMOVAL",
        subject,
        f"removal of replication job {jid} (target {job.get('target')}) failed {fails} times and is retried "
        f"every minute: {error or '?'}",
        {**evidence, "fail_count": fails, "error": error},
        severity=Severity.WARNING,
    )
