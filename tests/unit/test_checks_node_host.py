"""Node host hints (analysis/checks/node_host.py): self-signed certificate, IOMMU off, idle node."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.checks import node_host as nh
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import GiB, guest_row, node_row
from tests.unit.test_checks_node import cluster, codes

T = Thresholds()
CA = "/CN=Proxmox Virtual Environment/OU=0a1b2c/O=PVE Cluster Manager CA"


def cert(filename: str, subject: str, issuer: str) -> dict[str, Any]:
    return {"filename": filename, "subject": subject, "issuer": issuer, "notbefore": 1, "notafter": 2, "san": []}


def test_cluster_ca_and_ca_signed_certificates_are_no_finding() -> None:
    certs = [
        cert("pve-root-ca.pem", CA, CA),
        cert("pve-ssl.pem", "/OU=PVE Cluster Node/O=Proxmox Virtual Environment/CN=pve1.lan", CA),
    ]
    assert nh.cert_self_signed(cluster({"node_certificates": {"pve1": certs}}), T) == []


def test_self_signed_proxy_certificate() -> None:
    certs = [cert("pve-root-ca.pem", CA, CA), cert("pveproxy-ssl.pem", "/CN=pve1.example.com", "/CN=pve1.example.com")]
    found = nh.cert_self_signed(cluster({"node_certificates": {"pve1": certs}}), T)
    assert codes(found) == [("NODE_CERT_SELF_SIGNED", "pve1/pveproxy-ssl.pem", "info")]


def pci(group: int) -> dict[str, Any]:
    return {"id": "0000:41:00.0", "class": "0x020000", "vendor": "0x8086", "device": "0x1521", "iommugroup": group}


def test_no_iommu_group_on_any_device() -> None:
    d = cluster({"node_pci": {"pve1": [pci(-1), pci(-1)], "pve2": [pci(12), pci(13)], "pve3": []}})
    assert codes(nh.iommu_off(d, T)) == [("NODE_IOMMU_OFF", "pve1", "info")]


def test_iommu_groups_present_is_no_finding() -> None:
    assert nh.iommu_off(cluster({"node_pci": {"pve1": [pci(3), pci(-1)]}}), T) == []


def test_idle_node_with_guests_is_a_consolidation_hint() -> None:
    d = cluster({})
    idle = node_row("pve1", mem=10 * GiB)
    idle["cpu"] = 0.03
    d.resources = [idle, node_row("pve2", mem=10 * GiB), node_row("pve3", mem=10 * GiB), guest_row(100, "pve1")]
    found = nh.underused(d, T)
    assert codes(found) == [("NODE_UNDERUSED", "pve1", "info")]
    assert found[0].evidence == {"cpu_pct": 3.0, "mem_pct": 7.8, "guests": 1}


def test_busy_or_empty_nodes_are_no_consolidation_hint() -> None:
    d = cluster({})
    empty = node_row("pve2", mem=1 * GiB)
    empty["cpu"] = 0.01
    d.resources = [node_row("pve1", mem=10 * GiB), empty, guest_row(100, "pve1")]  # pve1 cpu 12 %
    assert nh.underused(d, T) == []


def test_unknown_resource_type_is_named_once_per_type() -> None:
    d = cluster({})
    d.resources += [{"id": "quantum/pve1/q0", "type": "quantum"}, {"id": "quantum/pve2/q1", "type": "quantum"}]
    found = nh.unknown_resource_types(d, T)
    assert codes(found) == [("RESOURCE_TYPE_UNKNOWN", "resources/quantum", "warning")]
    assert found[0].evidence == {"type": "quantum", "ids": ["quantum/pve1/q0", "quantum/pve2/q1"], "count": 2}


def test_documented_resource_types_are_no_finding() -> None:
    d = cluster({})
    d.resources += [guest_row(100, "pve1"), {"id": "sdn/pve1/zone1", "type": "sdn"}, {"id": "pool/p", "type": "pool"}]
    assert nh.unknown_resource_types(d, T) == []


def running_task(n: int, ttype: str = "vzdump") -> dict[str, Any]:
    upid = f"UPID:pve1:0000{n:04X}:00000000:6A000000:{ttype}::root@pam:"
    return {"upid": upid, "node": "pve1", "type": ttype, "user": "root@pam", "starttime": 1_800_000_000, "pid": n}


def done_task(n: int) -> dict[str, Any]:
    return {**running_task(n, "qmstart"), "status": "OK", "endtime": 1_800_000_100}


def test_task_queue_graded_by_running_count() -> None:
    few = [running_task(i) for i in range(4)] + [done_task(i) for i in range(20)]
    assert nh.tasks_running(cluster({"cluster_tasks": {"": few}}), T) == []
    many = [running_task(i) for i in range(7)] + [running_task(9, "qmigrate")]
    found = nh.tasks_running(cluster({"cluster_tasks": {"": many}}), T)
    assert codes(found) == [("TASKS_RUNNING_MANY", "tasks", "warning")]
    assert found[0].evidence["by_type"] == {"qmigrate": 1, "vzdump": 7}
    jammed = [running_task(i) for i in range(10)]
    assert codes(nh.tasks_running(cluster({"cluster_tasks": {"": jammed}}), T))[0][2] == "critical"
