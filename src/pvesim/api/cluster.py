"""Cluster-wide read endpoints: version, status, resources, tasks, backup jobs, replication."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pvesim import calendar, tags
from pvesim.api import render, sdn
from pvesim.api.access import pool_names
from pvesim.api.registry import ApiError, Call, b, route
from pvesim.state import Cluster, Guest


@route("GET", "/version")
def version(call: Call) -> dict[str, Any]:
    c = call.cluster
    return {"version": c.version, "release": c.release, "repoid": "0fcd7879", "console": "xtermjs"}


@route("GET", "/cluster/status")
def cluster_status(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    rows: list[dict[str, Any]] = [
        {
            "type": "cluster",
            "id": "cluster",
            "name": c.name,
            "nodes": len(c.nodes),
            "quorate": b(c.quorate),
            "version": 7 + len(c.nodes),
        }
    ]
    local = next(iter(c.nodes))
    rows.extend(
        {
            "type": "node",
            "id": f"node/{n.name}",
            "name": n.name,
            "nodeid": n.nodeid,
            "ip": n.ip,
            "online": b(n.online),
            "local": b(n.name == local),
            "level": n.level,
        }
        for n in c.nodes.values()
    )
    return rows


@route("GET", "/cluster/resources")
def cluster_resources(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    want = call.params.get("type")
    rows: list[dict[str, Any]] = []
    if want in (None, "node"):  # every node; its figures only with Sys.Audit on it (API2Tools extract_node_stats)
        mem_used = c.mem_used_by_node()
        rows += [
            render.node_resource(c, n, mem_used, call.can(f"/nodes/{n.name}", "Sys.Audit")) for n in c.nodes.values()
        ]
    if want is None:  # pool rows carry no type filter of their own in the schema; every pool of user.cfg
        rows += [
            {"id": f"/pool/{p}", "type": "pool", "pool": p, "status": "online"}
            for p in pool_names(c)
            if call.can(f"/pool/{p}", "Pool.Audit")
        ]
    if want in (None, "vm"):
        for g in sorted(c.guests.values(), key=lambda g: g.vmid):
            if call.can(f"/vms/{g.vmid}", "VM.Audit"):
                row = render.guest_resource(c, g)
                if g.pool and call.can(f"/pool/{g.pool}", "Pool.Audit"):  # API2/Cluster.pm resources
                    row["pool"] = g.pool
                rows.append(row)
    if want in (None, "storage"):  # Datastore.Audit alone: unlike /storage, AllocateSpace does not show a row here
        for n in c.nodes.values():
            for s in c.storages.values():
                if s.available_on(n.name) and call.can(f"/storage/{s.storage}", "Datastore.Audit"):
                    rows.append(render.storage_resource(c, s, n.name))
    if want in (None, "sdn"):  # PVE 9.1's network rows come only unfiltered: the type enum has no 'network'
        rows += [r for r in sdn.resource_rows(call) if want is None or r["type"] == "sdn"]
    return rows


@route("GET", "/cluster/tasks")
def cluster_tasks(call: Call) -> list[dict[str, Any]]:
    """pve-manager PVE/API2/Cluster.pm tasks: every task with Sys.Audit on /, else the caller's own, compared
    after a token task's user is split from its token id: a token (the request's user is the whole token id)
    sees none of them, not even its own."""
    c = call.cluster
    every = call.can("/", "Sys.Audit")
    visible = [t for t in c.tasks if every or t.user.split("!", 1)[0] == call.user]
    visible.sort(key=lambda t: (t.running, t.starttime), reverse=True)
    return [render.task_row(t) for t in visible[:1000]]


_DATACENTER_OBJECTS = (
    "crs", "migration", "replication", "next-id", "ha", "notify", "u2f", "webauthn", "tag-style", "user-tag-access",
)  # fmt: skip


@route("GET", "/cluster/options")
def cluster_options(call: Call) -> dict[str, Any]:
    """pve-manager PVE/API2/Cluster.pm get_options: all of datacenter.cfg with Sys.Audit on /, else console and
    tag-style; 'allowed-tags' for everyone (GuestHelpers.pm get_allowed_tags)."""
    c = call.cluster
    # datacenter.cfg (pvesim keeps the resource mappings beside it: mapping/*.cfg, not served here)
    opts = {k: v for k, v in c.options.items() if not k.startswith("task_") and k != "mappings"}
    # pve-cluster DataCenterConfig.pm parse_datacenter_config: the notes always (comment lines), the MAC
    # prefix Proxmox's OUI unless set, the property strings as objects, tag lists split at ';'
    opts.setdefault("description", "")
    opts.setdefault("mac_prefix", "BC:24:11")
    for key in _DATACENTER_OBJECTS:
        if isinstance(opts.get(key), str) and opts[key]:
            opts[key] = property_object(opts[key])
    for key, inner in (("registered-tags", None), ("user-tag-access", "user-allow-list")):
        holder = opts.get(key) if inner else opts
        if isinstance(holder, dict) and isinstance(holder.get(inner or key), str):
            holder[inner or key] = str(holder[inner or key]).split(";")
    if isinstance(opts.get("crs"), dict) and c.schema_version < "9":  # PVE 8's crs has no auto-rebalance
        opts["crs"] = {k: v for k, v in opts["crs"].items() if not k.startswith("ha-auto-rebalance")}
    if not call.can("/", "Sys.Audit"):
        opts = {k: v for k, v in opts.items() if k in ("console", "tag-style")}
    privileged = call.can("/", "Sys.Modify")
    configs = ((g.vmid, g.config) for g in c.guests.values())
    seen = tags.visible_tags(configs, lambda vmid: privileged or call.can(f"/vms/{vmid}", "VM.Audit"))
    opts["allowed-tags"] = sorted(tags.allowed_tags(c.options, privileged, seen)[0])
    return opts


def _job_vmids(job: dict[str, Any]) -> set[int] | None:
    if job.get("vmid"):
        return {int(v) for v in str(job["vmid"]).split(",") if v}
    return None


@dataclass(frozen=True)
class _Scope:
    """Which guests one backup job includes, its id lists parsed once per request, not once per guest."""

    node: str | None
    pool: str | None
    ids: set[int] | None
    all: bool
    excluded: set[int]

    @classmethod
    def of(cls, job: dict[str, Any]) -> _Scope:
        excluded = {int(v) for v in str(job.get("exclude", "")).split(",") if v}
        return cls(
            job.get("node") or None, job.get("pool") or None, _job_vmids(job), bool(int(job.get("all", 0))), excluded
        )

    def includes(self, g: Guest) -> bool:
        """As PVE's VZDump::get_included_guests: ``pool`` first, then a ``vmid`` list, then ``all`` minus
        ``exclude``; templates included."""
        if self.node and self.node != g.node:
            return False
        if self.pool:
            return g.pool == self.pool
        if self.ids is not None:
            return g.vmid in self.ids
        return self.all and g.vmid not in self.excluded


def _next_run(schedule: str, now: float) -> int | None:
    """Backup.pm index: Proxmox::RS::CalendarEvent compute_next_event from now (none for a bad schedule)."""
    try:
        runs = calendar.next_events(calendar.parse(schedule), now, 1)
    except calendar.CalendarError:
        return None
    return runs[0] if runs else None


@route("GET", "/cluster/backup")
def backup_jobs(call: Call) -> list[dict[str, Any]]:
    now = call.cluster.clock.now()
    out = []
    for job in call.cluster.backup_jobs:
        row = backup_job_row(job)
        if row.get("schedule"):  # every job with a schedule, enabled or not (Backup.pm index)
            nxt = _next_run(str(row["schedule"]), now)
            if nxt is not None:
                row["next-run"] = nxt
        out.append(row)
    return out


def backup_job_row(job: dict[str, Any]) -> dict[str, Any]:
    """A jobs.cfg vzdump section as the API returns it: its type, prune-backups decoded into an object."""
    row = dict(job)
    row.setdefault("type", "vzdump")
    for key in ("prune-backups", "fleecing", "performance"):  # VZDump::Common $PROPERTY_STRINGS, decode_value
        if isinstance(row.get(key), str):
            row[key] = property_object(row[key])
    return row


def property_object(text: str) -> dict[str, Any]:
    """PVE::JSONSchema parse_property_string for the backup formats, whose values are integers, booleans
    (as 0/1) or names."""
    out: dict[str, Any] = {}
    for kv in text.split(","):
        if "=" in kv:
            k, v = kv.split("=", 1)
            out[k.strip()] = int(v) if v.strip().isdecimal() else v.strip()
    return out


@route("PUT", "/cluster/backup/{id}")
def update_backup_job(call: Call) -> None:
    job = next((j for j in call.cluster.backup_jobs if j.get("id") == call.params["id"]), None)
    if job is None:
        raise ApiError(500, f"job '{call.params['id']}' does not exist")
    for key in str(call.params.get("delete", "")).split(","):
        if key.strip():
            job.pop(key.strip(), None)
    for key, value in call.params.items():
        if key not in ("id", "delete", "digest"):
            job[key] = int(value) if isinstance(value, bool) else value


@route("GET", "/cluster/backup-info/not-backed-up")
def not_backed_up(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    scopes = [_Scope.of(job) for job in c.backup_jobs]
    rows = []
    for g in sorted(c.guests.values(), key=lambda g: g.vmid):
        if not call.can(f"/vms/{g.vmid}", "VM.Audit"):  # templates are listed too (BackupInfo.pm)
            continue
        if not any(scope.includes(g) for scope in scopes):
            rows.append({"vmid": g.vmid, "type": g.type, "name": g.name})
    return rows


def replication_config_row(job: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": job.id,
        "type": "local",
        "guest": job.guest,
        "jobnum": job.jobnum,
        "target": job.target,
    }
    if job.schedule:  # SectionConfig writes only what is set; the */15 default lives in the schema
        row["schedule"] = job.schedule
    if job.disable:
        row["disable"] = 1
    if job.remove_job:
        row["remove_job"] = job.remove_job
    if job.rate:
        row["rate"] = job.rate
    if job.comment:
        row["comment"] = job.comment
    return row


@route("GET", "/cluster/replication")
def replication(call: Call) -> list[dict[str, Any]]:
    """pve-manager PVE/API2/ReplicationConfig.pm index: the jobs' sections, without a digest (SectionConfig
    parse_config keeps it at the top level, beside ``ids``)."""
    c = call.cluster
    rows = []
    for job in sorted(c.replication.values(), key=lambda j: j.id):
        if call.can(f"/vms/{job.guest}", "VM.Audit"):
            rows.append(_replication_section(c, job))
    return rows


def _replication_section(c: Cluster, job: Any) -> dict[str, Any]:
    row = replication_config_row(job)
    guest = c.guests.get(job.guest)
    source = job.source or (guest.node if guest else None)  # stored: it lags after an HA recovery
    if source:
        row["source"] = source
    return row


@route("GET", "/cluster/replication/{id}")
def replication_job(call: Call) -> dict[str, Any]:
    """pve-manager PVE/API2/ReplicationConfig.pm read: the job's section and the file's digest."""
    c = call.cluster
    job = c.replication.get(call.params["id"])
    if job is None:
        raise ApiError(500, f"no such replication job '{call.params['id']}'")
    if not call.can(f"/vms/{job.guest}", "VM.Audit"):
        raise ApiError(403, f"Permission check failed (/vms/{job.guest}, VM.Audit)")
    return {**_replication_section(c, job), "digest": replication_digest(c)}


def replication_digest(c: Cluster) -> str:
    return render.digest_of([replication_config_row(j) for j in sorted(c.replication.values(), key=lambda j: j.id)])


@route("PUT", "/cluster/replication/{id}")
def update_replication(call: Call) -> None:
    c = call.cluster
    jid = call.params["id"]
    # pve-manager PVE/API2/ReplicationConfig.pm update: PVE 8 checks Datastore.Allocate on /storage (the 8.4
    # schema's permissions), PVE 9 VM.Replicate on the guest parsed from the id (c81fe5cc), both before the lock
    path, privilege = (
        ("/storage", "Datastore.Allocate") if c.schema_version < "9" else (f"/vms/{jid.split('-')[0]}", "VM.Replicate")
    )
    if not call.can(path, privilege):
        raise ApiError(403, f"Permission check failed ({path}, {privilege})")
    if "digest" in call.params and call.params["digest"] != replication_digest(c):  # assert_if_modified
        raise ApiError(500, "detected modified configuration - file changed by other user? Try again.")
    job = c.replication.get(jid)
    if job is None:
        raise ApiError(500, f"no such job '{jid}'")
    deletes = {k.strip() for k in str(call.params.get("delete", "")).split(",") if k.strip()}
    if "disable" in deletes:
        job.disable = False
    if "disable" in call.params:
        job.disable = bool(int(call.params["disable"]))
    if "comment" in call.params:
        job.comment = str(call.params["comment"])
    if "schedule" in call.params:
        job.schedule = str(call.params["schedule"])


@route("GET", "/storage")
def storage_config(call: Call) -> list[dict[str, Any]]:
    rows = []
    for s in sorted(call.cluster.storages.values(), key=lambda s: s.storage):
        if not (
            call.can(f"/storage/{s.storage}", "Datastore.Audit")
            or call.can(f"/storage/{s.storage}", "Datastore.AllocateSpace")
        ):
            continue
        rows.append(storage_config_row(call.cluster, s))
    return rows


def storage_config_row(c: Cluster, s: Any) -> dict[str, Any]:
    """pve-storage src/PVE/API2/Storage/Config.pm $api_storage_config: the parsed entry, content re-encoded
    ('none' when empty, Plugin.pm encode_value); parse_config set shared=1 on the @SHARED_STORAGE types."""
    row: dict[str, Any] = {
        "storage": s.storage,
        "type": s.type,
        "content": ",".join(sorted(s.content)) or "none",
        "digest": render.digest_of(sorted(c.storages)),
    }
    if s.shared:
        row["shared"] = 1
    if s.nodes is not None:
        row["nodes"] = ",".join(s.nodes)
    if s.disable:
        row["disable"] = 1
    row.update(s.options)
    if isinstance(row.get("content-dirs"), str):  # not re-encoded: the hash Plugin.pm decode_value built
        row["content-dirs"] = dict(d.split("=", 1) for d in row["content-dirs"].split(",") if "=" in d)
    return row


@route("GET", "/nodes")
def nodes(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    rows = []
    for n in c.nodes.values():
        row: dict[str, Any] = {
            "node": n.name,
            "id": f"node/{n.name}",
            "type": "node",
            "status": "online" if n.online else "offline",
            "level": n.level,
            "ssl_fingerprint": n.certificates[1]["fingerprint"] if len(n.certificates) > 1 else "",
        }
        if n.online and call.can(f"/nodes/{n.name}", "Sys.Audit"):
            row.update(
                {
                    "cpu": n.cpu_usage,
                    "maxcpu": n.cpus,
                    "mem": c.node_mem_used(n.name),
                    "maxmem": n.memory_total,
                    "uptime": n.uptime,
                    "disk": n.rootfs_used,
                    "maxdisk": n.rootfs_total,
                }
            )
        rows.append(row)
    return rows
