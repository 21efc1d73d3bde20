"""A guest's volumes as QemuMigrate ``scan_local_volumes`` and LXC ``Migrate::prepare``/``phase1`` judge them.

Storage volumes need their content type on the storage; volumes on shared storage stay where
they are; local ones are copied if their storage type, ownership, snapshots and linked-clone
state allow it. Host paths, host CD-ROM drives and local ISO images pin a VM; the generated
cloud-init drive does not (PVE copies it like any generated disk).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.migration.model import NOT_VISIBLE, Reason, reason
from pve_steward.analysis.migration.storage import (
    is_generated_cloudinit,
    parse_volname,
    storage_content,
    storage_on,
    storage_shared,
    storage_type,
)
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import GuestConfig, Volume, parse_guest_config, parse_volume
from pve_steward.pve.visibility import STORAGE

VM_LOCAL_TYPES = frozenset({"dir", "btrfs", "zfspool", "lvmthin", "lvm"})
CT_LOCAL_TYPES = VM_LOCAL_TYPES
GiB = 1024**3
UNSEEN_SNAPSHOT_REFS = "the guest has snapshots; the config API does not show which volumes they reference"


@dataclass(slots=True)
class Scan:
    """What the walk over a guest's volumes found: reasons, and the local volumes a move copies."""

    reasons: list[Reason] = field(default_factory=list)
    copy_bytes: int = 0
    copied: list[str] = field(default_factory=list)
    images: dict[tuple[str, str], list[Volume]] = field(default_factory=dict)  # where each local image lies

    def block(self, code: str, vol: Volume, detail: str, live_only: bool = False, rule: str = "") -> None:
        self.reasons.append(reason(code, True, f"{vol.key}: {detail}", [vol.key], live_only, rule))


def has_snapshots(data: ClusterData, cfg: GuestConfig) -> bool:
    if cfg.parent_snapshot:
        return True
    with_snapshots: frozenset[int] | None = data.memo["snapshots"].get("vmids")
    if with_snapshots is None:  # one pass per snapshot: this is asked for every guest
        with_snapshots = data.memo["snapshots"]["vmids"] = frozenset(
            vmid for vmid, rows in data.snapshots.items() if any(s.get("name") != "current" for s in rows or [])
        )
    return cfg.vmid in with_snapshots


def replicated(data: ClusterData, cfg: GuestConfig, vol: Volume, stype: str | None) -> bool:
    """A volume the guest's replication job to the target copies: QemuMigrate marks the job's replicatable
    volumes (QemuConfig.pm get_replicatable_volumes: zfspool, a reference without replicate=0) for a job to the
    target, disabled or not (ReplicationConfig.pm find_local_replication_job). A running replicated VM moves
    live only to a job's target (migrate.replication-target), so any job of the guest is the target's."""
    if stype != "zfspool" or not data.replication_by_guest.get(cfg.vmid):
        return False
    return replicate_on(data, cfg, vol)


def replicate_on(data: ClusterData, cfg: GuestConfig, vol: Volume) -> bool:
    """foreach_volid merges the references: one that leaves replicate on (a snapshot's too) includes it."""
    return vol.replicate or bool((_snapshot_replicate(data, cfg) or {}).get(vol.volid))


def base_in_use(data: ClusterData, storage: str, stype: str | None, volname: str) -> bool:
    """``volume_is_base_and_used``: a volume of the same storage names this base image (a linked clone).

    Clones on local storage live on the same node as their base, so the configs of that node's
    guests show them (PVE lists the storage's images; an orphaned clone image is the difference).
    """
    memo = data.memo["bases_in_use"]
    if storage not in memo:
        used: set[str] = set()
        for cfg in data.parsed.values():
            for v in cfg.volumes:
                if v.storage == storage and ":" in v.volid:
                    vn = parse_volname(stype, v.volid.split(":", 1)[1])
                    if vn.base:
                        used.add(vn.base)
        memo[storage] = used
    return volname.rsplit("/", 1)[-1] in memo[storage]


