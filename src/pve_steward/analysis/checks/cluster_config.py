"""Cluster-wide configuration: backup job settings, whether HA and replication are used at all, kernel
consistency, external metrics and the cluster log.

The backup, HA and replication checks stand on reads the collector already makes for those areas
(``/cluster/backup``, ``/cluster/ha/resources``, ``/cluster/replication``), so they cost no extra call.
"""

from __future__ import annotations

import re
from typing import Any

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import CLUSTER, Finding, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.vzdumptarget import job_enabled, job_nodes, job_storages
from pve_steward.pve.visibility import CLUSTER_LOG, REPLICATION, STORAGE

_WARNINGS = re.compile(r"WARNINGS: \d+")
METRICS = Need("metric_servers", "/cluster/metrics/server", privilege="Sys.Audit on /")
# /cluster/log shows only the caller's own entries without Sys.Syslog on / (pve-manager API2/Cluster.pm log)
LOG = Need(
    "cluster_log",
    "/cluster/log",
    params=(("max", 200),),
    privilege="Sys.Syslog on /",
    filters=(CLUSTER_LOG,),
)


def _job_subject(job: Row) -> Subject:
    return Subject(kind="backup_job", id=str(job.get("id")), node=job.get("node"))


@pve_rule(
    "backups.compression",
    rule="vzdump writes uncompressed archives when compress is unset or 0 on the job and in vzdump.conf",
    pve="pve-manager PVE/VZDump.pm compressor_info",
    codes=("BACKUP_JOB_NO_COMPRESSION",),
)
def _compress_default(data: ClusterData, job: Row) -> str | None:
    """What vzdump would use for a job without ``compress``: /nodes/{n}/vzdump/defaults (vzdump.conf), where read."""
    nodes = set(job_nodes(data, job))
    found = [  # compress is vzdump.conf's whichever storage the answer folded in
        str(v.get("compress"))
        for key, v in sorted(data.vzdump_defaults.items())
        if key.split("@", 1)[0] in nodes and str(v.get("compress") or "0") != "0"
    ]
    return found[0] if found else None


