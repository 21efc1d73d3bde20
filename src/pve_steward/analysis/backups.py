"""Backup diagnostics: coverage, freshness, failed runs, verification, retention, excluded disks.

Coverage follows PVE's own job selection (a ``pool``, a ``vmid`` list, ``all`` minus ``exclude``, the
``node`` filter; templates included, as vzdump backs them up), counting only enabled jobs, and is
cross-checked with PVE's not-backed-up list, which counts disabled jobs as covering. A guest's "no
backup"/"stale" verdict is only given when every storage its jobs write to could be read.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pbsdata import pbs_prunes, storage_maps
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.schedule import interval_seconds
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.vzdumptarget import job_defaults, job_enabled, job_nodes, job_storages
from pve_steward.pve.tasks import task_running
from pve_steward.pve.visibility import GUESTS, STORAGE

_FAILED_VM = re.compile(r"Backup of VM (\d+) failed")


@lru_cache(maxsize=256)
def _id_set(text: str) -> frozenset[int]:
    return frozenset(int(v) for v in re.split(r"[,;\s]+", text) if v.isdecimal())


def _ids(text: Any) -> frozenset[int]:
    return _id_set(str(text or ""))


@dataclass(frozen=True, slots=True)
class Selection:
    """A job's guest selection, read once per job: PVE's ``pool``, ``vmid`` list, ``all`` minus ``exclude``."""

    node: str | None
    ids: frozenset[int] | None  # an explicit vmid list
    pool: str | None  # a resource pool: its members, read from /cluster/resources ``pool``
    excluded: frozenset[int] | None  # ``all`` jobs: who is left out; None when the job is not ``all``


@pve_rule(
    "backups.job-selection",
    rule="A vzdump job selects the members of its pool, else its vmid list, else (with all=1) every guest "
    "but the excluded ones, templates included; the node filter then drops guests on other nodes.",
    pve="pve-manager PVE/VZDump.pm get_included_guests",
    codes=("BACKUP_NOT_SCHEDULED",),
)
def selection(job: Row) -> Selection:
    node = job.get("node") or None
    if job.get("pool"):
        return Selection(node, None, str(job["pool"]), None)
    if job.get("vmid"):
        return Selection(node, _ids(job["vmid"]), None, None)
    try:
        every = bool(int(job.get("all", 0) or 0))
    except (TypeError, ValueError):
        every = False
    return Selection(node, None, None, _ids(job.get("exclude")) if every else None)


def covers(
    sel: Selection, vmid: int, node: str | None, pool: str | None = None, pools: frozenset[str] | None = None
) -> bool | None:
    """True/False per PVE's selection rules; None for a pool job when membership is not visible.

    ``pool`` is the guest row's ``pool``; ``pools`` the pools the token can see (``type=pool`` rows of
    /cluster/resources): a guest outside a visible pool is not a member, one outside an invisible pool may be.
    """
    if sel.node and node and sel.node != node:
        return False
    if sel.pool is not None:
        if pool == sel.pool:
            return True
        return False if pools is not None and sel.pool in pools else None
    if sel.ids is not None:
        return vmid in sel.ids
    return sel.excluded is not None and vmid not in sel.excluded


def job_covers(
    job: Row, vmid: int, node: str | None, pool: str | None = None, pools: frozenset[str] | None = None
) -> bool | None:
    return covers(selection(job), vmid, node, pool, pools)


def visible_pools(resources: list[Row]) -> frozenset[str]:
    return frozenset(str(r["pool"]) for r in resources if r.get("type") == "pool" and r.get("pool"))


def _hours(seconds: float) -> float:
    return round(seconds / 3600, 1)


@dataclass(frozen=True, slots=True)
class _Policy:
    """What a set of covering enabled jobs implies for a guest (derived once per distinct set)."""

    jobs: list[Row]
    threshold: float
    basis: str
    unprovable: bool  # a storage it should be on could not be read: no "none"/"stale" verdict


@check(
    "backups",
    codes=[
        Code(
            "BACKUP_NONE",
            "critical",
            "Guest has no backup",
            "No backup of the guest on any backup storage the token can read (templates excluded).",
            "Run a backup now and make sure an enabled job covers the guest.",
        ),
        Code(
            "BACKUP_STALE",
            "warning",
            "Newest backup too old",
            "Newest backup older than the covering enabled job's interval + grace (10 %, at least 2 h), else "
            "backup_stale_default_hours (26 h). Critical beyond backup_stale_critical_factor (2x) the threshold.",
            "Check the covering job's last runs (BACKUP_JOB_FAILED) and run a backup now.",
        ),
        Code(
            "BACKUP_NOT_SCHEDULED",
            "warning",
            "Guest covered by no enabled backup job",
            "No enabled vzdump job includes the guest (all/exclude, vmid list, node filter), cross-checked with "
            "/cluster/backup-info/not-backed-up (which counts disabled jobs as covering).",
            "Add the guest to an enabled backup job.",
        ),
        Code(
            "BACKUP_JOB_FAILED",
            "critical",
            "Last backup run failed",
            "The newest vzdump task for a node and job in the last backup_task_window_hours (48 h) ended with an "
            "error.",
            "Read the task log (get_task), fix the cause, and rerun the backup.",
        ),
        Code(
            "BACKUP_VERIFY_FAILED",
            "critical",
            "Newest backup failed verification",
            "On PBS storage the newest backup's verification state is 'failed'. (Until 261203-5 a backup without "
            "verification was reported here as a warning; that is now BACKUP_NOT_VERIFIED.)",
            "Investigate the PBS datastore (proxmox-backup-manager verify) and take a fresh backup.",
        ),
        Code(
            "BACKUP_NOT_VERIFIED",
            "info",
            "Newest backup not verified yet",
            "On PBS storage the newest backup has no verification state: no verify job has checked it yet (PBS "
            "lists verification only after one ran). Unverified is not failed.",
            "Schedule a verify job on the PBS datastore (or enable verify-new) if backups must be proven readable.",
        ),
        Code(
            "BACKUP_JOB_DISABLED",
            "info",
            "Backup job disabled",
            "A vzdump job has enabled=0; PVE still counts it as covering its guests.",
            "Enable or delete the job.",
        ),
        Code(
            "BACKUP_JOB_NO_RETENTION",
            "warning",
            "Backup job without retention",
            "vzdump keeps every backup: the job, its storage and the node's /etc/vzdump.conf set no prune-backups "
            "(PVE's default is keep-all=1), or remove=0 without keep-* limits. maxfiles counts as keep-last on PVE 8 "
            "only. On a PBS storage it also needs no enabled PBS prune job to prune it (a datastore's old "
            "prune-schedule is not run; judged only with a PBS connection).",
            "Set prune-backups on the job or the storage.",
        ),
        Code(
            "BACKUP_JOB_LIMIT",
            "warning",
            "Backup job stops at its keep limit",
            "The job has keep-* limits but remove=0: vzdump does not prune, and refuses a guest's new backup once "
            "its unprotected backups on the storage reach the sum of the keep-* values ('There is a max backup "
            "limit of N enforced').",
            "Let vzdump prune (remove=1, the default: drop remove=0 from the job or /etc/vzdump.conf), or raise the "
            "limit, or delete old backups in time.",
        ),
        Code(
            "BACKUP_DISK_EXCLUDED",
            "warning",
            "Disk excluded from backups",
            "A guest disk is left out of every backup: a VM disk with backup=0, or a container mount point volume "
            "without backup=1 (PVE backs up a mount point only when it is set; the GUI sets it, pct set and the "
            "API do not).",
            "Unless the disk is deliberately disposable: remove backup=0 from the VM disk, or set backup=1 on the "
            "mount point (pct set <vmid> --mpN <volume>,mp=<path>,backup=1).",
        ),
        Code(
            "BACKUP_ORPHANED",
            "info",
            "Backup of a guest that no longer exists",
            "Backups exist for a vmid that is not in the cluster, or of the other guest type than the guest that "
            "now has the vmid (a VM's backups for a container, or the reverse: left by a deleted guest).",
            "Prune them if they are not needed for restore.",
        ),
    ],
    thresholds=[
        Threshold(
            "backup_stale_default_hours", 26, "stale age when no enabled job covers the guest", minimum=None, above=0
        ),
        Threshold("backup_stale_critical_factor", 2, "critical beyond this multiple of the threshold", minimum=1),
        Threshold("backup_task_window_hours", 48, "how far back vzdump runs are examined", minimum=None, above=0),
    ],
    anchors=[
        "cv4pve-diag:WC0001=BACKUP_NOT_SCHEDULED",
        "cv4pve-diag:WC0002=BACKUP_JOB_NO_RETENTION",
        "cv4pve-diag:IC0012=BACKUP_JOB_DISABLED",
        "cv4pve-diag:WC0018=BACKUP_JOB_FAILED",
        "cv4pve-diag:WS0003=BACKUP_ORPHANED",
        "cv4pve-diag:WG0017=BACKUP_NOT_SCHEDULED",
        "cv4pve-diag:CG0002=BACKUP_DISK_EXCLUDED",
        "cv4pve-diag:WG0020=BACKUP_STALE/BACKUP_NONE",
        "check_pve:backup=BACKUP_JOB_FAILED/BACKUP_NOT_SCHEDULED",
    ],
    pve="pve-manager PVE/VZDump.pm get_included_guests + PVE/API2/Backup.pm get_not_backed_up",
)
def analyze_backups(data: ClusterData, t: Thresholds) -> list[Finding]:
    newest, orphans = _newest_backups(data)
    out = _guest_findings(data, t, newest)
    out += _job_findings(data, t)
    out += _failed_runs(data, t)
    out += _excluded_disks(data)
    out += _orphan_findings(data, orphans)
    return out


@pve_rule(
    "backups.guest-type",
    rule="A backup belongs to a guest by type and vmid: a VM's backups (subtype qemu, pbs-vm, vzdump-qemu-) are "
    "not a container's with the same vmid, nor the reverse (old OpenVZ archives restore as containers).",
    pve="pve-storage src/PVE/Storage.pm archive_info, src/PVE/Storage/PBSPlugin.pm list_volumes (subtype); "
    "src/PVE/Storage/Plugin.pm prune_backups (groups by type and vmid)",
    codes=("BACKUP_NONE", "BACKUP_ORPHANED"),
)
def _newest_backups(data: ClusterData) -> tuple[dict[int, Row], dict[int, list[Row]]]:
    """The newest backup of each guest, and backups that belong to no guest: of vmids no longer in the cluster,
    or of the other guest type than the guest that now has the vmid."""
    newest: dict[int, Row] = {}
    newest_ctime: dict[int, int] = {}
    orphans: dict[int, list[Row]] = defaultdict(list)
    guests = data.guests
    for b in data.backups:  # tens of thousands of rows: plain locals
        vmid = b.get("vmid")
        if vmid is None:
            continue
        vmid, ctime = int(vmid), int(b.get("ctime", 0))
        g = guests.get(vmid)
        kind = _backup_kind(b)
        if g is None or (
            kind is not None and kind != g.get("type") and not (kind == "openvz" and g.get("type") == "lxc")
        ):
            if g is not None or data.sees(GUESTS, vmid) is True:  # hidden (or cannot tell): not known to be deleted
                orphans[vmid].append(b)
            continue
        known = newest_ctime.get(vmid)
        if known is None or ctime > known:
            newest[vmid], newest_ctime[vmid] = b, ctime
    return newest, orphans


def _backup_kind(row: Row) -> str | None:
    """The guest type of a backup row: its ``subtype``, else its PBS format or its archive's name."""
    if row.get("subtype"):
        return str(row["subtype"])
    fmt, volid = str(row.get("format", "")), str(row.get("volid", ""))
    if fmt in ("pbs-vm", "pbs-ct"):
        return "qemu" if fmt == "pbs-vm" else "lxc"
    found = re.search(r"vzdump-(qemu|lxc|openvz)-", volid)
    return found.group(1) if found else None


