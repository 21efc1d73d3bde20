"""Rendering of state objects into PVE's response rows (shared by several endpoints)."""

from __future__ import annotations

import hashlib
import re
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
    if running:  # vmstatus: the guest's process (qemu-server's pid file, pve-container find_lxc_pid)
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


# the QEMU each release ships (pve-qemu-kvm): what a VM started now runs
QEMU_OF_RELEASE = {8: "9.2.0", 9: "10.1.2"}
_SERIAL = ("serial",)


def status_fields(cluster: Cluster, g: Guest, full: bool) -> dict[str, Any]:
    """What qemu-server QemuServer.pm vmstatus and pve-container LXC.pm vmstatus add beyond the resource row
    (the node's guest list; with ``full``, a VM's status/current): a CT's swap, the pressure stall averages of a
    running guest (PVE 9, cgroup v2 ``*.pressure``), a VM's serial flag and balloon settings, and for a running
    VM's full status the QMP answers (status, balloon, block and NIC statistics, machine and QEMU versions)."""
    node = cluster.nodes[g.node]
    running = g.status == "running" and node.online
    major = int(cluster.version.split(".")[0]) if cluster.version[:1].isdigit() else 9
    out: dict[str, Any] = {}
    if g.type == "lxc":
        out["swap"] = int(g.maxmem * 0.02) if running and "swap" in g.config else 0
    elif any(k.startswith("serial") and k[6:].isdecimal() for k in g.config):
        out["serial"] = 1
    if g.type == "qemu" and g.config.get("balloon") not in (None, "0"):
        out["balloon_min"] = int(str(g.config["balloon"])) * 1024**2
        out["shares"] = int(str(g.config.get("shares", 1000)))
    if running and major >= 9:
        for kind, value in (("cpu", 0.12), ("io", 0.03), ("memory", 0.0)):
            out[f"pressure{kind}some"] = value
            out[f"pressure{kind}full"] = value / 2
    if full and g.type == "qemu" and not running:
        out["qmpstatus"] = "stopped"  # vmstatus: a VM without a QMP answer takes its status
    if not (full and running and g.type == "qemu"):
        return out
    out["qmpstatus"] = g.qmpstatus or "running"
    mem = int(g.maxmem * g.mem_fraction)
    if g.config.get("balloon") != "0":
        out["balloon"] = g.maxmem
        out["freemem"] = g.maxmem - mem
        out["ballooninfo"] = {
            "actual": g.maxmem, "max_mem": g.maxmem, "total_mem": g.maxmem - 64 * 1024**2, "free_mem": g.maxmem - mem,
            "mem_swapped_in": 0, "mem_swapped_out": 0, "major_page_faults": 1020, "minor_page_faults": 640_000,
            "last_update": int(cluster.clock.now()) - 5,
        }  # fmt: skip
    out["blockstat"] = {
        key: {"rd_bytes": 52_428_800, "wr_bytes": 20_971_520, "rd_operations": 1200, "wr_operations": 800}
        for key, _volid, opts in g.volumes()
        if not key.startswith("unused") and opts.get("media") != "cdrom"
    }
    out["nics"] = {
        f"tap{g.vmid}i{k[3:]}": {"netin": 1_234_567, "netout": 987_654}
        for k in g.config
        if k.startswith("net") and k[3:].isdecimal()
    }
    out["proxmox-support"] = {"pbs-dirty-bitmap": True, "query-bitmap-info": True, "pbs-library-version": "1.5.2"}
    out["running-qemu"] = g.running_qemu or QEMU_OF_RELEASE.get(major, "10.1.2")
    out["running-machine"] = running_machine(g, out["running-qemu"])
    return out


def running_cpu(g: Guest) -> str:
    """CPUConfig.pm get_cpu_from_running_vm: the ``-cpu`` argument the VM was started with (the model, KVM's
    paravirtual flags, the config's own flags)."""
    spec = str(g.config.get("cpu", "x86-64-v2-AES"))
    model, _, rest = spec.partition(",")
    model = model.removeprefix("cputype=")
    flags = [f for opt in rest.split(",") if opt.startswith("flags=") for f in opt[6:].split(";") if f]
    head = [model] if model == "host" else [model, "enforce"]
    return ",".join(head + sorted({"+kvm_pv_eoi", "+kvm_pv_unhalt", *flags}))


def vmstate_storage(cluster: Cluster, g: Guest) -> str:
    """QemuConfig.pm find_vmstate_storage: vmstatestorage, else a shared storage the VM uses, else a local one,
    else 'local'."""
    if g.config.get("vmstatestorage"):
        return str(g.config["vmstatestorage"])
    shared = local = None
    for key, volid, _opts in g.volumes():
        sid = volid.split(":", 1)[0]
        s = cluster.storages.get(sid)
        if s is None or key.startswith("unused"):
            continue
        if s.shared and shared is None:
            shared = sid
        elif not s.shared and (local is None or local == "local"):
            local = sid
    return shared or local or "local"


def snapshot_section(cluster: Cluster, g: Guest, name: str) -> dict[str, str]:
    """A snapshot's section of the guest config as parsed (every value a string): its config, description,
    parent, snaptime, and for a VM snapshot with RAM what QemuConfig.pm __snapshot_save_vmstate adds: the
    state volume, the machine and -cpu it ran with, and (qemu-server 9) the VirtIO NICs' host_mtu."""
    snap = g.snapshots[name]
    out = {k: str(v) for k, v in snap.config.items()}
    if snap.description:
        out["description"] = snap.description
    if snap.parent:
        out["parent"] = snap.parent
    out["snaptime"] = str(snap.snaptime)
    if snap.vmstate and g.type == "qemu":
        sid = vmstate_storage(cluster, g)
        s = cluster.storages.get(sid)
        raw = ".raw" if s is not None and s.type in ("dir", "nfs", "cifs", "cephfs", "glusterfs", "btrfs") else ""
        out["vmstate"] = f"{sid}:vm-{g.vmid}-state-{name}{raw}"
        major = int(cluster.version.split(".")[0])
        out["runningmachine"] = running_machine(g, g.running_qemu or QEMU_OF_RELEASE.get(major, "10.1.2"))
        out["runningcpu"] = running_cpu(g)
        nets = sorted(k for k, v in snap.config.items() if re.fullmatch(r"net\d+", k) and str(v).startswith("virtio"))
        if major >= 9 and nets:
            out["running-nets-host-mtu"] = ",".join(f"{k}=0" for k in nets)
    return out


def running_machine(g: Guest, qemu: str) -> str:
    """QemuServer/Machine.pm current_from_query_machines: the machine the VM runs, its version pinned in the
    config or else that of the QEMU it was started with (not the newest installed), with PVE's revision."""
    if g.running_machine:
        return g.running_machine
    machine = str(g.config.get("machine", "")).split(",")[0]
    kind = "q35" if "q35" in machine else "i440fx"
    version = machine.rsplit("-", 1)[-1] if machine.count("-") >= 2 else ".".join(qemu.split(".")[:2])
    base, _, revision = version.partition("+")
    return f"pc-{kind}-{base}+{revision or 'pve0'}"  # a pinned PVE revision (+pve1) is kept


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
