"""Proxmox Backup Server payloads, and the PBS rules the checks share (design record 261203-20).

The payloads are what PBS's API returns (proxmox/proxmox-backup ``src/api2``); the tools layer
(``tools/pbsread.py``) reads them over the optional second connection. Snapshot rows carry the
namespace they were listed in as ``ns`` (PBS leaves it out of ``SnapshotListItem``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pve_steward.analysis.pverules import pve_rule

Row = dict[str, Any]
KEEPS = ("keep-last", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly")
MANIFEST = "index.json.blob"  # pbs-datastore MANIFEST_BLOB_NAME


@dataclass
class PbsData:
    host: str  # the configured PBS address, to match PVE storages' ``server``
    fingerprint: str | None = None  # the pinned certificate fingerprint (hex), to match PVE storages' ``fingerprint``
    usage: list[Row] = field(default_factory=list)  # GET /status/datastore-usage
    datastores: list[Row] = field(default_factory=list)  # GET /admin/datastore (with maintenance)
    config: dict[str, Row] = field(default_factory=dict)  # GET /config/datastore/{store}: keep-*, schedules
    gc: dict[str, Row] = field(default_factory=dict)  # GET /admin/datastore/{store}/gc
    snapshots: dict[str, list[Row]] = field(default_factory=dict)  # store -> rows (each with "ns")
    verify_jobs: list[Row] = field(default_factory=list)  # GET /admin/verify
    prune_jobs: list[Row] = field(default_factory=list)  # GET /admin/prune
    sync_jobs: list[Row] = field(default_factory=list)  # GET /admin/sync
    tasks: list[Row] | None = None  # GET /nodes/localhost/tasks (None: not read)
    subscription: Row | None = None  # GET /nodes/localhost/subscription
    updates: list[Row] | None = None  # GET /nodes/localhost/apt/update (APTUpdateInfo, PascalCase fields)


def upid_start(upid: Any) -> int | None:
    """The start time in a PBS UPID (``UPID:node:pid:pstart:task_id:starttime:type:id:auth:``, hex fields;
    pbs-api-types upid.rs)."""
    parts = str(upid or "").split(":")
    if len(parts) < 9 or parts[0] != "UPID":
        return None
    try:
        return int(parts[5], 16)
    except ValueError:
        return None


@pve_rule(
    "pbs.task-state",
    rule="PBS prints a finished task's state as OK, WARNINGS: n, unknown or the error message; OK and WARNINGS "
    "are success",
    pve="proxmox-backup src/server/jobstate.rs compute_schedule_status (TaskState Display, proxmox-rest-server)",
    codes=("PBS_JOB_FAILED", "PBS_GC_FAILED", "PBS_TASK_FAILED"),
)
def task_ok(state: Any) -> bool:
    """A finished job's ``last-run-state`` as PBS prints a TaskState (proxmox-rest-server worker_task.rs
    Display): ``OK``, ``WARNINGS: n``, ``unknown`` or the error message."""
    text = str(state or "")
    return text == "OK" or text.startswith("WARNINGS")


def keep_options(row: Row) -> dict[str, int]:
    """The keep-* of a prune job or datastore config row that keep something (pbs-api-types jobs.rs KeepOptions)."""
    out = {}
    for key in KEEPS:
        value = row.get(key)
        if value is not None and str(value).isdecimal() and int(value) > 0:
            out[key] = int(value)
    return out


def pve_keep_options(spec: dict[str, str] | None) -> dict[str, int]:
    """PVE's prune-backups property, in the same form (keep-all=1 keeps everything: no options)."""
    if not spec or spec.get("keep-all") not in (None, "0", ""):
        return {}
    return keep_options(dict(spec))


def ns_covers(job_ns: str, depth: Any, ns: str) -> bool:
    """Whether a job on namespace ``job_ns`` with ``max-depth`` reaches ``ns`` (PBS recurses fully by default)."""
    if job_ns and ns != job_ns and not ns.startswith(job_ns + "/"):
        return False
    below = ns.count("/") + 1 if ns else 0
    above = job_ns.count("/") + 1 if job_ns else 0
    return depth is None or str(depth) == "" or below - above <= int(depth)


@pve_rule(
    "pbs.prune-selection",
    rule="PBS prunes a group newest first: the newest unfinished snapshot is kept, then each keep-* option keeps "
    "the newest snapshot of each of its N newest periods not already kept; protected snapshots stay",
    pve="proxmox-backup pbs-datastore/src/prune.rs compute_prune_info + mark_selections",
    codes=("PBS_PRUNE_DROPS_LAST_VERIFIED",),
)
def prune_marks(snapshots: list[Row], keep: dict[str, int]) -> dict[int, str]:
    """PBS's prune selection for one group: backup-time -> keep / keep-partial / protected / remove.

    pbs-datastore prune.rs compute_prune_info: newest first, the newest unfinished snapshot is kept,
    each keep-* option keeps the newest snapshot of each of its N newest periods not already kept.
    Periods are taken in UTC here (PBS uses the server's local time).
    """
    ordered = sorted(snapshots, key=lambda s: -int(s.get("backup-time", 0)))
    mark: dict[int, str] = {}
    keep_unfinished = True
    for snap in ordered:
        t = int(snap.get("backup-time", 0))
        if finished(snap):
            keep_unfinished = False
        else:
            mark[t] = "keep-partial" if keep_unfinished else "remove"
            keep_unfinished = False
    for option, period in PERIODS:
        if option in keep:
            _mark_selections(mark, ordered, keep[option], period)
    return {
        int(s.get("backup-time", 0)): "protected"
        if s.get("protected")
        else mark.get(int(s.get("backup-time", 0)), "remove")
        for s in ordered
    }