def _guest_findings(data: ClusterData, t: Thresholds, newest: dict[int, Row]) -> list[Finding]:
    """Per guest: covered by an enabled job, backed up, recently enough, verified."""
    out: list[Finding] = []
    unreadable = {
        m.path.split("/storage/")[-1].split("/")[0] for m in data.missing_for("backups") if "/storage/" in m.path
    }
    # a job's storage PVE does not list to this token is unread too; and while PVE hides any storage, the newest
    # backup of a guest may be on one this token cannot see: no age verdict then (pve/visibility.py)
    unreadable |= {
        sid for job in data.backup_jobs for sid in job_storages(data, job) if data.hidden(STORAGE, sid) is not None
    }
    if not data.whole(STORAGE, "storage"):
        unreadable.add(_SOME_HIDDEN)
    # without the job list (PVE shows it only with Sys.Audit on /) coverage and the schedule a backup's age is judged
    # by are unknown: neither is judged
    jobs_unread = "backup_jobs" in data.unread
    pve_uncovered = {int(r["vmid"]) for r in data.not_backed_up or []}
    jobs = [(1 << i, job_enabled(job), selection(job), job) for i, job in enumerate(data.backup_jobs)]
    pools = visible_pools(data.resources)
    # a vmid no job lists (by vmid or exclude) is covered alike on its node and in its pool: one answer per pair
    listed = {v for _bit, _on, sel, _job in jobs for ids in (sel.ids, sel.excluded) if ids for v in ids}
    by_place: dict[tuple[str | None, str | None], tuple[int, int, int]] = {}
    policies: dict[int, _Policy] = {}  # bitmask of covering enabled jobs (negated: maybe-covering) -> policy
    storage_type = {sid: row.get("type") for sid, row in data.storage_defs.items()}
    now = data.now
    for vmid in data.guest_ids:  # templates too: vzdump selects and backs them up (get_included_guests)
        g = data.guests[vmid]
        node, pool = g.get("node"), g.get("pool")
        if vmid in listed:
            on_mask, off_mask, unknown = _coverage(jobs, vmid, node, pool, pools)
        else:
            masks = by_place.get((node, pool))
            if masks is None:
                masks = by_place[(node, pool)] = _coverage(jobs, _UNLISTED, node, pool, pools)
            on_mask, off_mask, unknown = masks
        # no job surely covers it but a pool job may (membership not visible): judge age by the longest of those
        # jobs' schedules rather than by the default, so an unreadable pool never makes a weekly backup "stale"
        key = on_mask or -unknown
        policy = policies.get(key)
        if policy is None:
            chosen = [j for bit, _on, _sel, j in jobs if (on_mask or unknown) & bit]
            policy = policies[key] = _policy(chosen, t, unreadable, longest=not on_mask)
        uncovered = vmid in pve_uncovered
        if jobs_unread:
            pass
        elif (not on_mask and not (unknown and not uncovered)) or uncovered:
            disabled = [str(j["id"]) for bit, _on, _sel, j in jobs if off_mask & bit]
            out.append(_not_scheduled(data, vmid, g, disabled, uncovered))
        if policy.unprovable:
            continue  # cannot prove absence or age: DATA_INCOMPLETE already says so
        latest = newest.get(vmid)
        if latest is None:
            out.append(_no_backup(data, vmid, g, policy))
            continue
        age = now - int(latest.get("ctime", 0))
        if age > policy.threshold and not jobs_unread:  # older than its jobs' schedule allows (inline: every guest)
            out.append(_stale(data, t, vmid, g, latest, age, policy))
        if storage_type.get(str(latest.get("storage"))) == "pbs" or str(latest.get("format", "")).startswith("pbs-"):
            verdict = _verification(data, vmid, g, latest)
            if verdict is not None:
                out.append(verdict)
    return out


