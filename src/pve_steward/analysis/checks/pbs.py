"""Proxmox Backup Server checks (design record 261203-20): datastores, garbage collection, jobs,
verification per backup group, failed tasks, and what PVE's PBS storages mean on the PBS side.

The data is read over the optional PBS connection (``tools/pbsread.py``) into ``data.pbs``; these
are not PVE reads, so the checks declare no ``Need``. Without a PBS connection the collector
reports "PBS: not configured" (CHECK_SKIPPED), and an unreachable PBS DATA_INCOMPLETE.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.data import ClusterData, guest_subject
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pbsdata import (
    PbsData,
    Row,
    finished,
    storage_maps,
    task_ok,
    upid_start,
)
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

DAY = 86400.0
SRC = "proxmox-backup"


def _store(store: str) -> Subject:
    return Subject(kind="pbs", id=f"datastore/{store}")


def mapped_storages(data: ClusterData, pbs: PbsData) -> dict[str, list[Row]]:
    """PVE storages on this PBS by the datastore they name."""
    out: dict[str, list[Row]] = {}
    for s in data.storage_config:
        if storage_maps(s, pbs) and s.get("datastore"):
            out.setdefault(str(s["datastore"]), []).append(s)
    return out


@check(
    "pbs",
    codes=[
        Code(
            "PBS_DATASTORE_NEAR_FULL",
            "warning",
            "PBS datastore nearly full",
            "A datastore's used/total (GET /status/datastore-usage) is at or above pbs_datastore_warning_pct; "
            "critical at pbs_datastore_critical_pct. A full datastore fails every backup to it.",
            "Run garbage collection, tighten prune jobs (keep-*), or grow the datastore.",
        ),
        Code(
            "PBS_DATASTORE_FULL_SOON",
            "warning",
            "PBS datastore full soon",
            "PBS's own estimate (estimated-full-date, a least-squares fit of a month of usage) is within "
            "pbs_full_warning_days; critical within pbs_full_critical_days. An estimate in the past means usage is "
            "flat or falling and is not reported.",
            "Plan capacity now: prune harder, move groups to another datastore, or add disks.",
        ),
        Code(
            "PBS_DATASTORE_ERROR",
            "critical",
            "PBS datastore error",
            "PBS could not open the datastore (the error field of GET /status/datastore-usage): backups to it fail. "
            "Offline or delete maintenance, which PBS also reports there, is PBS_DATASTORE_MAINTENANCE.",
            "Check the datastore's disk or mount on the PBS host (proxmox-backup-manager datastore list).",
        ),
    ],
    thresholds=[
        Threshold("pbs_datastore_warning_pct", 80, "PBS datastore usage (percent) that warns", maximum=100),
        Threshold("pbs_datastore_critical_pct", 90, "PBS datastore usage (percent) that is critical", maximum=100),
        Threshold("pbs_full_warning_days", 30, "warn when PBS estimates a datastore full within this many days"),
        Threshold("pbs_full_critical_days", 7, "critical when PBS estimates a datastore full within this many days"),
    ],
    pve=f"{SRC} src/api2/status.rs datastore_status; pbs-api-types datastore.rs DataStoreStatusListItem",
)
def datastore_usage(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Usage, the estimated full date and errors of each datastore PBS lists."""
    pbs = data.pbs
    if pbs is None:
        return []
    out = []
    for row in pbs.usage:
        store = str(row.get("store"))
        if row.get("error") and _maintenance_refusal(pbs, store, str(row["error"])):
            continue  # PBS_DATASTORE_MAINTENANCE says it
        if row.get("error"):
            out.append(
                finding(
                    "PBS_DATASTORE_ERROR",
                    _store(store),
                    f"PBS datastore {store}: {row['error']}",
                    {"error": row["error"]},
                )
            )
            continue
        out += _usage(data, t, store, row)
    return out