def _mark_selections(mark: dict[int, str], ordered: list[Row], keep: int, period: Callable[[int], str]) -> None:
    included: set[str] = set()
    already = {period(t) for t, m in mark.items() if m == "keep"}
    for snap in ordered:
        t = int(snap.get("backup-time", 0))
        if t in mark:
            continue
        if snap.get("protected"):
            mark[t] = "protected"
            continue
        sel = period(t)
        if sel in already:
            continue
        if sel not in included:
            if len(included) >= keep:
                break
            included.add(sel)
            mark[t] = "keep"
        else:
            mark[t] = "remove"


def _utc(fmt: str) -> Callable[[int], str]:
    return lambda t: dt.datetime.fromtimestamp(t, dt.UTC).strftime(fmt)


PERIODS: tuple[tuple[str, Callable[[int], str]], ...] = (
    ("keep-last", str),
    ("keep-hourly", _utc("%Y/%m/%d/%H")),
    ("keep-daily", _utc("%Y/%m/%d")),
    ("keep-weekly", _utc("%G/%V")),
    ("keep-monthly", _utc("%Y/%m")),
    ("keep-yearly", _utc("%Y")),
)


def finished(snap: Row) -> bool:
    """A snapshot with a manifest (pbs-datastore BackupInfo is_finished: index.json.blob exists)."""
    return any(_filename(f) == MANIFEST for f in snap.get("files") or [])


def _filename(entry: Any) -> str:
    return str(entry.get("filename")) if isinstance(entry, dict) else str(entry)


def host_of(address: str) -> str:
    """The host of an address like ``host``, ``host:port`` or ``[v6]:port``."""
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


@pve_rule(
    "pbs.storage-datastore",
    rule="A PVE storage of type pbs names a server (port 8007), a datastore, a namespace and the certificate "
    "fingerprint it pins",
    pve="pve-storage PVE/Storage/PBSPlugin.pm properties/options",
    codes=("PBS_STORAGE_DATASTORE_MISSING", "PBS_DATASTORE_MAINTENANCE"),
)
def storage_maps(storage: Row, pbs: PbsData) -> bool:
    """Whether a PVE storage of type ``pbs`` points at the configured PBS (pve-storage PBSPlugin: server,
    port, datastore, namespace, fingerprint): the same server host, or the certificate PVE pins is the one
    this connection pins (a PBS reached under another name or address)."""
    if storage.get("type") != "pbs":
        return False
    pinned = str(storage.get("fingerprint") or "").replace(":", "").lower()
    if pinned and pbs.fingerprint and pinned == pbs.fingerprint.replace(":", "").lower():
        return True
    return host_of(str(storage.get("server") or "")) == host_of(pbs.host)


@pve_rule(
    "pbs.retention",
    rule="A PBS prune job prunes its datastore and namespace (to max-depth) unless disabled or keeping nothing "
    "(then it keeps all); a datastore's own prune-schedule/keep-* (pre-2.2 datastore.cfg) is never run",
    pve="proxmox-backup src/bin/proxmox-backup-proxy.rs schedule_datastore_prune_jobs; src/server/prune_job.rs "
    "prune_datastore",
    codes=("BACKUP_JOB_NO_RETENTION", "PBS_PRUNE_DROPS_LAST_VERIFIED"),
)
def pbs_prunes(pbs: PbsData, store: str, ns: str) -> list[tuple[str, dict[str, int]]]:
    """What prunes ``store``/``ns`` on the PBS side: enabled prune jobs that keep something and reach the
    namespace. PBS's scheduler reads only prune jobs (proxmox-backup-proxy.rs schedule_datastore_prune_jobs:
    ``disable`` and ``!keeps_something()`` skipped); a datastore's prune-schedule/keep-* left in datastore.cfg
    is not run (PBS 2.2 moved them to prune jobs: config/datastore.rs create_datastore, postinst
    update-to-prune-jobs-config)."""
    out = []
    for job in pbs.prune_jobs:
        keep = keep_options(job)
        reaches = job.get("store") == store and ns_covers(str(job.get("ns") or ""), job.get("max-depth"), ns)
        if reaches and keep and job.get("disable") not in (True, 1, "1", "true"):
            out.append((f"PBS prune job {job.get('id')}", keep))
    return out