def _not_scheduled(data: ClusterData, vmid: int, g: Row, disabled: list[str], uncovered: bool) -> Finding:
    return finding(
        "BACKUP_NOT_SCHEDULED",
        guest_subject(data, vmid),
        f"guest {vmid} ({g.get('name')}) is not covered by any enabled backup job"
        + (f" (only by disabled job {', '.join(disabled)})" if disabled else ""),
        {
            "covered_only_by_disabled": disabled,
            "in_pve_not_backed_up": uncovered if data.not_backed_up is not None else None,
        },
    )


def _no_backup(data: ClusterData, vmid: int, g: Row, policy: _Policy) -> Finding:
    return finding(
        "BACKUP_NONE",
        guest_subject(data, vmid),
        f"guest {vmid} ({g.get('name')}) has no backup on any readable backup storage",
        {
            "covering_jobs": [j["id"] for j in policy.jobs],
            "storages_read": sorted(data.backup_storages_read),
            "threshold_hours": _hours(policy.threshold),
        },
    )


def _stale(data: ClusterData, t: Thresholds, vmid: int, g: Row, latest: Row, age: float, policy: _Policy) -> Finding:
    """The newest backup is ``age`` seconds old, more than its jobs' schedule allows (the caller compared)."""
    threshold = policy.threshold
    sev = Severity.CRITICAL if age > threshold * t.get("backup_stale_critical_factor") else Severity.WARNING
    return finding(
        "BACKUP_STALE",
        guest_subject(data, vmid),
        f"newest backup of {vmid} ({g.get('name')}) is {_hours(age)} h old "
        f"(threshold {_hours(threshold)} h, {policy.basis})",
        {
            "age_hours": _hours(age),
            "threshold_hours": _hours(threshold),
            "basis": policy.basis,
            "newest_volid": latest.get("volid"),
            "storage": latest.get("storage"),
        },
        severity=sev,
    )


