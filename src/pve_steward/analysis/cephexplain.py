"""Ceph's health check names in plain words: what each means, its likely cause and the next action.

Names and meanings follow Ceph's own health-check catalogue (doc/rados/operations/health-checks.rst).
A check not in the table still gets an answer that points to Ceph's documentation.
"""

from __future__ import annotations

from typing import NamedTuple


class CheckInfo(NamedTuple):
    meaning: str
    cause: str
    action: str


_DOC = "https://docs.ceph.com/en/latest/rados/operations/health-checks/"

CHECKS: dict[str, CheckInfo] = {
    "OSD_DOWN": CheckInfo(
        "One or more OSDs are marked down while still in: the data they hold has fewer copies.",
        "The OSD daemon stopped or crashed, its disk failed, or its host or network is down.",
        "Find the host (ceph osd tree down), check `systemctl status ceph-osd@<id>` and the disk; start it or "
        "replace the disk.",
    ),
    "OSD_HOST_DOWN": CheckInfo(
        "Every OSD of a host is down.",
        "The host is off, rebooting or cut off from the Ceph network.",
        "Bring the host back; if it is down for maintenance, make sure noout is set.",
    ),
    "OSD_NEARFULL": CheckInfo(
        "An OSD has passed the nearfull ratio (85 %): the cluster is close to stopping writes.",
        "Data grew, or uneven placement fills some OSDs before others.",
        "Add capacity or delete data; check balance (ceph osd df) and enable the balancer.",
    ),
    "OSD_BACKFILLFULL": CheckInfo(
        "An OSD has passed the backfillfull ratio (90 %): Ceph no longer moves data onto it.",
        "The cluster is nearly full; recovery cannot complete.",
        "Add capacity or delete data now.",
    ),
    "OSD_FULL": CheckInfo(
        "An OSD has passed the full ratio (95 %): the cluster stops accepting writes.",
        "The cluster ran out of space.",
        "Free space or add OSDs immediately; guests writing to Ceph are blocked.",
    ),
    "POOL_NEARFULL": CheckInfo(
        "Pools are near full because the OSDs backing them are.",
        "Same as OSD_NEARFULL.",
        "Add capacity or delete data.",
    ),
    "POOL_NEAR_FULL": CheckInfo(
        "A pool is close to its quota.",
        "The pool's max_bytes or max_objects quota is nearly used.",
        "Raise the quota (ceph osd pool set-quota) or delete data.",
    ),
    "POOL_FULL": CheckInfo(
        "A pool has reached its quota and no longer accepts writes.",
        "The pool quota is exhausted.",
        "Raise the quota or delete data.",
    ),
    "POOL_NO_REDUNDANCY": CheckInfo(
        "A pool keeps one copy only: any disk failure loses data.",
        "size was set to 1.",
        "Set size 3 and min_size 2 (ceph osd pool set <pool> size 3).",
    ),
    "PG_DEGRADED": CheckInfo(
        "Some placement groups have fewer copies than the pool's size: data is still served, with less redundancy.",
        "An OSD is down or out, or recovery is still running.",
        "Bring the OSD back or let recovery finish; do not take more OSDs down meanwhile.",
    ),
    "PG_AVAILABILITY": CheckInfo(
        "Some placement groups are inactive: I/O to their data is blocked. Ceph rates it HEALTH_WARN, yet "
        "guests using the pool hang.",
        "Too many OSDs holding the same data are down (fewer than min_size copies up).",
        "Bring the down OSDs back immediately; guests using the pool hang.",
    ),
    "PG_DAMAGED": CheckInfo(
        "Scrubbing found inconsistent data in placement groups.",
        "A disk returned bad data, or a crash left copies inconsistent.",
        "Check the disks' SMART state, then `ceph pg repair <pgid>` for each inconsistent PG.",
    ),
    "OBJECT_UNFOUND": CheckInfo(
        "Ceph knows objects exist but cannot find any copy.",
        "OSDs holding the only current copy are down.",
        "Bring every down OSD back before considering `mark_unfound_lost`.",
    ),
    "PG_NOT_SCRUBBED": CheckInfo(
        "Placement groups were not scrubbed in time.",
        "Scrubbing is disabled (noscrub) or the cluster is too busy.",
        "Unset noscrub; check the scrub schedule (osd_scrub_begin_hour) and load.",
    ),
    "PG_NOT_DEEP_SCRUBBED": CheckInfo(
        "Placement groups were not deep-scrubbed in time: silent corruption would go unnoticed.",
        "Deep scrubbing is disabled (nodeep-scrub), too slow, or the window is too short.",
        "Unset nodeep-scrub; widen the scrub window or raise osd_max_scrubs.",
    ),
    "MON_DOWN": CheckInfo(
        "A monitor is not in quorum: one more failure may stop the whole cluster.",
        "The monitor's daemon, host or network is down.",
        "Check `systemctl status ceph-mon@<name>` on its host and bring it back.",
    ),
    "MON_CLOCK_SKEW": CheckInfo(
        "Monitor clocks differ by more than 50 ms.",
        "Time synchronisation (chrony) is broken on a node.",
        "Fix NTP on the named monitors' hosts (chronyc tracking).",
    ),
    "MON_DISK_LOW": CheckInfo(
        "A monitor's data disk has less than 30 % free.",
        "The root disk of the monitor's host is filling (logs, the mon store).",
        "Free space on that host's root file system; compact the mon store if it is large.",
    ),
    "MON_DISK_CRIT": CheckInfo(
        "A monitor's data disk has less than 5 % free: it will shut down soon.",
        "The root disk of the monitor's host is full.",
        "Free space on that host now.",
    ),
    "OSDMAP_FLAGS": CheckInfo(
        "Cluster-wide OSD flags are set (noout, norebalance, pause...).",
        "A maintenance step set them and nobody unset them.",
        "If no maintenance is running, unset each flag (ceph osd unset <flag>).",
    ),
    "OSD_FLAGS": CheckInfo(
        "Flags are set on individual OSDs, hosts or device classes.",
        "A maintenance step set them per OSD.",
        "Unset them once the maintenance is over (ceph osd unset-group).",
    ),
    "DAEMON_OLD_VERSION": CheckInfo(
        "Daemons run different Ceph versions.",
        "An upgrade was not finished: some daemons were not restarted.",
        "Restart the daemons still on the old version (PVE: Ceph > OSD/Monitor > Restart).",
    ),
    "RECENT_CRASH": CheckInfo(
        "A Ceph daemon crashed recently.",
        "A bug, a failing disk or memory pressure.",
        "Read `ceph crash ls` and `ceph crash info <id>`; archive it once understood (ceph crash archive-all).",
    ),
    "SLOW_OPS": CheckInfo(
        "Requests to OSDs or monitors are taking too long.",
        "A slow or failing disk, an overloaded OSD or network problems.",
        "Find the OSDs named in the detail; check their disks and latency.",
    ),
    "BLUESTORE_SLOW_OP_ALERT": CheckInfo(
        "BlueStore reports slow operations on an OSD's disk.",
        "The disk is slow or failing.",
        "Check the disk's SMART state and latency; replace it if failing.",
    ),
    "POOL_TOO_FEW_PGS": CheckInfo(
        "A pool has fewer PGs than the autoscaler recommends.",
        "pg_autoscale_mode is warn or off and the pool grew.",
        "Set pg_autoscale_mode on, or set pg_num to the recommendation.",
    ),
    "POOL_TOO_MANY_PGS": CheckInfo(
        "A pool has more PGs than the autoscaler recommends.",
        "pg_num was set by hand, or the pool shrank.",
        "Set pg_autoscale_mode on, or lower pg_num.",
    ),
    "MGR_DOWN": CheckInfo(
        "No manager daemon is active: statistics and the dashboard stop updating.",
        "All managers are stopped.",
        "Start a manager (PVE: Ceph > Monitor > Manager > Start).",
    ),
    "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED": CheckInfo(
        "Monitors allow clients to reclaim global ids insecurely (CVE-2021-20288).",
        "The cluster was upgraded and the setting was left permissive.",
        "After all clients are updated: ceph config set mon auth_allow_insecure_global_id_reclaim false.",
    ),
}


def explain(name: str) -> CheckInfo:
    """The plain-words explanation of a health check; unknown names point to Ceph's catalogue."""
    return CHECKS.get(
        name,
        CheckInfo(
            f"Ceph health check {name} (not in our table).",
            "See Ceph's health-check catalogue.",
            f"Read `ceph health detail` and {_DOC}#{name.lower().replace('_', '-')}.",
        ),
    )
