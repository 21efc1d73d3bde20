"""Node health endpoints: services, time, APT package versions, DNS, /etc/hosts, network, LVM-thin pools, RRD data.

The answers come from the node's :class:`pvesim.nodehealth.NodeHealth` and follow the PVE handlers
named on each route.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any
from zoneinfo import ZoneInfo

from pvesim import disks, nodehealth
from pvesim.api.registry import ApiError, Call, Result, route
from pvesim.scenario import major


def _node(call: Call) -> Any:
    return call.cluster.nodes[call.params["node"]]


@route("GET", "/nodes/{node}/time")
def node_time(call: Call) -> dict[str, Any]:
    """pve-manager PVE/API2/Nodes.pm time: UTC seconds, the same wall time as if it were UTC, the zone."""
    h = _node(call).health
    now = int(call.cluster.clock.now() + h.clock_offset)
    local = dt.datetime.fromtimestamp(now, ZoneInfo(h.timezone))
    offset = local.utcoffset() or dt.timedelta()
    return {"time": now, "localtime": now + int(offset.total_seconds()), "timezone": h.timezone}


@route("GET", "/nodes/{node}/dns")
def dns(call: Call) -> dict[str, Any]:
    """pve-manager PVE/API2/Nodes.pm dns (PVE::INotify resolvconf)."""
    return dict(_node(call).health.dns)


@route("GET", "/nodes/{node}/hosts")
def hosts(call: Call) -> dict[str, Any]:
    """pve-manager PVE/API2/Nodes.pm get_etc_hosts (INotify etchosts: the text and its SHA-1 digest)."""
    node = _node(call)
    text = nodehealth.etc_hosts(node.health, node.name, node.ip)
    return {"data": text, "digest": hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()}


@route("GET", "/nodes/{node}/network")
def network(call: Call) -> Result:
    """pve-manager PVE/API2/Network.pm index; ``type`` filters (any_bridge: bridges and OVS bridges); the diff
    of pending changes (interfaces.new) beside the data as ``changes``."""
    n = _node(call)
    return Result(_network_rows(call), changes=n.health.network_changes)


def _network_rows(call: Call) -> list[dict[str, Any]]:
    n = _node(call)
    merged = {iface: dict(r) for iface, r in n.health.network.items()}
    for row in n.network:  # the upgrade-readiness knob (a list of rows), merged over the health model's
        merged[str(row["iface"])] = {**merged.get(str(row["iface"]), {}), **row}
    rows = [merged[k] for k in sorted(merged)]
    kind = call.params.get("type")
    if kind in ("any_bridge", "any_local_bridge"):
        return [r for r in rows if r.get("type") in ("bridge", "OVSBridge")]
    return [r for r in rows if kind is None or r.get("type") == kind]


@route("GET", "/nodes/{node}/disks/lvmthin")
def lvmthin(call: Call) -> list[dict[str, Any]]:
    """pve-storage PVE/API2/Disks/LVMThin.pm index (LvmThinPlugin list_thinpools)."""
    return [dict(p) for p in _node(call).health.lvmthin]


@route("GET", "/nodes/{node}/hardware/pci")
def hardware_pci(call: Call) -> list[dict[str, Any]]:
    """pve-manager PVE/API2/Hardware/PCI.pm pciscan: devices minus the blacklisted classes (memory controllers,
    bridges, processors by default); every device sits in IOMMU group -1 when the kernel has no IOMMU."""
    blacklist = str(call.params.get("pci-class-blacklist", "05;06;0b")).split(";")
    return [
        d
        for d in nodehealth.pci_devices(_node(call).health)
        if not any(d["class"][2:].startswith(b) for b in blacklist if b)
    ]


@route("GET", "/nodes/{node}/disks/smart")
def disk_smart(call: Call) -> dict[str, Any]:
    """pve-storage PVE/API2/Disks.pm smart (Diskmanage.pm get_smart_data; assert_blockdev first)."""
    n, devpath = _node(call), call.params["disk"]
    disk = next((d.disk for d in disks.node_disks(call.cluster, n) if d.disk.get("devpath") == devpath), None)
    if disk is None:
        raise ApiError(500, f"not a valid block device - '{devpath}'")
    answer = nodehealth.smart(n.health, disk)
    return {"health": answer["health"]} if call.flag("healthonly") else answer


@route("GET", "/nodes/{node}/disks/zfs/{name}")
def zfs_detail(call: Call) -> dict[str, Any]:
    """pve-storage PVE/API2/Disks/ZFS.pm detail (zpool status -P as a tree; the pool is the first level)."""
    n, name = _node(call), call.params["name"]
    pool = next((p for p in n.zfs if p.get("name") == name), None)
    if pool is None:
        raise ApiError(500, f"cannot open '{name}': no such pool")
    return nodehealth.zfs_detail(n.health, pool)


@route("GET", "/nodes/{node}/rrddata")
def rrddata(call: Call) -> list[dict[str, Any]]:
    """pve-manager PVE/API2/Nodes.pm rrddata; PVE 9's node RRD adds the PSI pressure columns. Only the
    day is modelled: every timeframe answers the day's points."""
    c, n = call.cluster, _node(call)
    base = {
        "maxcpu": n.cpus,
        "loadavg": n.loadavg[0],
        "memtotal": n.memory_total,
        "memused": c.node_mem_used(n.name),
        "roottotal": n.rootfs_total,
        "rootused": n.rootfs_used,
        "swaptotal": n.swap_total,
        "swapused": n.swap_used,
    }
    if major(c.version) >= 9:  # pvestatd's pve-node-9.0 columns (ProcFSTools read_meminfo)
        base.update(memavailable=n.memory_total - base["memused"], arcsize=n.zfs_arc)
    return nodehealth.rrd_day(n.health, c.clock.now(), major(c.version) >= 9, base)
