"""PBS seen from PVE (design record 261203-20): a PVE storage of type ``pbs`` names a datastore and
namespace on a PBS server; these checks say what that means on the PBS side.
"""

from __future__ import annotations

from pve_steward.analysis.backups import job_covers, visible_pools, vzdump_prune
from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.checks.pbs import group_subject, groups_of, mapped_storages
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Subject, finding
from pve_steward.analysis.pbsdata import MANIFEST, PbsData, Row, finished, pbs_prunes, prune_marks, pve_keep_options
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.vzdumptarget import job_enabled, job_storages


def _spec(value: object) -> dict[str, str] | None:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if not value:
        return None
    return dict(part.split("=", 1) for part in str(value).split(",") if "=" in part)


PbsPrune = tuple[str, dict[str, int], Row | None]  # source, keep-*, the PVE backup job (None: a PBS prune job)
GROUP_TYPE = {"qemu": "vm", "lxc": "ct"}  # pve-storage PBSPlugin.pm prune_backups: qemu -> vm, lxc -> ct


def pve_jobs(data: ClusterData, storage: Row) -> list[Row]:
    """The enabled PVE backup jobs writing to this PBS storage."""
    sid = storage.get("storage")
    return [j for j in data.backup_jobs if job_enabled(j) and sid in job_storages(data, j)]


def pve_keep(data: ClusterData, job: Row, storage: Row, node: str | None) -> dict[str, int]:
    """The keep-* vzdump prunes a guest's group with after its backup: the job's prune-backups, else
    /etc/vzdump.conf's of the guest's node with the storage's folded in, else keep-all; nothing with remove=0
    (pve-manager PVE/VZDump.pm new; analysis/backups.py vzdump_prune). Where that node's defaults were not
    read: the job's, else the storage's."""
    applied = vzdump_prune(data, job, node)
    if applied is not None:
        spec, remove = applied
        return pve_keep_options(spec) if remove else {}
    if str(job.get("remove", "")) == "0":
        return {}
    return pve_keep_options(_spec(job.get("prune-backups")) or _spec(storage.get("prune-backups")))


@pve_rule(
    "pbs.vzdump-prune-group",
    rule="vzdump prunes only the backup group of the guest it just backed up (type/vmid, qemu -> vm, lxc -> ct), "
    "so a PVE backup job's prune-backups reaches only the guests the job selects; it prunes right after that "
    "backup, which takes a keep slot itself",
    pve="pve-manager PVE/VZDump.pm exec_backup_task (prune_backups(..., $vmid, $vmtype)); pve-storage "
    "PBSPlugin.pm prune_backups",
    codes=("PBS_PRUNE_DROPS_LAST_VERIFIED",),
)
def group_keep(data: ClusterData, source: PbsPrune, storage: Row, kind: str, ident: str) -> dict[str, int]:
    """The keep-* a prune source applies to backup group ``kind/ident`` ({}: it does not prune it): a PBS prune
    job its own (it prunes every group of its namespace), a PVE job only for a guest of that type it selects (or
    may: a pool it cannot see)."""
    _name, keep, job = source
    if job is None:
        return keep
    guest = data.guests.get(int(ident)) if ident.isdecimal() else None
    if guest is None or GROUP_TYPE.get(str(guest.get("type"))) != kind:
        return {}
    pool, node = guest.get("pool"), guest.get("node")
    covered = job_covers(job, int(ident), node, str(pool) if pool else None, visible_pools(data.resources))
    return {} if covered is False else pve_keep(data, job, storage, str(node) if node else None)


def with_next_backup(group: list[Row], now: float) -> list[Row]:
    """The group as vzdump prunes it: with the backup it has just written, the newest and finished
    (VZDump.pm exec_backup_task prunes after the backup, "prune older backups with retention")."""
    newest = max((int(s.get("backup-time", 0)) for s in group), default=0)
    return [*group, {"backup-time": max(int(now), newest + 1), "files": [{"filename": MANIFEST}]}]


def _denied(data: ClusterData, store: str) -> bool:
    return any(m.optional and f"datastore {store}" in m.what for m in data.missing_for("pbs"))


