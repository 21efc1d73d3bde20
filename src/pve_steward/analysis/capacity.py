"""Capacity: storage usage and thin overcommit, node memory (configured vs physical, pressure, swap),
vCPU ratio, and whether the cluster can absorb the loss of its largest node."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.checks.node_load import RRD_DAY
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import CLUSTER, Finding, Severity, Subject, finding
from pve_steward.analysis.migration.storage import shared_flags, storage_shared
from pve_steward.analysis.migration.targets import maintenance_nodes
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.storagecfg import is_shared
from pve_steward.pve.values import flag, integer

GiB = 1024**3
_THIN = {"lvmthin", "rbd"}


def _pct(used: float, total: float) -> float:
    return round(100.0 * used / total, 1) if total else 0.0


def _thin(data: ClusterData, storage: str, stype: str | None) -> bool:
    cfg = data.storage_defs.get(storage, {})
    return stype in _THIN or (stype == "zfspool" and bool(int(cfg.get("sparse", 0) or 0)))


def _provisioned(data: ClusterData) -> dict[tuple[str, str | None], int]:
    """Virtual disk bytes per (storage, node); node None for shared storage."""
    out: dict[tuple[str, str | None], int] = defaultdict(int)
    guests = data.guests
    shared = shared_flags(data)
    for vmid, cfg in data.parsed.items():
        node = None
        for vol in cfg.volumes:
            storage = vol.storage
            if storage and not vol.cdrom and vol.size_bytes:
                on_shared = shared.get(storage, False)
                if not on_shared and node is None:
                    node = (guests.get(vmid) or {}).get("node")
                out[(storage, None if on_shared else node)] += vol.size_bytes
    return out


@check(
    "capacity",
    codes=[
        Code(
            "STORAGE_USAGE_HIGH",
            "warning",
            "Storage nearly full",
            "used/total at or above storage_warning_pct (80 %); critical at storage_critical_pct (90 %). Shared "
            "storage is counted once, from a node where it is enabled and active.",
            "Free space, extend the storage, or move volumes.",
        ),
        Code(
            "STORAGE_INACTIVE",
            "critical",
            "Storage enabled but not active",
            "An enabled storage is not active on an online node (judged on each node, shared storage too): "
            "guests on it cannot start there.",
            "Check the storage backend (mount, network, pool) on that node.",
        ),
        Code(
            "STORAGE_THIN_OVERCOMMIT",
            "warning",
            "Thin storage overcommitted",
            "Sum of virtual disk sizes on a thin storage exceeds its capacity x thin_overcommit_ratio; critical "
            "when usage is also at the storage warning threshold.",
            "Watch usage closely; a full thin pool causes I/O errors.",
        ),
    ],
    thresholds=[
        Threshold("storage_warning_pct", 80, "storage use that warns (%)", minimum=None, above=0, maximum=100),
        Threshold("storage_critical_pct", 90, "storage use that is critical (%)", minimum=None, above=0, maximum=100),
        Threshold(
            "thin_overcommit_ratio",
            1.0,
            "provisioned/capacity above which thin storage is overcommitted",
            minimum=None,
            above=0,
        ),
    ],
    anchors=[
        "cv4pve-diag:CS0001=STORAGE_INACTIVE",
        "cv4pve-diag:WS0001=STORAGE_USAGE_HIGH",
        "cv4pve-diag:WS0004=STORAGE_THIN_OVERCOMMIT",
        "check_pve:storage=STORAGE_USAGE_HIGH",
        "pve8to9:storage-active=STORAGE_INACTIVE",
    ],
    pve="pve-storage src/PVE/API2/Storage/Status.pm index over Storage.pm storage_info (every storage on every "
    "node: enabled 0 where disabled or not in its nodes list, active/total only where enabled and activated); "
    "pve-manager PVE/CLI/pve8to9.pm check_storage_health (enabled but not active, per node)",
)
def analyze_storage(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    seen_shared: set[str] = set()
    provisioned = _provisioned(data)
    for node in sorted(data.node_storage):
        if node not in data.online_nodes:
            continue
        for row in data.node_storage[node]:
            sid = str(row.get("storage"))
            shared = is_shared(row) or storage_shared(data, sid)
            enabled, active = flag(row.get("enabled", 1)), flag(row.get("active", 0))
            if enabled and not active:  # on every node, shared or not, as pve8to9 judges each node
                out.append(
                    finding(
                        "STORAGE_INACTIVE",
                        Subject(kind="storage", id=sid, node=node),
                        f"storage {sid} is enabled but not active on {node}",
                        {"node": node, "type": row.get("type")},
                    )
                )
                continue
            total, used = integer(row.get("total")), integer(row.get("used"))
            if not (enabled and active and total) or used is None:  # enabled 0 (disabled, or not here): all zeros
                continue
            if shared:  # counted once, from the first node that measured it
                if sid in seen_shared:
                    continue
                seen_shared.add(sid)
            subject = Subject(kind="storage", id=sid, node=None if shared else node)
            pct = _pct(used, total)
            where = "" if shared else f" on {node}"
            if pct >= t.get("storage_warning_pct"):
                sev = Severity.CRITICAL if pct >= t.get("storage_critical_pct") else Severity.WARNING
                out.append(
                    finding(
                        "STORAGE_USAGE_HIGH",
                        subject,
                        f"storage {sid}{where} is {pct} % full",
                        {
                            "used_bytes": used,
                            "total_bytes": total,
                            "used_pct": pct,
                            "warning_pct": t.get("storage_warning_pct"),
                            "critical_pct": t.get("storage_critical_pct"),
                        },
                        severity=sev,
                    )
                )
            if _thin(data, sid, row.get("type")):
                prov = provisioned.get((sid, None if shared else node), 0)
                ratio = prov / total
                if ratio > t.get("thin_overcommit_ratio"):
                    sev = Severity.CRITICAL if pct >= t.get("storage_warning_pct") else Severity.WARNING
                    out.append(
                        finding(
                            "STORAGE_THIN_OVERCOMMIT",
                            subject,
                            f"thin storage {sid}{where}: {prov // GiB} GiB provisioned on "
                            f"{total // GiB} GiB ({ratio:.2f}x), {pct} % used",
                            {
                                "provisioned_bytes": prov,
                                "total_bytes": total,
                                "ratio": round(ratio, 2),
                                "used_pct": pct,
                            },
                            severity=sev,
                        )
                    )
    return out


@dataclass
class _Running:
    """Running guests of a node, summed in one pass over the cluster's guests."""

    count: int = 0
    memory: int = 0  # configured bytes
    vcpus: float = 0.0
    ha_memory: int = 0  # of the HA resources among them that HA restarts elsewhere (requested state 'started')