def _orphan_findings(data: ClusterData, orphans: dict[int, list[Row]]) -> list[Finding]:
    out = []
    for vmid, rows in sorted(orphans.items()):
        now = data.guests.get(vmid)
        if now is None:
            what = f"{len(rows)} backup(s) of vmid {vmid}, which no longer exists"
        else:
            other = "VM" if now.get("type") == "lxc" else "container"
            what = f"{len(rows)} backup(s) of a deleted {other} {vmid} (the vmid now belongs to {now.get('name')})"
        out.append(
            finding(
                "BACKUP_ORPHANED",
                Subject(kind="guest", id=str(vmid)),
                what,
                {
                    "count": len(rows),
                    "bytes": sum(int(r.get("size", 0)) for r in rows),
                    "storages": sorted({str(r.get("storage")) for r in rows}),
                    "vmid_in_use": now is not None,
                },
            )
        )
    return out


_UNLISTED = -1  # a vmid no job can name (job vmid lists hold non-negative numbers only)
_SOME_HIDDEN = "\0some storage PVE hides from this token"  # no storage id has a NUL in it


@pve_rule(
    "backups.verification",
    rule="PBS lists a snapshot's verification only once a verify job ran on it (state ok or failed); "
    "a listing without it is unverified, not failed.",
    pve="pve-storage src/PVE/Storage/PBSPlugin.pm list_volumes (verification copied when defined)",
    codes=("BACKUP_VERIFY_FAILED", "BACKUP_NOT_VERIFIED"),
)
def _verification(data: ClusterData, vmid: int, g: Row, latest: Row) -> Finding | None:
    verification = latest.get("verification")
    state = verification.get("state") if isinstance(verification, dict) else None
    if state == "ok":
        return None
    evidence = {
        "volid": latest.get("volid"),
        "verification": state,
        "verify_upid": verification.get("upid") if isinstance(verification, dict) else None,
    }
    if state == "failed":
        return finding(
            "BACKUP_VERIFY_FAILED",
            guest_subject(data, vmid),
            f"newest backup of {vmid} ({g.get('name')}) FAILED verification",
            evidence,
        )
    return finding(
        "BACKUP_NOT_VERIFIED",
        guest_subject(data, vmid),
        f"newest backup of {vmid} ({g.get('name')}) has not been verified yet" + (f" (state {state})" if state else ""),
        evidence,
    )


