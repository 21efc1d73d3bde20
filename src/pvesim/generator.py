"""Synthetic large clusters for benchmarks: ``pvesim generate --nodes 20 --guests 2000 --seed 1``.

Deterministic for a seed. Most guests live on shared Ceph storage and are backed up nightly;
a small, realistic share carries the things diagnostics look for (local disks, passthrough,
``cpu: host``, HA, stale backups, stuck locks, a few nodes with a health problem). ``concentrate``
puts that many guests on the first node, for evacuation benchmarks.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from typing import Any

ROLES = [
    "web",
    "api",
    "db",
    "cache",
    "queue",
    "worker",
    "build",
    "mon",
    "log",
    "proxy",
    "auth",
    "search",
    "mail",
    "dns",
    "vpn",
    "git",
    "ci",
    "etl",
    "ml",
    "app",
]
TEAMS = ["core", "pay", "data", "ops", "dev", "edge", "crm", "erp"]


def generate(
    nodes: int = 20,
    guests: int = 2000,
    seed: int = 1,
    concentrate: int = 0,
    node_memory: str = "768G",
    version: str = "9.1.2",
) -> dict[str, Any]:
    rng = random.Random(seed)
    hygiene = random.Random(seed * 7919 + 1)  # config hygiene draws: the draws above stay as they were
    names = [f"pve{i:02d}" for i in range(1, nodes + 1)]
    data: dict[str, Any] = {
        "name": f"generated-{nodes}n-{guests}g-s{seed}",
        "version": version,
        "speed": 50,
        "options": {"ha": {"shutdown_policy": "conditional"}, "max_workers": 4},
        "nodes": [
            {
                "name": n,
                "cpus": 128,
                "memory": node_memory,
                "memory_used": "16G",
                "cpu_model": "AMD EPYC 9354 32-Core Processor",
                "repositories": {"no-subscription": True},
                "certificates": [
                    {"filename": "pve-root-ca.pem", "expires_in": "3000d"},
                    {"filename": "pve-ssl.pem", "expires_in": "600d"},
                ],
            }
            for n in names
        ],
        "storages": [
            {"id": "local", "type": "dir", "content": ["iso", "vztmpl", "backup"], "total": "200G", "used": "40G"},
            {"id": "local-lvm", "type": "lvmthin", "content": ["images", "rootdir"], "total": "4T", "used": "1T"},
            {"id": "ceph-vm", "type": "rbd", "content": ["images", "rootdir"], "total": "500T", "used": "180T"},
            {
                "id": "pbs",
                "type": "pbs",
                "content": ["backup"],
                "total": "1000T",
                "used": "300T",
                "prune-backups": "keep-daily=7",
            },
        ],
        "guests": [],
        "backups": [],
        "ha": {"master": names[0], "resources": []},
        "backup_jobs": [
            {
                "id": "backup-nightly",
                "type": "vzdump",
                "schedule": "21:00",
                "storage": "pbs",
                "all": 1,
                "mode": "snapshot",
                "enabled": 1,
            }
        ],
        "tasks": [{"node": n, "type": "vzdump", "id": "", "age": "15h", "duration": "40m"} for n in names],
    }
    excluded = []
    for i in range(guests):
        vmid = 1000 + i
        if concentrate:  # exactly `concentrate` guests on the first node, the rest spread over the others
            node = names[0] if i < concentrate else names[1 + (i - concentrate) % max(nodes - 1, 1)]
        else:
            node = names[i % nodes]
        is_ct = rng.random() < 0.25
        role = rng.choice(ROLES)
        name = f"{role}-{rng.choice(TEAMS)}-{i:04d}"
        memory = (
            rng.choice([512, 1024, 1024, 2048, 2048, 4096])
            if concentrate
            else rng.choice([1024, 2048, 4096, 4096, 8192, 16384])
        )
        running = rng.random() < 0.9
        local = rng.random() < 0.06
        storage = "local-lvm" if local else "ceph-vm"
        disk = rng.choice([8, 16, 32, 64, 128])
        cfg: dict[str, Any]
        if is_ct:
            cfg = {
                "hostname": name,
                "memory": memory,
                "swap": 512,
                "cores": rng.choice([1, 2, 4]),
                "rootfs": f"{storage}:vm-{vmid}-disk-0,size={disk}G",
                "unprivileged": 1,
                "onboot": 1,
                "net0": f"name=eth0,bridge=vmbr0,hwaddr=BC:24:11:{i >> 16 & 255:02X}:{i >> 8 & 255:02X}:"
                f"{i & 255:02X},ip=dhcp",
            }
        else:
            cfg = {
                "name": name,
                "memory": memory,
                "cores": rng.choice([1, 2, 4, 8]),
                "cpu": "host" if rng.random() < 0.03 else "x86-64-v2-AES",
                "scsi0": f"{storage}:vm-{vmid}-disk-0,size={disk}G",
                "net0": f"virtio=BC:24:12:{i >> 16 & 255:02X}:{i >> 8 & 255:02X}:{i & 255:02X},bridge=vmbr0",
                "agent": "1",
                "onboot": 1,
            }
            if rng.random() < 0.015:
                cfg["hostpci0"] = f"0000:{rng.randint(16, 200):02x}:00.0,pcie=1"
        _hygiene(cfg, hygiene, vmid, storage, is_ct)
        _as_created(cfg, vmid, seed, is_ct)
        if rng.random() < 0.005:
            cfg["lock"] = "backup"
        guest = {
            "vmid": vmid,
            "node": node,
            "type": "lxc" if is_ct else "qemu",
            "status": "running" if running else "stopped",
            "config": cfg,
            "cpu": round(rng.uniform(0.01, 0.6), 3),
            "mem": round(rng.uniform(0.3, 0.9), 2),
        }
        if running and hygiene.random() < 0.02:  # a change waiting for the next restart
            guest["pending"] = {"memory": memory * 2}
        data["guests"].append(guest)
        if rng.random() < 0.04:
            data["ha"]["resources"].append({"sid": f"{'ct' if is_ct else 'vm'}:{vmid}", "state": "started"})
        roll = rng.random()
        if roll < 0.02:
            excluded.append(vmid)
        elif roll < 0.05:
            data["backups"].append(
                {
                    "vmid": vmid,
                    "storage": "pbs",
                    "age": f"{rng.randint(3, 20)}d",
                    "size": f"{disk // 2 + 1}G",
                    "verification": "ok",
                }
            )
        else:
            data["backups"].append(
                {
                    "vmid": vmid,
                    "storage": "pbs",
                    "age": f"{rng.randint(10, 20)}h",
                    "size": f"{disk // 2 + 1}G",
                    "verification": "failed" if rng.random() < 0.01 else "ok",
                }
            )
    if excluded:
        data["backup_jobs"][0]["exclude"] = ",".join(map(str, excluded))
    health_rng = random.Random(seed * 7919 + 1)  # its own stream: the guests of a seed stay the same
    for node in data["nodes"]:
        health = node_health(health_rng)
        if health:
            node["health"] = health
    return data


def _as_created(cfg: dict[str, Any], vmid: int, seed: int, is_ct: bool) -> None:
    """The keys PVE and its GUI wizard write into every new guest's config, which no check reads but every
    config answer carries. Derived from the vmid, so no random draw moves.

    - qemu-server src/PVE/API2/Qemu.pm create_vm: meta (MetaInfo new_meta_info_string), boot
      (get_default_bootdevices: first disk, first CD-ROM, first NIC), smbios1 uuid, vmgenid.
    - pve-manager www/manager6/qemu: the wizard's CD-ROM drive (ide2), ProcessorEdit sockets and numa
      (uncheckedValue 0), HDEdit iothread on SCSI behind virtio-scsi-single, NetworkEdit firewall checked.
    - pve-container: src/PVE/LXC/Setup.pm sets arch, src/PVE/LXC/Create.pm ostype, Config.pm
      parse_lxc_network type=veth; www/manager6/lxc/Network.js firewall checked in the wizard.
    """
    digest = hashlib.sha256(f"{seed}:{vmid}".encode()).digest()
    ctime = 1_700_000_000 + int.from_bytes(digest[:3], "big")  # created at some point in late 2023 / 2024
    cfg["net0"] = cfg["net0"].replace(",bridge=vmbr0", ",bridge=vmbr0,firewall=1")
    if is_ct:
        cfg["arch"] = "amd64"
        cfg["ostype"] = "debian"
        cfg["net0"] += ",type=veth"
        return
    disk, options = cfg["scsi0"].split(",", 1)
    cfg["scsi0"] = f"{disk},iothread=1,{options}"
    cfg["ide2"] = "none,media=cdrom"
    cfg["boot"] = "order=scsi0;ide2;net0"
    cfg["meta"] = f"creation-qemu=9.2.0,ctime={ctime}"
    cfg["numa"] = 0
    cfg["sockets"] = 1
    cfg["smbios1"] = f"uuid={uuid.UUID(bytes=digest[:16], version=4)}"
    cfg["vmgenid"] = str(uuid.UUID(bytes=digest[16:], version=4))


def _hygiene(cfg: dict[str, Any], rng: random.Random, vmid: int, storage: str, is_ct: bool) -> None:
    """What the GUI sets on a new guest, and the small share of config drift real clusters carry."""
    if is_ct:
        if rng.random() < 0.05:
            cfg.pop("unprivileged")
        elif rng.random() < 0.1:
            cfg["features"] = "nesting=1" if rng.random() < 0.3 else "keyctl=1,nesting=1"
    else:
        cfg["ostype"] = "win11" if rng.random() < 0.05 else "l26"
        cfg["scsihw"] = "virtio-scsi-single"
        if cfg["ostype"] == "win11":  # PVE pins a Windows VM's machine version when it creates it
            cfg["machine"] = "pc-q35-9.2+pve1"
            cfg["bios"] = "ovmf"
            cfg["efidisk0"] = f"{storage}:vm-{vmid}-disk-1,efitype=4m,pre-enrolled-keys=1,size=4M"
            cfg["tpmstate0"] = f"{storage}:vm-{vmid}-disk-2,size=4M,version=v2.0"
        if rng.random() < 0.01:
            cfg["net0"] = cfg["net0"].replace("virtio=", "e1000=")
    if rng.random() < 0.03:
        cfg["unused0"] = f"{storage}:vm-{vmid}-disk-9"
    if rng.random() < 0.2:
        cfg["protection"] = 1


def node_health(rng: random.Random) -> dict[str, Any]:
    """A node's health problems at the rates a well-run fleet shows (pvesim/nodehealth.py knobs): most
    nodes have none; a reboot after a kernel update is the commonest, a full thin-pool metadata the rarest."""
    health: dict[str, Any] = {}
    if rng.random() < 0.08:
        health["kernel_installed"] = "6.14.11-5-pve"
    if rng.random() < 0.03:
        health["services"] = {rng.choice(["chrony", "postfix", "pvescheduler"]): "failed"}
    if rng.random() < 0.02:
        health["network"] = {"eno2": {"active": 0}}
    if rng.random() < 0.01:
        health["clock_offset"] = rng.choice([-90, 75, 240])
    if rng.random() < 0.01:
        health["lvmthin"] = [{"vg": "pve", "lv": "data", "metadata_pct": rng.choice([91, 96])}]
    return health
