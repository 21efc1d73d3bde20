"""Guest hygiene: stuck locks, old or numerous snapshots, silent guest agents, onboot, hibernation."""

from __future__ import annotations

from collections import defaultdict

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import Finding, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.guestconfig import GuestConfig
from pve_steward.pve.tasks import task_running

# Which task types set each lock (a vzdump of several guests has an empty id). Restores lock the new guest
# 'create' (qemu-server API2/Qemu.pm create_vm, pve-container API2/LXC.pm create_vm); an incoming remote
# migration locks it 'create', then 'migrate' (mtunnel: 'qmtunnel', 'vzmtunnel'); a container backup in
# snapshot mode swaps 'backup' for 'snapshot' and 'snapshot-delete' (pve-container VZDump/LXC.pm snapshot).
_LOCK_TASKS = {
    "backup": {"vzdump"},
    "migrate": {"qmigrate", "vzmigrate", "hamigrate", "qmtunnel", "vzmtunnel"},
    "snapshot": {"qmsnapshot", "vzsnapshot", "vzdump"},
    "snapshot-delete": {"qmdelsnapshot", "vzdelsnapshot", "vzdump"},
    "rollback": {"qmrollback", "vzrollback"},
    "clone": {"qmclone", "vzclone"},
    "create": {"qmcreate", "vzcreate", "qmrestore", "vzrestore", "qmtunnel", "vzmtunnel", "vzclone"},
    "destroyed": {"qmdestroy", "vzdestroy"},
    "suspending": {"qmsuspend"},
    "disk": {"qmmove", "move_volume", "resize", "vzclone"},
    "mounted": {"vzmount"},
    "fstrim": {"pctfstrim"},
}
# The lock a clone puts on the *new* guest, held by a task that carries the source's vmid (any node).
_CLONE_LOCKS = {"clone": ("qmclone", "vzclone"), "create": ("vzclone",)}


@pve_rule(
    "guests.lock_holders",
    rule="A clone locks the new guest ('clone' for a VM, 'create' for a CT) and a CT source 'disk' under one "
    "task with the source's vmid; a CT backup in snapshot mode holds 'snapshot'/'snapshot-delete' under vzdump.",
    pve="qemu-server src/PVE/API2/Qemu.pm clone_vm; pve-container src/PVE/API2/LXC.pm clone_vm + "
    "src/PVE/VZDump/LXC.pm snapshot",
    codes=("GUEST_LOCK_STUCK", "GUEST_LOCKED"),
)
def _related(tasks: list[Row], vmid: int, node: str | None, lock: str) -> list[Row]:
    """Tasks that may hold the lock: the guest's own, a node-wide vzdump (empty id), any clone for the locks a
    clone puts on its new guest (API2/Qemu.pm clone_vm forks 'qmclone' with the source vmid)."""
    types = _LOCK_TASKS.get(lock)
    clone_types = _CLONE_LOCKS.get(lock, ())
    by_vzdump = types is not None and "vzdump" in types
    out = []
    for task in tasks:
        same_guest = str(task.get("id")) == str(vmid)
        node_wide_backup = by_vzdump and task.get("type") == "vzdump" and not task.get("id")
        node_wide_backup = node_wide_backup and task.get("node") == node
        any_clone = task.get("type") in clone_types
        if (same_guest or any_clone or node_wide_backup) and (types is None or task.get("type") in types):
            out.append(task)
    return out


@pve_rule(
    "guests.onboot",
    rule="Start-all on boot starts guests with onboot=1 but skips every HA resource (any state): HA starts those.",
    pve="pve-manager PVE/API2/Nodes.pm get_start_stop_list + get_filtered_vmlist (vm_is_ha_managed)",
    codes=("GUEST_NO_ONBOOT",),
)
def _no_onboot(data: ClusterData, vmid: int, g: Row, cfg: GuestConfig | None) -> Finding | None:
    if cfg is None or g.get("status") != "running" or cfg.template or cfg.onboot:
        return None
    if "ha_resources" in data.unread:  # whether start-all skips it (an HA resource) is not known
        return None
    if f"vm:{vmid}" in data.ha_by_sid or f"ct:{vmid}" in data.ha_by_sid:  # HA::Config vm_is_ha_managed
        return None
    return finding(
        "GUEST_NO_ONBOOT",
        guest_subject(data, vmid),
        f"{vmid} ({g.get('name')}) is running but will not start after a node reboot (onboot unset)",
    )


