"""Where a backup job writes on each node, and the vzdump defaults that apply to it there.

A job that names no storage (and no dumpdir) writes to the node's vzdump default: /etc/vzdump.conf's
``storage`` or ``dumpdir``, else 'local'. ``GET /nodes/{n}/vzdump/defaults`` without ``storage`` answers
that choice (the collector reads it only where such a job is enabled); each node has its own vzdump.conf.
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.values import flag


def job_enabled(job: Row) -> bool:
    """A backup job's ``enabled``: a PVE boolean, default 1 (pve-manager PVE/API2/Backup.pm job properties)."""
    return flag(job.get("enabled", 1))


@pve_rule(
    "backups.job-storage",
    rule="A backup job writes to its storage; one without storage and dumpdir takes the node's /etc/vzdump.conf "
    "storage or dumpdir, else 'local' (the node's vzdump defaults answer that choice).",
    pve="pve-manager PVE/VZDump.pm new (vzdump.conf defaults: storage and dumpdir only together), "
    "get_storage_param ('local'); PVE/API2/VZDump.pm defaults",
    codes=(
        "STORAGE_BACKUP_TARGET_WRONG_CONTENT",
        "STORAGE_BACKUP_TARGET_MISSING",
        "STORAGE_DISABLED",
        "BACKUP_JOB_NO_RETENTION",
        "BACKUP_JOB_NO_COMPRESSION",
    ),
)
def job_storage(data: ClusterData, job: Row, node: str) -> str | None:
    """The storage ``job`` writes to on ``node``; None for a dumpdir, or where that node's default was not
    read (DATA_INCOMPLETE says so)."""
    if job.get("storage"):
        return str(job["storage"])
    if job.get("dumpdir"):
        return None
    return data.vzdump_storage.get(node)


def job_nodes(data: ClusterData, job: Row) -> list[str]:
    """The online nodes a job runs on: its node, or every one."""
    return [str(job["node"])] if job.get("node") else data.online_nodes


def job_storages(data: ClusterData, job: Row) -> list[str]:
    """Every storage the job writes to on the nodes it runs on (one, unless the nodes' vzdump.conf differ)."""
    if job.get("storage"):
        return [str(job["storage"])]
    return sorted({sid for n in job_nodes(data, job) if (sid := job_storage(data, job, n)) is not None})


def job_defaults(data: ClusterData, job: Row, node: str) -> Row | None:
    """``node``'s vzdump defaults for the job: /etc/vzdump.conf with the job's storage's prune-backups folded in
    (its default storage's, for a job without storage). None where not read, and for a job writing to a dumpdir:
    no API answer gives vzdump.conf's values without some storage's folded in."""
    if job.get("storage"):
        return data.vzdump_defaults.get(f"{node}@{job['storage']}")
    if job.get("dumpdir"):
        return None
    return data.vzdump_defaults.get(f"{node}@")