def _coverage(
    jobs: list[tuple[int, bool, Selection, Row]],
    vmid: int,
    node: str | None,
    pool: str | None,
    pools: frozenset[str],
) -> tuple[int, int, int]:
    """Bitmasks of the enabled and the disabled jobs covering a guest, and of enabled pool jobs that might."""
    on_mask = off_mask = unknown = 0
    for bit, on, sel, _job in jobs:
        covered = covers(sel, vmid, node, pool, pools)
        if covered is None:
            if on:
                unknown |= bit
        elif covered:
            if on:
                on_mask |= bit
            else:
                off_mask |= bit
    return on_mask, off_mask, unknown


def _policy(enabled: list[Row], t: Thresholds, unreadable: set[str], longest: bool = False) -> _Policy:
    """What the covering jobs imply: their storages, the staleness threshold and its basis.

    ``longest``: the jobs only may cover the guest (pool membership not visible); take the longest schedule.
    """
    storages = {j.get("storage") for j in enabled}
    unprovable = _SOME_HIDDEN in unreadable or bool(unreadable & storages) or (not enabled and bool(unreadable))
    intervals = [i for i in (interval_seconds(j.get("schedule")) for j in enabled) if i]
    if not intervals:
        return _Policy(enabled, t.get("backup_stale_default_hours") * 3600, "default", unprovable)
    interval = max(intervals) if longest else min(intervals)
    basis = f"job schedule every {_hours(interval)} h" + (" (pool job, membership not visible)" if longest else "")
    return _Policy(enabled, interval + max(2 * 3600, 0.1 * interval), basis, unprovable)


