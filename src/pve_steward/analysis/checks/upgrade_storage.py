"""Upgrade readiness, PVE 8 to 9: pve8to9's storage and backup-configuration checks."""

from __future__ import annotations

import posixpath
from typing import Any

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Subject
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.upgradeinfo import (
    APT_VERSIONS,
    BACKUP_JOBS,
    NODE_STORAGE,
    SOURCE,
    cluster_to_upgrade,
    graded,
    guests_to_upgrade,
    nodes_to_upgrade,
)
from pve_steward.pve.guestconfig import GuestConfig, Volume, parse_guest_config, parse_property_string, parse_volume
from pve_steward.pve.storagecfg import content_types, enabled_on, is_shared
from pve_steward.pve.values import flag
from pve_steward.pve.visibility import STORAGE


def _storage(sid: str, node: str | None = None) -> Subject:
    return Subject(kind="storage", id=sid, node=node)


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_STORAGE_INACTIVE",
            "warning",
            "Enabled storage not active",
            "pve8to9 WARNs for every storage that is enabled but not active on the node (/nodes/{node}/storage).",
            "Make the storage reachable (pvesm status) or disable it for this node before the upgrade.",
        )
    ],
    needs=[NODE_STORAGE, APT_VERSIONS],
    anchors=["pve8to9:storage-active"],
    pve=f"{SOURCE} check_storage_health",
)
def storage_active(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        rows = data.read("node_storage_status", node)
        for row in rows if isinstance(rows, list) else []:
            if flag(row.get("enabled", 1)) and not flag(row.get("active", 0)):
                sid = str(row.get("storage"))
                out.append(
                    graded(
                        "UPGRADE_STORAGE_INACTIVE",
                        "WARN",
                        _storage(sid, node),
                        f"storage '{sid}' enabled but not active on {node}",
                        "storage-active",
                        {"type": row.get("type")},
                    )
                )
    return out


def _enabled(row: dict[str, Any], data: ClusterData) -> bool:
    """pve8to9's ``storage_check_enabled($cfg, $storeid, undef, 1)`` on some node still to upgrade: not disabled and
    that node in the storage's nodes list (with no node to ask, only ``disable`` decides)."""
    nodes = nodes_to_upgrade(data)
    return any(enabled_on(row, n) for n in nodes) if nodes else not flag(row.get("disable", 0))


# storage types whose plugindata content list accepts 'none': pve-storage DirPlugin.pm, BTRFSPlugin.pm,
# ISCSIPlugin.pm, ISCSIDirectPlugin.pm, PBSPlugin.pm plugindata (Plugin.pm valid_content_types)
_NONE_OK = {"dir", "btrfs", "iscsi", "iscsidirect", "pbs"}


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CONTENT_NONE",
            "critical",
            "Storage configured with content 'none' it does not support",
            "pve8to9 FAILs for an enabled, not shared storage with no content type at all (not even 'none') when "
            "its type does not accept 'none' (/storage). PVE itself refuses such an entry when it parses "
            "storage.cfg and shows the type's default content, so the API rarely shows one.",
            "Set the storage's content types (Datacenter > Storage > Edit, or pvesm set <id> --content ...).",
        )
    ],
    anchors=["pve8to9:content-none"],
    pve=f"{SOURCE} check_storage_content (keys of the content hash == 0 and the type's valid content lacks 'none'); "
    "pve-storage src/PVE/Storage/Plugin.pm decode_value (content 'none' is the key 'none')",
)
def content_none(data: ClusterData, t: Thresholds) -> list[Finding]:
    if not cluster_to_upgrade(data):
        return []
    out = []
    for row in data.storage_config:
        if is_shared(row) or not _enabled(row, data) or content_types(row) or row.get("type") in _NONE_OK:
            continue
        sid = str(row.get("storage"))
        out.append(
            graded(
                "UPGRADE_CONTENT_NONE",
                "FAIL",
                _storage(sid),
                f"storage '{sid}' does not support configured content type 'none'",
                "content-none",
                {"type": row.get("type"), "content": row.get("content")},
            )
        )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_VOLUME_CONTENT_MISMATCH",
            "warning",
            "Guest volume on a storage without its content type",
            "pve8to9 WARNs for each guest volume (disks, unused disks, and those only a snapshot holds, a VM "
            "snapshot's RAM state included) whose storage does not exist or lacks the content type the volume needs "
            "(images for VM disks, iso for ISO images, rootdir for containers).",
            "Add the content type to the storage (pvesm set <id> --content ...) or move the volume.",
        )
    ],
    anchors=["pve8to9:content-mismatch"],
    pve=f"{SOURCE} check_storage_content",
)
def volume_content(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for vmid in guests_to_upgrade(data):
        cfg = data.parsed.get(vmid)
        if cfg is None:
            continue
        seen: set[str] = set()  # pve8to9: "volume might be referenced multiple times"
        for vol, snapshot in _volume_references(data, cfg):
            if vol.storage is None or vol.host_path or vol.volid in seen:
                continue
            seen.add(vol.volid)
            finding_ = _content_mismatch(data, cfg, vol, snapshot)
            if finding_ is not None:
                out.append(finding_)
    return out


def _volume_references(data: ClusterData, cfg: GuestConfig) -> list[tuple[Volume, str | None]]:
    """The config's volumes, then each snapshot's with a VM's RAM state (pve8to9 check_storage_content:
    foreach_volume_full over the config, then over every snapshot with extra_keys vmstate; the config's own
    vmstate is left out, as a resume works without 'images' content)."""
    refs: list[tuple[Volume, str | None]] = [(v, None) for v in cfg.volumes]
    for name, section in sorted((data.snapshot_configs.get(cfg.vmid) or {}).items()):
        if not isinstance(section, dict):
            continue
        refs += [(v, name) for v in parse_guest_config(section, cfg.vmid, cfg.type).volumes]
        state = section.get("vmstate") if cfg.type == "qemu" else None
        vol = parse_volume("vmstate", str(state), cfg.type) if state else None
        if vol is not None:
            refs.append((vol, name))
    return refs


def _content_mismatch(data: ClusterData, cfg: GuestConfig, vol: Volume, snapshot: str | None) -> Finding | None:
    vtype = "rootdir" if cfg.type == "lxc" else ("iso" if vol.volid.split(":", 1)[-1].startswith("iso/") else "images")
    scfg = data.storage_defs.get(str(vol.storage))
    if scfg is None and data.hidden(STORAGE, vol.storage) is not None:
        return None  # a storage PVE does not list to this token (the collector says so), not a missing one
    if scfg is None:
        text = "storage does not exist"
    elif vtype not in content_types(scfg):
        text = f"storage does not have content type '{vtype}' configured"
    else:
        return None
    kind = "VM" if cfg.type == "qemu" else "CT"
    where = vol.key if snapshot is None else f"{vol.key} in snapshot '{snapshot}'"
    return graded(
        "UPGRADE_VOLUME_CONTENT_MISMATCH",
        "WARN",
        Subject(kind="guest", id=str(cfg.vmid), name=cfg.name or None, node=data.guests[cfg.vmid].get("node")),
        f"{kind} {cfg.vmid} - volume '{vol.volid}' ({where}) - {text}",
        "content-mismatch",
        {"volume": vol.volid, "key": vol.key, "storage": vol.storage, "content_type": vtype, "snapshot": snapshot},
    )


# pve-storage Plugin.pm $vtype_subdirs
_SUBDIRS = {
    "images": "images",
    "rootdir": "private",
    "iso": "template/iso",
    "vztmpl": "template/cache",
    "backup": "dump",
    "snippets": "snippets",
    "import": "import",
}


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CONTENT_DIRS_SHARED",
            "critical",
            "One directory used for several content types",
            "pve8to9 FAILs when a storage with a path, enabled on a node still to upgrade, resolves two content "
            "types to the same directory (content-dirs overrides in /storage): no longer supported. It also FAILs "
            "('failed to check storage content directories - unknown vtype 'none'') at a directory storage with "
            "content 'none', and checks no further storage on that node.",
            "Give each content type its own directory (pvesm set <id> --content-dirs ...); give a storage with "
            "content 'none' a content type or remove its path.",
        )
    ],
    anchors=["pve8to9:content-dirs"],
    pve=f"{SOURCE} check_storage_content_dirs, check_storage_health (eval: 'failed to check storage content "
    "directories'); pve-storage src/PVE/Storage/Plugin.pm get_subdir ('$path/$subdir', dies on unknown vtype)",
)
def content_dirs(data: ClusterData, t: Thresholds) -> list[Finding]:
    if not cluster_to_upgrade(data):
        return []
    out: dict[tuple[str, str], Finding] = {}
    rows = sorted(data.storage_config, key=lambda r: str(r.get("storage")))
    nodes: list[str | None] = [*nodes_to_upgrade(data)] or [None]
    for node in nodes:  # pve8to9 runs on each node; its loop stops at the first die
        for row in rows:
            if not row.get("path") or not (enabled_on(row, node) if node else _enabled(row, data)):
                continue
            sid = str(row.get("storage"))
            if "none" in content_types(row):  # get_subdir: "unknown vtype 'none'", caught once by check_storage_health
                out.setdefault((sid, ""), _dirs_failed(sid))
                break
            for where, vtypes in _resolved_subdirs(row).items():
                if len(vtypes) > 1:
                    out.setdefault((sid, where), _dirs_shared(sid, where, vtypes))
    return [out[k] for k in sorted(out)]