@pve_rule(
    "migrate.storage-content",
    rule="Every volume's storage must be defined and carry the volume's content type (VM: the type its name "
    "parses to, images or iso; container: rootdir), else the migration dies. A storage the token's /storage "
    "list leaves out is missing only if the token would see it; else it is not visible: not provable.",
    pve="qemu-server src/PVE/QemuServer.pm check_storage_availability, src/PVE/QemuMigrate.pm "
    "target_storage_check_available; pve-container src/PVE/LXC/Migrate.pm prepare",
    codes=("MIGRATE_STORAGE_CONTENT", "MIGRATE_STORAGE_UNAVAILABLE", "MIGRATE_NOT_PROVABLE"),
)
def check_content(data: ClusterData, scan: Scan, vol: Volume, need: str) -> bool:
    """False (and a reason) when the volume's storage is missing, hidden from the token, or lacks the content type."""
    storage = vol.storage or ""
    if storage not in data.storage_defs:
        hidden = data.hidden(STORAGE, storage)
        if hidden is not None:  # pve-storage API2/Storage/Config.pm index lists only what the token may see
            scan.block("MIGRATE_NOT_PROVABLE", vol, hidden, rule=NOT_VISIBLE)
        else:
            scan.block("MIGRATE_STORAGE_UNAVAILABLE", vol, f"storage '{storage}' does not exist in the storage config")
        return False
    content = storage_content(data, storage)
    if content is not None and need not in content:
        scan.block(
            "MIGRATE_STORAGE_CONTENT",
            vol,
            f"content type '{need}' is not available on storage '{storage}' (content: {', '.join(sorted(content))})",
        )
        return False
    return True


@pve_rule(
    "migrate.storage-on-source",
    rule="Every storage the guest's volumes use must be enabled on the source node too (not disabled, the node in "
    "its nodes list): PVE checks it before the target.",
    pve="qemu-server src/PVE/QemuMigrate.pm prepare ('check if storage is available on source node'); "
    "pve-container src/PVE/LXC/Migrate.pm prepare; pve-storage src/PVE/Storage.pm storage_check_enabled",
    codes=("MIGRATE_STORAGE_UNAVAILABLE",),
)
def check_source(data: ClusterData, scan: Scan, vol: Volume, source: str) -> bool:
    """False (and a reason) when the volume's storage is configured but not enabled on the source node."""
    storage = vol.storage or ""
    if not source or storage not in data.storage_defs or storage_on(data, storage, source):
        return True  # a storage missing from the config: check_content says so
    scan.block("MIGRATE_STORAGE_UNAVAILABLE", vol, f"storage '{storage}' is not available on the source node {source}")
    return False


@pve_rule(
    "migrate.local-volume",
    rule="A local volume moves only if its storage type is dir, btrfs, zfspool, lvmthin or lvm, the guest owns it "
    "(a volume of no guest, such as an ISO attached as a disk, is refused), "
    "it is not a linked clone of a base image and no linked clone uses it as base.",
    pve="qemu-server src/PVE/QemuMigrate.pm scan_local_volumes; pve-container src/PVE/LXC/Migrate.pm phase1; "
    "pve-storage src/PVE/Storage.pm volume_is_base_and_used",
    codes=("MIGRATE_LOCAL_DISK_UNSUPPORTED", "MIGRATE_LINKED_CLONE"),
)
def check_local_volume(data: ClusterData, scan: Scan, cfg: GuestConfig, vol: Volume, stype: str | None) -> bool:
    storage = vol.storage or ""
    vn = parse_volname(stype, vol.volid.split(":", 1)[1])
    ok = True
    if vn.owner != cfg.vmid:  # PVE dies when the volume has no owner too ('if !$owner || $owner != $vmid')
        whose = f"another guest ({vn.owner})" if vn.owner is not None else "no guest (not a guest image)"
        scan.block("MIGRATE_LOCAL_DISK_UNSUPPORTED", vol, f"{vol.volid} is owned by {whose}")
        ok = False
    if stype not in VM_LOCAL_TYPES:
        scan.block(
            "MIGRATE_LOCAL_DISK_UNSUPPORTED",
            vol,
            f"{vol.volid}: storage type '{stype or 'unknown'}' of {storage} is not supported for migration",
        )
        return False
    if vn.base:
        scan.block("MIGRATE_LINKED_CLONE", vol, f"{vol.volid} is a linked clone of '{vn.base}' on local storage")
        ok = False
    elif vn.is_base and base_in_use(data, storage, stype, vol.volid.split(":", 1)[1]):
        scan.block("MIGRATE_LINKED_CLONE", vol, f"{vol.volid} is the base image of linked clone(s) on {storage}")
        ok = False
    return ok


