"""What PVE checks before and during a guest migration, as qemu-server and pve-container do it.

Used by the precondition endpoint (``GET .../migrate``, ``migrate_vm_precondition``) and by the
migration task itself (``QemuMigrate::prepare`` + ``scan_local_volumes``, LXC ``Migrate::prepare``
+ ``phase1``), so the two agree the way they do in PVE: the precondition reports, the task
enforces. PVE 8 and 9 differ in the precondition's HA fields and in clipboard=vnc.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pvesim import pveconfig
from pvesim.state import Cluster, Guest

_DEVICE = re.compile(r"^(usb|hostpci|serial|parallel|virtiofs)\d+$")
_MIGRATABLE_LOCAL_TYPES = {"dir", "btrfs", "zfspool", "lvmthin", "lvm"}
_CLOUDINIT = re.compile(r"vm-\d+-cloudinit")
_BASE_CLONE = re.compile(r"^(?:\d+/)?((?:base|basevol)-\d+-[^/]+)/(?:\d+/)?\S+$")
_OWNER = re.compile(r"(?:^|/)(?:vm|base|subvol|basevol)-(\d+)-")


def _major(c: Cluster) -> int:
    return int(c.version.split(".")[0])


def _mapping(c: Cluster, name: str) -> dict[str, Any] | None:
    """A resource mapping (options.mappings): ``name: [nodes]`` or ``name: {nodes, live-migration-capable}``."""
    spec = (c.options.get("mappings") or {}).get(name)
    if spec is None:
        return None
    return {"nodes": list(spec)} if isinstance(spec, list) else dict(spec)


def mapped_resources(c: Cluster, g: Guest) -> dict[str, dict[str, Any]]:
    """``mapped_res`` of ``check_local_resources``: PCI/USB with mapping=, every virtiofs share."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in g.config.items():
        if key.startswith("virtiofs") and _DEVICE.match(key):
            out[key] = {"name": pveconfig.parse_property_string(value, "dirid").get("dirid", "")}
        elif (key.startswith(("usb", "hostpci"))) and _DEVICE.match(key) and "mapping=" in value:
            name = pveconfig.parse_property_string(value, "host").get("mapping", "")
            info: dict[str, Any] = {"name": name}
            if key.startswith("hostpci") and int((_mapping(c, name) or {}).get("live-migration-capable", 0)):
                info["live-migration"] = 1
            out[key] = info
    return out


def _running_machine_ok(g: Guest) -> bool:
    machine = g.config.get("runningmachine", "pc-i440fx-10.1+pve0")
    m = re.search(r"(\d+)\.(\d+)", machine)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (10, 1)


def local_resources(c: Cluster, g: Guest) -> list[str]:
    """``loc_res`` of ``check_local_resources`` (plus clipboard=vnc as the precondition adds it)."""
    running = g.status == "running"
    out: list[str] = []
    if running:
        out += [f for f in ("amd-sev", "intel-tdx") if g.config.get(f)]
        if any(k.startswith("virtiofs") and _DEVICE.match(k) for k in g.config):
            out.append("virtiofs")
    out += [k for k in ("hostusb", "hostpci", "ivshmem") if g.config.get(k)]
    mapped = mapped_resources(c, g)
    for key, value in g.config.items():
        if not _DEVICE.match(key):
            continue
        if key.startswith("usb") and pveconfig.parse_property_string(value, "host").get("host", "").lower() == "spice":
            continue
        if key.startswith("hostpci") and key in mapped and (mapped[key].get("live-migration") or not running):
            continue
        if key.startswith("serial") and value == "socket":
            continue
        out.append(key)
    vga = pveconfig.parse_property_string(g.config.get("vga", ""), "type")
    if running and vga.get("clipboard") == "vnc" and (_major(c) < 9 or not _running_machine_ok(g)):
        out.append("clipboard=vnc")
    return out


def blocking_resources(c: Cluster, g: Guest) -> list[str]:
    """What ``QemuMigrate::prepare`` refuses: local resources that are not mapped ones."""
    mapped = mapped_resources(c, g)
    return [r for r in local_resources(c, g) if r not in mapped]