def _job_findings(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for job in data.backup_jobs:
        subject = Subject(kind="backup_job", id=str(job.get("id")), node=job.get("node"))
        if not job_enabled(job):
            out.append(
                finding(
                    "BACKUP_JOB_DISABLED",
                    subject,
                    f"backup job {job.get('id')} is disabled",
                    {"schedule": job.get("schedule"), "storage": job.get("storage")},
                )
            )
            continue
        limits = _limits(data, job)
        if limits:
            out.append(_limit_finding(data, job, subject, limits))
        keeps_all = _keeps_everything(data, job)
        if keeps_all:
            out.append(
                finding(
                    "BACKUP_JOB_NO_RETENTION",
                    subject,
                    f"backup job {job.get('id')} keeps every backup on {job.get('storage')} "
                    f"({'; '.join(f'{where}: {why}' for where, why in sorted(keeps_all.items()))})",
                    {"storage": job.get("storage"), "keeps_all": keeps_all},
                )
            )
    return out


def _prune_spec(value: Any) -> dict[str, str] | None:
    """A prune-backups value as PVE hands it over: a property string or (jobs index) an object."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if not value:
        return None
    return dict(part.split("=", 1) for part in str(value).split(",") if "=" in part)


def _keeps_all(spec: dict[str, str]) -> bool:
    if spec.get("keep-all") not in (None, "0", ""):
        return True
    return not any(k.startswith("keep-") and v.isdecimal() and int(v) > 0 for k, v in spec.items())


def _pve_major(data: ClusterData) -> int | None:
    head = str((data.version or {}).get("version") or "").split(".", 1)[0]
    return int(head) if head.isdecimal() else None


@pve_rule(
    "backups.retention",
    rule="vzdump prunes with the job's prune-backups, else the storage's, else /etc/vzdump.conf's, else keeps "
    "all (keep-all=1), and not at all with remove=0; PVE 8 still reads maxfiles (job, storage, vzdump.conf) as "
    "keep-last, PVE 9 dropped it. On a PBS storage vzdump's prune-backups or PBS's prune jobs "
    "prune; without a PBS connection it is not judged.",
    pve="pve-manager PVE/VZDump.pm new + storage_info + read_vzdump_defaults (stable-8: maxfiles; pve-storage "
    "stable-8 Storage.pm storage_config); PVE/CLI/pve8to9.pm maxfiles check",
    codes=("BACKUP_JOB_NO_RETENTION",),
)
def _keeps_everything(data: ClusterData, job: Row) -> dict[str, str]:
    """Where (node or "job") and why an enabled job keeps every backup; empty when it prunes or is unprovable."""
    sids = job_storages(data, job)
    storage = data.storage_defs.get(sids[0], {}) if len(sids) == 1 else {}
    if storage.get("type") == "pbs":
        return _pbs_keeps_everything(data, job, storage)
    out: dict[str, str] = {}
    for where, (spec, remove, source) in _settings(data, job).items():
        if _keeps_all(spec):
            off = "; remove=0" if not remove else ""
            out[where] = (
                f"the job's prune-backups keeps all ({_fmt(spec)}){off}"
                if source == "job"
                else f"no prune-backups on the job; the storage or /etc/vzdump.conf gives {_fmt(spec)}{off}"
            )
    return out


def _settings(data: ClusterData, job: Row) -> dict[str, tuple[dict[str, str], bool, str]]:
    """The prune-backups and remove vzdump applies for a job, per node ("job" when the job
    sets both): the job's own values, the rest from /etc/vzdump.conf (the defaults endpoint folds the storage's
    prune-backups in), keep-all=1 when none is set (VZDump.pm new). A node whose defaults were not read is left
    out (DATA_INCOMPLETE says so). The last item says where the prune-backups came from."""
    spec = _prune_spec(job.get("prune-backups"))
    if spec is None and job.get("maxfiles") is not None and (_pve_major(data) or 9) < 9:
        spec = {"keep-last": str(job["maxfiles"])} if str(job["maxfiles"]) != "0" else {"keep-all": "1"}
    remove = None if job.get("remove") is None else str(job["remove"]) != "0"
    if spec is not None and (remove is not None or _keeps_all(spec)):
        return {"job": (spec, bool(remove) if remove is not None else True, "job")}
    out: dict[str, tuple[dict[str, str], bool, str]] = {}
    for node in job_nodes(data, job):
        defaults = job_defaults(data, job, node)
        if defaults is None:
            continue
        effective = spec or _prune_spec(defaults.get("prune-backups")) or {"keep-all": "1"}
        removing = remove if remove is not None else str(defaults.get("remove", "1")) != "0"
        out[node] = (effective, removing, "job" if spec is not None else "defaults")
    return out


def vzdump_prune(data: ClusterData, job: Row, node: str | None) -> tuple[dict[str, str], bool] | None:
    """The prune-backups and remove vzdump applies to the job's guests on ``node`` (see ``_settings``);
    None when that node's /etc/vzdump.conf defaults were not read."""
    settings = _settings(data, job)
    chosen = settings.get("job") or (settings.get(node) if node else None)
    return (chosen[0], chosen[1]) if chosen else None


@pve_rule(
    "backups.limit",
    rule="With keep-* limits and remove=0, vzdump does not prune but refuses a guest's new backup once its "
    "unprotected backups of that type on the storage reach the sum of the keep-* values; keep-all means no limit.",
    pve="pve-manager PVE/VZDump.pm new ('remove = 0 if keep-all'), exec_backup_task ('max backup limit')",
    codes=("BACKUP_JOB_LIMIT",),
)
def _limits(data: ClusterData, job: Row) -> dict[str, int]:
    """Where (node, or "job" when the job says it all) vzdump enforces a backup count limit, and the limit."""
    return {
        where: _limit(spec)
        for where, (spec, remove, _source) in _settings(data, job).items()
        if not remove and not _keeps_all(spec)
    }


def _limit(spec: dict[str, str]) -> int:
    return sum(int(v) for k, v in spec.items() if k.startswith("keep-") and v.isdecimal())


def _limit_finding(data: ClusterData, job: Row, subject: Subject, limits: dict[str, int]) -> Finding:
    """The limit, and the guests already at it on the job's storage (their next backup fails)."""
    sids = job_storages(data, job)
    sid = ", ".join(sids) or "its dumpdir"
    limit = min(limits.values())
    counts: dict[tuple[int, str, str], int] = defaultdict(int)
    for b in data.backups:
        if b.get("storage") in sids and b.get("vmid") is not None and not b.get("protected"):
            counts[(int(b["vmid"]), str(_backup_kind(b)), str(b["storage"]))] += 1
    full = sorted({vmid for (vmid, _kind, _sid), n in counts.items() if n >= limit})
    where = "; ".join(f"{w}: {n}" for w, n in sorted(limits.items()))
    return finding(
        "BACKUP_JOB_LIMIT",
        subject,
        f"backup job {job.get('id')} does not prune (remove=0) and stops at {limit} backup(s) per guest on {sid} "
        f"({where})" + (f"; {len(full)} guest(s) already there: their next backup fails" if full else ""),
        {"storage": sid, "limits": limits, "guests_at_limit": full[:50], "count_at_limit": len(full)},
        severity=Severity.CRITICAL if full else None,
    )


