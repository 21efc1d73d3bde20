"""A node's disks and the storage scans (pve-storage src/PVE/API2/Disks.pm, Disks/LVM.pm, Disks/Directory.pm,
API2/Storage/Scan.pm; Diskmanage.pm get_disks)."""

from __future__ import annotations

import hashlib
from typing import Any

from pvesim import disks
from pvesim.api.registry import ApiError, Call, route
from pvesim.state import Node


def _node(call: Call) -> Node:
    return call.cluster.nodes[call.params["node"]]


@route("GET", "/nodes/{node}/disks/list")
def disk_list(call: Call) -> list[dict[str, Any]]:
    """Disks.pm list: get_disks sorted by name; ``type=unused`` keeps disks without a use, ``journal_disks``
    those that could hold a DB/WAL (no OSD; unused, GPT-partitioned or LVM); ``include-partitions`` adds them."""
    kind = call.params.get("type", "")
    rows: list[dict[str, Any]] = []
    for d in disks.node_disks(call.cluster, _node(call)):
        row = disks.list_row(d)
        if kind == "journal_disks":
            if row["osdid"] >= 0 or row.get("used") not in (None, "partitions", "LVM"):
                continue
        elif kind == "unused" and row.get("used"):
            continue
        rows.append(row)
        if call.flag("include-partitions"):
            rows += [dict(p) for p in d.partitions]
    if call.flag("skipsmart"):
        for row in rows:
            if row.get("type") != "partition":
                row.update(health="UNKNOWN", wearout="N/A")
    return sorted(rows, key=lambda r: str(r["devpath"]).rsplit("/", 1)[-1])