def missing_mappings(c: Cluster, g: Guest, target: str) -> list[str]:
    """Keys of mapped devices whose mapping has no entry for ``target`` (``missing_mappings_by_node``)."""
    out = []
    for key, info in sorted(mapped_resources(c, g).items()):
        mapping = _mapping(c, info["name"])
        if mapping is None or target not in mapping.get("nodes", []):
            out.append(key)
    return out


@dataclass
class LocalDisk:
    key: str
    volid: str
    storage: str | None
    cdrom: bool
    size: int
    unused: bool
    in_snapshot: list[str] = field(default_factory=list)
    attached: bool = True
    replicate: bool = False  # foreach_volid: set when any reference lacks replicate=0

    @property
    def cloudinit(self) -> bool:
        return self.cdrom and _CLOUDINIT.search(self.volid) is not None

    def as_api(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "volid": self.volid,
            "cdrom": int(self.cdrom),
            "is_unused": int(self.unused),
            "is_attached": int(self.attached and not self.unused),
            "size": self.size,
            "drivename": self.key,
            "shared": 0,
            "replicate": int(self.replicate),
            "is_cloudinit": int(self.cloudinit),
            "is_vmstate": 0,
            "is_tpmstate": int(self.key.startswith("tpmstate")),
        }
        if self.in_snapshot:
            row["referenced_in_snapshot"] = dict.fromkeys(self.in_snapshot, 1)
        return row


def local_disks(c: Cluster, g: Guest) -> list[LocalDisk]:
    """Volumes not on shared storage (``foreach_volid`` over config and snapshots); 'none' is skipped."""
    out: dict[str, LocalDisk] = {}
    sections = [(None, g.config)] + [(name, snap.config) for name, snap in sorted(g.snapshots.items())]
    for snapname, config in sections:
        for key, value in config.items():
            vol = pveconfig.volume_of(key, value, g.type)
            if vol is None:
                continue
            volid, opts = vol
            cdrom = opts.get("media") == "cdrom"
            if volid == "none" or (volid.startswith("/") and opts.get("shared") == "1"):
                continue
            sid = pveconfig.storage_of(volid)
            storage = c.storages.get(sid) if sid else None
            if storage is not None and storage.shared:
                continue
            disk = out.get(volid)
            if disk is None:
                size = pveconfig.parse_size(opts["size"]) if "size" in opts else 0
                disk = out[volid] = LocalDisk(key, volid, sid, cdrom, size, key.startswith("unused"), attached=False)
            disk.replicate = disk.replicate or opts.get("replicate", "1") not in ("0", "no", "off", "false")
            if snapshot := snapname:
                disk.in_snapshot.append(snapshot)
            else:
                disk.attached = True
    return list(out.values())


def _content_type(c: Cluster, g: Guest, volid: str) -> str:
    if g.type == "lxc":
        return "rootdir"
    return "iso" if volid.split(":", 1)[-1].startswith("iso/") else "images"


def storage_problem(c: Cluster, g: Guest, target: str) -> str | None:
    """``storage_check_enabled`` on the source node, then on the target, and the content type check, for every
    storage volume (qemu-server QemuServer.pm check_storage_availability, QemuMigrate.pm prepare)."""
    for _key, volid, _opts in g.volumes():
        sid = pveconfig.storage_of(volid)
        if sid is None:
            continue
        storage = c.storages.get(sid)
        if storage is None:
            return f"storage '{sid}' does not exist"
        if storage.disable:  # pve-storage Storage.pm storage_check_enabled
            return f"storage '{sid}' is disabled"
        if not storage.available_on(g.node):
            return f"storage '{sid}' is not available on node '{g.node}'"
        if not storage.available_on(target):
            return f"storage '{sid}' is not available on node '{target}'"
        vtype = _content_type(c, g, volid)
        if vtype not in storage.content:
            return f"{volid}: content type '{vtype}' is not available on storage '{sid}'"
    return None


def unavailable_storages(c: Cluster, g: Guest, target: str) -> list[str]:
    """``check_local_storage_availability``: disabled storages, or ones whose nodes exclude the target."""
    missing = set()
    for _key, volid, _opts in g.volumes():
        sid = pveconfig.storage_of(volid)
        storage = c.storages.get(sid) if sid else None
        if storage is not None and not storage.available_on(target):
            missing.add(storage.storage)
    return sorted(missing)


