"""Node host hints (info): a self-signed web certificate, IOMMU off, a node idle enough to consolidate.

Reads per node: /nodes/{node}/certificates/info and /nodes/{node}/hardware/pci; the idle node comes
from /cluster/resources (always read).
"""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.checks.node import node_subject
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve import visibility

CERTIFICATES = Need("node_certificates", "/nodes/{node}/certificates/info", per="node", privilege="any user")
PCI = Need("node_pci", "/nodes/{node}/hardware/pci", per="node", privilege="Sys.Audit or Sys.Modify on /")
# the cluster's own CA (pve-cluster PVE/Cluster/Setup.pm gen_pveca_cert): a root CA signs itself by design
_CLUSTER_CA = "pve-root-ca.pem"


@check(
    "node",
    codes=[
        Code(
            "NODE_CERT_SELF_SIGNED",
            "info",
            "A node certificate is self-signed",
            "A certificate of GET /nodes/{node}/certificates/info other than the cluster CA (pve-root-ca.pem) has "
            "issuer equal to subject (cv4pve-diag IN0004): browsers and API clients cannot verify it.",
            "Get a CA-signed certificate: GUI Node > System > Certificates > ACME (Let's Encrypt), or upload one "
            "(`pvenode cert set`).",
        )
    ],
    needs=[CERTIFICATES],
    anchors=["cv4pve-diag:IN0004"],
    pve="pve-manager PVE/API2/Certificates.pm info (PVE::Certificate::get_certificate_info)",
)
def cert_self_signed(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Self-signed node certificates (the cluster CA excepted)."""
    out = []
    for node, certs in sorted(data.read_nodes(CERTIFICATES.key).items()):
        for cert in certs or []:
            name, issuer, subject = cert.get("filename"), cert.get("issuer"), cert.get("subject")
            if name == _CLUSTER_CA or not issuer or issuer != subject:
                continue
            out.append(
                finding(
                    "NODE_CERT_SELF_SIGNED",
                    Subject(kind="certificate", id=f"{node}/{name}", node=node),
                    f"certificate {name} on {node} is self-signed",
                    {"filename": name, "issuer": issuer, "subject": subject},
                )
            )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_IOMMU_OFF",
            "info",
            "IOMMU is off: PCI passthrough will not work",
            "Every PCI device of GET /nodes/{node}/hardware/pci has iommugroup -1 (cv4pve-diag IN0002): the "
            "kernel found no IOMMU. A node that lists no device is not rated.",
            "Enable VT-d/AMD-Vi in the firmware and add `intel_iommu=on` (Intel) to the kernel command line "
            "(/etc/kernel/cmdline or GRUB), then `proxmox-boot-tool refresh` and reboot.",
        )
    ],
    needs=[PCI],
    anchors=["cv4pve-diag:IN0002"],
    pve="pve-manager PVE/API2/Hardware/PCI.pm pciscan (PVE::SysFSTools lspci: iommugroup -1 without IOMMU)",
)
def iommu_off(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Nodes whose PCI devices have no IOMMU group."""
    out = []
    for node, devices in sorted(data.read_nodes(PCI.key).items()):
        groups = [int(d.get("iommugroup", -1)) for d in devices or []]
        if groups and all(g == -1 for g in groups):
            out.append(
                finding(
                    "NODE_IOMMU_OFF",
                    node_subject(node),
                    f"IOMMU is off on {node}: none of its {len(groups)} PCI devices is in an IOMMU group",
                    {"devices": len(groups), "iommugroups": sorted(set(groups))},
                )
            )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_UNDERUSED",
            "info",
            "Node nearly idle: its guests could be consolidated",
            "A node with guests uses less CPU and memory than the consolidation thresholds (cv4pve-diag IN0003: "
            "CPU below 10 % and memory below 20 %, from /cluster/resources).",
            "Consider moving its guests to other nodes (plan_node_evacuation) and powering it down, or "
            "rebalancing load onto it.",
        )
    ],
    thresholds=[
        Threshold("node_consolidation_cpu_pct", 10, "node CPU use below which the node counts as idle", maximum=100),
        Threshold("node_consolidation_mem_pct", 20, "node memory use below which the node counts as idle", maximum=100),
    ],
    anchors=["cv4pve-diag:IN0003"],
    pve="pve-manager PVE/API2/Cluster.pm resources (node cpu, mem, maxmem)",
)
def underused(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Online nodes with guests, idle on both CPU and memory."""
    guests: dict[str, int] = {}
    for g in data.guests.values():
        if not g.get("template"):
            guests[str(g.get("node"))] = guests.get(str(g.get("node")), 0) + 1
    out = []
    for node in data.online_nodes:
        row = data.nodes[node]
        maxmem = float(row.get("maxmem") or 0)
        if not guests.get(node) or row.get("cpu") is None or maxmem <= 0:
            continue
        cpu, mem = float(row["cpu"]) * 100, float(row.get("mem") or 0) / maxmem * 100
        if cpu < t.get("node_consolidation_cpu_pct") and mem < t.get("node_consolidation_mem_pct"):
            out.append(
                finding(
                    "NODE_UNDERUSED",
                    node_subject(node),
                    f"{node} is nearly idle (CPU {cpu:.0f}%, memory {mem:.0f}%) with {guests[node]} guest(s)",
                    {"cpu_pct": round(cpu, 1), "mem_pct": round(mem, 1), "guests": guests[node]},
                )
            )
    return out


# pve-manager PVE/API2/Cluster.pm resources: the types its schema enumerates
KNOWN_RESOURCE_TYPES = frozenset({"node", "storage", "pool", "qemu", "lxc", "openvz", "sdn", "network"})


@check(
    "node",
    codes=[
        Code(
            "RESOURCE_TYPE_UNKNOWN",
            "warning",
            "Cluster resource of an unknown type",
            "A row of GET /cluster/resources has a type outside the ones PVE documents (node, storage, pool, "
            "qemu, lxc, openvz, sdn, network): nothing here judges it (cv4pve-diag CU0001 rates it critical; a "
            "newer PVE release is the usual cause).",
            "Check that pve-steward supports this PVE release (`pve-steward --version`, docs/tools.md); report "
            "the type if it is new.",
        )
    ],
    anchors=["cv4pve-diag:CU0001"],
    pve="pve-manager PVE/API2/Cluster.pm resources (type enum)",
)
def unknown_resource_types(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Resource rows no check understands, one finding per type."""
    seen: dict[str, list[str]] = {}
    for row in data.resources:
        kind = str(row.get("type"))
        if kind not in KNOWN_RESOURCE_TYPES:
            seen.setdefault(kind, []).append(str(row.get("id")))
    return [
        finding(
            "RESOURCE_TYPE_UNKNOWN",
            Subject(kind="cluster", id=f"resources/{kind}"),
            f"{len(ids)} cluster resource(s) of unknown type {kind}",
            {"type": kind, "ids": ids[:20], "count": len(ids)},
        )
        for kind, ids in sorted(seen.items())
    ]


# every task only with Sys.Audit on /, else the caller's own: none of a token's (pve-manager API2/Cluster.pm tasks)
CLUSTER_TASKS = Need("cluster_tasks", "/cluster/tasks", privilege="Sys.Audit on /", filters=(visibility.CLUSTER_TASKS,))


@check(
    "node",
    codes=[
        Code(
            "TASKS_RUNNING_MANY",
            "warning",
            "Many tasks are running at once",
            "GET /cluster/tasks lists at least the warning threshold of running tasks (no status yet), critical at "
            "the critical one (check_pve task-queue; it has no default, its documented example is 5/10): work is "
            "queueing up or tasks hang.",
            "Look at Datacenter > Tasks (or `pvenode task list --source active` per node); stop hung tasks "
            "(get_task, GUI Task > Stop).",
        )
    ],
    needs=[CLUSTER_TASKS],
    thresholds=[
        Threshold("tasks_running_warning", 5, "running tasks in the cluster"),
        Threshold("tasks_running_critical", 10, "running tasks in the cluster"),
    ],
    anchors=["check_pve:task-queue"],
    pve="pve-manager PVE/API2/Cluster.pm tasks (pmxcfs tasklist; a running task has no status)",
)
def tasks_running(data: ClusterData, t: Thresholds) -> list[Finding]:
    """The cluster's running-task count against the thresholds."""
    rows = [r for r in data.read(CLUSTER_TASKS.key) or [] if isinstance(r, dict)]
    running = [r for r in rows if "status" not in r]
    warn, crit = t.get("tasks_running_warning"), t.get("tasks_running_critical")
    if len(running) < warn:
        return []
    by_type: dict[str, int] = {}
    for r in running:
        by_type[str(r.get("type"))] = by_type.get(str(r.get("type")), 0) + 1
    return [
        finding(
            "TASKS_RUNNING_MANY",
            Subject(kind="cluster", id="tasks"),
            f"{len(running)} tasks are running in the cluster",
            {
                "running": len(running),
                "by_type": dict(sorted(by_type.items())),
                "upids": [r.get("upid") for r in running][:20],
            },
            severity=Severity.CRITICAL if len(running) >= crit else None,
        )
    ]