@pve_rule(
    "capacity.zfs-arc",
    rule="A node's used memory (MemTotal - MemAvailable) includes the ZFS ARC, which the kernel does not count as "
    "available though ZFS gives it back under pressure. PVE 9 records the ARC size in the node RRD (arcsize); its "
    "node summary still counts the ARC as used (the status API's memory.used and the summary's memory bar include "
    "it) and shows the use without it only in the memory chart: the ARC as its own series, and 'Without ZFS ARC' in "
    "the Used tooltip when the ARC is above 1 MiB. Our pressure check judges the use without it.",
    pve="pve-manager PVE/Service/pvestatd.pm update_node_status (arcsize, pve-node-9.0), PVE/API2/Nodes.pm status "
    "(memory.used: read_meminfo memused), www/manager6/node/StatusView.js (memory bar: 'TODO: split out ARC "
    "usage'), www/manager6/node/Summary.js (memory chart, 'Without ZFS ARC')",
    codes=("NODE_MEMORY_PRESSURE",),
)
def zfs_arc(rrd: Any) -> int:
    """The ARC size of the newest RRD row that has one (PVE 9); 0 without (PVE 8, no ZFS, unread)."""
    for row in reversed(rrd if isinstance(rrd, list) else []):
        arc = integer(row.get("arcsize")) if isinstance(row, dict) else None
        if arc is not None:
            return arc if arc > 1024 * 1024 else 0
    return 0