def maintenance_type(pbs: PbsData, store: str) -> str | None:
    """The datastore's maintenance type (read-only, offline, delete) from GET /admin/datastore's ``maintenance``
    or its config's ``maintenance-mode``: a property string whose default key is ``type``
    (pbs-api-types maintenance.rs MaintenanceMode)."""
    row = next((r for r in pbs.datastores if str(r.get("store")) == store), {})
    mode = row.get("maintenance") or pbs.config.get(store, {}).get("maintenance-mode")
    if not mode:
        return None
    for part in str(mode).split(","):
        key, eq, value = part.partition("=")
        if not eq or key == "type":
            return (value if eq else key) or str(mode)
    return str(mode)


@pve_rule(
    "pbs.maintenance-refusal",
    rule="Offline and delete maintenance make PBS refuse to open a datastore for reading; datastore-usage then "
    "lists it with that refusal as its error",
    pve="proxmox-backup src/api2/status.rs datastore_status; pbs-datastore datastore.rs lookup_datastore "
    "('datastore {name} is in {error}'); pbs-api-types maintenance.rs MaintenanceMode::check",
    codes=("PBS_DATASTORE_ERROR", "PBS_DATASTORE_MAINTENANCE"),
)
def _maintenance_refusal(pbs: PbsData, store: str, error: str) -> bool:
    """Whether a usage row's error is PBS refusing a datastore in offline or delete maintenance, not a fault."""
    return maintenance_type(pbs, store) in ("offline", "delete") and error.startswith(f"datastore '{store}' is in ")


def _usage(data: ClusterData, t: Thresholds, store: str, row: Row) -> list[Finding]:
    out = []
    total, used = row.get("total"), row.get("used")
    if isinstance(total, int | float) and isinstance(used, int | float) and total > 0:
        pct = round(100 * used / total, 1)
        if pct >= t.get("pbs_datastore_warning_pct"):
            critical = pct >= t.get("pbs_datastore_critical_pct")
            out.append(
                finding(
                    "PBS_DATASTORE_NEAR_FULL",
                    _store(store),
                    f"PBS datastore {store} is {pct}% full",
                    {"used_pct": pct, "used": used, "total": total, "avail": row.get("avail")},
                    severity=Severity.CRITICAL if critical else Severity.WARNING,
                )
            )
    full = row.get("estimated-full-date")
    if isinstance(full, int) and full > data.now:
        days = round((full - data.now) / DAY, 1)
        if days <= t.get("pbs_full_warning_days"):
            out.append(
                finding(
                    "PBS_DATASTORE_FULL_SOON",
                    _store(store),
                    f"PBS estimates datastore {store} full in {days} days",
                    {"estimated_full_date": full, "days": days},
                    severity=Severity.CRITICAL if days <= t.get("pbs_full_critical_days") else Severity.WARNING,
                )
            )
    return out


@check(
    "pbs",
    codes=[
        Code(
            "PBS_DATASTORE_MAINTENANCE",
            "warning",
            "PBS datastore in maintenance mode",
            "The datastore's maintenance-mode is set (GET /admin/datastore): read-only refuses new backups, "
            "offline refuses reads too. Critical when a PVE storage writes backups to it.",
            "Clear the maintenance mode when the work is done (proxmox-backup-manager datastore update <store> "
            "--delete maintenance-mode).",
        )
    ],
    pve=f"{SRC} src/api2/admin/datastore.rs get_datastore_list; pbs-api-types maintenance.rs MaintenanceType",
)
def datastore_maintenance(data: ClusterData, t: Thresholds) -> list[Finding]:
    """A datastore left in maintenance mode; critical when PVE backs up to it."""
    pbs = data.pbs
    if pbs is None:
        return []
    mapped = mapped_storages(data, pbs)
    out = []
    for row in pbs.datastores:
        store = str(row.get("store"))
        mode = row.get("maintenance") or pbs.config.get(store, {}).get("maintenance-mode")
        kind = maintenance_type(pbs, store)
        if not mode or kind is None:
            continue
        users = sorted(str(s.get("storage")) for s in mapped.get(store, []))
        out.append(
            finding(
                "PBS_DATASTORE_MAINTENANCE",
                _store(store),
                f"PBS datastore {store} is in maintenance mode {kind}"
                + (f"; PVE storage {', '.join(users)} backs up to it" if users else ""),
                {"maintenance": mode, "type": kind, "pve_storages": users},
                severity=Severity.CRITICAL if users else Severity.WARNING,
            )
        )
    return out


