"""In-guest filesystems as the QEMU guest agent reports them (design record 261203-21).

The collector asks ``agent/get-fsinfo`` of the VMs whose agent answered its probe (at most
``agent_probe_limit`` VMs; past it, CHECK_SKIPPED says how many were not probed), so this check sees
only agents that answer. Read-only media (ISO 9660, UDF, squashfs) are full by design and left out.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.data import ClusterData, guest_subject
from pve_steward.analysis.findings import Finding, Severity, finding
from pve_steward.analysis.thresholds import Thresholds

READ_ONLY_FS = frozenset({"iso9660", "udf", "squashfs", "cdfs"})


def _usage(fs: Any) -> tuple[str, str, int, int] | None:
    """(mountpoint, type, used, total) of one guest-get-fsinfo entry; None when it has no usable sizes."""
    if not isinstance(fs, dict) or not fs.get("mountpoint"):
        return None
    total, used = fs.get("total-bytes"), fs.get("used-bytes")
    if not isinstance(total, int) or not isinstance(used, int) or isinstance(total, bool) or total <= 0:
        return None
    kind = str(fs.get("type") or "")
    if kind.lower() in READ_ONLY_FS:
        return None
    return str(fs["mountpoint"]), kind, used, total


@check(
    "guests",
    codes=[
        Code(
            "GUEST_FS_FULL",
            "warning",
            "Filesystem inside a guest nearly full",
            "The guest agent reports a filesystem inside the VM at or above guest_fs_warning_pct used (critical "
            "from guest_fs_critical_pct): the guest's services fail once it is full, whatever the storage on the "
            "host has left.",
            "Free space inside the guest (logs, caches, old packages) or grow the disk (resize the VM disk, then "
            "the partition and filesystem inside the guest).",
        )
    ],
    thresholds=[
        Threshold("guest_fs_warning_pct", 90, "in-guest filesystem used percent that warns", maximum=100),
        Threshold("guest_fs_critical_pct", 97, "in-guest filesystem used percent that is critical", maximum=100),
    ],
    pve="qemu-server src/PVE/API2/Qemu/Agent.pm get-fsinfo (QGA guest-get-fsinfo used-bytes/total-bytes)",
)
def filesystem_full(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Filesystems inside VMs above the warning threshold, worst first per guest."""
    warn, crit = t.get("guest_fs_warning_pct"), t.get("guest_fs_critical_pct")
    out = []
    for vmid, result in sorted(data.agent_fsinfo.items()):
        seen: set[str] = set()
        for fs in result if isinstance(result, list) else []:
            usage = _usage(fs)
            if usage is None or usage[0] in seen:
                continue
            mount, kind, used, total = usage
            seen.add(mount)
            pct = round(100.0 * used / total, 1)
            if pct < warn:
                continue
            row = data.guests.get(vmid) or {}
            out.append(
                finding(
                    "GUEST_FS_FULL",
                    guest_subject(data, vmid),
                    f"{vmid} ({row.get('name') or vmid}): {mount} is {pct} % full inside the guest",
                    {"mountpoint": mount, "type": kind, "used_bytes": used, "total_bytes": total, "used_pct": pct},
                    severity=Severity.CRITICAL if pct >= crit else None,
                )
            )
    return out
