"""Node disks: LVM-thin metadata, ZFS pool fill, SSDs that hide their wear.

Per node: GET /nodes/{node}/disks/lvmthin, /disks/zfs and /disks/list (pve-storage
PVE/API2/Disks/LVMThin.pm index, ZFS.pm index, PVE/API2/Disks.pm list).
"""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

ROOT_AUDIT = "Sys.Audit on /"
LVMTHIN = Need("node_lvmthin", "/nodes/{node}/disks/lvmthin", per="node", privilege=ROOT_AUDIT)
ZFS = Need("node_zfs_pools", "/nodes/{node}/disks/zfs", per="node", privilege=ROOT_AUDIT)
DISKS = Need("node_disks", "/nodes/{node}/disks/list", per="node")


def _pct(used: object, total: object) -> float | None:
    try:
        u, t = float(used), float(total)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return 100.0 * u / t if t > 0 else None


@check(
    "node",
    codes=[
        Code(
            "NODE_LVMTHIN_METADATA_HIGH",
            "warning",
            "LVM-thin pool metadata is filling up",
            "metadata_used/metadata_size of a thin pool (GET /nodes/{node}/disks/lvmthin) is at or above 90 %, "
            "critical at 95 % (cv4pve-diag): a full metadata volume corrupts the pool's data.",
            "Grow the metadata now: `lvextend --poolmetadatasize +1G <vg>/<pool>` (needs free space in the VG).",
        )
    ],
    needs=[LVMTHIN],
    thresholds=[
        Threshold("node_lvmthin_metadata_warning_pct", 90, "thin pool metadata use (%)", maximum=100),
        Threshold("node_lvmthin_metadata_critical_pct", 95, "thin pool metadata use (%)", maximum=100),
    ],
    anchors=["cv4pve-diag:WN0026", "cv4pve-diag:CN0013"],
    pve="pve-storage src/PVE/Storage/LvmThinPlugin.pm list_thinpools (metadata_size, metadata_used from lvs)",
)
def lvmthin_metadata(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Thin pool metadata fill."""
    out = []
    warn, crit = t.get("node_lvmthin_metadata_warning_pct"), t.get("node_lvmthin_metadata_critical_pct")
    for node, pools in sorted(data.read_nodes(LVMTHIN.key).items()):
        for pool in pools or []:
            pct = _pct(pool.get("metadata_used"), pool.get("metadata_size"))
            if pct is None or pct < warn:
                continue
            name = f"{pool.get('vg')}/{pool.get('lv')}"
            out.append(
                finding(
                    "NODE_LVMTHIN_METADATA_HIGH",
                    Subject(kind="storage", id=f"{node}:{name}", node=node),
                    f"thin pool {name} on {node}: metadata {pct:.1f}% full",
                    {
                        "vg": pool.get("vg"),
                        "lv": pool.get("lv"),
                        "metadata_used": pool.get("metadata_used"),
                        "metadata_size": pool.get("metadata_size"),
                        "metadata_pct": round(pct, 1),
                    },
                    severity=Severity.CRITICAL if pct >= crit else None,
                )
            )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_ZFS_POOL_FULL",
            "warning",
            "ZFS pool is filling up",
            "alloc/size of a pool (GET /nodes/{node}/disks/zfs) is at or above the warning threshold "
            "(cv4pve-diag storage threshold: 70 %), critical at 85 %; ZFS slows down sharply past 80 %.",
            "Free or add space: delete old snapshots (`zfs list -t snapshot`), move disks away (GUI VM > Hardware > "
            "Disk Action > Move Storage), or add a vdev.",
        )
    ],
    needs=[ZFS],
    thresholds=[
        Threshold("node_zfs_pool_warning_pct", 70, "ZFS pool allocation (%)", maximum=100),
        Threshold("node_zfs_pool_critical_pct", 85, "ZFS pool allocation (%)", maximum=100),
    ],
    anchors=["cv4pve-diag:WN0044"],
    pve="pve-storage src/PVE/API2/Disks/ZFS.pm index (zpool list: size, alloc, free, frag, health)",
)
def zfs_pool_full(data: ClusterData, t: Thresholds) -> list[Finding]:
    """ZFS pool allocation against the storage thresholds."""
    out = []
    warn, crit = t.get("node_zfs_pool_warning_pct"), t.get("node_zfs_pool_critical_pct")
    for node, pools in sorted(data.read_nodes(ZFS.key).items()):
        for pool in pools or []:
            pct = _pct(pool.get("alloc"), pool.get("size"))
            if pct is None or pct < warn:
                continue
            out.append(
                finding(
                    "NODE_ZFS_POOL_FULL",
                    Subject(kind="zfs_pool", id=f"{node}:{pool.get('name')}", node=node),
                    f"ZFS pool {pool.get('name')} on {node} is {pct:.0f}% allocated",
                    {
                        "pool": pool.get("name"),
                        "alloc": pool.get("alloc"),
                        "size": pool.get("size"),
                        "pct": round(pct, 1),
                    },
                    severity=Severity.CRITICAL if pct >= crit else None,
                )
            )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_SSD_NO_WEAR_DATA",
            "warning",
            "An SSD does not report its wear",
            "A disk of type ssd or nvme in GET /nodes/{node}/disks/list has wearout 'N/A': its remaining life "
            "cannot be watched (cv4pve-diag WN0017).",
            "Read the drive's own data: `smartctl -a /dev/<disk>`; GUI Node > Disks > Show S.M.A.R.T. values. "
            "Replace drives that never report wear with ones that do.",
        )
    ],
    needs=[DISKS],
    anchors=["cv4pve-diag:WN0017"],
    pve="pve-storage src/PVE/Diskmanage.pm get_disks (wearout from SMART, 'N/A' when unknown)",
)
def ssd_no_wear_data(data: ClusterData, t: Thresholds) -> list[Finding]:
    """SSDs whose wearout is unknown."""
    out = []
    for node, disks in sorted(data.read_nodes(DISKS.key).items()):
        for disk in disks or []:
            if disk.get("type") in ("ssd", "nvme") and str(disk.get("wearout", "N/A")) == "N/A":
                out.append(
                    finding(
                        "NODE_SSD_NO_WEAR_DATA",
                        Subject(kind="disk", id=f"{node}:{disk.get('devpath')}", node=node),
                        f"{disk.get('type')} {disk.get('devpath')} on {node} does not report its wear",
                        {"devpath": disk.get("devpath"), "model": disk.get("model"), "wearout": disk.get("wearout")},
                    )
                )
    return out


ZFS_DETAIL = Need(
    "node_zfs_detail", "/nodes/{node}/disks/zfs/{item}", per="node", privilege=ROOT_AUDIT, each=(ZFS.key, "name")
)
# vdev states that are fine: a hot spare waiting (AVAIL) or in use (INUSE) is not a fault
_FINE = {"ONLINE", "AVAIL", "INUSE"}


@pve_rule(
    "zfs.detail-tree",
    rule=(
        "ZFS.pm detail parses `zpool status -P` into a tree of vdevs (name, state, read, write, cksum, msg, "
        "children) whose first level is the pool itself; section rows (spares, logs, cache) have no state."
    ),
    pve="pve-storage src/PVE/API2/Disks/ZFS.pm detail",
    codes=(
        "NODE_ZFS_VDEV_FAULTED",
        "NODE_ZFS_VDEV_ERRORS",
    ),
)
def _vdevs(children: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], dict[str, object]]]:
    """Every vdev of the tree with the names leading to it (the pool itself is the first level)."""
    out: list[tuple[tuple[str, ...], dict[str, object]]] = []
    for child in children if isinstance(children, list) else []:
        if isinstance(child, dict):
            here = (*path, str(child.get("name")))
            out.append((here, child))
            out += _vdevs(child.get("children"), here)
    return out


def _culprit(vdev: dict[str, object]) -> bool:
    """A vdev not ONLINE none of whose children is the reason (the leaf-most one is reported)."""
    if vdev.get("state") is None or str(vdev["state"]) in _FINE:
        return False
    return not any(
        c.get("state") is not None and str(c["state"]) not in _FINE for _p, c in _vdevs(vdev.get("children"))
    )


@check(
    "node",
    codes=[
        Code(
            "NODE_ZFS_VDEV_FAULTED",
            "critical",
            "A ZFS vdev is degraded, faulted or missing",
            "A vdev of GET /nodes/{node}/disks/zfs/{pool} is not ONLINE (spares AVAIL/INUSE aside); the leaf-most "
            "such vdev is reported, with the pool's status and action text (cv4pve-diag CN0012).",
            "Replace the device: `zpool replace <pool> <old> <new>` (GUI Node > Disks > ZFS > pool > Detail "
            "shows it); `zpool online` a device that came back.",
        ),
        Code(
            "NODE_ZFS_VDEV_ERRORS",
            "warning",
            "A ZFS vdev has read, write or checksum errors",
            "A vdev of GET /nodes/{node}/disks/zfs/{pool} counts read, write or cksum errors above 0 "
            "(cv4pve-diag WN0025).",
            "Check the disk's S.M.A.R.T. values and cabling, then `zpool clear <pool>` and scrub (`zpool scrub`); "
            "replace the disk if the errors return.",
        ),
        Code(
            "NODE_ZFS_DATA_ERRORS",
            "warning",
            "A ZFS pool reports data errors",
            "The errors line of GET /nodes/{node}/disks/zfs/{pool} is not 'No known data errors' (cv4pve-diag "
            "WN0024): files may be damaged.",
            "`zpool status -v <pool>` lists the damaged files; restore them from backup and scrub the pool.",
        ),
    ],
    needs=[ZFS, ZFS_DETAIL],
    anchors=["cv4pve-diag:CN0012", "cv4pve-diag:WN0025", "cv4pve-diag:WN0024"],
    pve="pve-storage src/PVE/API2/Disks/ZFS.pm detail (zpool status -P parsed into a vdev tree)",
)
def zfs_vdevs(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Faulted vdevs, vdev error counters and pool data errors."""
    out = []
    for node, pools in sorted(data.read_nodes(ZFS_DETAIL.key).items()):
        for pool, detail in sorted((pools or {}).items()):
            subject = Subject(kind="zfs_pool", id=f"{node}:{pool}", node=node)
            for path, vdev in _vdevs((detail or {}).get("children")):
                name = " > ".join(path)
                if _culprit(vdev):
                    out.append(
                        finding(
                            "NODE_ZFS_VDEV_FAULTED",
                            subject,
                            f"ZFS pool {pool} on {node}: vdev {name} is {vdev.get('state')}",
                            {
                                "vdev": name,
                                "state": vdev.get("state"),
                                "msg": vdev.get("msg") or None,
                                "status": detail.get("status"),
                                "action": detail.get("action"),
                            },
                        )
                    )
                counts = {k: vdev.get(k) or 0 for k in ("read", "write", "cksum")}
                if any(float(v) > 0 for v in counts.values()):  # type: ignore[arg-type]
                    out.append(
                        finding(
                            "NODE_ZFS_VDEV_ERRORS",
                            subject,
                            f"ZFS pool {pool} on {node}: vdev {name} has errors (read {counts['read']}, write "
                            f"{counts['write']}, cksum {counts['cksum']})",
                            {"vdev": name, **counts},
                        )
                    )
            errors = str((detail or {}).get("errors") or "")
            if errors and errors.lower() != "no known data errors":
                out.append(
                    finding(
                        "NODE_ZFS_DATA_ERRORS",
                        subject,
                        f"ZFS pool {pool} on {node} reports: {errors}",
                        {"errors": errors},
                    )
                )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_ZFS_FRAGMENTED",
            "warning",
            "ZFS pool free space is fragmented",
            "frag of a pool (GET /nodes/{node}/disks/zfs) is above the warning threshold, critical above the "
            "critical one (check_pve zfs-fragmentation; it has no default, its documented example is 40/60 %): "
            "writes slow down.",
            "Keep the pool well below full; fragmentation only shrinks by rewriting data (send/receive to a fresh "
            "pool, or move disks away and back: GUI VM > Hardware > Disk Action > Move Storage).",
        )
    ],
    needs=[ZFS],
    thresholds=[
        Threshold("node_zfs_frag_warning_pct", 40, "ZFS pool fragmentation (%)", maximum=100),
        Threshold("node_zfs_frag_critical_pct", 60, "ZFS pool fragmentation (%)", maximum=100),
    ],
    anchors=["check_pve:zfs-fragmentation"],
    pve="pve-storage src/PVE/API2/Disks/ZFS.pm index (zpool list frag)",
)
def zfs_fragmented(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Pools whose free-space fragmentation is above the thresholds (check_pve compares with >)."""
    out = []
    warn, crit = t.get("node_zfs_frag_warning_pct"), t.get("node_zfs_frag_critical_pct")
    for node, pools in sorted(data.read_nodes(ZFS.key).items()):
        for pool in pools or []:
            frag = pool.get("frag")
            if not isinstance(frag, int | float) or frag <= warn:
                continue
            out.append(
                finding(
                    "NODE_ZFS_FRAGMENTED",
                    Subject(kind="zfs_pool", id=f"{node}:{pool.get('name')}", node=node),
                    f"ZFS pool {pool.get('name')} on {node} is {frag}% fragmented",
                    {"pool": pool.get("name"), "frag": frag, "warning": warn, "critical": crit},
                    severity=Severity.CRITICAL if frag > crit else None,
                )
            )
    return out
