"""Guest endpoints (qemu and lxc): lists, config, status, power, snapshots, migration, vzdump."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from pvesim import migration, pveconfig, tags
from pvesim.api import render
from pvesim.api.registry import ApiError, Call, b, route
from pvesim.apischema import MethodSpec
from pvesim.state import Cluster, Guest, Snapshot, Task, Volume
from pvesim.tasks import start_task

KIND = {"qemu": "VM", "lxc": "CT"}
PREFIX = {"qemu": "qm", "lxc": "vz"}


def _ha_managed(c: Cluster, g: Guest) -> bool:
    """pve-ha-manager src/PVE/HA/Config.pm $service_check_ha_state: an ignored resource, and every resource while
    HA is disarmed (or disarming) in ignore mode, is managed directly."""
    res = c.ha_resource_for(g)
    disarmed_ignore = c.ha_disarm is not None and c.ha_disarm["mode"] == "ignore"
    return res is not None and res.state != "ignored" and not disarmed_ignore


def _check_lock(g: Guest) -> None:
    if g.lock:
        raise ApiError(500, f"{KIND[g.type]} is locked ({g.lock})")


# ---------------------------------------------------------------- lists and reads


def _list(call: Call, gtype: str) -> list[dict[str, Any]]:
    c = call.cluster
    rows = []
    for g in sorted(c.guests.values(), key=lambda g: g.vmid):
        if g.node != call.params["node"] or g.type != gtype or not call.can(f"/vms/{g.vmid}", "VM.Audit"):
            continue
        row = render.guest_runtime(c, g)
        row.update(render.status_fields(c, g, full=call.flag("full")))
        if gtype == "lxc":
            row["vmid"] = str(g.vmid)  # real PVE returns the CT vmid as a string here
            row["type"] = "lxc"
        rows.append(row)
    return rows


@route("GET", "/nodes/{node}/qemu")
def qemu_list(call: Call) -> list[dict[str, Any]]:
    return _list(call, "qemu")


@route("GET", "/nodes/{node}/lxc")
def lxc_list(call: Call) -> list[dict[str, Any]]:
    return _list(call, "lxc")


_CONFIG_TYPES: dict[int, tuple[MethodSpec, dict[str, str | None]]] = {}


def _config_types(spec: MethodSpec) -> dict[str, str | None]:
    """Return types of config keys per schema method; the entry keeps its spec, so that a spec of another
    schema created later at the same address is not taken for it."""
    found = _CONFIG_TYPES.get(id(spec))
    if found is None or found[0] is not spec:
        found = (spec, {k: v.get("type") for k, v in (spec.returns.get("properties") or {}).items()})
        _CONFIG_TYPES[id(spec)] = found
    return found[1]


def _typed_config(call: Call, config: dict[str, str]) -> dict[str, Any]:
    types = _config_types(call.spec)
    out: dict[str, Any] = {}
    for key, value in config.items():
        t = types.get(key) or types.get(re.sub(r"\d+$", "[n]", key))
        if t in ("integer", "boolean"):
            out[key] = int(value)
        elif t == "number":
            out[key] = float(value)
        else:
            out[key] = value
    return out


def _config(call: Call, gtype: str) -> dict[str, Any]:
    g = call.guest(gtype)
    if "snapshot" in call.params:
        if call.params["snapshot"] not in g.snapshots:
            raise ApiError(500, f"snapshot '{call.params['snapshot']}' does not exist")
        body = _typed_config(call, render.snapshot_section(call.cluster, g, call.params["snapshot"]))
    else:  # pending values applied unless current=1 (qemu-server API2/Qemu.pm vm_config)
        body = _typed_config(call, g.config if call.flag("current") else g.current_config())
    body["digest"] = g.digest
    return body


@route("GET", "/nodes/{node}/qemu/{vmid}/config")
def qemu_config(call: Call) -> dict[str, Any]:
    return _config(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/config")
def lxc_config(call: Call) -> dict[str, Any]:
    return _config(call, "lxc")


def _pending(call: Call, gtype: str) -> list[dict[str, Any]]:
    """Current and pending values per key (pve-guest-common GuestHelpers.pm config_with_pending_array)."""
    g = call.guest(gtype)
    out: list[dict[str, Any]] = []
    for key, value in {**g.config, "digest": g.digest}.items():
        item: dict[str, Any] = {"key": key, "value": value}
        if key in g.pending:
            item["pending"] = g.pending[key]
        if key in g.pending_delete:
            item["delete"] = 2 if g.pending_delete[key] else 1
        out.append(item)
    out += [{"key": k, "pending": v} for k, v in g.pending.items() if k not in g.config]
    out += [{"key": k, "delete": 2 if f else 1} for k, f in g.pending_delete.items() if k not in g.config]
    return out


@route("GET", "/nodes/{node}/qemu/{vmid}/pending")
def qemu_pending(call: Call) -> list[dict[str, Any]]:
    return _pending(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/pending")
def lxc_pending(call: Call) -> list[dict[str, Any]]:
    return _pending(call, "lxc")


def _update_config(call: Call, gtype: str) -> None:
    g = call.guest(gtype)
    p = dict(call.params)
    if "digest" in p and p["digest"] != g.digest:
        raise ApiError(500, "checksum mismatch (file change by other user?)")
    _root_only(call, "skiplock")
    if not call.flag("skiplock"):
        _check_lock(g)
    changes = {k: v for k, v in p.items() if k not in ("node", "vmid", "digest", "delete", "skiplock", "revert")}
    deletes = [k.strip() for k in str(p.get("delete", "")).split(",") if k.strip()]
    if not changes and not deletes:
        raise ApiError(500, "no options specified")
    if "tags" in changes:  # GuestHelpers.pm assert_tag_permissions, then get_unique_tags (qemu-server update_vm)
        c = call.cluster
        configs = ((v.vmid, v.config) for v in c.guests.values())
        seen = tags.visible_tags(configs, lambda vmid: call.can(f"/vms/{vmid}", "VM.Audit"))
        privileged = call.can("/", "Sys.Modify")
        refused = tags.tag_refusal(g.config.get("tags", ""), str(changes["tags"]), c.options, privileged, seen)
        if refused:
            raise ApiError(403, refused)
        changes["tags"] = tags.unique_tags(str(changes["tags"]), c.options)
    for key, value in changes.items():
        g.config[key] = str(int(value)) if isinstance(value, bool) else str(value)
    for key in deletes:
        g.config.pop(key, None)


@route("PUT", "/nodes/{node}/qemu/{vmid}/config")
def qemu_update(call: Call) -> None:
    _update_config(call, "qemu")


@route("PUT", "/nodes/{node}/lxc/{vmid}/config")
def lxc_update(call: Call) -> None:
    _update_config(call, "lxc")


def _status_current(call: Call, gtype: str) -> dict[str, Any]:
    c = call.cluster
    g = call.guest(gtype)
    row = render.guest_runtime(c, g)
    res = c.ha_resource_for(g)
    row["ha"] = (
        {"managed": 1, "state": res.state, **({"group": res.group} if res.group else {})} if res else {"managed": 0}
    )
    row.update(render.status_fields(c, g, full=True))
    if gtype == "qemu":
        # Qemu.pm vm_status: agent (when enabled), spice (a SPICE or virtio display) and the display's clipboard
        row["agent"] = b(pveconfig.parse_property_string(g.config.get("agent", "0"), "enabled").get("enabled") == "1")
        if g.config.get("vga"):
            vga = pveconfig.parse_property_string(g.config["vga"], "type")
            if str(vga.get("type", "")).startswith(("qxl", "virtio")) or "spice" in str(vga.get("type", "")):
                row["spice"] = 1
            if "clipboard" in vga:
                row["clipboard"] = vga["clipboard"]
    return row


@route("GET", "/nodes/{node}/qemu/{vmid}/status/current")
def qemu_status(call: Call) -> dict[str, Any]:
    return _status_current(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/status/current")
def lxc_status(call: Call) -> dict[str, Any]:
    return _status_current(call, "lxc")


# ---------------------------------------------------------------- power actions


def set_running(c: Cluster, g: Guest) -> None:
    g.status = "running"
    g.qmpstatus = None
    g.started_at = c.clock.now()


def set_stopped(g: Guest) -> None:
    g.status = "stopped"
    g.qmpstatus = None
    g.started_at = None


def _root_only(call: Call, param: str) -> None:
    """qemu-server and pve-container refuse skiplock (and force) unless the caller is root@pam itself. An API token
    is 'user@realm!name' there (pve-access-control AccessControl.pm verify_token), so even root@pam's tokens are
    refused: 'API tokens are always a subset of their user' (proxmox/qemu-server issue 10)."""
    if call.flag(param) and call.user != "root@pam":
        raise ApiError(400, "Parameter verification failed.", {param: "Only root may use this option."})


def _power(call: Call, gtype: str, action: str) -> str:
    c = call.cluster
    g = call.guest(gtype)
    kind = KIND[gtype]
    _root_only(call, "skiplock")
    skiplock = call.flag("skiplock")
    # qemu-server API2/Qemu.pm vm_shutdown (before routing an HA guest) and vm_reboot: vm_is_paused($vmid, 1)
    paused = g.status == "running" and g.qmpstatus in ("paused", "prelaunch", "suspended")
    if gtype == "qemu" and paused and (action == "reboot" or (action == "shutdown" and not call.flag("forceStop"))):
        raise ApiError(500, "VM is paused - cannot shutdown")
    if _ha_managed(c, g) and action in ("start", "stop", "shutdown"):
        return _ha_power(call, g, action)
    # vm_resume and qemu's vm_start take a hibernated VM ('suspended'); pve-container's vm_start skips 'mounted'
    passes = {"resume": ("suspended",), "start": ("suspended",) if gtype == "qemu" else ("mounted",)}
    if g.lock and not skiplock and g.lock not in passes.get(action, ()):
        raise ApiError(500, f"{kind} is locked ({g.lock})")
    ttype = PREFIX[gtype] + action
    durations = {"start": 3, "stop": 2, "shutdown": 8, "reboot": 10, "suspend": 2, "resume": 1, "reset": 1}

    def finish() -> str | None:
        if action == "start":
            if g.status == "running":
                return f"{kind} {g.vmid} already running"
            if g.template:
                return "you can't start a vm if it's a template"
            if g.config.get("lock") == "suspended":  # QemuServer.pm vm_start: resume => the saved state
                g.config.pop("lock")
                g.config.pop("vmstate", None)
            g.apply_pending()
            set_running(c, g)
        elif action in ("stop", "shutdown"):
            if action == "shutdown" and g.status != "running":
                return f"{kind} {g.vmid} not running"
            set_stopped(g)
        elif action in ("reboot", "reset"):
            if g.status != "running":
                return f"{kind} {g.vmid} not running"
            if action == "reboot":  # shutdown + start: "Applies pending changes." (API2/Qemu.pm vm_reboot)
                g.apply_pending()
            g.started_at = c.clock.now()
        elif action == "suspend":
            if g.status != "running":
                return f"{kind} {g.vmid} not running"
            if call.flag("todisk"):
                set_stopped(g)
                g.config["lock"] = "suspended"
                g.config["vmstate"] = f"local-lvm:vm-{g.vmid}-state-suspend-{dt.date.today():%Y-%m-%d}"
            else:
                g.qmpstatus = "paused"
        elif action == "resume":
            if g.config.get("lock") == "suspended":
                g.config.pop("lock")
                g.config.pop("vmstate", None)
                set_running(c, g)
            elif g.status == "running" and g.qmpstatus == "paused":
                g.qmpstatus = None
            elif g.status == "running":
                return f"{kind} {g.vmid} already running"
            else:
                return f"{kind} {g.vmid} not running"
        return None

    log = [f"{action} {kind} {g.vmid}"]
    task = start_task(c, g.node, ttype, str(g.vmid), call.user, durations[action], log, finish)
    return task.upid


def _ha_power(call: Call, g: Guest, action: str) -> str:
    c = call.cluster
    res = c.ha_resource_for(g)
    assert res is not None
    want = "started" if action == "start" else "stopped"
    ttype = "hastart" if action == "start" else "hastop"

    def carried_out() -> str | None:
        if want == "started":
            set_running(c, g)
        else:
            set_stopped(g)
        return None

    def finish() -> str | None:
        # the request task only queues the command (ha-manager set / crm-command stop); the CRM sets the resource's
        # state and the LRM runs the guest's own task (pve-ha-manager Manager.pm, LRM.pm, Resources/PVEVM.pm)
        if res.crm_state == "error":  # API2/HA/Resources.pm check_service_state, CLI/ha_manager.pm stop alike
            return f"service '{res.sid}' in error state, must be disabled and fixed first"
        res.state = want
        if (want == "started") != (g.status == "running"):
            lrm = action if action != "shutdown" or int(call.params.get("timeout", 60)) else "stop"
            log = [f"{lrm} {KIND[g.type]} {g.vmid} (HA request)"]
            start_task(c, g.node, PREFIX[g.type] + lrm, str(g.vmid), "root@pam", 3, log, carried_out)
        return None

    log = [f"Requesting HA {action if action == 'start' else 'stop'} for {KIND[g.type]} {g.vmid}"]
    return start_task(c, g.node, ttype, str(g.vmid), call.user, 2, log, finish).upid


def _power_route(gtype: str, action: str) -> None:
    def handler(call: Call) -> str:
        return _power(call, gtype, action)

    route("POST", f"/nodes/{{node}}/{gtype}/{{vmid}}/status/{action}")(handler)


for _action in ("start", "stop", "shutdown", "reboot", "suspend", "resume"):
    _power_route("qemu", _action)
    _power_route("lxc", _action)
_power_route("qemu", "reset")


# ---------------------------------------------------------------- snapshots


def _snapshot_list(call: Call, gtype: str) -> list[dict[str, Any]]:
    g = call.guest(gtype)
    rows: list[dict[str, Any]] = []
    for s in sorted(g.snapshots.values(), key=lambda s: s.snaptime):
        row: dict[str, Any] = {"name": s.name, "description": s.description, "snaptime": s.snaptime}
        if s.parent:
            row["parent"] = s.parent
        if gtype == "qemu":
            row["vmstate"] = b(s.vmstate)
        rows.append(row)
    current: dict[str, Any] = {"name": "current", "description": "You are here!"}
    if g.config.get("parent"):
        current["parent"] = g.config["parent"]
    if gtype == "qemu":
        current["running"] = b(g.status == "running")
    rows.append(current)
    return rows


@route("GET", "/nodes/{node}/qemu/{vmid}/snapshot")
def qemu_snapshots(call: Call) -> list[dict[str, Any]]:
    return _snapshot_list(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/snapshot")
def lxc_snapshots(call: Call) -> list[dict[str, Any]]:
    return _snapshot_list(call, "lxc")


def _snapshot_create(call: Call, gtype: str) -> str:
    c = call.cluster
    g = call.guest(gtype)
    name = call.params["snapname"]
    if name in ("current", "pending"):
        raise ApiError(500, f"unable to use snapshot name '{name}' (reserved name)")
    _check_lock(g)
    vmstate = call.flag("vmstate") and gtype == "qemu"

    def finish() -> str | None:
        refused = _snapshot_refusal(c, g, name, call.flag("vmstate"))
        if refused:
            return refused
        snap_cfg = {k: v for k, v in g.config.items() if k not in ("lock", "parent")}
        g.snapshots[name] = Snapshot(
            name,
            int(c.clock.now()),
            str(call.params.get("description", "")),
            vmstate and g.status == "running",
            g.config.get("parent"),
            snap_cfg,
        )
        g.config["parent"] = name
        return None

    ttype = "qmsnapshot" if gtype == "qemu" else "vzsnapshot"
    return start_task(
        c,
        g.node,
        ttype,
        str(g.vmid),
        call.user,
        5 if not vmstate else 15,
        [f"snapshotting '{name}'"],
        finish,
        lock_guest=g,
        lock="snapshot",
    ).upid


# pve-storage volume_has_feature('snapshot') of a current volume: any format on these plugin types, else qcow2
_SNAPSHOT_ANY_FORMAT = frozenset({"zfspool", "zfs", "rbd", "lvmthin", "btrfs"})


def _snapshot_refusal(c: Any, g: Any, name: str, vmstate: bool) -> str | None:
    """pve-guest-common AbstractConfig.pm __snapshot_prepare, in its order: template, the RAM blockers
    (qemu-server QemuMigrate/Helpers.pm check_non_migratable_resources, with vmstate asked), the name, then
    has_feature('snapshot') over the volumes (a VM's without CD-ROMs, QemuConfig.pm; every mount point,
    LXC/Config.pm); a host path has no feature (Storage.pm volume_has_feature)."""
    if g.template:
        return "you can't take a snapshot if it's a template"
    if vmstate and g.type == "qemu":
        blockers = [k for k in ("amd-sev", "intel-tdx") if g.config.get(k)]
        blockers += ["virtiofs"] if any(k.startswith("virtiofs") for k in g.config) else []
        if blockers:
            return "Cannot live-migrate, snapshot (with RAM), or hibernate a VM with: " + ", ".join(blockers)
    if name in g.snapshots:
        return f"snapshot name '{name}' already used"
    for volid in _snapshot_volids(g, g.config):
        sid = volid.split(":", 1)[0] if ":" in volid and not volid.startswith("/") else None
        storage = c.storages.get(sid) if sid else None
        if storage is None or not (storage.type in _SNAPSHOT_ANY_FORMAT or volid.endswith(".qcow2")):
            return "snapshot feature is not available"
    return None


@route("POST", "/nodes/{node}/qemu/{vmid}/snapshot")
def qemu_snapshot_create(call: Call) -> str:
    return _snapshot_create(call, "qemu")


@route("POST", "/nodes/{node}/lxc/{vmid}/snapshot")
def lxc_snapshot_create(call: Call) -> str:
    return _snapshot_create(call, "lxc")


def _snapshot_delete(call: Call, gtype: str) -> str:
    c = call.cluster
    g = call.guest(gtype)
    name = call.params["snapname"]
    if name not in g.snapshots:
        raise ApiError(500, f"snapshot '{name}' does not exist")
    if not call.flag("force"):
        _check_lock(g)

    def finish() -> str | None:
        snap = g.snapshots.pop(name)
        for other in g.snapshots.values():
            if other.parent == name:
                other.parent = snap.parent
        if g.config.get("parent") == name:
            if snap.parent:
                g.config["parent"] = snap.parent
            else:
                g.config.pop("parent", None)
        return None

    ttype = "qmdelsnapshot" if gtype == "qemu" else "vzdelsnapshot"
    return start_task(
        c,
        g.node,
        ttype,
        str(g.vmid),
        call.user,
        3,
        [f"delete snapshot '{name}'"],
        finish,
        lock_guest=g,
        lock="snapshot-delete",
    ).upid


@route("DELETE", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}")
def qemu_snapshot_delete(call: Call) -> str:
    return _snapshot_delete(call, "qemu")


@route("DELETE", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}")
def lxc_snapshot_delete(call: Call) -> str:
    return _snapshot_delete(call, "lxc")


def _snapshot_rollback(call: Call, gtype: str) -> str:
    c = call.cluster
    g = call.guest(gtype)
    name = call.params["snapname"]
    if name not in g.snapshots:
        raise ApiError(500, f"snapshot '{name}' does not exist")
    _check_lock(g)

    def finish() -> str | None:
        refused = _rollback_refusal(c, g, name)
        if refused:
            return refused
        snap = g.snapshots[name]
        g.config.clear()
        g.config.update(snap.config)
        g.config["parent"] = name
        if snap.vmstate or call.flag("start"):
            set_running(c, g)
        else:
            set_stopped(g)
        return None

    ttype = "qmrollback" if gtype == "qemu" else "vzrollback"
    return start_task(
        c,
        g.node,
        ttype,
        str(g.vmid),
        call.user,
        5,
        [f"rollback to snapshot '{name}'"],
        finish,
        lock_guest=g,
        lock="rollback",
    ).upid


def _snapshot_volids(g: Guest, config: dict[str, str]) -> list[str]:
    """The volumes a config (or a snapshot's) references as has_feature and __snapshot_rollback_vol_possible walk
    them: no unused ones, a VM's CD-ROMs left out."""
    out = []
    for key, value in config.items():
        vol = pveconfig.volume_of(key, str(value), g.type)
        if vol is None or key.startswith("unused") or (g.type == "qemu" and "cdrom" in (vol[1].get("media"), vol[0])):
            continue
        out.append(vol[0])
    return out


def _rollback_refusal(c: Cluster, g: Guest, name: str) -> str | None:
    """pve-guest-common AbstractConfig.pm snapshot_rollback: a template, then each volume's
    volume_rollback_is_possible (pve-storage): a path never, ZFS, thick LVM and volume chains only to the volume's
    most recent snapshot."""
    if g.template:
        return "you can't rollback if vm is a template"
    snap = g.snapshots[name]
    order = list(g.snapshots)  # in the order they were taken, as the storage keeps them (zfs list -s creation)
    newer = [g.snapshots[n] for n in order[order.index(name) + 1 :]]
    for volid in _snapshot_volids(g, snap.config):
        if volid.startswith("/"):
            return f"snapshot rollback file/device '{volid}' is not possible"
        storage = c.storages.get(volid.split(":", 1)[0])
        if storage is None:
            continue
        chain = storage.type == "lvm" or bool(int(storage.options.get("snapshot-as-volume-chain", 0) or 0))
        if (storage.type in ("zfspool", "zfs") or chain) and any(volid in _snapshot_volids(g, s.config) for s in newer):
            where = volid if storage.type in ("zfspool", "zfs") else volid.split(":", 1)[1]
            return f"can't rollback, '{name}' is not most recent snapshot on '{where}'"
    return None


@route("POST", "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback")
def qemu_snapshot_rollback(call: Call) -> str:
    return _snapshot_rollback(call, "qemu")


@route("POST", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback")
def lxc_snapshot_rollback(call: Call) -> str:
    return _snapshot_rollback(call, "lxc")


# ---------------------------------------------------------------- migration


@route("GET", "/nodes/{node}/qemu/{vmid}/migrate")
def qemu_migrate_precondition(call: Call) -> dict[str, Any]:
    c = call.cluster
    g = call.guest("qemu")
    if not c.quorate:
        raise ApiError(500, "cluster not ready - no quorum?")
    _check_lock(g)
    return migration.precondition(c, g)


@route("GET", "/nodes/{node}/lxc/{vmid}/migrate")
def lxc_migrate_precondition(call: Call) -> dict[str, Any]:
    """pve-container ``migrate_vm_precondition`` (PVE 9): only HA affinity, no storage or device analysis."""
    c = call.cluster
    g = call.guest("lxc")
    if not c.quorate:
        raise ApiError(500, "cluster not ready - no quorum?")
    _check_lock(g)
    not_allowed: dict[str, dict[str, Any]] = {}
    body: dict[str, Any] = {"running": b(g.status == "running")}
    if _ha_managed(c, g):
        body["dependent-ha-resources"] = migration.dependent_ha_resources(c, g.sid)
        for node, blockers in migration.blocking_ha_resources(c, g).items():
            if node != g.node:
                not_allowed[node] = {"blocking-ha-resources": blockers}
    body["allowed-nodes"] = [n for n in c.nodes if n != g.node and n not in not_allowed]
    body["not-allowed-nodes"] = not_allowed
    return body


def _check_target(c: Cluster, g: Guest, target: str) -> None:
    if target not in c.nodes:
        raise ApiError(500, f"no such cluster node '{target}'")
    if target == g.node:
        raise ApiError(500, "target is local node.")
    if not c.quorate:
        raise ApiError(500, "cluster not ready - no quorum?")


def move_guest(c: Cluster, g: Guest, target: str) -> None:
    """Apply a finished migration: local volumes and the config move to the target."""
    g.node = target


def schedule_migration(
    c: Cluster,
    g: Guest,
    target: str,
    user: str,
    online: bool,
    with_local: bool,
    restart: bool = False,
    ha_res: Any = None,
    force: bool = False,
) -> Task:
    """Start the real qmigrate/vzmigrate task; its checks run when it ends, like PVE's worker."""
    source = g.node
    if g.type == "qemu":
        ttype, seconds = "qmigrate", migration.migration_seconds(c, g, with_local)
    else:
        ttype, seconds = "vzmigrate", 10.0 + (20.0 if restart and g.status == "running" else 0.0)
    was_running = g.status == "running"

    def finish() -> str | None:
        if ha_res is not None:
            ha_res.crm_state = None
        if g.type == "qemu":
            err = migration.task_blocker(c, g, target, online, with_local, force_local=force)
        else:
            err = migration.ct_task_blocker(c, g, target, restart, online)
        if err:
            return err
        move_guest(c, g, target)
        if g.type == "lxc" and restart and was_running:
            set_running(c, g)
        return None

    kind = KIND[g.type]
    log = [f"starting migration of {kind} {g.vmid} to node '{target}' ({c.nodes[target].ip})"]
    if g.type == "lxc" and restart and was_running:
        log.append(f"shutdown CT {g.vmid}")
    if ha_res is not None:
        ha_res.crm_state = "migrate" if g.type == "qemu" else "relocate"
    return start_task(c, source, ttype, str(g.vmid), user, seconds, log, finish, lock_guest=g, lock="migrate")


@route("POST", "/nodes/{node}/qemu/{vmid}/migrate")
def qemu_migrate(call: Call) -> str:
    """qemu-server src/PVE/API2/Qemu.pm migrate_vm: check_lock, the running checks and the storage check come
    before the HA branch, so they hold for an HA-managed VM too; the remove_job refusal is QemuMigrate's
    prepare, in the task (migration.task_blocker)."""
    c = call.cluster
    g = call.guest("qemu")
    target = call.params["target"]
    _check_target(c, g, target)
    _check_lock(g)
    online = call.flag("online")
    if g.status == "running":
        if not online:
            raise ApiError(500, "can't migrate running VM without --online")
        # check_for_existing_jobs / find_local_replication_job: any job of the VM, any job to the target
        jobs = [j for j in c.replication.values() if j.guest == g.vmid]
        if jobs and not call.flag("force") and not any(j.target == target for j in jobs):
            raise ApiError(
                500,
                f"Cannot live-migrate replicated VM to node '{target}' - not a replication target. "
                "Use 'force' to override.",
            )
    problem = migration.storage_problem(c, g, target)  # check_storage_availability, before the worker forks
    if problem:
        raise ApiError(500, problem)
    if _ha_managed(c, g):
        return _ha_request(call, g, target, "migrate")
    return schedule_migration(c, g, target, call.user, online, call.flag("with-local-disks")).upid


@route("POST", "/nodes/{node}/lxc/{vmid}/migrate")
def lxc_migrate(call: Call) -> str:
    c = call.cluster
    g = call.guest("lxc")
    target = call.params["target"]
    _check_target(c, g, target)
    if _ha_managed(c, g):
        return _ha_request(call, g, target, "relocate")
    _check_lock(g)
    restart, online = call.flag("restart"), call.flag("online")
    if g.status == "running" and not (restart or online):
        raise ApiError(500, "can't migrate running container without --online or --restart")
    return schedule_migration(c, g, target, call.user, online, False, restart=restart).upid


def _ha_request(call: Call, g: Guest, target: str, kind: str) -> str:
    """PVE turns a direct migrate of an HA guest into an HA request: a hamigrate task that runs ``ha-manager
    migrate|relocate`` (qemu-server src/PVE/API2/Qemu.pm migrate_vm, pve-container src/PVE/API2/LXC.pm
    migrate_vm) and ends at once; a service in error state makes that command, and so the task, fail
    (pve-ha-manager src/PVE/API2/HA/Resources.pm check_service_state)."""
    c = call.cluster
    res = c.ha_resource_for(g)
    assert res is not None
    log = [
        f"Requesting HA {'migration' if kind == 'migrate' else 'relocation'} for {KIND[g.type]} {g.vmid} "
        f"to node {target}"
    ]
    refused = (res.crm_state or "") == "error"
    if refused:
        log.append(f"service '{res.sid}' in error state, must be disabled and fixed first")

    def finish() -> str | None:
        if refused:
            return f"command 'ha-manager {kind} {res.sid} {target}' failed: exit code 255"
        request_ha_move(c, g, target, kind)
        return None

    return start_task(c, g.node, "hamigrate", str(g.vmid), call.user, 0.5, log, finish).upid


def request_ha_move(c: Cluster, g: Guest, target: str, kind: str) -> None:
    """What the CRM does with an HA migrate/relocate request: it runs the real migration itself; while HA is
    disarmed it runs no state machine at all, so the request is never carried out (Manager.pm manage,
    handle_disarm)."""
    res = c.ha_resource_for(g)
    if c.ha_disarm is not None:
        return
    if g.type == "qemu" and kind == "migrate":
        # the LRM migrates with force and with-local-disks (pve-ha-manager src/PVE/HA/Resources/PVEVM.pm migrate)
        schedule_migration(c, g, target, "root@pam", g.status == "running", True, ha_res=res, force=True)
    else:
        schedule_migration(c, g, target, "root@pam", False, False, restart=True, ha_res=res)


# ---------------------------------------------------------------- backup


def _backup_volid(storage_type: str, sid: str, g: Guest, now: float) -> tuple[str, str]:
    t = dt.datetime.fromtimestamp(now, tz=dt.UTC)
    if storage_type == "pbs":
        kind = "vm" if g.type == "qemu" else "ct"
        return f"{sid}:backup/{kind}/{g.vmid}/{t:%Y-%m-%dT%H:%M:%SZ}", f"pbs-{kind}"
    ext = "vma.zst" if g.type == "qemu" else "tar.zst"
    return f"{sid}:backup/vzdump-{g.type}-{g.vmid}-{t:%Y_%m_%d-%H_%M_%S}.{ext}", ext


@route("POST", "/nodes/{node}/vzdump")
def vzdump(call: Call) -> str:
    c = call.cluster
    node = call.params["node"]
    p = call.params
    if "vmid" not in p and not call.flag("all"):
        raise ApiError(400, "Parameter verification failed.", {"vmid": "property is missing and it is not optional"})
    vmids = [int(v) for v in str(p.get("vmid", "")).split(",") if v] or sorted(c.guests)
    for vmid in vmids:
        if not call.can(f"/vms/{vmid}", "VM.Backup"):
            raise ApiError(403, f"Permission check failed (/vms/{vmid}, VM.Backup)")
    # API2/VZDump.pm vzdump checks the storage the parameters name (get_storage_param: else 'local'); the worker
    # (VZDump.pm new) then takes /etc/vzdump.conf's storage or dumpdir where the call set neither, and fails the
    # task, not the call, on a storage it cannot use
    asked = p.get("storage") or (None if p.get("dumpdir") else "local")
    if asked and not call.can(f"/storage/{asked}", "Datastore.AllocateSpace"):
        raise ApiError(403, f"Permission check failed (/storage/{asked}, Datastore.AllocateSpace)")
    conf = c.nodes[node].vzdump_conf
    chosen = p if p.get("storage") or p.get("dumpdir") else conf
    sid = None if chosen.get("dumpdir") and not chosen.get("storage") else str(chosen.get("storage") or "local")
    storage = c.storages.get(sid) if sid else None
    refused = _storage_refusal(sid, storage)
    local = [c.guests[v] for v in vmids if v in c.guests and c.guests[v].node == node]
    external = [v for v in vmids if v not in c.guests or c.guests[v].node != node]
    for g in local:
        _check_lock(g)
    seconds = sum(10 + g.maxdisk() / 1024**3 * 0.5 for g in local)
    # the command line as the call gave it (pve-guest-common VZDump/Common.pm command_line): vzdump.conf's storage
    # is not on it
    given = "".join(f" --{k} {p[k]}" for k in ("storage", "dumpdir") if p.get(k))
    log = [
        f"INFO: starting new backup job: vzdump {' '.join(map(str, vmids))}{given} --mode {p.get('mode', 'snapshot')}"
    ]
    if external:
        log.append(f"INFO: skip external VMs: {' '.join(map(str, external))}")

    def finish() -> str | None:
        if refused:
            task.log.append(f"ERROR: {refused}")
            return refused
        now = c.clock.now()
        task.log.extend(f"INFO: Starting Backup of VM {g.vmid} ({g.type})" for g in local)
        failed = {g.vmid: why for g in local if (why := _backup_refusal(call, conf, sid, storage, g))}
        for vmid, why in failed.items():
            task.log.append(f"ERROR: Backup of VM {vmid} failed - {why}")
        for g in local:
            if storage is None or sid is None or g.vmid in failed:  # a dumpdir: files outside any storage
                continue
            volid, fmt = _backup_volid(storage.type, sid, g, now)
            size = max(g.maxdisk() // 3, 64 * 1024**2)
            notes = (
                str(p["notes-template"]).replace("{{guestname}}", g.name).replace("{{vmid}}", str(g.vmid))
                if "notes-template" in p
                else None
            )
            c.volumes.append(
                Volume(
                    volid,
                    sid,
                    None if storage.shared else node,
                    "backup",
                    size,
                    int(now),
                    fmt,
                    g.vmid,
                    notes,
                    bool(int(p.get("protected", 0))),
                    None,
                    g.type,
                )
            )
            storage.add_used(node, size)
        for g in local:
            if g.vmid not in failed:
                task.log.append(f"INFO: Finished Backup of VM {g.vmid} (00:00:{int(seconds) % 60:02d})")
        if failed:
            return "job errors"
        task.log.append("INFO: Backup job finished successfully")
        return None

    lock_guest = local[0] if len(local) == 1 else None
    task = start_task(
        c,
        node,
        "vzdump",
        str(local[0].vmid) if len(local) == 1 else "",  # API2/VZDump.pm: the id only for one local guest
        call.user,
        seconds,
        log,
        finish,
        lock_guest=lock_guest,
        lock="backup",
    )
    return task.upid


def _backup_refusal(call: Call, conf: dict[str, Any], sid: str | None, storage: Any, g: Guest) -> str | None:
    """What VZDump.pm exec_backup_task dies with for one guest: stop mode on an HA resource requested 'started'
    (vm_is_ha_managed($vmid, 'started')); with protected, max-protected-backups (pve-storage Storage.pm
    get_max_protected_backups); with remove=0, the keep-* sum of the effective prune-backups (the call's, the
    storage's, vzdump.conf's; keep-all forces remove=0 and sets no limit)."""
    c, p = call.cluster, call.params
    res = c.ha_resources.get(f"vm:{g.vmid}") or c.ha_resources.get(f"ct:{g.vmid}")  # vm_is_ha_managed: either
    if p.get("mode", conf.get("mode")) == "stop" and res is not None and res.state in ("started", "enabled"):
        return (
            "Cannot execute a backup with stop mode on a HA managed and enabled Service. "
            "Use snapshot mode or disable the Service."
        )
    if storage is None or sid is None:
        return None
    mine = [
        v
        for v in c.volumes
        if v.storage == sid and v.content == "backup" and v.vmid == g.vmid and v.subtype in (None, g.type)
    ]
    kept = sum(1 for v in mine if v.protected)
    if call.flag("protected"):
        cap = storage.options.get("max-protected-backups")
        limit = int(cap) if cap is not None else (-1 if call.can(f"/storage/{sid}", "Datastore.Allocate") else 5)
        if -1 < limit <= kept:
            return f"The number of protected backups per guest is limited to {limit} on storage '{sid}'"
        return None
    prune = str(p.get("prune-backups") or storage.options.get("prune-backups") or conf.get("prune-backups") or "")
    spec = dict(kv.split("=", 1) for kv in prune.split(",") if "=" in kv)
    remove = str(p.get("remove", conf.get("remove", 1))) not in ("0", "False", "false")
    limit = sum(int(v) for k, v in spec.items() if k.startswith("keep-") and k != "keep-all" and v.isdecimal())
    if spec.get("keep-all", "0") not in ("0", "") or remove or not limit or len(mine) - kept < limit:
        return None
    return (
        f"There is a max backup limit of {limit} enforced by the target storage or the vzdump parameters. "
        "Either increase the limit or delete old backups."
    )


def _storage_refusal(sid: str | None, storage: Any) -> str | None:
    """What VZDump.pm new dies with for a storage it cannot use (storage_info, pve-storage storage_config)."""
    if sid is None:
        return None
    if storage is None:
        why = f"storage '{sid}' does not exist"
    elif "backup" not in storage.content:
        why = f"can't use storage '{sid}' for backups - wrong content type"
    else:
        return None
    return f"could not get storage information for '{sid}': {why}"


# ---------------------------------------------------------------- machine versions

# the QEMU each release ships (pve-qemu-kvm): its machine versions go up to this
_QEMU_OF_PVE = {7: (8, 1), 8: (9, 2), 9: (10, 1)}
_QEMU_VERSIONS = [(2, m) for m in range(4, 13)] + [(3, 0), (3, 1), (4, 0), (4, 1), (4, 2)]
_QEMU_VERSIONS += [(major, minor) for major in range(5, 11) for minor in range(3) if (major, minor) != (10, 2)]
# qemu-server src/PVE/QemuServer/Machine.pm $PVE_MACHINE_VERSION: the +pveN revisions of a version
_PVE_REVISIONS = {(4, 1): ("+pve1", "+pve2"), (9, 2): ("+pve1",), (10, 0): ("+pve1",)}


@route("GET", "/nodes/{node}/capabilities/qemu/machines")
def qemu_machines(call: Call) -> list[dict[str, Any]]:
    """What /usr/share/kvm/machine-versions-x86_64.json lists, with PVE's revisions merged in and newest
    first (qemu-server src/PVE/API2/Qemu/Machine.pm)."""
    newest = _QEMU_OF_PVE.get(int(call.cluster.version.split(".")[0]), (10, 1))
    out: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
    for ver in (v for v in _QEMU_VERSIONS if v <= newest):
        text = f"{ver[0]}.{ver[1]}"
        for kind, prefix in (("q35", "pc-q35"), ("i440fx", "pc-i440fx")):
            out.append(((*ver, 0), {"id": f"{prefix}-{text}", "type": kind, "version": text}))
            for rev in _PVE_REVISIONS.get(ver, ()):
                entry = {"id": f"{prefix}-{text}{rev}", "type": kind, "version": f"{text}{rev}"}
                out.append(((*ver, int(rev[4:])), entry))
    return [entry for _key, entry in sorted(out, key=lambda e: e[0], reverse=True)]
