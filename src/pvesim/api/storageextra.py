"""More storage reads (pve-storage src/PVE/API2/Storage/Content.pm info, PruneBackups.pm dryrun,
Status.pm import-metadata, FileRestore.pm list/download; Storage.pm prune_mark_backup_group)."""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from pvesim.api.registry import ApiError, Call, Download, route
from pvesim.api.storage import _disk_rows, _storage
from pvesim.state import Storage


def _volid(call: Call) -> str:
    """Content.pm $real_volume_id: a bare volume name takes the storage's id, a full one must name it."""
    storage, volume = call.params["storage"], str(call.params["volume"])
    if ":" in volume:
        sid = volume.split(":", 1)[0]
        if sid != storage:
            raise ApiError(400, "Parameter verification failed.", {"volume": "storage ID mismatch"})
        return volume
    return f"{storage}:{volume}"


def _path(s: Storage, volid: str, content: str, vmid: int | None) -> str:
    """Storage.pm path: where the volume lives on the node, by plugin."""
    name = volid.split(":", 1)[1]
    opts = s.options
    if s.type in ("dir", "nfs", "cifs", "cephfs", "glusterfs"):
        base = str(opts.get("path", f"/mnt/pve/{s.storage}"))
        sub = {"iso": "template/iso", "vztmpl": "template/cache", "backup": "dump", "import": "import"}
        if content in sub:
            return f"{base}/{sub[content]}/{name.rsplit('/', 1)[-1]}"
        return f"{base}/images/{vmid}/{name.rsplit('/', 1)[-1]}"
    if s.type in ("lvm", "lvmthin"):
        return f"/dev/{opts.get('vgname', 'pve')}/{name}"
    if s.type == "zfspool":
        return f"/dev/zvol/{opts.get('pool', 'rpool/data')}/{name}"
    if s.type == "rbd":
        pool = opts.get("pool", "rbd")
        return f"rbd:{pool}/{name}:conf=/etc/pve/ceph.conf:id=admin:keyring=/etc/pve/priv/ceph/{s.storage}.keyring"
    if s.type == "pbs":
        return (
            f"{opts.get('username', 'root@pam')}@{opts.get('server', 'localhost')}:{opts.get('datastore', '')}/{name}"
        )
    return f"/dev/disk/by-id/{name}"


@route("GET", "/nodes/{node}/storage/{storage}/content/{volume}")
def volume_info(call: Call) -> dict[str, Any]:
    """Content.pm info: path, size, used and format (volume_size_info), and the notes and protected attributes
    where the storage keeps them (backups)."""
    c = call.cluster
    s = _storage(call)
    volid = _volid(call)
    for row in _disk_rows(call, s, call.params["node"]):
        if row["volid"] == volid:
            if not call.can(f"/storage/{s.storage}", "Datastore.Allocate") and not call.can(
                f"/vms/{row['vmid']}", "VM.Config.Disk"
            ):
                raise ApiError(403, f"Permission check failed (/vms/{row['vmid']}, VM.Config.Disk)")
            fmt = row["format"]
            return {
                "path": _path(s, volid, row["content"], row["vmid"]),
                "size": row["size"],
                "used": row["used"],
                "format": fmt,
            }
    vol = next((v for v in c.volumes if v.volid == volid and (s.shared or v.node == call.params["node"])), None)
    if vol is None:
        raise ApiError(500, f"volume '{volid}' does not exist")
    owner_only = vol.content == "backup" and vol.vmid is not None
    allocate = call.can(f"/storage/{s.storage}", "Datastore.Allocate")
    if owner_only and not allocate and not call.can(f"/vms/{vol.vmid}", "VM.Backup"):  # check_volume_access
        raise ApiError(403, f"Permission check failed (/vms/{vol.vmid}, VM.Backup)")
    out: dict[str, Any] = {
        "path": _path(s, volid, vol.content, vol.vmid),
        "size": vol.size,
        "used": vol.size,
        "format": vol.format,
    }
    if vol.content == "backup":
        if vol.notes is not None:
            out["notes"] = vol.notes
        out["protected"] = int(vol.protected)
    return out