@check(
    "pbs",
    codes=[
        Code(
            "PBS_GC_FAILED",
            "critical",
            "PBS garbage collection failed",
            "The last garbage collection of the datastore ended with an error (last-run-state of GET "
            "/admin/datastore/{store}/gc): unreferenced chunks are not removed and the datastore keeps growing.",
            "Read the GC task log on PBS and fix its cause (often a full disk or a stale lock).",
        ),
        Code(
            "PBS_GC_STALE",
            "warning",
            "PBS garbage collection not running",
            "Garbage collection never ran, is overdue by pbs_job_overdue_hours on its gc-schedule, or (without a "
            "schedule) last ran more than pbs_gc_max_age_days ago: pruned backups never free space.",
            "Set a gc-schedule on the datastore (daily is common) or run it now.",
        ),
        Code(
            "PBS_BAD_CHUNKS",
            "critical",
            "PBS datastore has bad chunks",
            "Garbage collection counts chunks that verify marked .bad and that are still referenced (still-bad): "
            "the snapshots using them cannot be restored.",
            "Run a verify job to find the affected snapshots; back those guests up again (a new backup re-uploads "
            "good chunks).",
        ),
    ],
    thresholds=[
        Threshold("pbs_gc_max_age_days", 7, "GC age (days) that counts as stale when the datastore has no schedule"),
        Threshold("pbs_job_overdue_hours", 24, "hours past a PBS job's next-run before it counts as not running"),
    ],
    pve=f"{SRC} src/api2/admin/datastore.rs garbage_collection_status; pbs-api-types GarbageCollectionStatus",
)
def garbage_collection(data: ClusterData, t: Thresholds) -> list[Finding]:
    """GC state, age and bad chunks per datastore."""
    pbs = data.pbs
    if pbs is None:
        return []
    out = []
    for store, gc in sorted(pbs.gc.items()):
        state, end = gc.get("last-run-state"), gc.get("last-run-endtime")
        if state is not None and not task_ok(state):
            out.append(
                finding(
                    "PBS_GC_FAILED",
                    _store(store),
                    f"the last garbage collection of PBS datastore {store} failed: {state}",
                    {"last_run_state": state, "last_run_endtime": end, "upid": gc.get("upid")},
                )
            )
        stale = _gc_stale(data.now, t, gc)
        if stale:
            out.append(
                finding(
                    "PBS_GC_STALE",
                    _store(store),
                    f"garbage collection of PBS datastore {store}: {stale}",
                    {"schedule": gc.get("schedule"), "last_run_endtime": end, "next_run": gc.get("next-run")},
                )
            )
        bad = gc.get("still-bad")
        if isinstance(bad, int) and bad > 0:
            out.append(
                finding(
                    "PBS_BAD_CHUNKS",
                    _store(store),
                    f"PBS datastore {store} has {bad} bad chunks still in use",
                    {"still_bad": bad, "removed_bad": gc.get("removed-bad")},
                )
            )
    return out


def _gc_stale(now: float, t: Thresholds, gc: Row) -> str | None:
    end, next_run = gc.get("last-run-endtime"), gc.get("next-run")
    if not gc.get("upid") and end is None:
        return "it has never run" + ("" if gc.get("schedule") else " and the datastore has no gc-schedule")
    if gc.get("schedule") and isinstance(next_run, int):
        overdue = (now - next_run) / 3600
        return f"overdue by {round(overdue)} h on its schedule" if overdue > t.get("pbs_job_overdue_hours") else None
    if isinstance(end, int) and now - end > t.get("pbs_gc_max_age_days") * DAY:
        return f"last ran {round((now - end) / DAY)} days ago and the datastore has no gc-schedule"
    return None