def blocking_ha_resources(c: Cluster, g: Guest) -> dict[str, list[dict[str, str]]]:
    """``get_resource_motion_info`` (PVE 9): negative resource-affinity partners block their node."""
    out: dict[str, list[dict[str, str]]] = {}
    for rule in c.ha_rules.values():
        if rule.get("type") != "resource-affinity" or rule.get("affinity") != "negative" or rule.get("disable"):
            continue
        members = [m.strip() for m in str(rule.get("resources", "")).split(",")]
        if g.sid not in members:
            continue
        for sid in members:
            res = c.ha_resources.get(sid)
            other = c.guests.get(int(sid.split(":", 1)[1])) if ":" in sid else None
            if sid == g.sid or res is None or res.state == "ignored" or other is None:
                continue
            if c.nodes[other.node].online:
                out.setdefault(other.node, []).append({"sid": sid, "cause": "resource-affinity"})
    return out


def _ha_fields(c: Cluster, g: Guest, body: dict[str, Any], not_allowed: dict[str, dict[str, Any]]) -> None:
    res = c.ha_resource_for(g)
    if _major(c) < 9 or res is None or res.state == "ignored":
        return
    body["dependent-ha-resources"] = dependent_ha_resources(c, g.sid)
    for node, blockers in blocking_ha_resources(c, g).items():
        if node != g.node:
            not_allowed.setdefault(node, {})["blocking-ha-resources"] = blockers


def precondition(c: Cluster, g: Guest) -> dict[str, Any]:
    """The body of ``GET /nodes/{node}/qemu/{vmid}/migrate``."""
    not_allowed: dict[str, dict[str, Any]] = {}
    for node in c.nodes:
        if node == g.node:
            continue
        entry: dict[str, Any] = {}
        storages = unavailable_storages(c, g, node)
        if storages:
            entry["unavailable_storages"] = storages
        missing = missing_mappings(c, g, node)
        if missing:
            entry["unavailable-resources"] = missing
        not_allowed[node] = entry
    mapped = mapped_resources(c, g)
    body: dict[str, Any] = {
        "running": int(g.status == "running"),
        "local_disks": [d.as_api() for d in local_disks(c, g)],
        "local_resources": local_resources(c, g),
        "mapped-resources": sorted(mapped),
        "mapped-resource-info": mapped,
    }
    _ha_fields(c, g, body, not_allowed)
    body["not_allowed_nodes"] = not_allowed
    body["allowed_nodes"] = [n for n in c.nodes if n != g.node and not not_allowed.get(n)]
    if _major(c) >= 9:
        body["has-dbus-vmstate"] = 1
    return body


def dependent_ha_resources(c: Cluster, sid: str) -> list[str]:
    out: set[str] = set()
    for rule in c.ha_rules.values():
        if rule.get("type") == "resource-affinity" and rule.get("affinity") == "positive" and not rule.get("disable"):
            members = [r.strip() for r in str(rule.get("resources", "")).split(",")]
            if sid in members:
                out.update(m for m in members if m != sid)
    return sorted(out)


def _base_used(c: Cluster, g: Guest, volid: str) -> bool:
    """``volume_is_base_and_used``: another volume on the storage is a linked clone of this base image."""
    sid, _, name = volid.partition(":")
    base = name.rsplit("/", 1)[-1]
    if not base.startswith(("base-", "basevol-")):
        return False
    for other in c.guests.values():
        for _key, vid, _opts in other.volumes():
            m = _BASE_CLONE.match(vid.partition(":")[2]) if vid.startswith(f"{sid}:") else None
            if m and m.group(1) == base and vid != volid:
                return True
    return False


