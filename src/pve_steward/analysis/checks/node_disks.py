"""Node disks: LVM-thin metadata, ZFS pool fill, SSDs that hide their wear.

Per node: GET /nodes/{node}/disks/lvmthin, /disks/zfs and /disks/list (pve-storage
PVE/API2/Disks/LVMThin.pm index, ZFS.pm index, PVE/API2/Disks.pm list).
"""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
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