@pve_rule(
    "migrate.local-snapshots",
    rule="A local volume referenced by a snapshot moves offline only on zfspool, btrfs (raw) or qcow2 without "
    "snapshot-as-volume-chain (containers: zfspool, btrfs); a running VM cannot move it live unless it is "
    "replicated to the target.",
    pve="qemu-server src/PVE/QemuMigrate.pm scan_local_volumes ('non-migratable snapshot exists', 'online storage "
    "migration not possible if non-replicated snapshot exists'); pve-container src/PVE/LXC/Migrate.pm phase1",
    codes=("MIGRATE_LOCAL_DISK_UNSUPPORTED", "MIGRATE_LIVE_UNSUPPORTED", "MIGRATE_NOT_PROVABLE"),
)
def check_snapshots(
    data: ClusterData, scan: Scan, cfg: GuestConfig, vol: Volume, stype: str | None, running: bool
) -> None:
    """Exact when the snapshot sections were read; otherwise a reference is not provable, only likely."""
    refs = snapshot_refs(data, cfg)
    if refs is not None and vol.volid not in refs:
        return
    vn = parse_volname(stype, vol.volid.split(":", 1)[1])
    scfg = data.storage_defs.get(vol.storage or "") or {}
    if cfg.type == "lxc":
        safe = stype in ("zfspool", "btrfs")
    else:
        chain = bool(int(scfg.get("snapshot-as-volume-chain", 0) or 0))
        safe = stype == "zfspool" or (stype == "btrfs" and vn.format == "raw") or (vn.format == "qcow2" and not chain)
    known = refs is not None
    why = "referenced by a snapshot" if known else UNSEEN_SNAPSHOT_REFS
    rule = "" if known else "migrate.local-snapshots"
    if not safe:
        scan.block(
            "MIGRATE_LOCAL_DISK_UNSUPPORTED" if known else "MIGRATE_NOT_PROVABLE",
            vol,
            f"{why}, and PVE refuses a snapshot-referenced volume on {stype} ('non-migratable snapshot exists')",
            rule=rule,
        )
    if running and cfg.type == "qemu" and not replicated(data, cfg, vol, stype):
        scan.block(
            "MIGRATE_LIVE_UNSUPPORTED" if known else "MIGRATE_NOT_PROVABLE",
            vol,
            f"{why}; PVE refuses a live move of a snapshot-referenced local volume that is not replicated",
            live_only=True,
            rule=rule,
        )


def snapshot_refs(data: ClusterData, cfg: GuestConfig) -> set[str] | None:
    """Volumes the guest's snapshots reference (``foreach_volid`` over the sections); None when not read."""
    replicate = _snapshot_replicate(data, cfg)
    return None if replicate is None else set(replicate)


def _snapshot_replicate(data: ClusterData, cfg: GuestConfig) -> dict[str, bool] | None:
    """Each volume the snapshots reference -> whether any of those references leaves replicate on."""
    sections = data.snapshot_configs.get(cfg.vmid)
    if sections is None:
        return None
    memo = data.memo["snapshot_refs"]
    if cfg.vmid not in memo:
        found: dict[str, bool] = {}
        for raw in sections.values():
            for v in parse_guest_config(raw, cfg.vmid, cfg.type).volumes:
                found[v.volid] = found.get(v.volid, False) or v.replicate
        memo[cfg.vmid] = found
    return memo[cfg.vmid]  # type: ignore[no-any-return]