def _scan_volume(c: Cluster, g: Guest, disk: LocalDisk, running: bool, replicated: bool) -> str | None:
    """``scan_local_volumes``' ``$test_volid`` for one local volume."""
    if disk.storage is None:
        return "can't migrate local cdrom drive" if disk.volid == "cdrom" else "local file/device"
    if disk.cdrom:
        return None if disk.cloudinit else "local cdrom image"
    name = disk.volid.partition(":")[2]
    owner = _OWNER.search(name.rsplit("/", 1)[-1])
    if owner is None or int(owner.group(1)) != g.vmid:
        return f"owned by other VM (owner = VM {owner.group(1) if owner else ''})"  # Perl's undef owner: empty
    storage = c.storages[disk.storage]
    if disk.in_snapshot:
        if running and not replicated:
            return "online storage migration not possible if non-replicated snapshot exists"
        fmt = "qcow2" if disk.volid.endswith(".qcow2") else "raw"
        chain = bool(storage.options.get("snapshot-as-volume-chain"))
        if not (
            storage.type == "zfspool" or (storage.type == "btrfs" and fmt == "raw") or (fmt == "qcow2" and not chain)
        ):
            return "non-migratable snapshot exists"
    if _base_used(c, g, disk.volid):
        return "referenced by linked clone(s)"
    if storage.type not in _MIGRATABLE_LOCAL_TYPES:
        return f"storage type '{storage.type}' not supported"
    m = _BASE_CLONE.match(name)
    if m:
        return f"can't migrate '{disk.volid}' as it's a clone of '{m.group(1)}'"
    return None


def _image_path(c: Cluster, g: Guest, disk: LocalDisk) -> str | None:
    """pve-storage ``path``: where a local volume's image lies (directory, zvol, logical volume)."""
    storage = c.storages.get(disk.storage or "")
    if storage is None or disk.cdrom:
        return None
    name = disk.volid.partition(":")[2].rsplit("/", 1)[-1]
    opts = storage.options
    if storage.type in ("dir", "btrfs") and opts.get("path"):
        return f"{str(opts['path']).rstrip('/')}/images/{g.vmid}/{name}"
    if storage.type == "zfspool" and opts.get("pool"):
        return f"/dev/zvol/{opts['pool']}/{name}"
    if storage.type in ("lvm", "lvmthin") and opts.get("vgname"):
        return f"/dev/{opts['vgname']}/{name}"
    return None


def aliased(c: Cluster, g: Guest) -> str | None:
    """QemuMigrate ``scan_local_volumes`` / LXC ``Migrate::phase1``: two volids resolving to one path die with
    'detected not supported aliased volumes'."""
    paths: dict[str, set[str]] = {}
    for disk in local_disks(c, g):
        path = _image_path(c, g, disk)
        if path is not None:
            paths.setdefault(path, set()).add(disk.volid)
    for volids in paths.values():
        if len(volids) > 1:
            return "detected not supported aliased volumes: '" + "', '".join(sorted(volids)) + "'"
    return None


