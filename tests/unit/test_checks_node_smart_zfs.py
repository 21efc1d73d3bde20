"""Per-disk S.M.A.R.T. and per-pool ZFS detail checks, and the collector's reads over another read's rows
(catalog ``Need.each``): one read per disk/pool, at most ``limit`` per node, the rest CHECK_SKIPPED."""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.checks import node_disks as nd
from pve_steward.analysis.checks import node_smart as ns
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.errors import PvePermissionError
from pve_steward.testing import FakeClient
from pve_steward.tools.collect import collect
from tests.unit.pve_fixtures import NOW, cluster_status, node_row, storage_cfg
from tests.unit.test_checks_node import cluster, codes

T = Thresholds()


def ata(**raw: str) -> dict[str, Any]:
    """get_smart_data of an ATA drive: ids right-aligned as smartctl prints them, raw values as text."""
    names = {
        5: "Reallocated_Sector_Ct",
        187: "Reported_Uncorrect",
        194: "Temperature_Celsius",
        197: "Current_Pending_Sector",
        198: "Offline_Uncorrectable",
        199: "UDMA_CRC_Error_Count",
    }
    values = {5: "0", 187: "0", 194: "36 (Min/Max 21/45)", 197: "0", 198: "0", 199: "0"}
    values.update({int(k.removeprefix("a")): v for k, v in raw.items()})
    attrs = [
        {
            "id": f"{i:>3}",
            "name": names[i],
            "flags": "-O--CK",
            "value": 100,
            "normalized": 100,
            "worst": 100,
            "threshold": 0,
            "fail": "-",
            "raw": values[i],
        }
        for i in names
    ]
    return {"health": "PASSED", "type": "ata", "attributes": attrs}


def nvme(temp: int) -> dict[str, Any]:
    text = f"SMART/Health Information (NVMe Log 0x02)\nTemperature:                        {temp} Celsius\n"
    return {"health": "PASSED", "type": "text", "text": text, "wearout": 97}


def test_healthy_drives_are_no_finding() -> None:
    d = cluster({"node_smart": {"pve1": {"/dev/sda": ata(), "/dev/nvme0n1": nvme(38)}}})
    assert ns.smart_attributes(d, T) == []


def test_every_failure_counter_and_the_temperature() -> None:
    sick = ata(a5="8", a187="1", a194="58 (Min/Max 20/61)", a197="2", a198="2", a199="14")
    found = ns.smart_attributes(cluster({"node_smart": {"pve1": {"/dev/sdb": sick, "/dev/nvme0n1": nvme(70)}}}), T)
    assert codes(found) == [
        ("NODE_DISK_TEMPERATURE_HIGH", "pve1:/dev/nvme0n1", "critical"),
        ("NODE_DISK_TEMPERATURE_HIGH", "pve1:/dev/sdb", "warning"),
        ("NODE_DISK_REALLOCATED_SECTORS", "pve1:/dev/sdb", "warning"),
        ("NODE_DISK_PENDING_SECTORS", "pve1:/dev/sdb", "critical"),
        ("NODE_DISK_OFFLINE_UNCORRECTABLE", "pve1:/dev/sdb", "critical"),
        ("NODE_DISK_CRC_ERRORS", "pve1:/dev/sdb", "warning"),
        ("NODE_DISK_REPORTED_UNCORRECTABLE", "pve1:/dev/sdb", "warning"),
    ]
    assert found[2].evidence == {"disk": "/dev/sdb", "attribute": 5, "name": "Reallocated_Sector_Ct", "raw": 8}


def sas(temp: int) -> dict[str, Any]:
    """get_smart_data of a SAS drive: smartctl's text after the SMART data section (scsiPrintTemp's line)."""
    text = (
        f"Current Drive Temperature:     {temp} C\nDrive Trip Temperature:        68 C\n\n"
        "Accumulated start-stop cycles:  34\nElements in grown defect list: 0\n"
    )
    return {"health": "OK", "type": "text", "text": text}


def test_a_sas_drive_reports_its_temperature_in_text() -> None:
    """SAS drives print 'Current Drive Temperature: N C' (not NVMe's 'Temperature: N Celsius'); the trip
    temperature beside it is not the drive's."""
    found = ns.smart_attributes(cluster({"node_smart": {"pve1": {"/dev/sdc": sas(57), "/dev/sdd": sas(40)}}}), T)
    assert codes(found) == [("NODE_DISK_TEMPERATURE_HIGH", "pve1:/dev/sdc", "warning")]
    assert found[0].evidence["temperature_c"] == 57