@check(
    "guests",
    codes=[
        Code(
            "GUEST_LOCK_STUCK",
            "critical",
            "Stuck guest lock",
            "A lock is set, no running task holds the guest, and the last related task ended more than "
            "lock_stuck_minutes (60) ago (or none is known).",
            "Make sure the locking action is truly gone (no task of the guest still runs; guest_unlock checks), then "
            "clear the lock on the node: qm unlock / pct unlock <vmid> (PVE lets no API token skip a lock).",
        ),
        Code(
            "GUEST_LOCKED",
            "info",
            "Guest locked by a running task",
            "A lock is held by an active task.",
            "Nothing to fix; wait for the task to end (get_task) before changing the guest.",
        ),
        Code(
            "SNAPSHOT_OLD",
            "warning",
            "Old snapshot",
            "A snapshot is older than snapshot_age_days (30): it keeps growing and slows I/O.",
            "Delete it if it is no longer needed.",
        ),
        Code(
            "SNAPSHOT_COUNT_HIGH",
            "warning",
            "Many snapshots",
            "More than snapshot_count (10) snapshots.",
            "Delete the snapshots that are no longer needed (list_snapshots shows age and parent); each slows I/O.",
        ),
        Code(
            "GUEST_AGENT_NOT_RUNNING",
            "warning",
            "Guest agent not answering",
            "A running VM has the agent enabled and PVE answers 'QEMU guest agent is not running' (its guest-ping "
            "failed): no fs-freeze for backups, no IPs, shutdown falls back to ACPI. A probe that could not be "
            "made (403, unreachable node, other errors) is reported as DATA_INCOMPLETE/CHECK_SKIPPED instead.",
            "Install or start qemu-guest-agent in the guest.",
        ),
        Code(
            "GUEST_NO_ONBOOT",
            "info",
            "Running guest does not start on boot",
            "A running, non-template guest that is not an HA resource has onboot unset (start-all skips HA "
            "resources: HA starts them).",
            "Set onboot=1 if it must come back after a node reboot.",
        ),
        Code(
            "GUEST_HIBERNATED",
            "info",
            "Guest hibernated",
            "A VM is suspended to disk (lock suspended).",
            "Resume it (start) when it is needed; it cannot migrate while hibernated.",
        ),
    ],
    thresholds=[
        Threshold(
            "lock_stuck_minutes",
            60,
            "a lock whose last related task ended longer ago than this (none running) is stuck",
            minimum=None,
            above=0,
        ),
        Threshold("snapshot_age_days", 30, "a snapshot older than this is old", minimum=None, above=0),
        Threshold("snapshot_count", 10, "more snapshots than this per guest are many", minimum=1, integer=True),
    ],
    anchors=[
        "cv4pve-diag:CG0001=GUEST_HIBERNATED",
        "cv4pve-diag:WG0015=GUEST_LOCKED/GUEST_LOCK_STUCK",
        "cv4pve-diag:WG0004=GUEST_AGENT_NOT_RUNNING",
        "cv4pve-diag:WG0016=GUEST_NO_ONBOOT",
        "cv4pve-diag:WG0024=SNAPSHOT_OLD",
        "cv4pve-diag:WG0023=SNAPSHOT_COUNT_HIGH",
        "check_pve:snapshot-age=SNAPSHOT_OLD",
    ],
    pve="pve-guest-common src/PVE/AbstractConfig.pm check_lock + snapshot_list; "
    "qemu-server PVE/API2/Qemu/Agent.pm ping",
)
def analyze_guests(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    tasks_by_node: dict[str, list[Row]] = defaultdict(list)
    for task in data.tasks:
        tasks_by_node[str(task.get("node"))].append(task)
    clones = [t for t in data.tasks if t.get("type") in ("qmclone", "vzclone")]  # may run on another node
    guests, parsed, snapshots, agent = data.guests, data.parsed, data.snapshots, data.agent
    for vmid in data.guest_ids:
        g = guests[vmid]
        cfg = parsed.get(vmid)
        lock = g.get("lock") or (cfg.lock if cfg else None)
        if lock == "suspended":
            out.append(
                finding("GUEST_HIBERNATED", guest_subject(data, vmid), f"{vmid} ({g.get('name')}) is hibernated")
            )
        elif lock:
            nearby = tasks_by_node.get(str(g.get("node")), []) + (clones if lock in _CLONE_LOCKS else [])
            related = _related(nearby, vmid, g.get("node"), str(lock))
            active = [r for r in related if task_running(r)]
            if active:
                out.append(
                    finding(
                        "GUEST_LOCKED",
                        guest_subject(data, vmid),
                        f"{vmid} ({g.get('name')}) locked '{lock}' by a running {active[0].get('type')} task",
                        {"lock": lock, "upid": active[0].get("upid")},
                    )
                )
            elif f"tasks:{g.get('node')}" not in data.unread:  # unread, or others' hidden: stuck is not provable
                ended = [int(r["endtime"]) for r in related if r.get("endtime")]
                age = data.now - max(ended) if ended else None
                if age is None or age > t.get("lock_stuck_minutes") * 60:
                    out.append(
                        finding(
                            "GUEST_LOCK_STUCK",
                            guest_subject(data, vmid),
                            f"{vmid} ({g.get('name')}) has lock '{lock}' and no task holds it"
                            + (
                                f"; the last {lock} task ended {age / 3600:.1f} h ago"
                                if age is not None
                                else "; no related task in the history read"
                            ),
                            {
                                "lock": lock,
                                "last_related_task_age_hours": round(age / 3600, 1) if age else None,
                                "threshold_minutes": t.get("lock_stuck_minutes"),
                            },
                        )
                    )
        rows = snapshots.get(vmid) if snapshots else None
        if rows:
            out += _snapshot_findings(data, t, vmid, g, rows)
        if agent and agent.get(vmid) is False:  # only PVE's own "not running" answer (tools/collect.py)
            out.append(
                finding(
                    "GUEST_AGENT_NOT_RUNNING",
                    guest_subject(data, vmid),
                    f"{vmid} ({g.get('name')}) has the guest agent enabled but it does not answer",
                )
            )
        onboot = _no_onboot(data, vmid, g, cfg)
        if onboot is not None:
            out.append(onboot)
    return out


def _snapshot_findings(data: ClusterData, t: Thresholds, vmid: int, g: Row, rows: list[Row]) -> list[Finding]:
    out: list[Finding] = []
    snaps = [s for s in rows if s.get("name") != "current"]
    old = [s for s in snaps if s.get("snaptime") and data.now - int(s["snaptime"]) > t.get("snapshot_age_days") * 86400]
    if old:
        oldest = min(int(s["snaptime"]) for s in old)
        out.append(
            finding(
                "SNAPSHOT_OLD",
                guest_subject(data, vmid),
                f"{vmid} ({g.get('name')}) has {len(old)} snapshot(s) older than "
                f"{t.get('snapshot_age_days'):.0f} days (oldest {(data.now - oldest) / 86400:.0f} days)",
                {
                    "snapshots": [s.get("name") for s in old],
                    "oldest_age_days": round((data.now - oldest) / 86400, 1),
                },
            )
        )
    if len(snaps) > t.get("snapshot_count"):
        out.append(
            finding(
                "SNAPSHOT_COUNT_HIGH",
                guest_subject(data, vmid),
                f"{vmid} ({g.get('name')}) has {len(snaps)} snapshots",
                {"count": len(snaps), "threshold": t.get("snapshot_count")},
            )
        )
    return out
