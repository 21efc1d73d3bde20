"""Storage definitions against where they are usable: disabled but used, shared but mounted once,
no backup target at all, a backup job's target missing on a node.

Reads: /storage and /cluster/resources (always read), plus /cluster/backup (one cluster-wide read).
/cluster/resources lists a storage on a node only where it is enabled for that node (pve-manager
PVE/API2/Cluster.pm resources: ``storage_check_enabled``), with status 'available' once pvestatd
could activate it.
"""

from __future__ import annotations

from pve_steward.analysis.backups import covers, selection, visible_pools
from pve_steward.analysis.catalog import Code, Need, check
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import CLUSTER, Finding, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.vzdumptarget import job_enabled, job_nodes, job_storage, job_storages
from pve_steward.pve.storagecfg import allowed_nodes, content_types, is_shared
from pve_steward.pve.values import flag
from pve_steward.pve.visibility import STORAGE, STORAGE_ROWS

BACKUP_JOBS = Need("backup_job_config", "/cluster/backup", privilege="Sys.Audit on /")


def _disabled(s: Row) -> bool:
    return flag(s.get("disable"))


def _enabled_jobs(data: ClusterData) -> list[Row]:
    return [j for j in data.read(BACKUP_JOBS.key) or [] if job_enabled(j)]


@pve_rule(
    "storage.resources-where-enabled",
    rule=(
        "/cluster/resources lists a storage on a node only where storage_check_enabled passes (not disable=1,"
        " node in its nodes list), with status 'available' once pvestatd activated it."
    ),
    pve="pve-manager PVE/API2/Cluster.pm resources; pve-storage src/PVE/Storage.pm storage_check_enabled",
    codes=(
        "STORAGE_DISABLED",
        "STORAGE_SHARED_SINGLE_NODE",
        "STORAGE_BACKUP_TARGET_MISSING",
    ),
)
def _runs_on(data: ClusterData, job: Row) -> list[str]:
    """The online nodes where a job gets as far as its storage: every node (or its node) for an 'all' job; for a
    job that names guests or a pool, only nodes holding one of them, since vzdump ends silently elsewhere.
    A node whose guests' pool membership is not visible is left out (not provable)."""
    nodes = job_nodes(data, job)
    sel = selection(job)
    if sel.ids is None and sel.pool is None:
        return nodes
    pools = visible_pools(data.resources)
    holding = {
        str(g.get("node"))
        for vmid, g in data.guests.items()
        if covers(sel, vmid, str(g.get("node")), None if g.get("pool") is None else str(g["pool"]), pools)
    }
    return [n for n in nodes if n in holding]


@pve_rule(
    "storage.backup-content",
    rule="vzdump refuses a storage whose content lacks 'backup' ('wrong content type') before it backs up anything, "
    "for a job's own storage and a node's default alike.",
    pve="pve-manager PVE/VZDump.pm storage_info (called by new and by the API's defaults)",
    codes=("STORAGE_BACKUP_TARGET_WRONG_CONTENT",),
)
def _refuses_backups(scfg: Row) -> bool:
    return "backup" not in content_types(scfg)


def _available_on(data: ClusterData) -> dict[str, set[str]]:
    """Storage id -> online nodes where /cluster/resources says it is available."""
    out: dict[str, set[str]] = {}
    online = set(data.online_nodes)
    for r in data.resources:
        if r.get("type") == "storage" and r.get("status") == "available" and r.get("node") in online:
            out.setdefault(str(r.get("storage")), set()).add(str(r["node"]))
    return out


def _unseen(data: ClusterData, sid: str) -> bool:
    """Whether the token may merely not see the storage: its /storage entry, or (Datastore.Audit alone shows
    them) its /cluster/resources rows. The collector names what is hidden (pve/visibility.py)."""
    return data.hidden(STORAGE if sid not in data.storage_defs else STORAGE_ROWS, sid) is not None


def storage_subject(sid: str, node: str | None = None) -> Subject:
    return Subject(kind="storage", id=sid if node is None else f"{node}:{sid}", name=sid, node=node)