@pve_rule(
    "migrate.cdrom",
    rule="A host CD-ROM drive or an ISO image on local storage blocks migration; an empty drive, media on shared "
    "storage and the generated cloud-init drive (vm-N-cloudinit) do not.",
    pve="qemu-server src/PVE/QemuMigrate.pm scan_local_volumes (local cdrom drive/image, ref 'generated')",
    codes=("MIGRATE_LOCAL_CDROM",),
)
def check_cdrom(scan: Scan, vol: Volume) -> bool:
    """True when the local CD-ROM volume is the generated cloud-init drive (copied like a disk)."""
    if is_generated_cloudinit(vol.volid):
        return True
    scan.block("MIGRATE_LOCAL_CDROM", vol, f"holds {vol.volid} on local storage (eject it first)")
    return False


def scan_volumes(data: ClusterData, cfg: GuestConfig, running: bool) -> Scan:
    """The volume walk of ``scan_local_volumes`` (VM) or ``prepare``/``phase1`` (container): the config's
    volumes, then those only its snapshots reference (``foreach_volid``; known once the sections were read)."""
    scan = Scan()
    snapshots = has_snapshots(data, cfg)
    source = str((data.guests.get(cfg.vmid) or {}).get("node", ""))
    for vol in cfg.volumes:
        _scan_one(data, scan, cfg, vol, running, snapshots, source)
    for vol, names in snapshot_only(data, cfg):
        before = len(scan.reasons)
        _scan_one(data, scan, cfg, vol, running, True, source, names)
        for r in scan.reasons[before:]:  # what only a snapshot holds cannot be ejected: the snapshot must go
            r.detail = r.detail.replace(" (eject it first)", "") + f" (referenced in snapshot - {', '.join(names)})"
    check_aliases(scan)
    return scan


@pve_rule(
    "migrate.aliased-volumes",
    rule="Two volume ids of one guest whose storages resolve them to the same image (local storages on one directory, "
    "ZFS pool or volume group) stop a migration, offline as well as live: 'detected not supported aliased volumes'.",
    pve="qemu-server src/PVE/QemuMigrate.pm scan_local_volumes ($path_to_volid); pve-container src/PVE/LXC/Migrate.pm "
    "phase1; pve-storage src/PVE/Storage.pm path (DirPlugin filesystem_path, ZFSPoolPlugin path, LVMPlugin path)",
    codes=("MIGRATE_ALIASED_VOLUME",),
)
def check_aliases(scan: Scan) -> None:
    for vols in scan.images.values():
        volids = sorted({v.volid for v in vols})
        if len(volids) > 1:
            scan.reasons.append(
                reason(
                    "MIGRATE_ALIASED_VOLUME",
                    True,
                    f"{', '.join(sorted({v.key for v in vols}))}: {' and '.join(volids)} are one image through two "
                    "storages; PVE refuses the migration ('detected not supported aliased volumes')",
                    sorted({v.key for v in vols}),
                )
            )


def image_path(data: ClusterData, vol: Volume, stype: str | None, vmid: int) -> tuple[str, str] | None:
    """Where a local volume's image lies, as pve-storage's path() resolves it: a directory storage's
    <path>/images/<vmid>/<name>, a zvol of the pool, a volume of the VG (None where the config does not say)."""
    scfg = data.storage_defs.get(vol.storage or "") or {}
    name = vol.volid.split(":", 1)[1].rsplit("/", 1)[-1]
    if stype in ("dir", "btrfs") and scfg.get("path"):
        return ("file", f"{str(scfg['path']).rstrip('/')}/images/{vmid}/{name}")
    if stype == "zfspool" and scfg.get("pool"):
        return ("zfs", f"{str(scfg['pool']).strip('/')}/{name}")
    if stype in ("lvm", "lvmthin") and scfg.get("vgname"):
        return ("lvm", f"{scfg['vgname']}/{name}")
    return None


