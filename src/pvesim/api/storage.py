"""Per-node storage endpoints: list, status and content (guest disks, backups, ISOs)."""

from __future__ import annotations

from typing import Any

from pvesim import pveconfig, replication
from pvesim.api import render
from pvesim.api.registry import ApiError, Call, b, route
from pvesim.state import Storage


def _readable(call: Call, sid: str) -> bool:
    return call.can(f"/storage/{sid}", "Datastore.Audit") or call.can(f"/storage/{sid}", "Datastore.AllocateSpace")


def _info(call: Call) -> dict[str, dict[str, Any]]:
    """pve-storage src/PVE/Storage.pm storage_info(cfg, content) on the called node: with ``content``, only the
    storages enabled on the node that carry one of its types (``next if !$want_ctype || !$storage_enabled``)."""
    c = call.cluster
    node = call.params["node"]
    want = set(str(call.params["content"]).split(",")) if "content" in call.params else None
    return {
        s.storage: render.storage_info(c, s, node)
        for s in c.storages.values()
        if want is None or (want & set(s.content) and s.available_on(node))
    }


@route("GET", "/nodes/{node}/storage")
def node_storage(call: Call) -> list[dict[str, Any]]:
    """pve-storage src/PVE/API2/Storage/Status.pm index."""
    c = call.cluster
    node = call.params["node"]
    info = _info(call)
    sid = call.params.get("storage")
    if sid and sid not in info:
        raise ApiError(400, "Parameter verification failed.", {"storage": "No such storage."})
    target = call.params.get("target")
    if target in (node, "localhost"):
        target = None
    rows = []
    for s in sorted(c.storages.values(), key=lambda s: s.storage):
        data = info.get(s.storage)
        if data is None or not _readable(call, s.storage) or (sid and sid != s.storage):
            continue
        if call.flag("enabled") and s.disable:
            continue
        # the clone dialog: shared storages whose nodes list holds both nodes (storage_check_node, not disable)
        if target and not (s.shared and all(s.nodes is None or n in s.nodes for n in (node, target))):
            continue
        row = {"storage": s.storage, **data}
        if data["total"]:
            row["used_fraction"] = data["used"] / data["total"]
        if call.flag("format"):  # Storage.pm storage_info with includeformat: the plugin's get_formats
            valid, default = _formats(s, c.version)
            row["formats"] = {"default": default, "supported": valid}
            row["format"] = [dict.fromkeys(valid, 1), default]  # the deprecated form, still sent
            if s.type in ("iscsi", "iscsidirect"):  # plugindata select_existing
                row["select_existing"] = 1
        rows.append(row)
    return rows


# pve-storage plugindata ``format``: the image formats a storage type takes and its default (raw for types
# without); PVE 9's LVM plugin added qcow2 (volume chains)
_FORMATS = {
    "dir": ["qcow2", "raw", "subvol", "vmdk"],
    "nfs": ["qcow2", "raw", "vmdk"],
    "cifs": ["qcow2", "raw", "vmdk"],
    "glusterfs": ["qcow2", "raw", "vmdk"],
    "esxi": ["qcow2", "raw", "vmdk"],
    "btrfs": ["raw", "subvol"],
    "zfspool": ["raw", "subvol"],
}


def _formats(s: Storage, version: str) -> tuple[list[str], str]:
    valid = _FORMATS.get(s.type, ["raw"])
    if s.type == "lvm" and int(version.split(".", maxsplit=1)[0]) >= 9:
        valid = ["qcow2", "raw"]
    return valid, str(s.options.get("format") or "raw")


def _storage(call: Call) -> Storage:
    s = call.cluster.storages.get(call.params["storage"])
    node = call.params["node"]
    if s is None:
        raise ApiError(500, f"storage '{call.params['storage']}' does not exist")
    if s.nodes is not None and node not in s.nodes:
        raise ApiError(500, f"storage '{s.storage}' is not available on node '{node}'")
    return s


@route("GET", "/nodes/{node}/storage/{storage}/status")
def storage_status(call: Call) -> dict[str, Any]:
    """pve-storage src/PVE/API2/Storage/Status.pm read_status: the storage_info entry, also for a storage not
    enabled on the node (enabled 0, zeros); 400 for a storage storage.cfg does not define."""
    s = call.cluster.storages.get(call.params["storage"])
    if s is None:
        raise ApiError(400, "Parameter verification failed.", {"storage": "No such storage."})
    return render.storage_info(call.cluster, s, call.params["node"])