@check(
    "pbs",
    codes=[
        Code(
            "PBS_STORAGE_DATASTORE_MISSING",
            "critical",
            "PVE storage names a datastore PBS does not have",
            "A PVE storage of type pbs on this PBS (same server, or the same pinned certificate) names a datastore "
            "that PBS neither lists nor knows: every backup job to that storage fails.",
            "Fix the storage's datastore (pvesm set <storage> --datastore <name>) or create the datastore on PBS.",
        ),
        Code(
            "PBS_PRUNE_DROPS_LAST_VERIFIED",
            "critical",
            "Next prune removes a guest's only verified backup",
            "Every snapshot of the guest's backup group whose verification is ok would be removed by the next "
            "prune (an enabled PBS prune job, or the prune-backups of a PVE backup job that backs the guest up; PBS's "
            "selection, pbs-datastore prune.rs compute_prune_info): afterwards no verified backup of it is left.",
            "Verify the newer snapshots now (or protect the verified one) before the next prune runs.",
        ),
    ],
    pve="proxmox-backup pbs-datastore/src/prune.rs compute_prune_info; pve-storage PVE/Storage/PBSPlugin.pm",
)
def pve_storages(data: ClusterData, t: Thresholds) -> list[Finding]:
    """PVE's PBS storages against PBS: a datastore missing, and guests about to lose their only verified backup."""
    pbs = data.pbs
    if pbs is None:
        return []
    known = {str(r.get("store")) for r in [*pbs.usage, *pbs.datastores]} | set(pbs.config)
    out = []
    for store, storages in sorted(mapped_storages(data, pbs).items()):
        if store not in known and not _denied(data, store):
            names = sorted(str(s.get("storage")) for s in storages)
            out.append(
                finding(
                    "PBS_STORAGE_DATASTORE_MISSING",
                    Subject(kind="storage", id=names[0]),
                    f"PVE storage {', '.join(names)} names datastore {store}, which PBS {pbs.host} does not have",
                    {"datastore": store, "pve_storages": names, "pbs": pbs.host},
                )
            )
            continue
        for storage in storages:
            out += _last_verified(data, pbs, store, storage)
    return out


def _last_verified(data: ClusterData, pbs: PbsData, store: str, storage: Row) -> list[Finding]:
    ns = str(storage.get("namespace") or "")
    prunes: list[PbsPrune] = [(source, keep, None) for source, keep in pbs_prunes(pbs, store, ns)]
    prunes += [(f"PVE backup job {job.get('id')}", {}, job) for job in pve_jobs(data, storage)]
    if not prunes:
        return []
    rows = [r for r in pbs.snapshots.get(store, []) if str(r.get("ns") or "") == ns]
    out = []
    for key, group in sorted(groups_of(rows).items()):
        verified = [s for s in group if finished(s) and (s.get("verification") or {}).get("state") == "ok"]
        if key[1] not in ("vm", "ct") or not verified:
            continue
        removed_by: dict[int, str] = {}
        for prune in prunes:
            source, _keep, job = prune
            keep = group_keep(data, prune, storage, key[1], key[2])
            if not keep:
                continue
            marks = prune_marks(group if job is None else with_next_backup(group, data.now), keep)
            for s in verified:
                if marks[int(s.get("backup-time", 0))] == "remove":
                    removed_by.setdefault(int(s.get("backup-time", 0)), source)
        if len(removed_by) == len(verified):
            label = f"{key[1]}/{key[2]} on {store}"
            out.append(
                finding(
                    "PBS_PRUNE_DROPS_LAST_VERIFIED",
                    group_subject(data, store, key),
                    f"the next prune removes every verified backup of {label} "
                    f"({len(verified)} verified, by {', '.join(sorted(set(removed_by.values())))})",
                    {
                        "store": store,
                        "ns": ns,
                        "group": f"{key[1]}/{key[2]}",
                        "verified_backup_times": sorted(removed_by),
                        "pruned_by": sorted(set(removed_by.values())),
                        "pve_storage": storage.get("storage"),
                    },
                )
            )
    return out