def _scan_one(
    data: ClusterData,
    scan: Scan,
    cfg: GuestConfig,
    vol: Volume,
    running: bool,
    snapshots: bool,
    source: str,
    in_snapshots: tuple[str, ...] = (),
) -> None:
    """One volume; ``in_snapshots`` names the snapshots of a volume the current config does not hold."""
    if vol.empty_drive:
        return
    if vol.host_path or vol.storage is None:
        if not (in_snapshots and cfg.type == "lxc"):  # LXC phase1 ignores a snapshot's non-volume mount points
            _host_volume(scan, cfg, vol)
        return
    if not check_source(data, scan, vol, source):
        return
    stype = storage_type(data, vol.storage)
    need = "rootdir" if cfg.type == "lxc" else parse_volname(stype, vol.volid.split(":", 1)[1]).vtype
    if not check_content(data, scan, vol, need) or storage_shared(data, vol.storage):
        return
    if vol.cdrom and cfg.type == "qemu" and not check_cdrom(scan, vol):
        return
    if not check_local_volume(data, scan, cfg, vol, stype):
        return
    image = None if vol.cdrom else image_path(data, vol, stype, cfg.vmid)  # QemuMigrate: a CD-ROM returns first
    if image is not None:
        scan.images.setdefault(image, []).append(vol)
    if snapshots and not vol.cdrom and vol.key != "vmstate":  # QemuMigrate: 'return if is_vmstate' comes first
        check_snapshots(data, scan, cfg, vol, stype, running)
    scan.copy_bytes += vol.size_bytes or 0
    where = f", in snapshot {', '.join(in_snapshots)}" if in_snapshots else ""
    scan.copied.append(f"{vol.key} ({vol.storage}{where})")


def snapshot_only(data: ClusterData, cfg: GuestConfig) -> list[tuple[Volume, tuple[str, ...]]]:
    """Volumes only the guest's snapshots reference, each with those snapshots' names (none when the sections
    were not read). A volume is a CD-ROM only if every snapshot holds it as one (``foreach_volid``); a VM's
    RAM state (``vmstate``) is a volume too."""
    sections = data.snapshot_configs.get(cfg.vmid)
    if not sections:
        return []
    memo = data.memo["snapshot_only"]
    if cfg.vmid not in memo:
        current = {v.volid for v in cfg.volumes}
        found: dict[str, tuple[Volume, list[str]]] = {}
        for name in sorted(sections):
            raw = sections[name]
            volumes = parse_guest_config(raw, cfg.vmid, cfg.type).volumes
            state = raw.get("vmstate") if cfg.type == "qemu" else None
            ram = parse_volume("vmstate", str(state), "qemu") if state else None
            for vol in [*volumes, ram] if ram is not None else volumes:
                if vol.volid in current:
                    continue
                kept = found.get(vol.volid)
                if kept is None:
                    found[vol.volid] = (vol, [name])
                    continue
                kept[1].append(name)
                if kept[0].cdrom and not vol.cdrom:
                    found[vol.volid] = (vol, kept[1])
        memo[cfg.vmid] = [(vol, tuple(names)) for vol, names in found.values()]
    return memo[cfg.vmid]  # type: ignore[no-any-return]


@pve_rule(
    "migrate.host-paths",
    rule="A volume given as a host path (/dev/..., a container bind or device mount point) blocks migration unless "
    "marked shared=1; the host CD-ROM drive always blocks.",
    pve="qemu-server src/PVE/QemuMigrate.pm scan_local_volumes ('local file/device'); pve-container "
    "src/PVE/LXC/Migrate.pm prepare ('cannot migrate local bind mount point')",
    codes=("MIGRATE_LOCAL_DISK_UNSUPPORTED", "MIGRATE_BIND_MOUNT", "MIGRATE_LOCAL_CDROM"),
)
def _host_volume(scan: Scan, cfg: GuestConfig, vol: Volume) -> None:
    if vol.volid == "cdrom":
        scan.block("MIGRATE_LOCAL_CDROM", vol, "uses the host's CD-ROM drive")
    elif vol.shared_flag:
        return
    elif cfg.type == "lxc":
        scan.block("MIGRATE_BIND_MOUNT", vol, f"binds host path {vol.volid}")
    else:
        scan.block("MIGRATE_LOCAL_DISK_UNSUPPORTED", vol, f"is host path {vol.volid} (local file/device)")