@check(
    "storage",
    codes=[
        Code(
            "STORAGE_DISABLED",
            "warning",
            "Storage is disabled",
            "A storage.cfg entry has disable=1 (GET /storage): PVE hides it everywhere, yet backup jobs (GET "
            "/cluster/backup) or guest disks may still point at it and fail.",
            "Enable it (GUI Datacenter > Storage > Edit > Enable, `pvesm set <id> --disable 0`) or repoint the jobs "
            "named in the evidence and remove it (`pvesm remove <id>`).",
        )
    ],
    needs=[BACKUP_JOBS],
    anchors=["cv4pve-diag:WS0008"],
    pve="pve-storage src/PVE/Storage.pm storage_check_enabled (disable option)",
)
def disabled(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Disabled storages, with the enabled backup jobs that still target them."""
    jobs = _enabled_jobs(data)
    out = []
    for s in sorted(data.storage_config, key=lambda r: str(r.get("storage"))):
        if not _disabled(s):
            continue
        sid = str(s.get("storage"))
        users = sorted(str(j.get("id")) for j in jobs if sid in job_storages(data, j))
        out.append(
            finding(
                "STORAGE_DISABLED",
                storage_subject(sid),
                f"storage {sid} is disabled" + (f"; backup job(s) {', '.join(users)} still target it" if users else ""),
                {"storage": sid, "type": s.get("type"), "disable": s.get("disable"), "backup_jobs": users},
            )
        )
    return out


@check(
    "storage",
    codes=[
        Code(
            "STORAGE_SHARED_SINGLE_NODE",
            "warning",
            "Shared storage is available on only one node",
            "A shared storage (GET /storage shared=1: every iscsi, nfs, cifs, rbd, cephfs, iscsidirect, glusterfs, "
            "zfs, drbd or pbs storage, and any other configured shared) is 'available' in /cluster/resources on "
            "exactly one of the online nodes it is configured for (its nodes list, or every node), when that is two "
            "or more: the other nodes cannot reach it (mount failure or misconfiguration).",
            "On the other nodes: `pvesm status`, check the mount/network path; GUI Datacenter > Storage > Edit > "
            "Nodes.",
        )
    ],
    anchors=["cv4pve-diag:WS0005"],
    pve="pve-manager PVE/API2/Cluster.pm resources (a storage row per node where storage_check_enabled); "
    "pve-storage src/PVE/Storage/Plugin.pm @SHARED_STORAGE, parse_config (shared=1)",
)
def shared_single_node(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Shared storages mounted on a single node of those that should reach them."""
    out = []
    where = _available_on(data)
    for s in sorted(data.storage_config, key=lambda r: str(r.get("storage"))):
        sid, kind = str(s.get("storage")), str(s.get("type"))
        if not is_shared(s) or _disabled(s):
            continue
        allowed = allowed_nodes(s)
        expected = [n for n in data.online_nodes if allowed is None or n in allowed]
        available = where.get(sid, set()) & set(expected)
        if len(expected) < 2 or len(available) != 1:
            continue
        only = next(iter(available))
        out.append(
            finding(
                "STORAGE_SHARED_SINGLE_NODE",
                storage_subject(sid),
                f"shared storage {sid} ({kind}) is available only on {only}",
                {
                    "storage": sid,
                    "type": kind,
                    "available_on": [only],
                    "expected_on": expected,
                    "online_nodes": data.online_nodes,
                },
            )
        )
    return out


@check(
    "storage",
    codes=[
        Code(
            "STORAGE_NO_BACKUP_TARGET",
            "warning",
            "No storage can hold backups",
            "No enabled storage of GET /storage has content type 'backup': vzdump has nowhere to write.",
            "Add 'VZDump backup file' to a storage's content (GUI Datacenter > Storage > Edit > Content, "
            "`pvesm set <id> --content backup,...`) or add a Proxmox Backup Server storage.",
        )
    ],
    anchors=["cv4pve-diag:WS0006"],
    pve="pve-manager PVE/VZDump.pm storage_info (storage must have content 'backup')",
)
def no_backup_target(data: ClusterData, t: Thresholds) -> list[Finding]:
    """The cluster has no storage for backups (not judged when PVE hides some storage from the token)."""
    if not data.storage_config or any("backup" in content_types(s) and not _disabled(s) for s in data.storage_config):
        return []
    if not data.whole(STORAGE, "storage"):
        return []
    return [
        finding(
            "STORAGE_NO_BACKUP_TARGET",
            CLUSTER,
            "no enabled storage has content type 'backup'",
            {
                "storages": sorted(
                    f"{s.get('storage')}:{','.join(sorted(content_types(s)))}" for s in data.storage_config
                )
            },
        )
    ]


@check(
    "storage",
    codes=[
        Code(
            "STORAGE_BACKUP_TARGET_MISSING",
            "warning",
            "A backup job's storage is not available on a node it runs on",
            "An enabled backup job (GET /cluster/backup) writes to a storage that /cluster/resources does not "
            "list as 'available' on an online node the job runs on (its node, or every node; a job that names its "
            "guests or a pool runs only where one of them is): guests there are not backed up.",
            "Make the storage available on that node (GUI Datacenter > Storage > Edit > Nodes; check the mount "
            "with `pvesm status`) or restrict the job (GUI Datacenter > Backup > Edit > Node).",
        )
    ],
    needs=[BACKUP_JOBS],
    anchors=["cv4pve-diag:WS0007"],
    pve="pve-manager PVE/VZDump.pm exec_backup (storage_info fails where the storage is not enabled/active); "
    "PVE/API2/VZDump.pm vzdump ('silent exit if specified VMs run on other nodes')",
)
def backup_target_missing(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Pairs of (enabled job, online node) where the job's storage is not available."""
    where = _available_on(data)
    out = []
    for job in sorted(_enabled_jobs(data), key=lambda j: str(j.get("id"))):
        for node in _runs_on(data, job):
            sid = job_storage(data, job, node)
            if sid is None or node not in data.online_nodes or node in where.get(sid, set()):
                continue
            if not _unseen(data, sid):
                out.append(
                    finding(
                        "STORAGE_BACKUP_TARGET_MISSING",
                        storage_subject(sid, node),
                        f"backup job {job.get('id')} writes to {sid}, which is not available on {node}",
                        {
                            "job": job.get("id"),
                            "storage": sid,
                            "node": node,
                            "available_on": sorted(where.get(sid, ())),
                        },
                    )
                )
    return out


@check(
    "storage",
    codes=[
        Code(
            "STORAGE_BACKUP_TARGET_WRONG_CONTENT",
            "critical",
            "A backup job writes to a storage without content type 'backup'",
            "An enabled backup job (GET /cluster/backup) that runs on some online node writes to a storage whose "
            "content (GET /storage) lacks 'backup': vzdump stops with \"can't use storage '<id>' for backups - "
            "wrong content type\" and every run fails. A job without storage writes where each node's vzdump "
            "default says (/etc/vzdump.conf's storage, else 'local': GET /nodes/{node}/vzdump/defaults).",
            "Add 'VZDump backup file' to the storage's content (GUI Datacenter > Storage > Edit > Content, "
            "`pvesm set <id> --content backup,...`) or point the job at a backup storage (GUI Datacenter > "
            "Backup > Edit > Storage).",
        )
    ],
    needs=[BACKUP_JOBS],
    pve="pve-manager PVE/VZDump.pm storage_info ('wrong content type'), get_storage_param ('local'); "
    "PVE/API2/VZDump.pm defaults",
)
def backup_target_wrong_content(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Storages that enabled backup jobs write to although they do not take backups."""
    users: dict[str, dict[str, list[str]]] = {}  # storage -> job -> the nodes it writes there from
    defaulting = {str(j.get("id")) for j in _enabled_jobs(data) if not j.get("storage")}
    for job in sorted(_enabled_jobs(data), key=lambda j: str(j.get("id"))):
        for node in _runs_on(data, job):
            sid = job_storage(data, job, node)
            scfg = data.storage_defs.get(sid) if sid is not None else None
            if sid is None or scfg is None or not _refuses_backups(scfg):  # unknown: ..._TARGET_MISSING's
                continue
            users.setdefault(sid, {}).setdefault(str(job.get("id")), []).append(node)
    out = []
    for sid, jobs in sorted(users.items()):
        defaulted = {job: nodes for job, nodes in jobs.items() if job in defaulting}
        how = f" (by the vzdump default of {', '.join(sorted({n for ns in defaulted.values() for n in ns}))})"
        out.append(
            finding(
                "STORAGE_BACKUP_TARGET_WRONG_CONTENT",
                storage_subject(sid),
                f"backup job(s) {', '.join(jobs)} write to {sid}{how if defaulted else ''}, whose content lacks "
                "'backup': vzdump refuses it and every run fails",
                {
                    "storage": sid,
                    "content": sorted(content_types(data.storage_defs[sid])),
                    "backup_jobs": list(jobs),
                    "storage_from_job": not defaulted,
                    "from_vzdump_default": {job: sorted(nodes) for job, nodes in defaulted.items()},
                },
            )
        )
    return out