def task_blocker(
    c: Cluster, g: Guest, target: str, online: bool, with_local_disks: bool, force_local: bool = False
) -> str | None:
    """The error a qmigrate task would die with (``QemuMigrate::prepare`` + ``scan_local_volumes``)."""
    # prepare's first check: the job to this target only (find_local_replication_job), any other job aside
    if any(j.guest == g.vmid and j.target == target and j.remove_job for j in c.replication.values()):
        return "refusing to migrate replicated VM whose replication job is marked for removal"
    if not c.nodes[target].online:
        return "migration aborted (duration 00:00:01): Can't connect to destination address using public key"
    running = g.status == "running"
    blocking = [r for r in blocking_resources(c, g) if r != "clipboard=vnc"]
    # prepare tests '$self->{running} || !force', but AbstractMigrate sets running only once prepare returned:
    # force (the HA LRM's, PVEVM.pm migrate) lets local devices through, running or not
    if blocking and not force_local:
        return f"can't migrate VM which uses local devices: {', '.join(blocking)}"
    unmovable = [r for r in blocking if r.startswith(("hostpci", "ivshmem"))]
    if running and online and unmovable:  # QEMU's own migration blocker (VFIO without migration support, ivshmem)
        return f"online migrate failure - QEMU cannot migrate {', '.join(unmovable)}"
    mapped = mapped_resources(c, g)
    missing = missing_mappings(c, g, target)
    if missing:
        return f"can't migrate to '{target}': missing mapped devices {', '.join(missing)}"
    not_live = [f"{k}:{info['name']}" for k, info in sorted(mapped.items()) if not info.get("live-migration")]
    if running and not_live:
        return f"can't live migrate running VM which uses following mapped devices: {', '.join(not_live)}"
    if "clipboard=vnc" in local_resources(c, g):
        return "VMs with 'clipboard' set to 'vnc' are not live migratable!"
    problem = storage_problem(c, g, target)
    if problem:
        return problem
    # QemuMigrate: the job to the target (disabled or not) marks its replicatable volumes (QemuConfig.pm
    # get_replicatable_volumes: on a storage with the replicate feature, zfspool, and not replicate=0)
    job = any(j.guest == g.vmid and j.target == target for j in c.replication.values())
    alias = aliased(c, g)  # dies after the volume walk, before the per-volume errors are acted on
    if alias:
        return f"Problem found while scanning volumes - {alias}"
    for disk in local_disks(c, g):
        zfs = disk.storage is not None and c.storages[disk.storage].type == "zfspool"
        err = _scan_volume(c, g, disk, running, job and zfs and disk.replicate and not disk.cdrom)
        if err:
            return f"can't migrate local disk '{disk.volid}': {err}"
        if running and disk.attached and not disk.unused and not disk.cdrom and not with_local_disks:
            return "can't live migrate attached local disks without with-local-disks option"
    plug = _plug_error(c, g, target) if running and online else None
    if plug:  # the target's 'qm start --migratedfrom' plugs the NICs (qemu-server src/usr/pve-bridge)
        return f"migration problems: start failed on target: {plug}"
    if running and online and _cpu_host(g) and c.nodes[target].cpu_model != c.nodes[g.node].cpu_model:
        return (
            "migration problems: VM qmp command 'migrate' failed - target host CPU "
            f"'{c.nodes[target].cpu_model}' lacks features of the source host CPU (cpu: host)"
        )
    return None


def _plug_error(c: Cluster, g: Guest, target: str) -> str | None:
    if c.sdn is None:
        return None
    for key, value in sorted(g.config.items()):
        if key.startswith("net") and key[3:].isdecimal():
            opts = pveconfig.parse_property_string(value, "model")
            err = c.sdn.plug_error(opts.get("bridge", ""), target, bool(opts.get("tag") or opts.get("trunks")))
            if err:
                return err
    return None


def _cpu_host(g: Guest) -> bool:
    cpu = g.config.get("cpu", "")
    return cpu == "host" or "cputype=host" in cpu or cpu.startswith("host,")


def ct_task_blocker(c: Cluster, g: Guest, target: str, restart: bool, online: bool) -> str | None:
    """LXC ``Migrate::prepare`` and ``phase1``."""
    if not c.nodes[target].online:
        return "migration aborted (duration 00:00:01): Can't connect to destination address using public key"
    if online and g.status == "running":
        return "lxc live migration is currently not implemented"
    for key, volid, opts in g.volumes():
        if volid.startswith("/") and opts.get("shared") != "1":
            return f"cannot migrate local bind mount point '{key}'"
    problem = storage_problem(c, g, target)
    if problem:
        return problem
    for disk in local_disks(c, g):
        if disk.storage is None:
            continue
        storage = c.storages[disk.storage]
        if disk.in_snapshot and storage.type not in ("zfspool", "btrfs"):
            return f"can't migrate local volume '{disk.volid}': non-migratable snapshot exists"
        if storage.type not in _MIGRATABLE_LOCAL_TYPES:
            return f"can't migrate local volume '{disk.volid}': storage type '{storage.type}' not supported"
        m = _BASE_CLONE.match(disk.volid.partition(":")[2])
        if m:
            return f"can't migrate local volume '{disk.volid}': clone of '{m.group(1)}'"
    return aliased(c, g)


def migration_seconds(c: Cluster, g: Guest, with_local_disks: bool) -> float:
    """Simulated duration: RAM transfer plus any local disk copy (1 GiB/s)."""
    seconds = 5 + g.maxmem / 1024**3 * 2
    if with_local_disks or g.status != "running":
        seconds += sum(d.size for d in local_disks(c, g) if not d.cdrom) / 1024**3
    return seconds