# pve-storage Storage.pm prune_mark_backup_group: the keep options and the period each one counts
_PERIODS: list[tuple[str, Callable[[dt.datetime], Any]]] = [
    ("keep-last", lambda t: t.timestamp()),
    ("keep-hourly", lambda t: (t.year, t.month, t.day, t.hour)),
    ("keep-daily", lambda t: (t.year, t.month, t.day)),
    ("keep-weekly", lambda t: t.isocalendar()[:2]),
    ("keep-monthly", lambda t: (t.year, t.month)),
    ("keep-yearly", lambda t: t.year),
]


def prune_marks(group: list[dict[str, Any]], keep: dict[str, int], zone: Any) -> None:
    """Storage.pm prune_mark_backup_group over one guest's backups (newest first): each keep option keeps the
    newest backup of each of its most recent periods that no earlier option kept; the rest is 'remove'."""
    positive = [k for k, v in keep.items() if k != "keep-all" and v > 0]
    if keep.get("keep-all") or not positive:
        for entry in group:
            if entry.get("mark") in (None, "remove"):
                entry["mark"] = "keep"
        return
    entries = sorted(group, key=lambda e: -int(e["ctime"]))
    for option, period in _PERIODS:
        count = keep.get(option, 0)
        if not count:
            continue
        kept = {period(dt.datetime.fromtimestamp(e["ctime"], zone)) for e in entries if e.get("mark") == "keep"}
        newly: set[Any] = set()
        for entry in entries:
            pid = period(dt.datetime.fromtimestamp(entry["ctime"], zone))
            if entry.get("mark") is not None or pid in kept:
                continue
            if pid not in newly:
                if len(newly) >= count:
                    break
                newly.add(pid)
                entry["mark"] = "keep"
            else:
                entry["mark"] = "remove"
    for entry in entries:
        entry.setdefault("mark", "remove")


def _keep(spec: Any) -> dict[str, int]:
    if isinstance(spec, dict):
        return {str(k): int(v) for k, v in spec.items()}
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in str(spec or "").split(",") if "=" in kv)}


@route("GET", "/nodes/{node}/storage/{storage}/prunebackups")
def prune_dryrun(call: Call) -> list[dict[str, Any]]:
    """PruneBackups.pm dryrun (Plugin.pm prune_backups with dryrun): every backup of the storage (of the guest,
    of the type), marked keep, remove or protected under the given options or the storage's own."""
    c = call.cluster
    s = _storage(call)
    if "backup" not in s.content:
        raise ApiError(500, f"storage '{s.storage}' does not support backups")
    spec = call.params.get("prune-backups", s.options.get("prune-backups"))
    if spec is None:
        raise ApiError(500, f"no prune-backups options configured for storage '{s.storage}'")
    keep = _keep(spec)
    vmid = int(call.params["vmid"]) if "vmid" in call.params else None
    kind = call.params.get("type")
    zone = ZoneInfo(c.nodes[call.params["node"]].health.timezone)
    groups: dict[str, list[dict[str, Any]]] = {}
    out = []
    for v in c.volumes:
        if v.storage != s.storage or v.content != "backup" or (not s.shared and v.node != call.params["node"]):
            continue
        btype = v.subtype or "qemu"
        if (vmid is not None and v.vmid != vmid) or (kind is not None and kind != btype):
            continue
        entry: dict[str, Any] = {"ctime": v.ctime, "type": btype, "volid": v.volid}
        if v.vmid is not None:
            entry["vmid"] = v.vmid
            groups.setdefault(f"{btype}/{v.vmid}", []).append(entry)
        else:
            entry["mark"] = "renamed"
        if v.protected:
            entry["mark"] = "protected"
        out.append(entry)
    for group in groups.values():
        prune_marks(group, keep, zone)
    return out


