"""Storage replication as pvesr leaves it: the replica volumes on the target and the last run's log.

pve-guest-common src/PVE/Replication.pm replicates a guest's volumes on local ZFS storages (zfspool, the only
storage with the replicate feature; ``replicate=0`` opts a disk out) to the job's target, where each volume
exists under the same volume id once a sync has succeeded (``last_sync`` set); each run snapshots the
volumes as ``__replicate_<job>_<start>__`` and keeps the last successful one on both sides. The log of the
last run (ReplicationState.pm job_logfile_name) is written line by line as '<time> <job>: <message>'.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from pvesim import pveconfig


def replicated_volumes(cluster: Any, guest: Any) -> list[tuple[str, str, dict[str, str]]]:
    """(key, volid, options) of the guest's volumes a job replicates: on a local zfspool, replicate not off."""
    out = []
    for key, volid, opts in guest.volumes():
        storage = cluster.storages.get(pveconfig.storage_of(volid))
        if storage is None or storage.type != "zfspool" or storage.shared or key.startswith("unused"):
            continue
        if opts.get("replicate", "1") in ("0", "no", "off", "false") or opts.get("media") == "cdrom":
            continue
        out.append((key, volid, opts))
    return out


def replicas_on(cluster: Any, node: str, storage_id: str) -> list[tuple[Any, str, dict[str, str], int]]:
    """The replica volumes on ``node``'s storage: (guest, volid, options, last_sync) of every job that targets
    the node and has synced at least once (a failing job keeps its last good replica)."""
    out = []
    for job in cluster.replication.values():
        guest = cluster.guests.get(job.guest)
        if guest is None or job.target != node or guest.node == node or not job.last_sync:
            continue
        for _key, volid, opts in replicated_volumes(cluster, guest):
            if pveconfig.storage_of(volid) == storage_id:
                out.append((guest, volid, opts, int(job.last_sync)))
    return out


def snapshot_name(job_id: str, start: int) -> str:
    return f"__replicate_{job_id}_{start}__"


def job_log(cluster: Any, job: Any) -> list[str]:
    """The last run's log (Replication.pm run_replication_nolock and replicate): its start, the guest and its
    volumes, the snapshot, the transfer, the cleanup, and its end (with the error of a failed run)."""
    guest = cluster.guests.get(job.guest)
    if not job.last_try or guest is None:
        return []
    zone = cluster.nodes[guest.node].health.timezone if guest.node in cluster.nodes else "UTC"
    start = int(job.last_try)

    def line(offset: int, text: str) -> str:
        when = dt.datetime.fromtimestamp(start + offset, ZoneInfo(zone))
        return f"{when:%Y-%m-%d %H:%M:%S} {job.id}: {text}"

    volids = [v for _k, v, _o in replicated_volumes(cluster, guest)]
    kind = "VM" if guest.type == "qemu" else "CT"
    lines = [
        line(0, "start replication job"),
        line(0, f"guest => {kind} {guest.vmid}, running => {10_000 + guest.vmid if guest.status == 'running' else 0}"),
        line(0, "volumes => " + ",".join(sorted(volids))),
    ]
    if job.error:
        return [*lines, line(1, f"end replication job with error: {job.error}")]
    snap = snapshot_name(job.id, start)
    lines += [line(1, f"create snapshot '{snap}' on {v}") for v in sorted(volids)]
    rate = f"{job.rate} MiB/s" if job.rate else "none"
    lines.append(line(1, f"using secure transmission, rate limit: {rate}"))
    for v in sorted(volids):
        lines.append(line(1, f"incremental sync '{v}' ({snapshot_name(job.id, start - 900)} => {snap})"))
        storage = cluster.storages.get(pveconfig.storage_of(v))
        dataset = f"{storage.options.get('pool', 'rpool/data') if storage else 'rpool/data'}/{v.split(':', 1)[1]}"
        lines.append(
            line(2, f"send from @{snapshot_name(job.id, start - 900)} to {dataset}@{snap} estimated size is 2.35M")
        )
        lines.append(line(2, f"delete previous replication snapshot '{snapshot_name(job.id, start - 900)}' on {v}"))
    lines.append(line(3, "end replication job"))
    return lines
