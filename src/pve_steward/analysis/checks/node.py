"""Node health: services, kernel, clock, root filesystem, subscription, end of life.

Each check reads a handful of per-node endpoints (a per-node constant, batched by the collector) and
follows cv4pve-diag ``DiagnosticEngine.Node.cs`` and check_pve with their default thresholds.
"""

from __future__ import annotations

import re
import statistics
from datetime import UTC, datetime
from typing import Any

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

STATUS = Need("node_status", "/nodes/{node}/status", per="node")
SERVICES = Need("node_services", "/nodes/{node}/services", per="node")
TIME = Need("node_time", "/nodes/{node}/time", per="node")
APT_VERSIONS = Need("apt_versions", "/nodes/{node}/apt/versions", per="node")
RRD_DAY = Need("node_rrd_day", "/nodes/{node}/rrddata", per="node", params=(("timeframe", "day"), ("cf", "AVERAGE")))
SUBSCRIPTION = Need("node_subscription", "/nodes/{node}/subscription", per="node", privilege="any user")

# pve-manager PVE/API2/Services.pm $essential_services: the node cannot be managed without them.
ESSENTIAL = frozenset({"pveproxy", "pvedaemon", "pve-cluster"})
# unit states systemd starts on its own (Services.pm reports UnitFileState as unit-state)
_STARTED_BY_SYSTEMD = frozenset({"enabled", "enabled-runtime", "static", "linked", "linked-runtime", "alias"})


def node_subject(node: str) -> Subject:
    return Subject(kind="node", id=node, node=node)


def pct(used: Any, total: Any) -> float | None:
    try:
        u, t = float(used), float(total)
    except (TypeError, ValueError):
        return None
    return 100.0 * u / t if t > 0 else None


def graded(value: float, warn: float, crit: float) -> Severity | None:
    if value >= crit:
        return Severity.CRITICAL
    if value >= warn:
        return Severity.WARNING
    return None


def _clustered(data: ClusterData) -> bool:
    return any(r.get("type") == "cluster" for r in data.cluster_status) or len(data.nodes) > 1