def vdev(name: str, state: str = "ONLINE", cksum: int = 0, children: list[Any] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "state": state, "read": 0, "write": 0, "cksum": cksum, "msg": ""}
    if children is not None:
        row["children"] = children
    return row


def pool(state: str, leaf2: dict[str, Any], errors: str = "No known data errors") -> dict[str, Any]:
    mirror = vdev("mirror-0", state, children=[vdev("/dev/sda3"), leaf2])
    spares = {"name": "spares", "msg": "", "children": [vdev("/dev/sdd", "AVAIL")]}
    return {
        "name": "tank",
        "state": state,
        "errors": errors,
        "children": [vdev("tank", state, children=[mirror]), spares],
    }


def test_healthy_pool_with_a_spare_is_no_finding() -> None:
    d = cluster({"node_zfs_detail": {"pve1": {"tank": pool("ONLINE", vdev("/dev/sdb3"))}}})
    assert nd.zfs_vdevs(d, T) == []


def test_faulted_disk_is_reported_once_with_its_errors_and_the_data_errors() -> None:
    sick = pool("DEGRADED", vdev("/dev/sdb3", "FAULTED", cksum=41), errors="2 data errors, use '-v' for a list")
    found = nd.zfs_vdevs(cluster({"node_zfs_detail": {"pve1": {"tank": sick}}}), T)
    assert codes(found) == [
        ("NODE_ZFS_VDEV_FAULTED", "pve1:tank", "critical"),
        ("NODE_ZFS_VDEV_ERRORS", "pve1:tank", "warning"),
        ("NODE_ZFS_DATA_ERRORS", "pve1:tank", "warning"),
    ]
    assert found[0].evidence["vdev"] == "tank > mirror-0 > /dev/sdb3"


def disk(devpath: str) -> dict[str, Any]:
    return {"devpath": devpath, "type": "hdd", "size": 4 * 10**12, "health": "PASSED", "wearout": "N/A", "gpt": 1}


@pytest.mark.anyio
async def test_collector_reads_each_disk_and_pool_bounded_per_node() -> None:
    devpaths = [f"/dev/sd{i:02d}" for i in range(ns.SMART.limit + 2)]  # two disks more than the bound
    fake = FakeClient()
    fake.on("GET", "/version", {"version": "9.1.2", "release": "9.1"})
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True}))
    fake.on("GET", "/cluster/resources", [node_row("pve1")])
    fake.on("GET", "/storage", [storage_cfg("local", "dir", "iso,backup")])
    fake.on("GET", "/nodes/pve1/disks/list", [disk(p) for p in reversed(devpaths)])
    fake.on("GET", "/nodes/pve1/disks/smart", lambda params: ata(a5="3") if params["disk"] == "/dev/sd01" else ata())
    pools = [{"name": "tank", "size": 10, "alloc": 1, "health": "ONLINE"}, {"name": "9 bad", "size": 10, "alloc": 1}]
    fake.on("GET", "/nodes/pve1/disks/zfs", pools)
    fake.on(
        "GET", "/nodes/pve1/disks/zfs/tank", PvePermissionError("GET /nodes/pve1/disks/zfs/tank: denied", status=403)
    )
    data = await collect(fake, NOW, ["node"])
    smart_calls = [p["disk"] for m, path, p in fake.calls if path == "/nodes/pve1/disks/smart"]
    assert smart_calls == devpaths[:32] and set(data.read("node_smart", "pve1")) == set(devpaths[:32])
    skipped = {m.what: m.optional for m in data.missing if m.affects == ("node",)}
    assert skipped["node smart of pve1: 2 of 34 not read (at most 32 per node)"] is True
    assert any(what.startswith("node zfs detail of pve1 (skipped: needs Sys.Audit on /)") for what in skipped)
    assert skipped["node zfs detail of pve1: '9 bad' is not an addressable name"] is True  # cluster text, not read
    assert [path for _m, path, _p in fake.calls if path.startswith("/nodes/pve1/disks/zfs/")] == [
        "/nodes/pve1/disks/zfs/tank"
    ]
    assert codes(ns.smart_attributes(data, T)) == [("NODE_DISK_REALLOCATED_SECTORS", "pve1:/dev/sd01", "warning")]