def _resolved_subdirs(row: dict[str, Any]) -> dict[str, list[str]]:
    """Directory -> the content types that land in it: Plugin.pm get_subdir's "$path/$subdir" (an override with a
    leading slash is still below the path), normalised as Cwd::abs_path would (symlinks aside)."""
    raw = row.get("content-dirs")
    # Config.pm returns content-dirs as Plugin.pm decode_value left it (a hash); a string is read too
    overrides = (
        {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else parse_property_string(str(raw or ""))
    )
    dirs: dict[str, list[str]] = {}
    for vtype in sorted(content_types(row)):
        sub = overrides.get(vtype, _SUBDIRS.get(vtype))
        if sub is not None and vtype in _SUBDIRS:
            where = posixpath.normpath(f"{row.get('path')}/{sub}")
            dirs.setdefault("/" + where.lstrip("/") if where.startswith("/") else where, []).append(vtype)
    return dirs


def _dirs_shared(sid: str, where: str, vtypes: list[str]) -> Finding:
    return graded(
        "UPGRADE_CONTENT_DIRS_SHARED",
        "FAIL",
        _storage(sid),
        f"storage '{sid}' uses directory {where} for multiple content types ({', '.join(vtypes)})",
        "content-dirs",
        {"directory": where, "content_types": vtypes},
    )


def _dirs_failed(sid: str) -> Finding:
    return graded(
        "UPGRADE_CONTENT_DIRS_SHARED",
        "FAIL",
        _storage(sid),
        f"failed to check storage content directories - unknown vtype 'none' (storage '{sid}')",
        "content-dirs",
        {"content_types": ["none"]},
    )


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_GLUSTERFS",
            "critical",
            "Native GlusterFS storage configured",
            "pve8to9 FAILs for every storage of type glusterfs: PVE 9 ends native GlusterFS support (/storage).",
            "Move the volumes to other storage and remove the GlusterFS storage, or mount GlusterFS yourself and "
            "use it as directory storage.",
        )
    ],
    anchors=["pve8to9:glusterfs"],
    pve=f"{SOURCE} check_glusterfs_storage_usage",
)
def glusterfs(data: ClusterData, t: Thresholds) -> list[Finding]:
    if not cluster_to_upgrade(data):
        return []
    return [
        graded(
            "UPGRADE_GLUSTERFS",
            "FAIL",
            _storage(str(row.get("storage"))),
            f"found 'glusterfs' storage '{row.get('storage')}'",
            "glusterfs",
        )
        for row in data.storage_config
        if row.get("type") == "glusterfs"
    ]