@check(
    "backups",
    codes=[
        Code(
            "BACKUP_JOB_NO_COMPRESSION",
            "info",
            "Backup job writes uncompressed archives",
            "An enabled backup job to a non-PBS storage has `compress` unset or 0 and the node's vzdump.conf "
            "(where read) sets none, so vzdump writes uncompressed archives (VZDump.pm compressor_info). PBS "
            "storages compress chunks themselves and are skipped.",
            "GUI Datacenter > Backup > Edit > Compression: ZSTD, or `pvesh set /cluster/backup/<id> --compress zstd`.",
        ),
        Code(
            "BACKUP_JOB_OVERLAP",
            "warning",
            "Backup jobs share a storage and a schedule",
            "Two or more enabled backup jobs write to the same storage on the same schedule, so they run at once "
            "and contend for its I/O (schedules compared as written, trimmed, case-insensitive).",
            "Stagger the schedules (GUI Datacenter > Backup > Edit > Schedule) or merge the jobs.",
        ),
    ],
    anchors=["cv4pve-diag:IC0001", "cv4pve-diag:WC0019"],
    pve="pve-manager PVE/VZDump.pm compressor_info, PVE/API2/Backup.pm index",
)
def backup_job_settings(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Enabled jobs without compression, and enabled jobs that run together on one storage."""
    types = {str(s.get("storage")): s.get("type") for s in data.storage_config}
    out: list[Finding] = []
    groups: dict[tuple[str, str], list[Row]] = {}
    for job in data.backup_jobs:
        if not job_enabled(job):
            continue
        # a job without storage writes where each node's vzdump default says; not judged where that is unknown
        # a storage PVE hides from the token has a type it cannot know: not judged (the collector names it)
        files = [
            sid
            for sid in job_storages(data, job)
            if types.get(sid) != "pbs" and (sid in types or data.hidden(STORAGE, sid) is None)
        ]
        compress = str(job.get("compress") or "0")
        # vzdump.conf fills only what the job leaves undefined (VZDump.pm new): an explicit compress=0 (the GUI's
        # 'none') stands
        inherited = _compress_default(data, job) if job.get("compress") is None else None
        if (files or job.get("dumpdir")) and compress == "0" and not inherited:
            where = ", ".join(files) or str(job.get("dumpdir"))
            out.append(
                finding(
                    "BACKUP_JOB_NO_COMPRESSION",
                    _job_subject(job),
                    f"backup job {job.get('id')} writes uncompressed archives to {where}",
                    {"compress": job.get("compress"), "storage": where, "storage_type": types.get(where)},
                )
            )
        schedule = str(job.get("schedule") or "").strip().lower()
        if schedule and job.get("storage"):
            groups.setdefault((str(job["storage"]), schedule), []).append(job)
    for (sid, schedule), jobs in sorted(groups.items()):
        if len(jobs) < 2:
            continue
        ids = sorted(str(j.get("id")) for j in jobs)
        for job in jobs:
            others = [i for i in ids if i != str(job.get("id"))]
            out.append(
                finding(
                    "BACKUP_JOB_OVERLAP",
                    _job_subject(job),
                    f"backup job {job.get('id')} runs on {sid} at '{schedule}' together with {', '.join(others)}",
                    {"storage": sid, "schedule": job.get("schedule"), "overlapping_jobs": others},
                )
            )
    return out


@check(
    "ha",
    codes=[
        Code(
            "HA_NONE",
            "info",
            "No guest is managed by HA",
            "The cluster has several nodes and guests but no HA resource, so no guest restarts elsewhere when its "
            "node fails.",
            "Add the guests that must survive a node failure: GUI Datacenter > HA > Add, or "
            "`ha-manager add vm:<vmid> --state started`.",
        )
    ],
    anchors=["cv4pve-diag:IC0002"],
    pve="pve-ha-manager src/PVE/HA/Manager.pm (only configured resources are recovered)",
)
def ha_used(data: ClusterData, t: Thresholds) -> list[Finding]:
    """A multi-node cluster with guests and no HA resource at all."""
    if len(data.nodes) < 2 or not data.guests or data.ha_resources or "ha_resources" in data.unread:
        return []
    return [finding("HA_NONE", CLUSTER, "no guest is managed by HA", {"ha_resources": 0, "guests": len(data.guests)})]


@check(
    "replication",
    codes=[
        Code(
            "REPLICATION_NONE",
            "info",
            "No storage replication job",
            "The cluster has several nodes and guests but no replication job, so guests on local storage have no "
            "copy on another node. Guests on shared storage (Ceph, NFS, iSCSI) do not need one.",
            "For guests on local ZFS: GUI Guest > Replication > Add, or "
            "`pvesr create-local-job <vmid>-0 <target> --schedule '*/15'`.",
        )
    ],
    anchors=["cv4pve-diag:IC0003"],
    pve="pve-guest-common src/PVE/ReplicationConfig.pm",
)
def replication_used(data: ClusterData, t: Thresholds) -> list[Finding]:
    """A multi-node cluster with guests and no replication job (the list shows jobs of visible guests only: not
    judged while PVE hides some guest from the token)."""
    if len(data.nodes) < 2 or not data.guests or data.replication_jobs:
        return []
    if not data.whole(REPLICATION, "replication_jobs"):
        return []
    return [finding("REPLICATION_NONE", CLUSTER, "no storage replication job", {"jobs": 0, "guests": len(data.guests)})]


def _kernel(status: Row) -> str | None:
    current = status.get("current-kernel")
    if isinstance(current, dict) and current.get("release"):
        return str(current["release"])
    parts = str(status.get("kversion") or "").split()
    return parts[1] if len(parts) > 1 else None


@check(
    "cluster",
    codes=[
        Code(
            "NODE_KERNEL_MISMATCH",
            "warning",
            "Nodes run different kernels",
            "The online nodes do not all run the same kernel release, so live migration and the behaviour of "
            "storage and network drivers can differ between them.",
            "Update every node to the same packages (`apt full-upgrade`) and reboot the stragglers one at a time "
            "(plan_node_evacuation moves their guests away first).",
        )
    ],
    anchors=["cv4pve-diag:WC0012"],
    pve="pve-manager PVE/API2/Nodes.pm status (current-kernel, kversion)",
)
def kernels(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Different running kernel releases across online nodes."""
    running = {n: k for n, st in data.node_status.items() if (k := _kernel(st))}
    if len(set(running.values())) < 2:
        return []
    return [
        finding(
            "NODE_KERNEL_MISMATCH",
            CLUSTER,
            f"nodes run {len(set(running.values()))} different kernels",
            {"kernels": dict(sorted(running.items()))},
        )
    ]


@check(
    "cluster",
    codes=[
        Code(
            "METRICS_NONE",
            "info",
            "No external metric server",
            "No InfluxDB or Graphite server is configured, so history lives only in the nodes' RRD files, which "
            "keep coarse averages and are lost with a node.",
            "GUI Datacenter > Metric Server > Add, or `pvesh create /cluster/metrics/server/<id> --type influxdb "
            "--server <host> --port 8086`.",
        ),
        Code(
            "METRICS_ALL_DISABLED",
            "info",
            "Every metric server is disabled",
            "Metric servers are configured but every one has `disable` set, so nothing is exported.",
            "Enable one: `pvesh set /cluster/metrics/server/<id> --disable 0`.",
        ),
    ],
    needs=[METRICS],
    anchors=["cv4pve-diag:IC0018", "cv4pve-diag:IC0019"],
    pve="pve-manager PVE/API2/Cluster/MetricServer.pm server_index",
)
def metrics(data: ClusterData, t: Thresholds) -> list[Finding]:
    """External metric servers: none, or all disabled."""
    servers = data.read("metric_servers")
    if not isinstance(servers, list):
        return []
    if not servers:
        return [finding("METRICS_NONE", CLUSTER, "no external metric server is configured", {"servers": 0})]
    if all(int(s.get("disable") or 0) for s in servers):
        ids = sorted(str(s.get("id")) for s in servers)
        return [
            finding("METRICS_ALL_DISABLED", CLUSTER, f"all {len(ids)} metric servers are disabled", {"servers": ids})
        ]
    return []


@check(
    "cluster",
    codes=[
        Code(
            "CLUSTER_LOG_ERRORS",
            "info",
            "Many errors in the cluster log",
            "At least `cluster_log_errors_max` of the last 200 cluster log entries have priority err or worse "
            "(syslog 0-3).",
            "Read them: GUI Datacenter > Cluster log, or `pvesh get /cluster/log --max 200`; then the node's "
            "journal (`journalctl -p err`).",
        )
    ],
    needs=[LOG],
    thresholds=[Threshold("cluster_log_errors_max", 10, "error-level entries among the last 200 in the cluster log")],
    anchors=["cv4pve-diag:IC0015"],
    pve="pve-manager PVE/API2/Cluster.pm log",
)
def cluster_log(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Error-level entries among the most recent 200 of the cluster log."""
    rows = data.read("cluster_log")
    if not isinstance(rows, list):
        return []
    errors = [r for r in rows if _priority(r) <= 3]
    if len(errors) < t.get("cluster_log_errors_max"):
        return []
    tags: dict[str, int] = {}
    for r in errors:
        tags[str(r.get("tag"))] = tags.get(str(r.get("tag")), 0) + 1
    return [
        finding(
            "CLUSTER_LOG_ERRORS",
            CLUSTER,
            f"{len(errors)} of the last {len(rows)} cluster log entries are errors",
            {"errors": len(errors), "entries": len(rows), "by_tag": tags, "threshold": t.get("cluster_log_errors_max")},
        )
    ]


def _priority(row: Row) -> int:
    value: Any = row.get("pri", 6)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 6


def _members(spec: Any) -> list[str]:
    """'pve1:2,pve2' -> ['pve1', 'pve2'] (HA group and node-affinity rule node lists; priorities dropped)."""
    return [part.split(":", 1)[0].strip() for part in str(spec or "").split(",") if part.strip()]


@check(
    "ha",
    codes=[
        Code(
            "HA_RULE_NODE_OFFLINE",
            "warning",
            "HA group or rule lists an offline node",
            "An HA group (PVE 8) or enabled node-affinity rule (PVE 9) names nodes that are offline, so its "
            "resources have fewer places to fail over to. HA_RULE_NO_TARGET says when none is left.",
            "Bring the node back, or take it out of the group/rule (GUI Datacenter > HA > Groups/Rules; "
            "`ha-manager rules set node-affinity <rule> --nodes ...`).",
        )
    ],
    anchors=["cv4pve-diag:CC0003"],
    pve="pve-ha-manager src/PVE/HA/Manager.pm select_service_node (online nodes of the group/rule)",
)
def ha_offline_members(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Groups and node-affinity rules with offline member nodes."""
    offline = {n for n, r in data.nodes.items() if not r.get("online")}
    if not offline:
        return []
    lists = [(f"group {g.get('group')}", str(g.get("group")), g.get("nodes")) for g in data.ha_groups]
    lists += [
        (f"rule {r.get('rule')}", str(r.get("rule")), r.get("nodes"))
        for r in data.ha_rules
        if r.get("type") == "node-affinity" and not int(r.get("disable", 0) or 0)
    ]
    out = []
    for label, name, spec in lists:
        members = _members(spec)
        down = sorted(set(members) & offline)
        if down:
            out.append(
                finding(
                    "HA_RULE_NODE_OFFLINE",
                    Subject(kind="ha_rule", id=name),
                    f"HA {label} lists offline node(s) {', '.join(down)}",
                    {"nodes": members, "offline": down},
                )
            )
    return out


@check(
    "operations",
    codes=[
        Code(
            "TASK_FAILURE_RATE",
            "info",
            "Many recent tasks failed",
            "Of the tasks that ended in the window read (48 h), at least `task_failure_rate_pct` percent ended in "
            "an error (not OK, not WARNINGS), counted once there are `task_failure_rate_min_tasks` of them: "
            "something fails systematically.",
            "Group the failures by type and node (list_tasks with errors only; GUI Datacenter > Tasks) and read "
            "the newest log of each (get_task).",
        )
    ],
    thresholds=[
        Threshold("task_failure_rate_pct", 10, "percent of ended tasks that failed", maximum=100),
        Threshold("task_failure_rate_min_tasks", 10, "ended tasks needed before the rate is judged"),
    ],
    anchors=["cv4pve-diag:IC0016"],
    pve="pve-common src/PVE/UPID.pm status_is_error (OK and WARNINGS: <n> are not errors)",
)
def task_failure_rate(data: ClusterData, t: Thresholds) -> list[Finding]:
    """The share of ended tasks that failed."""
    ended = [r for r in data.tasks if r.get("endtime") and r.get("status")]
    if len(ended) < t.get("task_failure_rate_min_tasks"):
        return []
    failed = [r for r in ended if _task_failed(str(r.get("status")))]
    pct = 100.0 * len(failed) / len(ended)
    if pct < t.get("task_failure_rate_pct"):
        return []
    by_type: dict[str, int] = {}
    for r in failed:
        by_type[str(r.get("type"))] = by_type.get(str(r.get("type")), 0) + 1
    return [
        finding(
            "TASK_FAILURE_RATE",
            CLUSTER,
            f"{len(failed)} of {len(ended)} recent tasks failed ({pct:.0f} %)",
            {"failed": len(failed), "ended": len(ended), "percent": round(pct, 1), "by_type": by_type},
        )
    ]


def _task_failed(status: str) -> bool:
    """pve-common UPID.pm status_is_error: anything but OK and ``WARNINGS: <n>``."""
    return status != "OK" and not _WARNINGS.fullmatch(status)
