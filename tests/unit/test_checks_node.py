"""Node health checks (analysis/checks/node.py) on fixtures shaped like PVE's answers."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.catalog import load_checks
from pve_steward.analysis.checks import node as nc
from pve_steward.analysis.checks import node_load as nl
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from tests.unit.pve_fixtures import NOW, GiB, cluster_status, data, node_row

T = Thresholds()
NODES = ("pve1", "pve2", "pve3")


def cluster(reads: dict[str, dict[str, Any]], nodes: tuple[str, ...] = NODES) -> ClusterData:
    return data(
        cluster_status=cluster_status(dict.fromkeys(nodes, True)),
        resources=[node_row(n) for n in nodes],
        reads=reads,
    )


def codes(found: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.code, str(f.subject.id), f.severity.value) for f in found]


def service(name: str, state: str = "running", active: str = "active", unit: str = "enabled") -> dict[str, Any]:
    return {"service": name, "name": name, "desc": name, "state": state, "active-state": active, "unit-state": unit}


HEALTHY_SERVICES = [
    service("chrony"),
    service("corosync"),
    service("pveproxy"),
    service("pvedaemon"),
    service("pve-cluster"),
    service("systemd-journald", unit="static"),
    service("systemd-timesyncd", "dead", "inactive", "not-found"),
    service("spiceproxy", "dead", "inactive", "disabled"),  # disabled on purpose: not started by systemd
]


def test_services_all_running_is_no_finding() -> None:
    assert nc.services_stopped(cluster({"node_services": {"pve1": HEALTHY_SERVICES}}), T) == []


def test_service_not_running_warns_and_essential_one_is_critical() -> None:
    rows = [r for r in HEALTHY_SERVICES if r["name"] not in ("chrony", "pveproxy")]
    rows += [service("chrony", "failed", "failed"), service("pveproxy", "dead", "inactive")]
    found = nc.services_stopped(cluster({"node_services": {"pve1": rows}}), T)
    assert codes(found) == [
        ("NODE_SERVICE_STOPPED", "pve1", "warning"),
        ("NODE_SERVICE_STOPPED", "pve1", "critical"),
    ]
    assert found[0].evidence["service"] == "chrony"
    assert found[1].evidence["state"] == "dead"


def test_corosync_is_not_expected_on_a_single_node() -> None:
    d = cluster({"node_services": {"pve1": [service("corosync", "dead", "inactive")]}}, nodes=("pve1",))
    d.cluster_status = [r for r in d.cluster_status if r["type"] == "node"]
    assert nc.services_stopped(d, T) == []


def kernels(*releases: str, running: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"Package": "proxmox-ve", "Version": "9.1.0", "CurrentState": "Installed", "RunningKernel": running},
        {"Package": "pve-manager", "Version": "9.1.2", "CurrentState": "Installed"},
    ]
    rows += [{"Package": f"proxmox-kernel-{r}-signed", "Version": r, "CurrentState": "Installed"} for r in releases]
    return rows


def status(release: str = "6.14.11-4-pve", pveversion: str = "pve-manager/9.1.2/abc", **extra: Any) -> dict[str, Any]:
    return {
        "current-kernel": {"sysname": "Linux", "release": release, "machine": "x86_64"},
        "kversion": f"Linux {release} #1 SMP",
        "pveversion": pveversion,
        "rootfs": {"total": 100 * GiB, "used": 12 * GiB, "avail": 88 * GiB, "free": 88 * GiB},
        **extra,
    }


def test_newer_kernel_installed_means_reboot_pending() -> None:
    d = cluster(
        {
            "node_status": {"pve1": status("6.14.11-4-pve")},
            "apt_versions": {"pve1": kernels("6.14.11-5-pve", "6.14.11-4-pve", running="6.14.11-4-pve")},
        }
    )
    found = nc.reboot_pending(d, T)
    assert codes(found) == [("NODE_REBOOT_PENDING", "pve1", "warning")]
    assert found[0].evidence["newest_installed_kernel"] == "6.14.11-5-pve"


def test_running_the_newest_kernel_is_no_finding() -> None:
    d = cluster(
        {
            "node_status": {"pve1": status("6.14.11-5-pve")},
            "apt_versions": {"pve1": kernels("6.8.12-9-pve", "6.14.11-5-pve", running="6.14.11-5-pve")},
        }
    )
    assert nc.reboot_pending(d, T) == []


def times(**offsets: float) -> dict[str, dict[str, Any]]:
    return {
        n: {"time": int(NOW + off), "localtime": int(NOW + off + 3600), "timezone": "Europe/Berlin"}
        for n, off in offsets.items()
    }


def test_clock_off_is_offset_and_drift() -> None:
    found = nc.clock(cluster({"node_time": times(pve1=0, pve2=1, pve3=95)}), T)
    assert codes(found) == [("NODE_CLOCK_OFFSET", "pve3", "warning"), ("NODE_CLOCK_DRIFT", "pve3", "warning")]


def test_small_drift_between_nodes_is_found_by_its_own_threshold() -> None:
    found = nc.clock(cluster({"node_time": times(pve1=0, pve2=0, pve3=-8)}), T)
    assert codes(found) == [("NODE_CLOCK_DRIFT", "pve3", "warning")]


def test_clocks_in_sync_is_no_finding() -> None:
    assert nc.clock(cluster({"node_time": times(pve1=0, pve2=2, pve3=-3)}), T) == []


def test_root_filesystem_graded_by_the_storage_thresholds() -> None:
    def rootfs(used: int) -> dict[str, Any]:
        return status(rootfs={"total": 100 * GiB, "used": used * GiB, "avail": (100 - used) * GiB})

    d = cluster({"node_status": {"pve1": rootfs(12), "pve2": rootfs(72), "pve3": rootfs(90)}})
    assert codes(nc.rootfs_full(d, T)) == [
        ("NODE_ROOTFS_FULL", "pve2", "warning"),
        ("NODE_ROOTFS_FULL", "pve3", "critical"),
    ]


def rrd(**avg: float) -> list[dict[str, Any]]:
    # pvestatd: cpu and iowait are fractions, the PSI columns /proc/pressure's avg10 percentages
    base = {"cpu": 0.1, "iowait": 0.01, "pressurecpusome": 2.0, "pressureiofull": 0.0, "pressurememoryfull": 0.0}
    base.update(avg)
    return [
        {"time": int(NOW) - 1800 * i, "maxcpu": 32, **{k: v * (1.05 if i % 2 else 0.95) for k, v in base.items()}}
        for i in range(48)
    ]


def test_day_averages_above_thresholds() -> None:
    d = cluster(
        {
            "node_rrd_day": {
                "pve1": rrd(cpu=0.75),
                "pve2": rrd(iowait=0.9),
                "pve3": rrd(pressurecpusome=45.0, pressurememoryfull=20.0),
            }
        }
    )
    assert codes(nl.load_high(d, T)) == [
        ("NODE_CPU_HIGH", "pve1", "warning"),
        ("NODE_IOWAIT_HIGH", "pve2", "critical"),
        ("NODE_PRESSURE_HIGH", "pve3", "warning"),
        ("NODE_PRESSURE_HIGH", "pve3", "critical"),
    ]


def test_quiet_day_is_no_finding_and_thresholds_are_overridable() -> None:
    d = cluster({"node_rrd_day": {"pve1": rrd(cpu=0.5)}})
    assert nl.load_high(d, T) == []
    assert codes(nl.load_high(d, thresholds_from({"node_cpu_warning_pct": 40}))) == [
        ("NODE_CPU_HIGH", "pve1", "warning")
    ]


def test_pressure_columns_are_percentages_already() -> None:
    """A node stalled 1.5 % of the time on CPU and 0.4 % on I/O is calm: PSI avg10 is a percentage."""
    d = cluster({"node_rrd_day": {"pve1": rrd(pressurecpusome=1.5, pressureiofull=0.4, pressurememoryfull=0.3)}})
    assert nl.load_high(d, T) == []


def test_pve8_rrd_without_pressure_columns_is_no_finding() -> None:
    rows = [{k: v for k, v in r.items() if not k.startswith("pressure")} for r in rrd()]
    assert nl.load_high(cluster({"node_rrd_day": {"pve1": rows}}), T) == []


def test_subscription_graded_as_check_pve_does() -> None:
    d = cluster(
        {
            "node_subscription": {
                "pve1": {"status": "active", "productname": "Proxmox VE Basic", "nextduedate": "2027-06-01"},
                "pve2": {"status": "notfound", "message": "There is no subscription key"},
                "pve3": {"status": "expired"},
            }
        }
    )
    assert codes(nc.subscription(d, T)) == [
        ("NODE_SUBSCRIPTION_INACTIVE", "pve2", "info"),
        ("NODE_SUBSCRIPTION_INACTIVE", "pve3", "critical"),
    ]


def test_end_of_life_release() -> None:
    d = cluster({"node_status": {"pve1": status(pveversion="pve-manager/8.4.14/b502d23c55afcba1"), "pve2": status()}})
    found = nc.version_eol(d, T)  # NOW is 2027-01-15: PVE 8 ended 2026-08-31
    assert codes(found) == [("NODE_VERSION_EOL", "pve1", "warning")]
    assert found[0].evidence["end_of_life"] == "2026-08-31"


def test_supported_release_is_no_finding() -> None:
    assert nc.version_eol(cluster({"node_status": {"pve1": status()}}), T) == []


def test_unread_node_reads_give_no_finding_and_the_area_runs_in_diagnose() -> None:
    report = diagnose(cluster({}), T, ["node"])
    assert report.findings == [] and report.status == "ok"
    names = {c.name for c in load_checks().values() if c.area == "node"}
    assert {"node.services_stopped", "node.clock", "node_network.interfaces", "node_disks.lvmthin_metadata"} <= names


def sized(mem_pct: float, root_pct: float, **avg: float) -> list[dict[str, Any]]:
    rows = rrd(**avg)
    for r in rows:
        r.update(memtotal=100 * GiB, memused=mem_pct * GiB, roottotal=100 * GiB, rootused=root_pct * GiB)
    return rows


def test_health_score_as_cv4pve_weighs_it() -> None:
    d = cluster(
        {
            "node_rrd_day": {
                "pve1": sized(30, 12, cpu=0.12),  # 100 - (4.8 + 12 + 2.4) = 80.8
                "pve2": sized(60, 20, cpu=0.30),  # 100 - (12 + 24 + 4) = 60
                "pve3": sized(80, 50, cpu=0.75),  # 100 - (30 + 32 + 10) = 28
            }
        }
    )
    found = nl.health_score(d, T)
    assert codes(found) == [("NODE_HEALTH_SCORE_LOW", "pve2", "warning"), ("NODE_HEALTH_SCORE_LOW", "pve3", "critical")]
    assert found[0].evidence == {"score": 60.0, "cpu_pct": 30.0, "mem_pct": 60.0, "root_pct": 20.0}


def test_health_score_of_a_quiet_node_is_no_finding() -> None:
    assert nl.health_score(cluster({"node_rrd_day": {"pve1": sized(30, 12, cpu=0.12)}}), T) == []


def test_network_throughput_is_off_by_default_and_rated_once_set() -> None:
    d = cluster({"node_rrd_day": {"pve1": rrd(netin=900e6, netout=10e6)}})
    assert nl.network_busy(d, T) == []  # cv4pve-diag's default: thresholds 0, not rated
    t = thresholds_from(
        {
            "node_net_in_warning_bytes": 500e6,
            "node_net_in_critical_bytes": 1e9,
            "node_net_out_warning_bytes": 500e6,
            "node_net_out_critical_bytes": 1e9,
        }
    )
    found = nl.network_busy(d, t)
    assert codes(found) == [("NODE_NETWORK_BUSY", "pve1", "warning")]
    assert found[0].evidence["direction"] == "in"