_MAXFILES = "parameter 'maxfiles' was deprecated with PVE 7.x and is getting dropped with PVE 9."


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_MAXFILES",
            "critical",
            "Legacy 'maxfiles' backup retention",
            "pve8to9 FAILs for 'maxfiles' (deprecated in PVE 7, dropped in PVE 9) on a storage (/storage), and "
            "once for /etc/pve/vzdump.cron when any of its jobs has it (/cluster/backup lists those jobs with "
            "ids '<digest>:<n>'); it does not read jobs.cfg. Its /etc/vzdump.conf check needs a shell: the API "
            "turns that maxfiles into prune-backups.",
            "Replace maxfiles with prune-backups (e.g. keep-last=N) on the storage or job, in the GUI or with "
            "pvesm set <id> --prune-backups keep-last=N --delete maxfiles.",
        )
    ],
    needs=[BACKUP_JOBS],
    anchors=["pve8to9:maxfiles"],
    pve=f"{SOURCE} check_backup_retention_settings; pve-guest-common src/PVE/VZDump/Common.pm "
    'parse_vzdump_cron_config (id "$digest:$jid"); pve-manager PVE/API2/Backup.pm index (cron and jobs.cfg)',
)
def maxfiles(data: ClusterData, t: Thresholds) -> list[Finding]:
    if not cluster_to_upgrade(data):
        return []
    out = [
        graded(
            "UPGRADE_MAXFILES",
            "FAIL",
            _storage(str(row.get("storage"))),
            f"storage '{row.get('storage')}' - {_MAXFILES}",
            "maxfiles",
            {"maxfiles": row.get("maxfiles")},
        )
        for row in data.storage_config
        if row.get("maxfiles") is not None
    ]
    jobs = data.read("backup_job_config")
    cron = [
        str(job.get("id"))
        for job in (jobs if isinstance(jobs, list) else [])
        if isinstance(job, dict) and ":" in str(job.get("id")) and job.get("maxfiles") is not None
    ]
    if cron:  # "only warn once, there might be many jobs"
        out.append(
            graded(
                "UPGRADE_MAXFILES",
                "FAIL",
                Subject(kind="backup_job", id="vzdump.cron"),
                f"/etc/pve/vzdump.cron - {_MAXFILES}",
                "maxfiles",
                {"jobs": cron},
            )
        )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_BACKUP_JOB_NOTIFICATION",
            "critical",
            "Backup job uses legacy notification options",
            "pve8to9 FAILs for a backup job with the legacy 'notification-policy' or 'notification-target' option "
            "(/cluster/backup).",
            "Edit and save the job in Datacenter > Backup (this clears the options), or remove them from "
            "/etc/pve/jobs.cfg.",
        )
    ],
    needs=[BACKUP_JOBS],
    anchors=["pve8to9:backup-job-notif"],
    pve=f"{SOURCE} check_legacy_backup_job_options",
)
def backup_job_notification(data: ClusterData, t: Thresholds) -> list[Finding]:
    jobs = data.read("backup_job_config")
    if not isinstance(jobs, list) or not cluster_to_upgrade(data):
        return []
    out = []
    for job in jobs:
        for option in ("notification-policy", "notification-target"):
            if isinstance(job, dict) and job.get(option) is not None:
                out.append(
                    graded(
                        "UPGRADE_BACKUP_JOB_NOTIFICATION",
                        "FAIL",
                        Subject(kind="backup_job", id=str(job.get("id"))),
                        f"found legacy '{option}' option for job '{job.get('id')}'",
                        "backup-job-notif",
                        {"option": option, "value": job.get(option)},
                    )
                )
    return out