def _pbs_keeps_everything(data: ClusterData, job: Row, storage: Row) -> dict[str, str]:
    """A PBS storage keeps everything where neither vzdump (the job's prune-backups, else /etc/vzdump.conf's with
    the storage's folded in: VZDump.pm new prunes PBS targets alike) nor PBS (a prune job reaching the namespace,
    analysis/pbsdata.py pbs_prunes) prunes it. Without a PBS connection (or when it could not
    be read) it is not judged: PVE cannot see PBS's side."""
    if data.pbs is None or not storage_maps(storage, data.pbs) or not storage.get("datastore"):
        return {}
    settings = _settings(data, job)
    if not settings:  # no defaults read: the job's and the storage's own values
        spec = _prune_spec(job.get("prune-backups")) or _prune_spec(storage.get("prune-backups")) or {"keep-all": "1"}
        settings = {"job": (spec, str(job.get("remove", "")) != "0", "job")}
    keeping = sorted(where for where, (spec, _remove, _source) in settings.items() if _keeps_all(spec))
    store, ns = str(storage["datastore"]), str(storage.get("namespace") or "")
    if not keeping or pbs_prunes(data.pbs, store, ns):
        return {}
    where = f"datastore {store}" + (f" namespace {ns}" if ns else "")
    why = f"no prune-backups on the job, storage or /etc/vzdump.conf, and no PBS prune job prunes {where}"
    return {place if place != "job" else "pbs": why for place in keeping}


def _fmt(spec: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(spec.items()))