def _disk_rows(call: Call, s: Storage, node: str) -> list[dict[str, Any]]:
    rows = [] if s.shared else _replica_rows(call, s, node)
    for g in call.cluster.guests.values():
        if not s.shared and g.node != node:
            continue
        for _key, volid, opts in g.volumes():
            if pveconfig.storage_of(volid) != s.storage or opts.get("media") == "cdrom":
                continue
            size = pveconfig.parse_size(opts["size"]) if "size" in opts else 4 * 1024**2
            content = "rootdir" if g.type == "lxc" else "images"
            fmt = (
                "qcow2"
                if volid.endswith(".qcow2")
                else ("subvol" if content == "rootdir" and s.type == "zfspool" else "raw")
            )
            row: dict[str, Any] = {
                "volid": volid,
                "content": content,
                "format": fmt,
                "size": size,
                "vmid": g.vmid,
                "used": size // 2,
                "ctime": int(call.cluster.clock.now()) - 86400 * 90,
            }
            base = volid.split(":", 1)[-1].split("/", 1)
            if len(base) == 2 and base[0].startswith(("base-", "basevol-")):  # a linked clone: its base image
                snap_based = s.type in ("zfspool", "rbd")  # zfs/rbd clone from the base's @__base__ snapshot
                row["parent"] = base[0] + ("@__base__" if snap_based else "")
            rows.append(row)
    return rows


def _replica_rows(call: Call, s: Storage, node: str) -> list[dict[str, Any]]:
    """The replicas pvesr keeps on a replication target (pvesim/replication.py): the source's volume ids, the
    guest's vmid, the size of the last synced state."""
    rows = []
    for g, volid, opts, synced in replication.replicas_on(call.cluster, node, s.storage):
        size = pveconfig.parse_size(opts["size"]) if "size" in opts else 4 * 1024**2
        content = "rootdir" if g.type == "lxc" else "images"
        rows.append(
            {
                "volid": volid,
                "content": content,
                "format": "subvol" if content == "rootdir" else "raw",
                "size": size,
                "vmid": g.vmid,
                "used": size // 2,
                "ctime": synced,
            }
        )
    return rows


def _may_see(call: Call, sid: str, row: dict[str, Any]) -> bool:
    """Whether the content index shows this volume to the caller (pve-storage src/PVE/API2/Storage/Content.pm
    index skips what src/PVE/Storage.pm check_volume_access refuses)."""
    if call.can(f"/storage/{sid}", "Datastore.Allocate"):
        return True
    content, owner = row["content"], row.get("vmid")
    if content in ("iso", "vztmpl", "import"):
        return _readable(call, sid)
    if content == "backup" and owner:
        return call.can(f"/storage/{sid}", "Datastore.AllocateSpace") and call.can(f"/vms/{owner}", "VM.Backup")
    if content in ("images", "rootdir") and owner:
        return call.can(f"/storage/{sid}", "Datastore.Audit") and call.can(f"/vms/{owner}", "VM.Config.Disk")
    return False  # PVE: "missing privileges to access $volid"


@route("GET", "/nodes/{node}/storage/{storage}/content")
def storage_content(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    s = _storage(call)
    node = call.params["node"]
    if not c.nodes[node].online or node in s.inactive_on:
        raise ApiError(500, f"storage '{s.storage}' is not online")
    # the filters first: the health check asks a backup store for its backups, and building every guest
    # disk's row only to drop it held pvesim's one event loop (issue 17, design record 261204-41)
    want = call.params.get("content")
    vmid = int(call.params["vmid"]) if "vmid" in call.params else None
    rows = [
        r
        for r in (_disk_rows(call, s, node) if want in (None, "images", "rootdir") else [])
        if (want is None or r["content"] == want) and (vmid is None or r["vmid"] == vmid)
    ]
    for v in c.volumes:
        if v.storage != s.storage or (not s.shared and v.node != node):
            continue
        if (want is not None and v.content != want) or (vmid is not None and v.vmid != vmid):
            continue
        row: dict[str, Any] = {
            "volid": v.volid,
            "content": v.content,
            "format": v.format,
            "size": v.size,
            "ctime": v.ctime,
        }
        if v.vmid is not None:
            row["vmid"] = v.vmid
        if v.content == "backup":
            row["subtype"] = v.subtype or "qemu"
            if v.notes is not None:
                row["notes"] = v.notes.split("\n", 1)[0]
            row["protected"] = b(v.protected)
            if v.verification is not None:
                row["verification"] = dict(v.verification)
            if v.encrypted is not None:
                row["encrypted"] = v.encrypted
        rows.append(row)
    rows = [r for r in rows if _may_see(call, s.storage, r)]
    return sorted(rows, key=lambda r: r["volid"])