@check(
    "node",
    codes=[
        Code(
            "NODE_SERVICE_STOPPED",
            "warning",
            "A system service of the node is not running",
            "A service PVE lists (GET /nodes/{node}/services) that systemd starts (unit-state enabled or static) "
            "is not in state 'running', or its active-state is 'failed'; corosync on a single node and a unit "
            "that is not installed are skipped. Critical for pveproxy, pvedaemon and pve-cluster.",
            "Look at `journalctl -u <service>` and start it: `systemctl restart <service>`, or GUI: Node > System > "
            "Start/Restart.",
        )
    ],
    needs=[SERVICES],
    anchors=["cv4pve-diag:WN0011", "check_pve:services"],
    pve="pve-manager PVE/API2/Services.pm $service_state",
)
@pve_rule(
    "node.service-state",
    rule=(
        "Services.pm reports systemd's SubState as state (a finished oneshot's Result instead), UnitFileState"
        " as unit-state ('not-found' when the unit is not installed) and ActiveState as active-state; "
        "pveproxy, pvedaemon and pve-cluster are its essential services."
    ),
    pve="pve-manager PVE/API2/Services.pm $service_state, $essential_services",
    codes=("NODE_SERVICE_STOPPED",),
)
def services_stopped(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Services that should run and do not."""
    out = []
    clustered = _clustered(data)
    for node, rows in sorted(data.read_nodes(SERVICES.key).items()):
        for row in rows or []:
            name = str(row.get("name") or row.get("service") or "")
            state, active, unit = row.get("state"), row.get("active-state"), row.get("unit-state")
            if unit == "not-found" or (name == "corosync" and not clustered):
                continue
            failed = active == "failed"
            if not failed and (state == "running" or unit not in _STARTED_BY_SYSTEMD):
                continue
            out.append(
                finding(
                    "NODE_SERVICE_STOPPED",
                    node_subject(node),
                    f"service {name} on {node} is {state} (active-state {active}, unit {unit})",
                    {"service": name, "state": state, "active_state": active, "unit_state": unit},
                    severity=Severity.CRITICAL if name in ESSENTIAL else None,
                )
            )
    return out


_KERNEL_PKG = re.compile(r"^(?:pve|proxmox)-kernel-(\d+\.\d+\.\d+-\d+-pve)(?:-signed)?$")


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", release))


@check(
    "node",
    codes=[
        Code(
            "NODE_REBOOT_PENDING",
            "warning",
            "A newer kernel is installed than the one running",
            "The newest installed kernel package (proxmox-kernel-<release> in GET /nodes/{node}/apt/versions) is "
            "newer than the running kernel (status current-kernel.release / RunningKernel): updates wait for a "
            "reboot.",
            "Migrate guests away (plan_node_evacuation), then reboot the node: GUI Node > Reboot or "
            "`systemctl reboot`.",
        )
    ],
    needs=[STATUS, APT_VERSIONS],
    anchors=["cv4pve-diag:WN0013"],
    pve="pve-manager PVE/API2/APT.pm versions (installed (pve|proxmox)-kernel-* packages, RunningKernel)",
)
@pve_rule(
    "node.installed-kernels",
    rule=(
        "APT.pm versions lists every installed (pve|proxmox)-kernel-* package, newest first by Debian "
        "version, and gives the running release (uname) as RunningKernel of proxmox-ve."
    ),
    pve="pve-manager PVE/API2/APT.pm versions",
    codes=("NODE_REBOOT_PENDING",),
)
def reboot_pending(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Running kernel older than the newest installed one."""
    out = []
    for node, pkgs in sorted(data.read_nodes(APT_VERSIONS.key).items()):
        status = data.read(STATUS.key, node) or {}
        running = str((status.get("current-kernel") or {}).get("release") or "")
        if not running:
            running = next((str(p.get("RunningKernel")) for p in pkgs or [] if p.get("RunningKernel")), "")
        installed = [
            m.group(1)
            for p in pkgs or []
            if p.get("CurrentState", "Installed") == "Installed" and (m := _KERNEL_PKG.match(str(p.get("Package"))))
        ]
        if not running or not installed:
            continue
        newest = max(installed, key=_release_key)
        if _release_key(newest) > _release_key(running):
            out.append(
                finding(
                    "NODE_REBOOT_PENDING",
                    node_subject(node),
                    f"{node} runs kernel {running} but {newest} is installed: reboot pending",
                    {"running_kernel": running, "newest_installed_kernel": newest},
                )
            )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_CLOCK_OFFSET",
            "warning",
            "Node clock is off",
            "The node's time (GET /nodes/{node}/time) differs from the checking host's clock by more than the "
            "threshold (cv4pve-diag: 60 s): NTP is not keeping it in sync.",
            "Check time sync on the node: `chronyc tracking`, `systemctl status chrony`; GUI Node > System > Time.",
        ),
        Code(
            "NODE_CLOCK_DRIFT",
            "warning",
            "Node clocks drift apart",
            "A node's time (GET /nodes/{node}/time) differs from the median of the cluster's node times by more "
            "than the threshold (cv4pve-diag: 5 s between nodes): corosync, HA fencing and log correlation suffer.",
            "Point every node at the same NTP servers (/etc/chrony/chrony.conf) and check `chronyc sources`.",
        ),
    ],
    needs=[TIME],
    thresholds=[
        Threshold("node_clock_offset_seconds", 60, "node time vs. the checking host beyond which NTP is suspect"),
        Threshold("node_clock_drift_seconds", 5, "time difference between cluster nodes"),
    ],
    anchors=["cv4pve-diag:WN0014", "cv4pve-diag:WN0045"],
    pve="pve-manager PVE/API2/Nodes.pm time (time = time())",
)
def clock(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Clock offset against ``now``, and each node against the cluster's median time (so one node off
    is one finding, not one per peer)."""
    times = {n: int(r["time"]) for n, r in data.read_nodes(TIME.key).items() if r and r.get("time") is not None}
    out = []
    limit, drift_limit = t.get("node_clock_offset_seconds"), t.get("node_clock_drift_seconds")
    median = statistics.median_low(times.values()) if len(times) > 1 and _clustered(data) else None
    for node, when in sorted(times.items()):
        offset = when - data.now
        if abs(offset) > limit:
            out.append(
                finding(
                    "NODE_CLOCK_OFFSET",
                    node_subject(node),
                    f"{node}'s clock is {offset:+.0f} s off",
                    {"node_time": when, "checked_at": int(data.now), "offset_seconds": round(offset), "limit": limit},
                )
            )
        if median is not None and abs(when - median) > drift_limit:
            out.append(
                finding(
                    "NODE_CLOCK_DRIFT",
                    node_subject(node),
                    f"{node}'s clock is {when - median:+d} s from the cluster's median time",
                    {
                        "node_time": when,
                        "cluster_median_time": median,
                        "times": dict(sorted(times.items())),
                        "limit": drift_limit,
                    },
                )
            )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_ROOTFS_FULL",
            "warning",
            "Node root filesystem is filling up",
            "rootfs used/total of GET /nodes/{node}/status at or above the warning threshold (cv4pve-diag storage "
            "threshold: 70 %), critical at the critical one (85 %). A full root stops pmxcfs, logs and updates.",
            "Free space on / : `apt clean`, `journalctl --vacuum-size=200M`, old ISOs/backups under /var/lib/vz.",
        )
    ],
    needs=[STATUS],
    thresholds=[
        Threshold("node_rootfs_warning_pct", 70, "root filesystem use (%)", maximum=100),
        Threshold("node_rootfs_critical_pct", 85, "root filesystem use (%)", maximum=100),
    ],
    anchors=["cv4pve-diag:WN0029"],
    pve="pve-manager PVE/API2/Nodes.pm status (rootfs = PVE::Tools::df('/'))",
)
def rootfs_full(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Root filesystem use against the storage thresholds."""
    out = []
    for node, status in sorted(data.read_nodes(STATUS.key).items()):
        rootfs = (status or {}).get("rootfs") or {}
        used_pct = pct(rootfs.get("used"), rootfs.get("total"))
        if used_pct is None:
            continue
        sev = graded(used_pct, t.get("node_rootfs_warning_pct"), t.get("node_rootfs_critical_pct"))
        if sev:
            out.append(
                finding(
                    "NODE_ROOTFS_FULL",
                    node_subject(node),
                    f"root filesystem of {node} is {used_pct:.0f}% full",
                    {"used": rootfs.get("used"), "total": rootfs.get("total"), "used_pct": round(used_pct, 1)},
                    severity=sev,
                )
            )
    return out