def _failed_runs(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Backup runs that failed for guests no later backup has covered since (one finding per run).

    PVE gives a vzdump task the vmid as its id only when it backs up one guest on its node (pve-manager
    PVE/API2/VZDump.pm vzdump, ``$taskid``); every other run, of any job, has an empty id. So a later run
    on the node says nothing about another job's guests: a failed guest (its log's 'Backup of VM N failed')
    counts as recovered only once a backup of it newer than the failure is listed, on the storage the run
    wrote to (its log's command line, ``--storage``) when the log names one. A failed run whose log names
    no guest is judged as before: only if it is the newest run of its node and task id.
    """
    since = data.now - t.get("backup_task_window_hours") * 3600
    runs = sorted(
        (
            task
            for task in data.tasks
            if task.get("type") == "vzdump" and int(task.get("starttime", 0)) >= since and not task_running(task)
        ),
        key=lambda task: int(task["starttime"]),
    )
    failing = [task for task in runs if not _succeeded(task)]
    if not failing:
        return []
    newest_run = {(str(task.get("node")), str(task.get("id", ""))): task for task in runs}
    named = {str(task.get("upid")): _failed_guests(data, task) for task in failing}
    written = _backup_times(data, {v for vmids, _storage in named.values() for v in vmids})
    out: list[Finding] = []
    superseded: set[int] = set()  # guests a newer failure already speaks for
    for task in reversed(failing):
        failed, storage = named[str(task.get("upid"))]
        start = int(task["starttime"])
        if failed:
            left = [v for v in failed if v not in superseded and not _backed_up_since(written, v, storage, start)]
            superseded.update(failed)
            if left:
                out.append(_failed_run(data, task, left))
        elif newest_run[(str(task.get("node")), str(task.get("id", "")))] is task:
            out.append(_failed_run(data, task, []))
    return sorted(out, key=lambda f: (f.subject.node or "", f.subject.id))


_STORAGE_ARG = re.compile(r"--storage\s+(\S+)")


def _succeeded(task: Row) -> bool:
    status = str(task.get("status"))
    return status == "OK" or status.startswith("WARNINGS")


def _failed_guests(data: ClusterData, task: Row) -> tuple[list[int], str | None]:
    """The guests a failed run names (its log, or its id for a one-guest run) and the storage it wrote to."""
    log = data.task_logs.get(str(task.get("upid")), [])
    failed = sorted({int(m.group(1)) for line in log for m in [_FAILED_VM.search(line)] if m})
    tid = str(task.get("id", ""))
    if not failed and tid.isdecimal():
        failed = [int(tid)]
    storage = next(
        (m.group(1) for line in log[:5] if "starting new backup job" in line for m in [_STORAGE_ARG.search(line)] if m),
        None,
    )
    return failed, storage


def _backup_times(data: ClusterData, vmids: set[int]) -> dict[tuple[int, str], int]:
    """The newest backup time per (guest, storage) of the guests asked about (usually none: no pass then)."""
    out: dict[tuple[int, str], int] = {}
    if not vmids:
        return out
    for b in data.backups:
        vmid = b.get("vmid")
        if vmid is not None and int(vmid) in vmids:
            key = (int(vmid), str(b.get("storage")))
            out[key] = max(out.get(key, 0), int(b.get("ctime", 0)))
    return out


def _backed_up_since(written: dict[tuple[int, str], int], vmid: int, storage: str | None, start: int) -> bool:
    return any(v == vmid and (storage is None or s == storage) and ctime > start for (v, s), ctime in written.items())


def _failed_run(data: ClusterData, task: Row, failed: list[int]) -> Finding:
    node, status = str(task.get("node")), str(task.get("status"))
    pools = visible_pools(data.resources)
    jobs = sorted(
        {
            str(j["id"])
            for j in data.backup_jobs
            if job_enabled(j)
            and (not failed or any(job_covers(j, v, node, _pool(data, v), pools) for v in failed))
            and (not j.get("node") or j["node"] == node)
        }
    )
    return finding(
        "BACKUP_JOB_FAILED",
        Subject(kind="task", id=str(task.get("upid")), node=node),
        f"last backup run on {node} failed ({status})" + (f": VM {', '.join(map(str, failed))}" if failed else ""),
        {
            "upid": task.get("upid"),
            "status": status,
            "starttime": task.get("starttime"),
            "failed_vmids": failed,
            "jobs": jobs,
        },
    )


def _pool(data: ClusterData, vmid: int) -> str | None:
    pool = data.guests.get(vmid, {}).get("pool")
    return None if pool is None else str(pool)


def _excluded_disks(data: ClusterData) -> list[Finding]:
    out = []
    parsed = data.parsed
    for vmid in sorted(parsed):  # templates too: vzdump backs them up alike
        cfg = parsed[vmid]
        for v in cfg.volumes:  # nearly every guest backs up all its volumes: no list for those
            if not v.backup:
                break
        else:
            continue
        # bind and device mount points are host data, never backed up by design: not reported
        keys = [v.key for v in cfg.volumes if not v.backup and not v.cdrom and not v.unused and not v.host_path]
        if keys:
            why = "without backup=1" if cfg.type == "lxc" else "backup=0"
            out.append(
                finding(
                    "BACKUP_DISK_EXCLUDED",
                    guest_subject(data, vmid),
                    f"{', '.join(keys)} of {vmid} ({cfg.name}) excluded from backups ({why})",
                    {"disks": keys},
                )
            )
    return out


@pve_rule(
    "backups.run-refusals",
    rule="vzdump fails a guest's backup in stop mode while it is an HA resource requested 'started'; with "
    "protected, once max-protected-backups (the storage's, else 5; no limit with Datastore.Allocate on it) "
    "protected backups of it exist; with remove=0 and keep-* limits, once its unprotected backups reach their sum.",
    pve="pve-manager PVE/VZDump.pm exec_backup_task ('Cannot execute a backup with stop mode', 'max backup limit', "
    "'number of protected backups'); pve-storage src/PVE/Storage.pm get_max_protected_backups",
    codes=("BACKUP_JOB_LIMIT",),
)
def vzdump_refusals(
    vmtype: str,
    mode: str,
    protected: bool,
    prune: Any,
    backups: list[Row],
    storage: Row,
    may_allocate: bool,
    ha_state: str | None,
) -> list[str]:
    """Why vzdump (called with remove=0) would fail this guest's backup: ``prune`` is the effective
    prune-backups (the node's vzdump defaults for the storage), ``backups`` the storage's backups of the guest,
    ``ha_state`` the requested state of its HA resource (None when it has none); empty when it would run."""
    out = []
    if mode == "stop" and ha_state in ("started", "enabled"):
        out.append(
            "stop mode on an HA resource requested 'started' (PVE: Cannot execute a backup with stop mode on a HA "
            "managed and enabled Service); use snapshot mode"
        )
    mine = [b for b in backups if not b.get("subtype") or b.get("subtype") == vmtype]
    kept = sum(1 for b in mine if b.get("protected"))
    if protected:
        cap = storage.get("max-protected-backups")
        limit = int(cap) if cap is not None else (-1 if may_allocate else 5)
        if -1 < limit <= kept:
            out.append(f"{kept} protected backup(s) already: the storage allows {limit} per guest")
        return out
    spec = _prune_spec(prune) or {"keep-all": "1"}
    if not _keeps_all(spec) and len(mine) - kept >= _limit(spec):
        out.append(
            f"{len(mine) - kept} unprotected backup(s) already reach the limit of {_limit(spec)} ({_fmt(spec)}): "
            "backup_now does not prune, so PVE refuses ('There is a max backup limit'); delete old backups first"
        )
    return out
