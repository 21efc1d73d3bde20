"""Disk S.M.A.R.T. attributes: temperature, reallocated, pending and uncorrectable sectors, CRC errors.

One read per disk (GET /nodes/{node}/disks/smart?disk=<devpath>, at most 32 per node) after the disk
list, as cv4pve-diag does with its detailed S.M.A.R.T. checks. ATA attributes come as pve-storage
PVE/Diskmanage.pm get_smart_data parses ``smartctl -A -f brief``: ``id`` (right-aligned, e.g. "  5"),
``name``, ``raw`` ("36 (Min/Max 20/45)"); NVMe and SAS drives answer ``type: text`` instead.
"""

from __future__ import annotations

import re
from typing import Any

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.checks.node_disks import DISKS, ROOT_AUDIT
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

SMART = Need(
    "node_smart",
    "/nodes/{node}/disks/smart",
    per="node",
    params=(("disk", "{item}"),),
    privilege=ROOT_AUDIT,
    each=(DISKS.key, "devpath"),
)

# ATA attribute id -> (code, words), cv4pve-diag DiagnosticEngine.Node.cs CheckNodeDiskAsync
_COUNTERS = {
    5: ("NODE_DISK_REALLOCATED_SECTORS", "reallocated sector(s)"),
    197: ("NODE_DISK_PENDING_SECTORS", "pending sector(s)"),
    198: ("NODE_DISK_OFFLINE_UNCORRECTABLE", "offline uncorrectable sector(s)"),
    199: ("NODE_DISK_CRC_ERRORS", "UDMA CRC error(s)"),
    187: ("NODE_DISK_REPORTED_UNCORRECTABLE", "reported uncorrectable error(s)"),
}
_TEMPERATURE_IDS = (194, 190)  # Temperature_Celsius, Airflow_Temperature_Cel
# smartctl's text (Diskmanage.pm get_smart_data type 'text'): NVMe "Temperature: 38 Celsius", SAS/SCSI
# "Current Drive Temperature:     35 C" (smartmontools scsiprint.cpp scsiPrintTemp)
_TEXT_TEMPERATURE = re.compile(r"^(?:Temperature:\s+(\d+) Celsius|Current Drive Temperature:\s+(\d+) C)", re.MULTILINE)
FIX = (
    "Check the drive: GUI Node > Disks > Show S.M.A.R.T. values, `smartctl -a <disk>`; plan its replacement "
    "(ZFS: `zpool replace`, Ceph: mark the OSD out) before it fails."
)


def _raw(attr: Row) -> int | None:
    head = str(attr.get("raw") or "").split(" ", 1)[0]
    return int(head) if head.isdecimal() else None


@pve_rule(
    "disks.smart-attributes",
    rule=(
        "get_smart_data parses `smartctl -H -A -f brief`: ATA attributes keep smartctl's right-aligned id ('"
        "  5') and the raw column as text; NVMe and SAS drives give type 'text' with smartctl's lines."
    ),
    pve="pve-storage src/PVE/Diskmanage.pm get_smart_data",
    codes=(
        "NODE_DISK_TEMPERATURE_HIGH",
        "NODE_DISK_REALLOCATED_SECTORS",
        "NODE_DISK_PENDING_SECTORS",
        "NODE_DISK_OFFLINE_UNCORRECTABLE",
        "NODE_DISK_CRC_ERRORS",
        "NODE_DISK_REPORTED_UNCORRECTABLE",
    ),
)
def _attrs(answer: Any) -> dict[int, Row]:
    out = {}
    for attr in (answer or {}).get("attributes") or []:
        ident = str(attr.get("id", "")).strip()
        if isinstance(attr, dict) and ident.isdecimal():
            out[int(ident)] = attr
    return out


def _temperature(answer: Any) -> int | None:
    attrs = _attrs(answer)
    for ident in _TEMPERATURE_IDS:
        value = _raw(attrs.get(ident, {}))
        if value:
            return value
    m = _TEXT_TEMPERATURE.search(str((answer or {}).get("text") or ""))
    return int(m.group(1) or m.group(2)) if m else None


def _subject(node: str, disk: str) -> Subject:
    return Subject(kind="disk", id=f"{node}:{disk}", node=node)


@check(
    "node",
    codes=[
        Code(
            "NODE_DISK_TEMPERATURE_HIGH",
            "warning",
            "Disk runs hot",
            "The drive temperature (ATA attribute 194 or 190 raw value, an NVMe drive's 'Temperature:' or a SAS "
            "drive's 'Current Drive Temperature:' line of "
            "GET /nodes/{node}/disks/smart) is at or above the warning threshold (cv4pve-diag: 55 °C), critical "
            "at 65 °C.",
            "Check airflow, fans and the chassis/room temperature; `smartctl -A <disk>` shows the history.",
        ),
        *(
            Code(
                code,
                "critical" if ident in (197, 198) else "warning",
                f"Disk has {words}",
                f"ATA attribute {ident} of GET /nodes/{{node}}/disks/smart has a raw value above 0 (cv4pve-diag).",
                FIX if ident != 199 else "Reseat or replace the SATA cable, check the controller/backplane port.",
            )
            for ident, (code, words) in _COUNTERS.items()
        ),
    ],
    needs=[DISKS, SMART],
    thresholds=[
        Threshold("node_disk_temperature_warning_c", 55, "drive temperature (°C)", maximum=None),
        Threshold("node_disk_temperature_critical_c", 65, "drive temperature (°C)", maximum=None),
    ],
    anchors=[
        "cv4pve-diag:WN0019",
        "cv4pve-diag:CN0007",
        "cv4pve-diag:WN0020",
        "cv4pve-diag:CN0008",
        "cv4pve-diag:CN0009",
        "cv4pve-diag:WN0021",
        "cv4pve-diag:WN0022",
    ],
    pve="pve-storage src/PVE/Diskmanage.pm get_smart_data",
)
def smart_attributes(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Per disk: its temperature against the thresholds and the failure counters above zero."""
    out = []
    warn, crit = t.get("node_disk_temperature_warning_c"), t.get("node_disk_temperature_critical_c")
    for node, by_disk in sorted(data.read_nodes(SMART.key).items()):
        for disk, answer in sorted((by_disk or {}).items()):
            temp = _temperature(answer)
            if temp is not None and temp >= warn:
                out.append(
                    finding(
                        "NODE_DISK_TEMPERATURE_HIGH",
                        _subject(node, disk),
                        f"{disk} on {node} is at {temp} °C",
                        {"disk": disk, "temperature_c": temp, "warning_c": warn, "critical_c": crit},
                        severity=Severity.CRITICAL if temp >= crit else None,
                    )
                )
            attrs = _attrs(answer)
            for ident, (code, words) in _COUNTERS.items():
                value = _raw(attrs.get(ident, {}))
                if value:
                    out.append(
                        finding(
                            code,
                            _subject(node, disk),
                            f"{disk} on {node} has {value} {words}",
                            {"disk": disk, "attribute": ident, "name": attrs[ident].get("name"), "raw": value},
                        )
                    )
    return out