_SUBSCRIPTION_SEVERITY = {"notfound": Severity.INFO, "expired": Severity.CRITICAL, "invalid": Severity.CRITICAL}


@check(
    "node",
    codes=[
        Code(
            "NODE_SUBSCRIPTION_INACTIVE",
            "info",
            "Node has no active subscription",
            "GET /nodes/{node}/subscription status is not 'active'. 'notfound' (no key: the community setup) is "
            "info; 'new' (key not yet checked) and 'suspended' warn; 'expired' and 'invalid' are critical, as "
            "check_pve grades them (cv4pve-diag warns on any of them).",
            "Add or renew the key: GUI Node > Subscription > Upload Subscription Key, or `pvesubscription set <key>`"
            "; without one, use the no-subscription repository (the operations area of check_cluster_health "
            "checks which repositories are enabled).",
        )
    ],
    needs=[SUBSCRIPTION],
    anchors=["cv4pve-diag:WN0004", "check_pve:subscription"],
    pve="pve-manager PVE/API2/Subscription.pm get (status from PVE::Subscription read_subscription)",
)
def subscription(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Subscription status as check_pve grades it."""
    out = []
    for node, sub in sorted(data.read_nodes(SUBSCRIPTION.key).items()):
        status = str((sub or {}).get("status") or "").lower()
        if not status or status == "active":
            continue
        out.append(
            finding(
                "NODE_SUBSCRIPTION_INACTIVE",
                node_subject(node),
                f"{node} has no active subscription (status {status})",
                {"status": status, "message": (sub or {}).get("message")},
                severity=_SUBSCRIPTION_SEVERITY.get(status, Severity.WARNING),
            )
        )
    return out


# cv4pve-diag DiagnosticEngine.Node.cs _pveEndOfLife: end of security support per major release.
END_OF_LIFE = {8: "2026-08-31", 7: "2024-07-31", 6: "2022-09-30", 5: "2020-07-31", 4: "2018-06-30"}


@check(
    "node",
    codes=[
        Code(
            "NODE_VERSION_EOL",
            "warning",
            "Node runs a Proxmox VE release past its end of life",
            "The major release of pveversion (GET /nodes/{node}/status) has reached its end-of-life date "
            "(Proxmox: 8 on 2026-08-31, 7 on 2024-07-31, ...): no more security updates.",
            "Upgrade to the current major release (`pve8to9 --full`, then the upgrade guide); "
            "check_upgrade_readiness lists the blockers.",
        )
    ],
    needs=[STATUS],
    anchors=["cv4pve-diag:WN0003"],
    pve="pve-manager PVE/API2/Nodes.pm status (pveversion = PVE::pvecfg::package/version/repoid)",
)
def version_eol(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Releases past their end of life on ``now``'s date."""
    out = []
    today = datetime.fromtimestamp(data.now, UTC).strftime("%Y-%m-%d")
    for node, status in sorted(data.read_nodes(STATUS.key).items()):
        m = re.match(r"pve-manager/(\d+)\.", str((status or {}).get("pveversion") or ""))
        eol = END_OF_LIFE.get(int(m.group(1))) if m else None
        if eol and today >= eol:
            out.append(
                finding(
                    "NODE_VERSION_EOL",
                    node_subject(node),
                    f"{node} runs Proxmox VE {m.group(1) if m else '?'}, end of life since {eol}",
                    {"pveversion": status.get("pveversion"), "end_of_life": eol},
                )
            )
    return out
