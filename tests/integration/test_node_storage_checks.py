"""Node and storage checks through the MCP server against pvesim: the demo's planted node-health and
storage problems are found, a healthy cluster has none, and a token that cannot read a node's disks gets
CHECK_SKIPPED naming the privilege, never a clean bill."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

import pvesim
from pvesim.scenario import DEFAULT_TOKENS
from pvesim.server import SimServer
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

# (code, subject id, severity) planted in src/pvesim/scenarios/demo.yaml (health: and storages:)
PLANTED_NODE = {
    ("NODE_MTU_MISMATCH", "pve1", "warning"),
    ("NODE_NIC_DOWN", "pve2", "warning"),
    ("NODE_BOND_DEGRADED", "pve2", "warning"),
    ("NODE_SERVICE_STOPPED", "pve3", "warning"),
    ("NODE_CLOCK_OFFSET", "pve3", "warning"),
    ("NODE_CLOCK_DRIFT", "pve3", "warning"),
    ("NODE_REBOOT_PENDING", "pve3", "warning"),
    ("NODE_LVMTHIN_METADATA_HIGH", "pve3:pve/data", "warning"),
    ("NODE_CPU_HIGH", "pve3", "warning"),
    ("NODE_DNS_DIFFERS", "pve2", "warning"),
    ("NODE_IOMMU_OFF", "pve3", "info"),
    ("NODE_DISK_REALLOCATED_SECTORS", "pve3:/dev/sdb", "warning"),
    ("NODE_DISK_PENDING_SECTORS", "pve3:/dev/sdb", "critical"),
    ("NODE_DISK_TEMPERATURE_HIGH", "pve3:/dev/sdb", "warning"),
    ("NODE_ZFS_VDEV_FAULTED", "pve3:tank", "critical"),
    ("NODE_ZFS_VDEV_ERRORS", "pve3:tank", "warning"),
    ("NODE_HEALTH_SCORE_LOW", "pve3", "critical"),
    ("NODE_APT_SOURCES_DIFFER", "pve2", "warning"),
    ("NODE_HOSTS_DIFFERS", "pve2", "warning"),  # pve3 at a stale address (every node's own entry differs: fine)
}
PLANTED_STORAGE = {
    ("STORAGE_DISABLED", "nfs-archive", "warning"),
    ("STORAGE_SHARED_SINGLE_NODE", "nfs-templates", "warning"),
}


async def _health(mcp: Any, areas: list[str]) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("check_cluster_health", {"detail": True, "areas": areas, "limit": 200})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


def _found(report: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(f["code"], f["subject"]["id"], f["severity"]) for f in report["findings"]}


async def test_demo_node_health_problems_are_found(demo_sim: SimServer, server_for: Any) -> None:
    report = await _health(server_for(demo_sim), ["node"])
    found = _found(report)
    assert found >= PLANTED_NODE, PLANTED_NODE - found
    assert report["complete"] is True and report["checked"] == ["node"]
    unplanted = {(c, s) for c, s, sev in found if sev != "info"} - {(c, s) for c, s, _ in PLANTED_NODE}
    assert unplanted == set(), unplanted  # nothing but what was planted
    hosts = next(f for f in report["findings"] if f["code"] == "NODE_HOSTS_DIFFERS")
    assert hosts["evidence"]["names"]["pve3"] == {"here": ["10.0.0.99"], "elsewhere": ["10.0.0.13"]}
    reboot = next(f for f in report["findings"] if f["code"] == "NODE_REBOOT_PENDING")
    assert reboot["evidence"] == {"running_kernel": "6.14.11-4-pve", "newest_installed_kernel": "6.14.11-5-pve"}


async def test_demo_storage_problems_are_found(demo_sim: SimServer, server_for: Any) -> None:
    report = await _health(server_for(demo_sim), ["storage"])
    assert _found(report) == PLANTED_STORAGE and report["complete"] is True


async def test_a_backup_job_to_a_storage_without_backup_content_is_found(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    with sim.sim.mutate() as c:  # the nightly job now writes to the ISO share (content iso,vztmpl)
        next(j for j in c.backup_jobs if j["id"] == "backup-nightly")["storage"] = "nfs-iso"
    report = await _health(server_for(sim), ["storage"])
    assert _found(report) == PLANTED_STORAGE | {("STORAGE_BACKUP_TARGET_WRONG_CONTENT", "nfs-iso", "critical")}


async def test_healthy_cluster_has_no_node_or_storage_warning(start_sim: Any, server_for: Any) -> None:
    report = await _health(server_for(start_sim("healthy")), ["node", "storage"])
    assert {f["severity"] for f in report["findings"]} <= {"info"}, report["findings"]
    assert report["complete"] is True


async def test_unreadable_node_disks_are_skipped_with_the_privilege(start_sim: Any, server_for: Any) -> None:
    data = pvesim.load_scenario("demo")
    node_only = {"id": "nodeaudit@pve!mcp", "acl": [{"path": "/nodes", "role": "PVEAuditor"}]}
    data["tokens"] = [*DEFAULT_TOKENS, {**node_only, "user_acl": node_only["acl"]}]
    report = await _health(server_for(start_sim(data), "nodeaudit@pve!mcp"), ["node"])
    skipped = [f for f in report["findings"] if f["code"] == "CHECK_SKIPPED"]
    per_node = [f for f in skipped if f["subject"]["id"].startswith("/nodes/")]
    paths = {f["subject"]["id"].split("/", 3)[3] for f in per_node}
    assert paths == {"disks/lvmthin", "disks/zfs", "hosts", "hardware/pci", "disks/smart"}, paths
    assert all(f["evidence"]["status"] == 403 and "on /)" in f["message"] for f in per_node), per_node
    # /cluster/tasks lists every task only with Sys.Audit on / (none of a token's otherwise): not visible, not idle
    (tasks,) = [f for f in skipped if f["subject"]["id"] == "/cluster/tasks"]
    assert "not visible to this token" in tasks["message"] and "Sys.Audit on /" in tasks["message"]
    # what the token may not see is a check limited by its scope, said as such (nothing failed to be read)
    status = next(f for f in skipped if f["subject"]["id"] == "/cluster/status")
    assert "cluster membership and quorum rows" in status["message"] and "Sys.Audit on /" in status["message"]
    assert report["complete"] is True
    assert ("NODE_LVMTHIN_METADATA_HIGH", "pve3:pve/data", "warning") not in _found(report)
    assert ("NODE_SERVICE_STOPPED", "pve3", "warning") in _found(report)  # /nodes/{node}/services stays readable


async def test_pve8_healthy_cluster_is_past_end_of_life_and_nothing_else(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("healthy", version="8.4.14")
    report = await _health(server_for(sim), ["node", "storage"])
    warnings = {(f["code"], f["subject"]["id"]) for f in report["findings"] if f["severity"] != "info"}
    assert warnings == {("NODE_VERSION_EOL", n) for n in ("hv1", "hv2", "hv3")}  # PVE 8 ended 2026-08-31
    assert report["complete"] is True


@pytest.mark.parametrize(("version", "pressure"), [("9.1.2", False), ("8.4.14", True)])
async def test_a_full_zfs_arc_is_no_memory_pressure_where_pve_records_it(
    start_sim: Any, server_for: Any, version: str, pressure: bool
) -> None:
    """hv1's ZFS ARC fills 80 of its 96 GiB: to the kernel that memory is used (not in MemAvailable). PVE 9's node
    RRD records the ARC (pvestatd arcsize) and PVE's summary shows the use without it; PVE 8 records none."""
    data = pvesim.load_scenario("healthy")
    data["nodes"][0]["zfs_arc"] = "80G"
    report = await _health(server_for(start_sim(data, version=version)), ["capacity"])
    found = [f for f in report["findings"] if f["code"] == "NODE_MEMORY_PRESSURE"]
    assert [f["subject"]["id"] for f in found] == (["hv1"] if pressure else [])
    assert report["complete"] is True


async def test_a_hot_sas_drive_is_found_from_smartctls_text(start_sim: Any, server_for: Any) -> None:
    """A SAS drive's SMART answer is text (Diskmanage.pm get_smart_data) whose temperature line is 'Current Drive
    Temperature: N C', not NVMe's 'Temperature: N Celsius'."""
    data = pvesim.load_scenario("healthy")
    data["nodes"][0]["disks"] = [{"devpath": "/dev/sdc", "type": "hdd", "size": "4T", "transport": "sas"}]
    data["nodes"][0].setdefault("health", {})["smart"] = {"/dev/sdc": {194: 59}}
    report = await _health(server_for(start_sim(data)), ["node"])
    hot = [f for f in report["findings"] if f["code"] == "NODE_DISK_TEMPERATURE_HIGH"]
    assert [(f["subject"]["id"], f["evidence"]["temperature_c"]) for f in hot] == [("hv1:/dev/sdc", 59)]