JOB_KINDS = (("verify", "verify_jobs"), ("prune", "prune_jobs"), ("sync", "sync_jobs"))


@check(
    "pbs",
    codes=[
        Code(
            "PBS_JOB_FAILED",
            "critical",
            "PBS job failed",
            "A verify, prune or sync job's last run ended with an error (last-run-state of GET /admin/verify, "
            "/admin/prune, /admin/sync; OK and WARNINGS count as success).",
            "Read the job's last task log on PBS (last-run-upid) and fix its cause.",
        ),
        Code(
            "PBS_JOB_STALE",
            "warning",
            "PBS job not running",
            "An enabled verify, prune or sync job's next-run (computed by PBS from its last run and schedule) is "
            "more than pbs_job_overdue_hours in the past while no run of it is going (a running job lists "
            "last-run-upid without last-run-state), or it has no schedule and never ran.",
            "Check that the job has a valid schedule and that proxmox-backup-proxy runs.",
        ),
    ],
    pve=f"{SRC} src/api2/admin/verify.rs list_verification_jobs, prune.rs list_prune_jobs, sync.rs "
    "list_sync_jobs; src/server/jobstate.rs compute_schedule_status",
)
def jobs(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Verify, prune and sync jobs: last state and whether they still run."""
    pbs = data.pbs
    if pbs is None:
        return []
    out = []
    for kind, attr in JOB_KINDS:
        for job in getattr(pbs, attr):
            out += _job(data.now, t, kind, job)
    return out


def _job(now: float, t: Thresholds, kind: str, job: Row) -> list[Finding]:
    ident = str(job.get("id"))
    subject = Subject(kind="pbs", id=f"job/{kind}/{ident}")
    evidence = {
        "kind": kind,
        "store": job.get("store"),
        "schedule": job.get("schedule"),
        "last_run_state": job.get("last-run-state"),
        "last_run_endtime": job.get("last-run-endtime"),
        "next_run": job.get("next-run"),
    }
    if job.get("disable") in (True, 1, "1", "true"):
        return []
    state = job.get("last-run-state")
    if state is not None and not task_ok(state):
        return [finding("PBS_JOB_FAILED", subject, f"PBS {kind} job {ident} failed: {state}", evidence)]
    if job_running(job):
        return []
    next_run = job.get("next-run")
    if isinstance(next_run, int) and (now - next_run) / 3600 > t.get("pbs_job_overdue_hours"):
        late = round((now - next_run) / 3600)
        return [finding("PBS_JOB_STALE", subject, f"PBS {kind} job {ident} is {late} h overdue", evidence)]
    if not job.get("schedule") and not job.get("last-run-upid"):
        return [finding("PBS_JOB_STALE", subject, f"PBS {kind} job {ident} has no schedule and never ran", evidence)]
    return []


@pve_rule(
    "pbs.job-running",
    rule="A job whose last run is still going lists last-run-upid without last-run-state, and its next-run counts "
    "from that run's start, so it may lie in the past while the job runs",
    pve="proxmox-backup src/server/jobstate.rs JobState::load (Started while worker_is_active_local), "
    "compute_schedule_status",
    codes=("PBS_JOB_STALE",),
)
def job_running(job: Row) -> bool:
    """Whether PBS reports the job's last run as still running (JobState::Started: upid, no state, no end time)."""
    return bool(job.get("last-run-upid")) and job.get("last-run-state") is None


@check(
    "pbs",
    codes=[
        Code(
            "PBS_GROUP_NOT_VERIFIED",
            "warning",
            "Backup group never verified",
            "The newest finished snapshot of a backup group older than pbs_verify_grace_hours carries no "
            "verification (GET /admin/datastore/{store}/snapshots, verification field): nobody knows it restores.",
            "Create a verify job on the datastore (daily, ignore-verified with outdated-after 30) or run one.",
        ),
        Code(
            "PBS_GROUP_VERIFY_FAILED",
            "critical",
            "Newest backup failed verification",
            "The newest verified snapshot of a backup group has verification state failed: it cannot be "
            "restored as it is.",
            "Back the guest up again now; then find the bad chunks (PBS_BAD_CHUNKS) and their disk.",
        ),
        Code(
            "PBS_GROUP_VERIFY_OUTDATED",
            "warning",
            "Backup verification outdated",
            "The newest snapshot of a backup group (past pbs_verify_grace_hours) was last verified more than "
            "pbs_verify_max_age_days ago (the verify task's UPID start time).",
            "Let a verify job re-verify old snapshots (outdated-after) or run one now.",
        ),
        Code(
            "PBS_SNAPSHOT_NO_MANIFEST",
            "warning",
            "Backup snapshot without manifest",
            "A snapshot older than pbs_verify_grace_hours has no manifest (index.json.blob): the backup never "
            "finished and cannot be restored; PBS's prune drops it once a newer one finished.",
            "Check the backup task that wrote it; prune or forget the partial snapshot.",
        ),
    ],
    thresholds=[
        Threshold("pbs_verify_max_age_days", 30, "days after which a snapshot's verification counts as outdated"),
        Threshold("pbs_verify_grace_hours", 36, "hours a new snapshot may wait for its first verification"),
    ],
    pve=f"{SRC} src/api2/admin/datastore.rs list_snapshots; pbs-api-types datastore.rs SnapshotListItem, "
    "SnapshotVerifyState",
)
def verification(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Per backup group: the newest snapshot never verified, verify failed or outdated; partial snapshots."""
    pbs = data.pbs
    if pbs is None:
        return []
    out = []
    for store, rows in sorted(pbs.snapshots.items()):
        for key, group in sorted(groups_of(rows).items()):
            out += _group(data, t, store, key, group)
    return out


def groups_of(rows: list[Row]) -> dict[tuple[str, str, str], list[Row]]:
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for row in rows:
        key = (str(row.get("ns") or ""), str(row.get("backup-type")), str(row.get("backup-id")))
        groups.setdefault(key, []).append(row)
    return groups


def group_subject(data: ClusterData, store: str, key: tuple[str, str, str]) -> Subject:
    ns, kind, ident = key
    if kind in ("vm", "ct") and ident.isdecimal() and int(ident) in data.guests:
        return guest_subject(data, int(ident))
    return Subject(kind="pbs", id=f"group/{store}/{ns + '/' if ns else ''}{kind}/{ident}")


def _group(data: ClusterData, t: Thresholds, store: str, key: tuple[str, str, str], group: list[Row]) -> list[Finding]:
    grace = data.now - t.get("pbs_verify_grace_hours") * 3600
    ordered = sorted(group, key=lambda s: -int(s.get("backup-time", 0)))
    subject = group_subject(data, store, key)
    label = f"{key[1]}/{key[2]} on {store}" + (f" (namespace {key[0]})" if key[0] else "")
    base = {"store": store, "ns": key[0], "group": f"{key[1]}/{key[2]}"}
    out = [
        finding(
            "PBS_SNAPSHOT_NO_MANIFEST",
            subject,
            f"snapshot {snap.get('backup-time')} of {label} has no manifest (unfinished backup)",
            base | {"backup_time": snap.get("backup-time")},
        )
        for snap in ordered
        if not finished(snap) and int(snap.get("backup-time", 0)) < grace
    ]
    verdict = _verdict(data.now, t, grace, [s for s in ordered if finished(s)])
    if verdict is not None:
        code, what, evidence = verdict
        out.append(finding(code, subject, f"the newest backup of {label} {what}", base | evidence))
    return out


def _verdict(now: float, t: Thresholds, grace: float, done: list[Row]) -> tuple[str, str, dict[str, Any]] | None:
    """The newest finished snapshot failed verification; else the newest past the grace period was never
    verified, failed, or was verified too long ago (the verify task's UPID start time)."""
    newest = done[0] if done else {}
    if (newest.get("verification") or {}).get("state") == "failed":
        upid = newest["verification"].get("upid")
        return (
            "PBS_GROUP_VERIFY_FAILED",
            "failed verification",
            {"backup_time": newest["backup-time"], "verify_upid": upid},
        )
    judged = next((s for s in done if int(s.get("backup-time", 0)) < grace), None)
    if judged is None:
        return None
    verify, evidence = judged.get("verification"), {"backup_time": judged.get("backup-time")}
    if not isinstance(verify, dict):
        return "PBS_GROUP_NOT_VERIFIED", "was never verified", evidence
    if verify.get("state") == "failed":
        return "PBS_GROUP_VERIFY_FAILED", "failed verification", evidence | {"verify_upid": verify.get("upid")}
    when = upid_start(verify.get("upid"))
    if when is not None and now - when > t.get("pbs_verify_max_age_days") * DAY:
        age = round((now - when) / DAY, 1)
        return (
            "PBS_GROUP_VERIFY_OUTDATED",
            f"was last verified {age} days ago",
            evidence | {"verified_at": when, "age_days": age},
        )
    return None


@check(
    "pbs",
    codes=[
        Code(
            "PBS_TASK_FAILED",
            "warning",
            "PBS tasks failed",
            "PBS tasks of one type ended with an error in the last 24 h (GET /nodes/localhost/tasks with "
            "errors=1; a token without Sys.Audit on /system/tasks sees only its own tasks).",
            "Read the failed task logs on PBS (Administration > Tasks).",
        ),
        Code(
            "PBS_NO_SUBSCRIPTION",
            "info",
            "PBS without active subscription",
            "GET /nodes/localhost/subscription reports a status other than active: no enterprise repository "
            "and no support.",
            "Nothing to fix for labs; production PBS hosts should carry a subscription.",
        ),
        Code(
            "PBS_UPDATES_PENDING",
            "info",
            "PBS updates pending",
            "GET /nodes/localhost/apt/update lists packages with a newer version available on the PBS host "
            "(needs Sys.Audit on /; without it the check is skipped).",
            "Apply the updates in a maintenance window (apt full-upgrade on the PBS host).",
        ),
    ],
    pve=f"{SRC} src/api2/node/tasks.rs list_tasks; src/api2/node/subscription.rs get_subscription; "
    "src/api2/node/apt.rs apt_update_available",
)
def host(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Failed PBS tasks by worker type, the subscription state and pending updates of the PBS host."""
    pbs = data.pbs
    if pbs is None:
        return []
    failed: dict[str, list[Row]] = {}
    for task in pbs.tasks or []:
        if task.get("endtime") is not None and task.get("status") is not None and not task_ok(task.get("status")):
            failed.setdefault(str(task.get("worker_type")), []).append(task)
    out = [
        finding(
            "PBS_TASK_FAILED",
            Subject(kind="pbs", id=f"tasks/{kind}"),
            f"{len(rows)} PBS {kind} task(s) failed in the last 24 h; last: {rows[0].get('status')}",
            {"worker_type": kind, "count": len(rows), "upids": [r.get("upid") for r in rows[:5]]},
        )
        for kind, rows in sorted(failed.items())
    ]
    sub = pbs.subscription
    if isinstance(sub, dict) and sub.get("status") not in (None, "active"):
        out.append(
            finding(
                "PBS_NO_SUBSCRIPTION",
                Subject(kind="pbs", id="subscription"),
                f"PBS subscription status: {sub.get('status')}",
                {"status": sub.get("status"), "message": sub.get("message")},
            )
        )
    if pbs.updates:
        names = sorted(str(u.get("Package")) for u in pbs.updates)
        out.append(
            finding(
                "PBS_UPDATES_PENDING",
                Subject(kind="pbs", id="updates"),
                f"{len(names)} package update(s) pending on PBS: {', '.join(names[:5])}"
                + (" ..." if len(names) > 5 else ""),
                {"count": len(names), "packages": names[:20]},
            )
        )
    return out
