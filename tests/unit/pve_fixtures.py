"""Builders for payloads shaped exactly like PVE's API responses (field names, units, 0/1 booleans).

Shapes follow the PVE 9.1 schema (and real clusters where they differ: e.g. CT vmids as strings in
/nodes/{node}/lxc). Every builder returns plain dicts, the way proxmoxer hands them over.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.data import ClusterData

NOW = 1_800_000_000.0  # fixed clock for every unit test (2027-01-15)
GiB = 1024**3
MiB = 1024**2
HOUR = 3600
DAY = 86400


def cluster_status(nodes: dict[str, bool], quorate: bool = True, name: str = "lab") -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"type": "cluster", "id": "cluster", "name": name, "nodes": len(nodes), "quorate": int(quorate), "version": 12}
    ]
    for i, (node, online) in enumerate(nodes.items(), start=1):
        rows.append(
            {
                "type": "node",
                "id": f"node/{node}",
                "name": node,
                "nodeid": i,
                "ip": f"10.0.0.{i}",
                "online": int(online),
                "local": int(i == 1),
                "level": "",
            }
        )
    return rows


def node_row(
    name: str, online: bool = True, maxmem: int = 128 * GiB, mem: int = 40 * GiB, maxcpu: int = 32
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"node/{name}",
        "type": "node",
        "node": name,
        "status": "online" if online else "offline",
        "level": "",
        "cgroup-mode": 2,
    }
    if online:
        row.update(
            {
                "maxmem": maxmem,
                "mem": mem,
                "maxcpu": maxcpu,
                "cpu": 0.12,
                "uptime": 300_000,
                "maxdisk": 100 * GiB,
                "disk": 12 * GiB,
            }
        )
    return row


def guest_row(
    vmid: int,
    node: str,
    gtype: str = "qemu",
    status: str = "running",
    name: str | None = None,
    memory_mib: int = 4096,
    cpus: int = 2,
    template: bool = False,
    lock: str | None = None,
    hastate: str | None = None,
    pool: str | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"{gtype}/{vmid}",
        "type": gtype,
        "vmid": vmid,
        "node": node,
        "status": status,
        "name": name or f"guest{vmid}",
        "maxmem": memory_mib * MiB,
        "maxcpu": cpus,
        "maxdisk": 32 * GiB,
        "disk": 0,
        "template": int(template),
        "mem": memory_mib * MiB // 2 if status == "running" else 0,
        "cpu": 0.05 if status == "running" else 0,
        "uptime": 1000 if status == "running" else 0,
    }
    if lock:
        row["lock"] = lock
    if hastate:
        row["hastate"] = hastate
    if pool:
        row["pool"] = pool
    return row


def pool_row(pool: str) -> dict[str, Any]:
    """A ``type=pool`` row of /cluster/resources (present when the token has Pool.Audit on the pool)."""
    return {"id": f"/pool/{pool}", "type": "pool", "pool": pool, "status": "online"}


def vzdump_defaults(storage: str, prune: str | None = "keep-all=1", **extra: Any) -> dict[str, Any]:
    """GET /nodes/{node}/vzdump/defaults?storage=: /etc/vzdump.conf over schema defaults, storage prune over both."""
    row: dict[str, Any] = {"storage": storage, "mode": "snapshot", "compress": "0", "remove": 1, **extra}
    if prune is not None:
        row["prune-backups"] = prune
    return row


def qemu_config(name: str, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": name,
        "memory": "4096",
        "cores": 2,
        "cpu": "x86-64-v2-AES",
        "scsi0": "ceph-vm:vm-100-disk-0,size=32G",
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        "onboot": 1,
        "digest": "0" * 40,
    }
    cfg.update(extra)
    return {k: v for k, v in cfg.items() if v is not None}


def lxc_config(hostname: str, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "hostname": hostname,
        "memory": 1024,
        "swap": 512,
        "cores": 1,
        "rootfs": "ceph-vm:vm-200-disk-0,size=8G",
        "unprivileged": 1,
        "onboot": 1,
        "digest": "1" * 40,
    }
    cfg.update(extra)
    return {k: v for k, v in cfg.items() if v is not None}


def storage_cfg(sid: str, stype: str, content: str = "images,rootdir", **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"storage": sid, "type": stype, "content": content, "digest": "a" * 40}
    row.update(extra)
    return row


def node_storage_row(
    sid: str,
    stype: str,
    total: int,
    used: int,
    active: int = 1,
    enabled: int = 1,
    shared: int = 0,
    content: str = "images,rootdir",
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "storage": sid,
        "type": stype,
        "content": content,
        "active": active,
        "enabled": enabled,
        "shared": shared,
        "total": total,
        "used": used,
        "avail": max(total - used, 0),
    }
    if total:  # pve-storage API2/Storage/Status.pm index: used_fraction only with a total
        row["used_fraction"] = used / total
    return row


def backup_row(
    vmid: int, storage: str, age: float, verification: str | None = None, pbs: bool = True, gtype: str = "qemu"
) -> dict[str, Any]:
    ctime = int(NOW - age)
    row: dict[str, Any] = {
        "volid": f"{storage}:backup/vm/{vmid}/{ctime}",
        "content": "backup",
        "ctime": ctime,
        "vmid": vmid,
        "size": 10 * GiB,
        "format": "pbs-vm" if pbs else "vma.zst",
        "subtype": gtype,
        "protected": 0,
        "storage": storage,
    }
    if verification is not None:
        row["verification"] = {"state": verification, "upid": "UPID:pbs:00000001:00000001:00000001:verify::root@pam:"}
    return row


def task(
    node: str, ttype: str, tid: str, age: float, status: str | None = "OK", duration: float = 60, user: str = "root@pam"
) -> dict[str, Any]:
    start = int(NOW - age)
    row: dict[str, Any] = {
        "upid": f"UPID:{node}:0000{start % 65536:04X}:00000001:{start:08X}:{ttype}:{tid}:{user}:",
        "node": node,
        "pid": 1,
        "pstart": 1,
        "starttime": start,
        "type": ttype,
        "id": tid,
        "user": user,
    }
    if status is not None:  # /nodes/{node}/tasks sends a running task with status RUNNING (Tasks.pm node_tasks)
        row["status"] = status
    if status not in (None, "RUNNING"):
        row["endtime"] = int(start + duration)
    return row


def data(**kw: Any) -> ClusterData:
    return ClusterData(now=NOW, **kw)