@route("GET", "/nodes/{node}/storage/{storage}/import-metadata")
def import_metadata(call: Call) -> dict[str, Any]:
    """Status.pm get_import_metadata: only ESXi storages and .ova/.ovf files on directory storages can be
    imported from; any other storage has no importer."""
    s = _storage(call)
    if s.type not in ("esxi", "dir", "nfs", "cifs", "cephfs", "btrfs"):
        raise ApiError(500, "storage does not support the importer API")
    volid = _volid(call)
    name = volid.split(":", 1)[1]
    if s.type != "esxi" and not name.startswith("import/"):
        raise ApiError(500, f"invalid content type '{name.split('/', 1)[0]}'")
    if s.type != "esxi" and not name.endswith((".ova", ".ovf")):
        raise ApiError(500, "invalid format")
    vm = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    warnings = [{"type": "ova-needs-extracting"}] if name.endswith(".ova") else []
    return {
        "type": "vm",
        "source": name,
        "create-args": {"name": vm, "cores": 2, "memory": 4096, "ostype": "l26"},
        "disks": {"scsi0": {"volid": f"{s.storage}:{name}/{vm}-disk1.vmdk", "size": 32 * 1024**3}},
        "net": {"net0": {"model": "vmxnet3"}},
        "warnings": warnings,
    }


def _pbs_backup(call: Call) -> Any:
    s = _storage(call)
    if s.type != "pbs":
        raise ApiError(
            400, "Parameter verification failed.", {"storage": "Only PBS storages supported for file-restore."}
        )
    volid = _volid(call)
    vol = next((v for v in call.cluster.volumes if v.volid == volid and v.content == "backup"), None)
    if vol is None:
        raise ApiError(500, f"unable to parse PBS volume name '{volid.split(':', 1)[1]}'")
    if (
        vol.vmid is not None
        and not call.can(f"/vms/{vol.vmid}", "VM.Backup")
        and not call.can(f"/storage/{s.storage}", "Datastore.Allocate")
    ):
        raise ApiError(403, f"Permission check failed (/vms/{vol.vmid}, VM.Backup)")
    return vol


@route("GET", "/nodes/{node}/storage/{storage}/file-restore/list")
def file_restore_list(call: Call) -> list[dict[str, Any]]:
    """FileRestore.pm list (proxmox-file-restore): the archives of a snapshot at '/', then their content;
    file paths are base64-encoded below the root."""
    vol = _pbs_backup(call)
    path = str(call.params.get("filepath") or "/")
    if path == "/":
        archives = ["drive-scsi0.img.fidx", "qemu-server.conf.blob"] if vol.subtype != "lxc" else ["root.pxar.didx"]
        return [
            {
                "filepath": base64.b64encode(f"/{a}".encode()).decode(),
                "text": a,
                "type": "v" if a.endswith(".fidx") else "f",
                "leaf": int(a.endswith(".blob")),
                **({"size": 1024} if a.endswith(".blob") else {}),
            }
            for a in archives
        ]
    decoded = perl_b64decode(path)
    entries = [("etc", "d"), ("home", "d"), ("var", "d")]
    return [
        {
            "filepath": base64.b64encode(f"{decoded.rstrip('/')}/{name}".encode()).decode(),
            "text": name,
            "type": kind,
            "leaf": 0,
            "mtime": vol.ctime,
        }
        for name, kind in entries
    ]


def perl_b64decode(text: str) -> str:
    """MIME::Base64 decode_base64, which FileRestore.pm uses: characters outside the alphabet are skipped,
    decoding stops at '=', an incomplete last group gives what bytes it can."""
    clean = re.sub(r"[^A-Za-z0-9+/]", "", text.split("=", 1)[0])
    if len(clean) % 4 == 1:
        clean = clean[:-1]
    return base64.b64decode(clean + "=" * (-len(clean) % 4)).decode(errors="replace")


@route("GET", "/nodes/{node}/storage/{storage}/file-restore/download")
def file_restore_download(call: Call) -> Download:
    """FileRestore.pm download: a file (or a directory as a zip or tar) from the snapshot, streamed."""
    _pbs_backup(call)
    path = perl_b64decode(str(call.params["filepath"]))
    name = path.rstrip("/").rsplit("/", 1)[-1] or "root"
    content = f"{name}\n".encode()
    return Download(content, "application/octet-stream", (("content-disposition", f'attachment; filename="{name}"'),))