def _running_on(data: ClusterData) -> dict[str, _Running]:
    memo = data.memo.get("running_on")
    if memo is not None:
        return memo  # type: ignore[no-any-return]
    out: dict[str, _Running] = defaultdict(_Running)
    ha = data.ha_by_vmid
    for vmid, g in data.guests.items():
        if g.get("status") == "running" and not g.get("template"):
            node = out[str(g.get("node"))]
            node.count += 1
            memory = int(g.get("maxmem") or 0)
            node.memory += memory
            node.vcpus += float(g.get("maxcpu") or 0)
            if vmid in ha and (ha[vmid].get("state") or "started") == "started":
                node.ha_memory += memory
    data.memo["running_on"] = out
    return out


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """How much memory a node can take: the one arithmetic of N+1 and of the evacuation planner."""

    node: str
    total: int
    committed: int  # max(used memory, configured memory of its running guests)
    headroom: int

    @property
    def free(self) -> int:
        return self.total - self.committed - self.headroom


def capacity_nodes(data: ClusterData) -> list[str]:
    """Nodes that can take guests: online and not in HA maintenance (the CRM is emptying those)."""
    away = maintenance_nodes(data)
    return [n for n in data.online_nodes if n not in away]


@pve_rule(
    "capacity.node-room",
    rule="A node takes a running guest's configured memory (what the HA static scheduler reserves); it starts from "
    "the larger of its used memory and the configured memory of the guests it runs, and keeps a headroom.",
    pve="pve-ha-manager src/PVE/HA/Usage/Static.pm (configured maxmem per service)",
)
def node_room(data: ClusterData, node: str, headroom_pct: float) -> NodeRoom:
    st = (data.node_status.get(node) or {}).get("memory") or {}
    row = data.nodes.get(node, {})
    total = int(st.get("total") or row.get("maxmem") or 0)
    used = int(st.get("used") or row.get("mem") or 0)
    configured = (_running_on(data).get(node) or _Running()).memory
    return NodeRoom(node, total, max(used, configured), int(total * headroom_pct / 100))


def room_freed(data: ClusterData, node: str, vmids: list[int]) -> int:
    """How much a node's room grows when these running guests of it stop: its committed memory (the larger of
    used and configured) drops by their configured memory on one side and their current use on the other."""
    st = (data.node_status.get(node) or {}).get("memory") or {}
    row = data.nodes.get(node, {})
    used = int(st.get("used") or row.get("mem") or 0)
    configured = (_running_on(data).get(node) or _Running()).memory
    guests = [data.guests.get(v) or {} for v in vmids]
    after = max(
        used - sum(int(g.get("mem") or 0) for g in guests), configured - sum(int(g.get("maxmem") or 0) for g in guests)
    )
    return max(max(used, configured) - after, 0)


