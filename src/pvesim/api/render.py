"""Rendering of state objects into PVE's response rows (shared by several endpoints)."""

from __future__ import annotations

import hashlib
from typing import Any

from pvesim.api.registry import b
from pvesim.state import Cluster, Guest, Node, Storage, Task

HA_STATUS = {"started": "started", "stopped": "stopped", "disabled": "disabled", "ignored": "ignored"}


def guest_runtime(cluster: Cluster, g: Guest) -> dict[str, Any]:
    """Fields common to /cluster/resources, /nodes/{node}/qemu|lxc and status/current."""
    node = cluster.nodes[g.node]
    running = g.status == "running" and node.online
    row: dict[str, Any] = {
        "vmid": g.vmid,
        "name": g.name,
        "status": ("running" if running else "stopped") if node.online else "unknown",
        "maxmem": g.maxmem,
        "maxdisk": g.maxdisk(),
        "cpus": g.maxcpu,
        "uptime": _uptime(cluster, g, running),
        "cpu": round(g.cpu_usage, 4) if running else 0,
        "mem": int(g.maxmem * g.mem_fraction) if running else 0,
        "disk": 0,
        "netin": 1_234_567 * (g.vmid % 7 + 1) if running else 0,
        "netout": 987_654 * (g.vmid % 5 + 1) if running else 0,
        "diskread": 52_428_800 if running else 0,
        "diskwrite": 20_971_520 if running else 0,
    }
    if g.type == "qemu" and running:
        row["qmpstatus"] = g.qmpstatus or "running"
        row["pid"] = 10_000 + g.vmid
    if g.type == "qemu" and int(cluster.version.split(".")[0]) >= 9:
        # PVE 9: the VM's cgroup memory, 0 when stopped (qemu-server src/PVE/QemuServer.pm vmstatus; in
        # /cluster/resources from the pve-vm-9.0 RRD row, pve-manager PVE/API2Tools.pm extract_vm_stats)
        row["memhost"] = row["mem"]
    if g.type == "lxc":
        row["maxswap"] = int(g.config.get("swap", 512)) * 1024**2
    if g.template:
        row["template"] = 1
    if g.lock:
        row["lock"] = g.lock
    if "tags" in g.config:
        row["tags"] = g.config["tags"]
    return row


def _uptime(cluster: Cluster, g: Guest, running: bool) -> int:
    return int(cluster.clock.now() - g.started_at) if running and g.started_at else 0


def ha_state(cluster: Cluster, g: Guest) -> str | None:
    res = cluster.ha_resource_for(g)
    if res is None:
        return None
    return res.crm_state or HA_STATUS.get(res.state, res.state)


def guest_resource(cluster: Cluster, g: Guest) -> dict[str, Any]:
    """The guest's /cluster/resources row. Built again only when something it is built from changed:
    building 2,000 rows held pvesim's one event loop for 14 ms idle and 25-40 ms under load, and every
    request behind it waited (issue 17, design record 261204-41). The key holds every input of
    ``guest_runtime`` and ``ha_state`` but the clock, which only the uptime reads: a new input of either
    belongs in the key too (tests/unit/test_pvesim_resource_rows.py changes each one it knows)."""
    online = cluster.nodes[g.node].online
    key = (
        g.parsed(),
        g.status,
        g.node,
        online,
        g.qmpstatus,
        g.started_at,
        g.cpu_usage,
        g.mem_fraction,
        ha_state(cluster, g),
    )
    memo = g.resource_memo
    if memo is None or memo[0] != key:
        memo = g.resource_memo = (key, _guest_resource(cluster, g))
    row = dict(memo[1])
    row["uptime"] = _uptime(cluster, g, g.status == "running" and online)
    return row


def _guest_resource(cluster: Cluster, g: Guest) -> dict[str, Any]:
    row = guest_runtime(cluster, g)
    row.pop("cpus")
    row.update(
        {"id": f"{g.type}/{g.vmid}", "type": g.type, "node": g.node, "maxcpu": g.maxcpu, "template": b(g.template)}
    )
    hastate = ha_state(cluster, g)
    if hastate:
        row["hastate"] = hastate
    return row


def node_resource(cluster: Cluster, n: Node, mem_used: dict[str, int], stats: bool = True) -> dict[str, Any]:
    """``mem_used``: ``Cluster.mem_used_by_node()``, taken once for all the nodes of an answer. ``stats``: the
    caller has Sys.Audit on /nodes/<node>; without it the row keeps id, status and level and loses every figure
    (pve-manager PVE/API2Tools.pm extract_node_stats ``$exclude_stats``), but it is never left out."""
    row: dict[str, Any] = {
        "id": f"node/{n.name}",
        "type": "node",
        "node": n.name,
        "status": "online" if n.online else "offline",
        "level": n.level,
        "cgroup-mode": n.cgroup_mode,
    }
    if n.online and stats:
        row.update(
            {
                "maxcpu": n.cpus,
                "cpu": n.cpu_usage,
                "maxmem": n.memory_total,
                "mem": mem_used[n.name],
                "maxdisk": n.rootfs_total,
                "disk": n.rootfs_used,
                "uptime": n.uptime,
            }
        )
    return row


def storage_info(cluster: Cluster, s: Storage, node: str) -> dict[str, Any]:
    """The storage's entry in pve-storage src/PVE/Storage.pm storage_info on ``node``: every storage.cfg
    entry, with ``enabled`` = storage_check_enabled for that node (not disabled, the node in its nodes list),
    ``active`` and real figures only where it is enabled and could be activated; zeros otherwise."""
    enabled = s.available_on(node)
    row: dict[str, Any] = {
        "type": s.type,
        "total": 0,
        "avail": 0,
        "used": 0,
        "shared": b(s.shared),
        "content": ",".join(sorted(s.content)),
        "active": 0,
        "enabled": b(enabled),
    }
    if enabled and cluster.nodes[node].online and node not in s.inactive_on:
        total, used = s.capacity(node)
        row.update({"total": total, "avail": max(total - used, 0), "used": used, "active": 1})
    return row


def storage_resource(cluster: Cluster, s: Storage, node: str) -> dict[str, Any]:
    total, used = s.capacity(node)
    active = cluster.nodes[node].online and node not in s.inactive_on
    row: dict[str, Any] = {
        "id": f"storage/{node}/{s.storage}",
        "type": "storage",
        "storage": s.storage,
        "node": node,
        "status": "available" if active else "unknown",
        "plugintype": s.type,
        "shared": b(s.shared),
        "content": ",".join(sorted(s.content)),
    }
    if active:
        row.update({"disk": used, "maxdisk": total})
    return row


def task_identity(t: Task) -> dict[str, Any]:
    """The fields every task answer carries (task lists and a task's status)."""
    return {
        "upid": t.upid,
        "node": t.node,
        "pid": t.pid,
        "pstart": t.pstart,
        "starttime": t.starttime,
        "type": t.type,
        "id": t.id,
        "user": t.user,
    }


def task_row(t: Task) -> dict[str, Any]:
    row = task_identity(t)
    if not t.running:
        row["status"] = t.status
        row["endtime"] = t.endtime
    return row


def digest_of(obj: Any) -> str:
    return hashlib.sha1(repr(obj).encode()).hexdigest()
