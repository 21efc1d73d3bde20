"""Reads of one cluster-wide object: a backup job and the volumes it backs up (pve-manager PVE/API2/Backup.pm
read_job, get_volume_backup_included), an HA group or rule (pve-ha-manager API2/HA/Groups.pm, Rules.pm read),
a metric server (API2/Cluster/MetricServer.pm read) and a storage definition (pve-storage
API2/Storage/Config.pm read)."""

from __future__ import annotations

from typing import Any

from pvesim.api import render
from pvesim.api.cluster import _Scope, backup_job_row, storage_config_row
from pvesim.api.ha import full_rules, rule_row
from pvesim.api.registry import ApiError, Call, route
from pvesim.scenario import major
from pvesim.state import Guest


def _job(call: Call) -> dict[str, Any]:
    job = next((j for j in call.cluster.backup_jobs if str(j.get("id")) == call.params["id"]), None)
    if job is None:
        raise ApiError(400, "Parameter verification failed.", {"id": f"No such job '{call.params['id']}'"})
    return job


@route("GET", "/cluster/backup/{id}")
def read_job(call: Call) -> dict[str, Any]:
    """Backup.pm read_job: jobs.cfg's section with its id (no next-run: only the index computes it)."""
    row = backup_job_row(_job(call))
    row.pop("next-run", None)
    return row


def _volumes(g: Guest) -> list[dict[str, Any]]:
    """qemu-server QemuConfig.pm get_backup_volumes (no CD-ROMs; ``backup=0`` and an EFI disk without OVMF are
    left out) and pve-container LXC/Config.pm mountpoint_backup_enabled (rootfs always, volume mount points
    with ``backup=1``, bind and device mounts never)."""
    out = []
    for key, volid, opts in g.volumes():
        if key.startswith("unused") or opts.get("media") == "cdrom":
            continue
        if g.type == "qemu":
            included = opts.get("backup", "1") not in ("0", "no", "off", "false")
            reason = "backup=" + ("yes" if "backup" not in opts else "no")
            if key.startswith("efidisk") and g.config.get("bios") != "ovmf":
                included, reason = False, "efidisk but no OVMF BIOS"
        elif key == "rootfs":
            included, reason = True, "rootfs"
        elif volid.startswith("/"):
            included, reason = False, "not a volume"
        else:
            included = opts.get("backup") in ("1", "yes", "on", "true")
            reason = "enabled" if included else "disabled"
        out.append({"id": f"{g.vmid}:{key}", "name": volid, "included": int(included), "reason": reason, "leaf": 1})
    return out


@route("GET", "/cluster/backup/{id}/included_volumes")
def included_volumes(call: Call) -> dict[str, Any]:
    """Backup.pm get_volume_backup_included: the job's guests the caller may audit, each with its volumes."""
    c = call.cluster
    job = _job(call)
    scope = _Scope.of(job)
    vmids = sorted(g.vmid for g in c.guests.values() if scope.includes(g))
    if scope.ids is not None and not scope.pool:  # listed ids that are no guest (removed, not purged)
        vmids = sorted(set(vmids) | {v for v in scope.ids if v not in c.guests})
    children: list[dict[str, Any]] = []
    for vmid in vmids:
        if not call.can(f"/vms/{vmid}", "VM.Audit"):
            continue
        g = c.guests.get(vmid)
        if g is None:
            children.append({"id": vmid, "type": "unknown", "leaf": 1})
            continue
        volumes = _volumes(g)
        name = g.config.get("name" if g.type == "qemu" else "hostname", "")
        children.append({"id": vmid, "type": g.type, "name": name, "children": volumes, "leaf": int(not volumes)})
    return {"children": children}


@route("GET", "/cluster/ha/groups/{group}")
def read_group(call: Call) -> dict[str, Any]:
    """Groups.pm read: PVE 9 refuses once the groups are migrated; else the group with its name and digest."""
    c = call.cluster
    if major(c.version) >= 9 and not c.ha_groups:
        raise ApiError(500, "cannot read group: ha groups have been migrated to rules")
    name = call.params["group"]
    if name not in c.ha_groups:
        raise ApiError(500, f"no such ha group '{name}'")
    digest = render.digest_of(sorted(c.ha_groups.items()))
    return {"group": name, "type": "group", **c.ha_groups[name], "digest": digest}


@route("GET", "/cluster/ha/rules/{rule}")
def read_rule(call: Call) -> dict[str, Any]:
    """Rules.pm read_rule: the rule (groups not yet migrated included), with digest and order."""
    rules = full_rules(call.cluster)
    name = call.params["rule"]
    if name not in rules:
        raise ApiError(500, f"no such ha rule '{name}'")
    order = sorted(rules).index(name) + 1
    return rule_row(call.cluster, name, rules[name], order)


@route("GET", "/cluster/metrics/server/{id}")
def read_metric_server(call: Call) -> dict[str, Any]:
    """MetricServer.pm read: status.cfg's section as stored (type and its options, no id)."""
    sid = call.params["id"]
    entry = next((m for m in call.cluster.metric_servers if m.get("id") == sid), None)
    if entry is None:
        raise ApiError(500, f"status server entry '{sid}' does not exist")
    out = {k: v for k, v in entry.items() if k != "id"}
    for key in ("port", "disable"):
        if key in out:
            out[key] = int(out[key])
    return out


@route("GET", "/storage/{storage}")
def read_storage(call: Call) -> dict[str, Any]:
    """Config.pm read ($api_storage_config): the entry as the index shows it; storage_config dies for an
    unknown id."""
    s = call.cluster.storages.get(call.params["storage"])
    if s is None:
        raise ApiError(500, f"storage '{call.params['storage']}' does not exist")
    return storage_config_row(call.cluster, s)