def _vgs(call: Call) -> list[dict[str, Any]]:
    """The volume groups: 'pve' on the installation's third partition (an LVM install), a ceph-<uuid> group per
    OSD disk (ceph-volume's BlueStore LV), a group on each disk given to LVM."""
    out = []
    for d in disks.node_disks(call.cluster, _node(call)):
        dev = str(d.disk["devpath"])
        size = int(d.disk.get("size", 0))
        if d.use == "root" and d.pool is None:
            part = d.partitions[-1]
            out.append(("pve", str(part["devpath"]), int(part["size"]), int(part["size"]) // 8))
        elif d.use == "osd":
            fsid = hashlib.md5(dev.encode(), usedforsecurity=False).hexdigest()
            out.append((f"ceph-{fsid[:8]}-{fsid[8:12]}-{fsid[12:16]}-{fsid[16:20]}-{fsid[20:32]}", dev, size, 0))
        elif d.use == "lvm":
            out.append((str(d.disk.get("vg") or f"vg-{dev.rsplit('/', 1)[-1]}"), dev, size, size // 2))
    return [{"vg": vg, "pv": pv, "size": size, "free": free} for vg, pv, size, free in out]


@route("GET", "/nodes/{node}/disks/lvm")
def lvm(call: Call) -> dict[str, Any]:
    """Disks/LVM.pm index: a tree of volume groups (size, free) and their physical volumes."""
    children = [
        {
            "leaf": 0,
            "name": v["vg"],
            "size": v["size"],
            "free": v["free"],
            "children": [{"leaf": 1, "name": v["pv"], "size": v["size"], "free": v["free"]}],
        }
        for v in _vgs(call)
    ]
    return {"leaf": 0, "children": children}


@route("GET", "/nodes/{node}/disks/directory")
def directory(call: Call) -> list[dict[str, Any]]:
    """Disks/Directory.pm index: the systemd mount units /etc/systemd/system/mnt-pve-<name>.mount that the
    GUI's 'Create: Directory' writes, one per disk formatted there."""
    out = []
    for d in disks.node_disks(call.cluster, _node(call)):
        if d.use not in ("ext4", "xfs"):
            continue
        name = str(d.disk.get("name") or f"{d.use}-{str(d.disk['devpath']).rsplit('/', 1)[-1]}")
        uuid = hashlib.md5(str(d.disk["devpath"]).encode(), usedforsecurity=False).hexdigest()
        out.append(
            {
                "unitfile": f"/etc/systemd/system/mnt-pve-{name}.mount",
                "path": f"/mnt/pve/{name}",
                "device": f"/dev/disk/by-uuid/{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}",
                "type": d.use,
                "options": "defaults",
            }
        )
    return out


# ---------------------------------------------------------------- storage scans (API2/Storage/Scan.pm)


def _storages_of(call: Call, stype: str, key: str, value: str) -> list[Any]:
    return [s for s in call.cluster.storages.values() if s.type == stype and str(s.options.get(key, "")) == value]


@route("GET", "/nodes/{node}/scan/nfs")
def scan_nfs(call: Call) -> list[dict[str, str]]:
    """Scan.pm nfsscan (pve-storage scan_nfs: showmount --exports): the server's exports, known from the NFS
    storages that use it; any other server does not answer."""
    server = str(call.params["server"])
    found = _storages_of(call, "nfs", "server", server)
    if not found:
        raise ApiError(500, f"command '/sbin/showmount --no-headers --exports {server}' failed: exit code 1")
    return [{"path": str(s.options.get("export", "/")), "options": "10.0.0.0/24"} for s in found]


@route("GET", "/nodes/{node}/scan/cifs")
def scan_cifs(call: Call) -> list[dict[str, str]]:
    """Scan.pm cifsscan (smbclient -L): the server's shares, known from the CIFS storages that use it."""
    server = str(call.params["server"])
    found = _storages_of(call, "cifs", "server", server)
    if not found:
        raise ApiError(500, "Connection to server failed (Error NT_STATUS_HOST_UNREACHABLE)")
    return [{"share": str(s.options.get("share", "share")), "description": ""} for s in found]


@route("GET", "/nodes/{node}/scan/iscsi")
def scan_iscsi(call: Call) -> list[dict[str, str]]:
    """Scan.pm iscsiscan (iscsiadm --mode discovery): the portal's targets, known from the iSCSI storages."""
    portal = str(call.params["portal"])
    found = [
        s
        for s in call.cluster.storages.values()
        if s.type in ("iscsi", "iscsidirect") and s.options.get("portal") == portal
    ]
    if not found:
        raise ApiError(
            500,
            f"command '/usr/bin/iscsiadm --mode discovery --type sendtargets --portal {portal}' failed: exit code 4",
        )
    return [{"target": str(s.options.get("target", "")), "portal": f"{portal}:3260"} for s in found]


@route("GET", "/nodes/{node}/scan/glusterfs")
def scan_glusterfs(call: Call) -> list[dict[str, str]]:
    """Scan.pm glusterfsscan (PVE 8): the server's volumes, known from the GlusterFS storages."""
    server = str(call.params["server"])
    found = _storages_of(call, "glusterfs", "server", server)
    if not found:
        raise ApiError(500, f"command '/usr/sbin/gluster --remote-host={server} volume info' failed: exit code 1")
    return [{"volname": str(s.options.get("volume", ""))} for s in found]


@route("GET", "/nodes/{node}/scan/pbs")
def scan_pbs(call: Call) -> list[dict[str, Any]]:
    """Scan.pm pbsscan (PBSPlugin scan_datastores): the server's datastores, known from the PBS storages that
    use it; 'authentication failed' stands for any other server's refusal."""
    server = str(call.params["server"])
    found = _storages_of(call, "pbs", "server", server)
    if not found:
        raise ApiError(500, f"error fetching datastores - 500 Can't connect to {server}:8007 (Connection refused)")
    return [{"store": str(s.options.get("datastore", "")), "comment": ""} for s in found]


@route("GET", "/nodes/{node}/scan/lvm")
def scan_lvm(call: Call) -> list[dict[str, str]]:
    """Scan.pm lvmscan (LVMPlugin lvm_vgs): every volume group of the node."""
    return [{"vg": v["vg"]} for v in _vgs(call)]


@route("GET", "/nodes/{node}/scan/lvmthin")
def scan_lvmthin(call: Call) -> list[dict[str, str]]:
    """Scan.pm lvmthinscan (LvmThinPlugin list_thinpools): the thin pools of the volume group."""
    vg = str(call.params["vg"])
    return [{"lv": str(p["lv"])} for p in _node(call).health.lvmthin if p["vg"] == vg]


@route("GET", "/nodes/{node}/scan/zfs")
def scan_zfs(call: Call) -> list[dict[str, str]]:
    """Scan.pm zfsscan (ZFSPoolPlugin zfs_list_pools): every pool and dataset that holds no guest volume."""
    pools = [str(p["name"]) for p in _node(call).zfs]
    out = []
    for name in pools:
        out.append({"pool": name})
        if name == "rpool":
            out += [{"pool": "rpool/ROOT"}, {"pool": "rpool/data"}]
    return out