@check(
    "capacity",
    codes=[
        Code(
            "NODE_MEMORY_OVERCOMMIT",
            "warning",
            "Node memory overcommitted",
            "Sum of configured memory of running guests above memory_overcommit_warning_pct (100 %) of node "
            "memory; critical above memory_overcommit_critical_pct (150 %).",
            "Move guests away or add memory.",
        ),
        Code(
            "NODE_MEMORY_PRESSURE",
            "warning",
            "Node memory nearly exhausted",
            "used/total at or above memory_pressure_warning_pct (85 %); critical at memory_pressure_critical_pct "
            "(95 %). On PVE 9 the ZFS ARC (the node RRD's arcsize, above 1 MiB) is left out of used, since ZFS "
            "gives it back under pressure; PVE's node summary still counts it as used in its memory bar and shows "
            "the use without it only in the memory chart ('Without ZFS ARC' in the Used tooltip).",
            "Move guests away; on ZFS check the ARC's limit (zfs_arc_max) if the ARC is what fills memory.",
        ),
        Code(
            "NODE_SWAP_USED",
            "warning",
            "Node swapping",
            "swap used at or above swap_warning_pct (20 %) of swap; critical at swap_critical_pct (50 %).",
            "Relieve memory pressure on the node.",
        ),
        Code(
            "NODE_VCPU_OVERCOMMIT",
            "warning",
            "vCPU overcommit high",
            "vCPUs of running guests per logical CPU above vcpu_ratio_warning (4:1).",
            "Rebalance CPU-heavy guests.",
        ),
        Code(
            "CLUSTER_NO_N_PLUS_1",
            "warning",
            "Cluster cannot absorb a node failure",
            "The configured memory of a node's running guests does not fit in the other nodes' free memory (after "
            "capacity_headroom_pct): neither its maintenance nor its failure leaves room for them. Critical when its "
            "HA resources alone do not fit: HA restarts those on the survivors by itself, whether they fit or not, "
            "and overloads them; the other guests stay down until someone starts them.",
            "Add capacity or reduce the running set (evidence: ha_bytes is what HA would restart unasked).",
        ),
    ],
    thresholds=[
        Threshold(
            "memory_overcommit_warning_pct",
            100,
            "configured memory of running guests over node memory that warns (%)",
            minimum=None,
            above=0,
        ),
        Threshold(
            "memory_overcommit_critical_pct",
            150,
            "configured memory of running guests over node memory that is critical (%)",
            minimum=None,
            above=0,
        ),
        Threshold(
            "memory_pressure_warning_pct", 85, "node memory use that warns (%)", minimum=None, above=0, maximum=100
        ),
        Threshold(
            "memory_pressure_critical_pct",
            95,
            "node memory use that is critical (%)",
            minimum=None,
            above=0,
            maximum=100,
        ),
        Threshold("swap_warning_pct", 20, "node swap use that warns (%)", maximum=100),
        Threshold("swap_critical_pct", 50, "node swap use that is critical (%)", maximum=100),
        Threshold("vcpu_ratio_warning", 4, "running vCPUs per node CPU that warns", minimum=None, above=0),
        Threshold(
            "capacity_headroom_pct",
            10,
            "memory a node keeps free when it takes guests (N+1, like the planner default)",
            maximum=90,
        ),
    ],
    anchors=[
        "cv4pve-diag:WN0036=NODE_MEMORY_OVERCOMMIT",
        "cv4pve-diag:WN0038=NODE_MEMORY_PRESSURE",
        "cv4pve-diag:WN0030=NODE_SWAP_USED",
        "cv4pve-diag:WG0036=NODE_VCPU_OVERCOMMIT",
        "check_pve:memory=NODE_MEMORY_PRESSURE",
        "check_pve:swap=NODE_SWAP_USED",
    ],
    needs=[RRD_DAY],
    pve="pve-manager PVE/API2/Nodes.pm status (memory, swap, cpuinfo), rrddata (arcsize); "
    "pve-ha-manager src/PVE/HA/Manager.pm recover_fenced_service",
)
def analyze_nodes(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    running = _running_on(data)
    for node in data.online_nodes:
        res = data.nodes[node]
        st = data.node_status.get(node) or {}
        total = int((st.get("memory") or {}).get("total") or res.get("maxmem") or 0)
        subject = Subject(kind="node", id=node)
        guests = running.get(node) or _Running()
        if total:
            configured = guests.memory
            pct = _pct(configured, total)
            if pct > t.get("memory_overcommit_warning_pct"):
                sev = Severity.CRITICAL if pct > t.get("memory_overcommit_critical_pct") else Severity.WARNING
                out.append(
                    finding(
                        "NODE_MEMORY_OVERCOMMIT",
                        subject,
                        f"{node}: running guests are configured with {configured // GiB} GiB on "
                        f"{total // GiB} GiB ({pct} %)",
                        {
                            "configured_bytes": configured,
                            "total_bytes": total,
                            "pct": pct,
                            "running_guests": guests.count,
                        },
                        severity=sev,
                    )
                )
            used = int((st.get("memory") or {}).get("used") or res.get("mem") or 0)
            arc = zfs_arc(data.read(RRD_DAY.key, node))
            used_pct = _pct(used - arc, total)
            if used_pct >= t.get("memory_pressure_warning_pct"):
                sev = Severity.CRITICAL if used_pct >= t.get("memory_pressure_critical_pct") else Severity.WARNING
                out.append(
                    finding(
                        "NODE_MEMORY_PRESSURE",
                        subject,
                        f"{node}: memory {used_pct} % used"
                        + (
                            f" without the ZFS ARC ({arc / GiB:.1f} GiB; PVE's memory bar counts it as used, its "
                            "memory chart's 'Without ZFS ARC' leaves it out)"
                            if arc
                            else ""
                        ),
                        {"used_bytes": used, "zfs_arc_bytes": arc, "total_bytes": total, "pct": used_pct},
                        severity=sev,
                    )
                )
        swap = st.get("swap") or {}
        if swap.get("total"):
            swap_pct = _pct(int(swap.get("used") or 0), int(swap["total"]))
            if swap_pct >= t.get("swap_warning_pct") and int(swap.get("used") or 0) > 0:
                sev = Severity.CRITICAL if swap_pct >= t.get("swap_critical_pct") else Severity.WARNING
                out.append(
                    finding(
                        "NODE_SWAP_USED",
                        subject,
                        f"{node}: {swap_pct} % of swap in use",
                        {"used_bytes": swap.get("used"), "total_bytes": swap.get("total"), "pct": swap_pct},
                        severity=sev,
                    )
                )
        cpus = int(res.get("maxcpu") or (st.get("cpuinfo") or {}).get("cpus") or 0)
        if cpus:
            vcpus = guests.vcpus
            ratio = vcpus / cpus
            if ratio > t.get("vcpu_ratio_warning"):
                out.append(
                    finding(
                        "NODE_VCPU_OVERCOMMIT",
                        subject,
                        f"{node}: {vcpus:.0f} vCPUs on {cpus} CPUs ({ratio:.1f}:1)",
                        {"vcpus": vcpus, "cpus": cpus, "ratio": round(ratio, 2)},
                    )
                )
    out += _n_plus_1(data, running, t.get("capacity_headroom_pct"))
    return out


@pve_rule(
    "capacity.n-plus-1",
    rule="When a node fails, HA recovers its HA resources onto the remaining online nodes and starts those requested "
    "'started', whether they fit or not; other guests stay down. The cluster is N+1 when the running guests of any "
    "one node fit into the room the others have (nodes in maintenance or offline take none).",
    pve="pve-ha-manager src/PVE/HA/Manager.pm recover_fenced_service; "
    "pve-docs ha-manager.adoc (Recover Fenced Services)",
    codes=("CLUSTER_NO_N_PLUS_1",),
)
def _n_plus_1(data: ClusterData, running: dict[str, _Running], headroom_pct: float) -> list[Finding]:
    nodes = capacity_nodes(data)
    if len(nodes) < 2:
        return []
    rooms = {n: node_room(data, n, headroom_pct) for n in nodes}
    if not all(r.total for r in rooms.values()):
        return []  # a node's memory is unknown: not provable either way
    worst: tuple[tuple[bool, int], str, _Running, int] | None = None
    for node in nodes:
        guests = running.get(node) or _Running()
        have = sum(max(r.free, 0) for n, r in rooms.items() if n != node)
        rank = (guests.ha_memory > have, guests.memory - have)  # HA's own overload first, then the shortfall
        if guests.memory > have and (worst is None or rank > worst[0]):
            worst = (rank, node, guests, have)
    if worst is None:
        return []
    (ha_overload, _short), node, guests, have = worst
    ha = f" ({guests.ha_memory / GiB:.1f} GiB of them HA resources, which HA restarts there by itself)"
    return [
        finding(
            "CLUSTER_NO_N_PLUS_1",
            CLUSTER,
            f"if {node} fails or goes into maintenance, its running guests need {guests.memory / GiB:.1f} GiB"
            f"{ha if guests.ha_memory else ''} but the other nodes have {have / GiB:.1f} GiB free after "
            f"{headroom_pct:g} % headroom",
            {
                "failing_node": node,
                "configured_bytes": guests.memory,
                "ha_bytes": guests.ha_memory,
                "free_elsewhere_bytes": have,
                "headroom_pct": headroom_pct,
                "not_capacity": sorted(set(data.nodes) - set(nodes)),
            },
            severity=Severity.CRITICAL if ha_overload else None,
        )
    ]
