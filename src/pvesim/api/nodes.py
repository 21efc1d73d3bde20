"""Per-node read endpoints: status, tasks, replication, certificates, APT, disks, subscription."""

from __future__ import annotations

import re
from typing import Any

from pvesim import nodehealth, replication
from pvesim.api import logs, render
from pvesim.api.cluster import property_object, replication_config_row
from pvesim.api.registry import ApiError, Call, Download, Result, route
from pvesim.logs import dump_logfile
from pvesim.scenario import major
from pvesim.state import Task


def _node(call: Call) -> Any:
    return call.cluster.nodes[call.params["node"]]


@route("GET", "/nodes/{node}/status")
def node_status(call: Call) -> dict[str, Any]:
    c = call.cluster
    n = _node(call)
    used = c.node_mem_used(n.name)
    return {
        "cpu": n.cpu_usage,
        "wait": 0.0012,
        "idle": 0,
        "uptime": n.uptime,
        "loadavg": [f"{x:.2f}" for x in n.loadavg],
        "cpuinfo": {
            "model": n.cpu_model,
            "cpus": n.cpus,
            "sockets": n.sockets,
            "cores": n.cpus // n.sockets // 2 or 1,
            "mhz": f"{n.mhz:.3f}",
            "hvm": "1",
            "flags": n.cpu_flags,
            "user_hz": 100,
        },
        "memory": {
            "total": n.memory_total,
            "used": used,
            "free": n.memory_total - used,
            "available": n.memory_total - used,
        },
        "swap": {"total": n.swap_total, "used": n.swap_used, "free": n.swap_total - n.swap_used},
        "rootfs": {
            "total": n.rootfs_total,
            "used": n.rootfs_used,
            "free": n.rootfs_total - n.rootfs_used,
            "avail": n.rootfs_total - n.rootfs_used,
        },
        "ksm": {"shared": n.ksm_shared},
        "pveversion": f"pve-manager/{c.version}/0fcd7879d9b3ec58",
        "kversion": f"Linux {n.kernel} #1 SMP PREEMPT_DYNAMIC PMX {n.kernel} (2026-10-01T12:00Z)",
        "current-kernel": {
            "sysname": "Linux",
            "release": n.kernel,
            "machine": "x86_64",
            "version": f"#1 SMP PREEMPT_DYNAMIC PMX {n.kernel} (2026-10-01T12:00Z)",
        },
        "boot-info": {"mode": "efi", "secureboot": 0},
    }


@route("GET", "/nodes/{node}/version")
def node_version(call: Call) -> dict[str, Any]:
    c = call.cluster
    return {"version": c.version, "release": c.release, "repoid": "0fcd7879"}


def _task_visible(call: Call, t: Task) -> bool:
    return t.user == call.user or call.can(f"/nodes/{t.node}", "Sys.Audit")


def _status_type(status: str | None) -> str:
    """pve-common PVE/UPID.pm normalize_status_type (a running task has no status yet: 'unknown')."""
    if not status or status == "unexpected status":
        return "unknown"
    if status == "OK":
        return "ok"
    return "warning" if re.fullmatch(r"WARNINGS: \d+", status) else "error"


@route("GET", "/nodes/{node}/tasks")
def node_tasks(call: Call) -> list[dict[str, Any]]:
    p = call.params
    source = p.get("source", "archive")
    rows = []
    for t in sorted(call.cluster.tasks, key=lambda t: t.starttime, reverse=True):
        if t.node != p["node"] or not _task_visible(call, t):
            continue
        if (source == "archive" and t.running) or (source == "active" and not t.running):
            continue
        kind = _status_type(t.status)
        if call.flag("errors") and kind == "ok":  # Tasks.pm node_tasks: errors=1 drops only 'ok' (and wins)
            continue
        if "typefilter" in p and t.type != p["typefilter"]:
            continue
        if "vmid" in p and t.id != str(p["vmid"]):
            continue
        if "userfilter" in p and p["userfilter"] not in t.user:
            continue
        if "since" in p and t.starttime < int(p["since"]):
            continue
        if "until" in p and t.starttime > int(p["until"]):
            continue
        if "statusfilter" in p and not call.flag("errors"):
            wanted = {s.strip().lower() for s in str(p["statusfilter"]).split(",")}
            if kind not in wanted:
                continue
        row = render.task_row(t)
        if t.running:  # Tasks.pm node_tasks: an active task that has not ended is sent with status RUNNING
            row["status"] = "RUNNING"
        rows.append(row)
    start = int(p.get("start", 0))
    limit = int(p.get("limit", 50))
    return rows[start : start + limit] if limit else rows[start:]


def _task(call: Call) -> Task:
    upid = call.params["upid"]
    for t in call.cluster.tasks:
        if t.upid == upid and t.node == call.params["node"]:
            if not _task_visible(call, t):
                raise ApiError(403, f"Permission check failed (/nodes/{t.node}, Sys.Audit)")
            return t
    # Tasks.pm read_task_status: raise_param_exc, i.e. HTTP 400 with the parameter named
    raise ApiError(
        400,
        "Parameter verification failed.",
        {"upid": "unable to parse worker upid" if not upid.startswith("UPID:") else "no such task"},
    )


@route("DELETE", "/nodes/{node}/tasks/{upid}")
def stop_task(call: Call) -> None:
    """Kill a running task: its effect never happens, and a lock it held stays (how stuck locks are born)."""
    t = _task(call)
    if t.user != call.user and not call.can(f"/nodes/{t.node}", "Sys.Modify"):
        raise ApiError(403, f"Permission check failed (/nodes/{t.node}, Sys.Modify)")
    if t.running:
        t.finish = None
        t.done_at = None
        t.status = "interrupted by signal"
        t.endtime = int(call.cluster.clock.now())
        t.log.append("received interrupt")
        t.log.append("TASK ERROR: interrupted by signal")


@route("GET", "/nodes/{node}/tasks/{upid}/status")
def task_status(call: Call) -> dict[str, Any]:
    t = _task(call)
    row = render.task_identity(t)
    row["status"] = "running" if t.running else "stopped"
    if not t.running:
        row["exitstatus"] = t.status
    return row


@route("GET", "/nodes/{node}/tasks/{upid}/log")
def task_log(call: Call) -> Result | Download:
    return logs.task_log(call, _task(call))


_EVERY_MINUTES = re.compile(r"\*/(\d{1,2})")


def _next_event(schedule: str, last_try: int) -> int:
    """PVE::CalendarEvent compute_next_event(parse_calendar_event(schedule), last_try): the first event after
    last_try. The sim has no calendar-event parser (it must not import the server's): it knows the minute
    repetition ``*/N`` (minutes 0, N, 2N, ... of every hour) and takes any other schedule as PVE's default
    ``*/15`` (pve-guest-common src/PVE/ReplicationConfig.pm ``default => '*/15'``)."""
    m = _EVERY_MINUTES.fullmatch(schedule.strip())
    step = int(m.group(1)) if m and 0 < int(m.group(1)) < 60 else 15
    hour = last_try - last_try % 3600
    for minute in range(0, 60, step):
        if hour + 60 * minute > last_try:
            return hour + 60 * minute
    return hour + 3600


def _next_sync(c: Any, job: Any) -> int:
    """ReplicationState.pm job_status: 1 for a job marked for removal; after a failure, retry in 5 min x
    fail_count (30 min beyond 3 failures) but only while the target is an online cluster member, else 0 (never
    picked by get_next_job, so fail_count freezes); without failures the schedule's next event after last_try."""
    if job.remove_job:
        return 1
    if job.fail_count:
        target = c.nodes.get(job.target)
        if target is None or not target.online:  # PVE::Cluster::get_members()->{$target}->{online}
            return 0
        return int(job.last_try + 60 * (5 * job.fail_count if job.fail_count <= 3 else 30))
    return _next_event(job.schedule or "*/15", int(job.last_try))


def _replication_status(call: Call, job: Any) -> dict[str, Any]:
    """pve-manager PVE/API2/Replication.pm $extract_job_status: the job's config with job_status's fields;
    last_sync, last_try and fail_count default to 0 (extract_job_state), duration exists once a run ended."""
    c = call.cluster
    row = replication_config_row(job)
    guest = c.guests.get(job.guest)
    row.update(
        {
            "source": guest.node if guest else None,
            "vmtype": guest.type if guest else "qemu",
            "last_sync": job.last_sync,
            "last_try": job.last_try,
            "fail_count": job.fail_count,
            "next_sync": _next_sync(c, job),
        }
    )
    if job.last_try and job.duration is not None:  # record_job_end sets it
        row["duration"] = job.duration
    if job.error:
        row["error"] = job.error
    if job.running:  # $extract_job_status: the pid of a run whose process is still alive
        row["pid"] = 40_000 + job.guest
    return row


def _local_jobs(c: Any, node: str) -> list[Any]:
    """ReplicationState.pm job_status: jobs of existing guests on this node, without those whose target is
    this node ('never sync to local node') unless marked for removal."""
    out = []
    for job in sorted(c.replication.values(), key=lambda j: j.id):
        guest = c.guests.get(job.guest)
        if guest is None or guest.node != node:  # skip non existing vms, only guests on this node
            continue
        if not job.remove_job and job.target == node:
            continue
        out.append(job)
    return out


@route("GET", "/nodes/{node}/replication")
def node_replication(call: Call) -> list[dict[str, Any]]:
    rows = []
    for job in _local_jobs(call.cluster, call.params["node"]):
        if not call.can(f"/vms/{job.guest}", "VM.Audit"):
            continue
        if "guest" in call.params and int(call.params["guest"]) != job.guest:
            continue
        rows.append(_replication_status(call, job))
    return rows


@route("GET", "/nodes/{node}/replication/{id}/status")
def replication_status(call: Call) -> dict[str, Any]:
    """API2/Replication.pm job_status: only a job this node's job_status has, else 'no such replication job'."""
    job = next((j for j in _local_jobs(call.cluster, call.params["node"]) if j.id == call.params["id"]), None)
    if job is None:
        raise ApiError(500, f"no such replication job '{call.params['id']}'")
    if not call.can(f"/vms/{job.guest}", "VM.Audit"):
        raise ApiError(403, f"Permission check failed (/vms/{job.guest}, VM.Audit)")
    return _replication_status(call, job)


@route("GET", "/nodes/{node}/replication/{id}/log")
def replication_log(call: Call) -> Result:
    """API2/Replication.pm read_job_log: the job's last run (dump_logfile of its log file); any job of the
    cluster, for VM.Audit on its guest or Sys.Audit on the node ('no such replication job' otherwise)."""
    job = call.cluster.replication.get(call.params["id"])
    if job is None:
        raise ApiError(500, f"no such replication job '{call.params['id']}'")
    if not (call.can(f"/vms/{job.guest}", "VM.Audit") or call.can(f"/nodes/{call.params['node']}", "Sys.Audit")):
        raise ApiError(403, "Permission check failed")
    lines = replication.job_log(call.cluster, job) if _runs_here(call, job) else []
    total, rows = dump_logfile(lines, int(call.params.get("start") or 0), int(call.params.get("limit", 50)))
    if not lines:  # dump_logfile of a file that is not there: 'unable to open file'
        return Result([{"n": 1, "t": "unable to open file - No such file or directory"}], total=1)
    return Result(rows, total=total)


def _runs_here(call: Call, job: Any) -> bool:
    """The log file is on the node that ran the job: the guest's."""
    guest = call.cluster.guests.get(job.guest)
    return guest is not None and guest.node == call.params["node"]


@route("GET", "/nodes/{node}/certificates/info")
def certificates(call: Call) -> list[dict[str, Any]]:
    return [dict(cert) for cert in _node(call).certificates]


@route("GET", "/nodes/{node}/apt/update")
def apt_update(call: Call) -> list[dict[str, Any]]:
    return [dict(u) for u in _node(call).apt_updates]


_SUITE_ORDER = ("stretch", "buster", "bullseye", "bookworm", "trixie", "forky")


def _repository_infos(files: list[dict[str, Any]], codename: str) -> list[dict[str, Any]]:
    """proxmox-apt's checks: the origin of every repository whose Release file names one (Debian, Proxmox),
    and a warning on the ``Suites`` property of an enabled repository with an older or newer Debian release
    than the installed one, or an unstable one."""
    infos: list[dict[str, Any]] = []
    for f in files:
        for index, repo in enumerate(f.get("repositories") or []):
            uris = " ".join(repo.get("URIs") or [])
            origin = "Proxmox" if "proxmox.com" in uris else "Debian" if "debian.org" in uris else None
            if origin:
                infos.append({"path": f["path"], "index": index, "kind": "origin", "message": origin})
            if not repo.get("Enabled", 1):
                continue
            for suite in repo.get("Suites") or []:
                base = str(suite).split("-", 1)[0].split("/", 1)[0]
                if base in ("sid", "unstable", "experimental"):
                    message = f"suite '{suite}' should not be used in production!"
                elif base in _SUITE_ORDER and _SUITE_ORDER.index(base) < _SUITE_ORDER.index(codename):
                    message = f"old suite '{suite}' configured!"
                elif base in _SUITE_ORDER and _SUITE_ORDER.index(base) > _SUITE_ORDER.index(codename):
                    message = f"newer suite '{suite}' configured!"
                else:
                    continue
                infos.append(
                    {"path": f["path"], "index": index, "property": "Suites", "kind": "warning", "message": message}
                )
    return infos


@route("GET", "/nodes/{node}/apt/repositories")
def apt_repositories(call: Call) -> dict[str, Any]:
    n = _node(call)
    repos = dict(n.repositories)
    standard = repos.get("standard-repos", [])  # the files apt reads follow it (nodehealth.py apt_sources)
    derived = nodehealth.apt_sources(standard, major(call.cluster.version))
    planted = list(repos.get("files") or [])  # a scenario's extra sources.list lines (the upgrade knob)
    repos["files"] = [{**f, "digest": [0] * 32} for f in derived] + planted
    repos.setdefault("errors", [])
    repos["infos"] = _repository_infos(repos["files"], "trixie" if major(call.cluster.version) >= 9 else "bookworm")
    repos.setdefault("standard-repos", [])
    repos.setdefault("digest", render.digest_of(repos))
    return repos


@route("GET", "/nodes/{node}/subscription")
def subscription(call: Call) -> dict[str, Any]:
    return dict(_node(call).subscription)


@route("GET", "/nodes/{node}/disks/zfs")
def zfs(call: Call) -> list[dict[str, Any]]:
    return [dict(p) for p in _node(call).zfs]


# vzdump.conf keys that read_vzdump_defaults fills from the schema when the file does not set them
_VZDUMP_SCHEMA_DEFAULTS: dict[str, Any] = {
    "mode": "snapshot",
    "compress": "0",
    "remove": 1,
    "prune-backups": "keep-all=1",
    "all": 0,
    "stdexcludes": 1,
    "lockwait": 180,
    "stopwait": 10,
    "ionice": 7,
    "fleecing": {"enabled": 0},  # VZDump.pm read_vzdump_defaults: the formats' defaults, as objects
    "performance": {"max-workers": 16, "pbs-entries-max": 1048576},
}


@route("GET", "/nodes/{node}/vzdump/defaults")
def vzdump_defaults(call: Call) -> dict[str, Any]:
    """PVE/API2/VZDump.pm defaults: /etc/vzdump.conf over the schema defaults, then the storage's own
    ``prune-backups`` over both (VZDump.pm storage_info). PVE 8 still turns a ``maxfiles`` of vzdump.conf
    (stable-8 ``$parse_prune_backups_maxfiles``) or of the storage (pve-storage stable-8 Storage.pm
    ``storage_config``) into ``keep-last``; PVE 9 dropped the option."""
    c = call.cluster
    conf = dict(_node(call).vzdump_conf)
    maxfiles = conf.pop("maxfiles", None)
    if maxfiles is not None and "prune-backups" not in conf and major(c.version) < 9:
        conf["prune-backups"] = f"keep-last={maxfiles}" if int(maxfiles) else "keep-all=1"
    for key in ("fleecing", "performance"):  # parse_fleecing, parse_performance
        if isinstance(conf.get(key), str):
            conf[key] = property_object(conf[key])
    if "performance" in conf:  # merge_performance: the file's settings over the format's defaults
        conf["performance"] = {**_VZDUMP_SCHEMA_DEFAULTS["performance"], **conf["performance"]}
    if "storage" in conf and "dumpdir" in conf:  # "both 'storage' and 'dumpdir' defined ... ignoring 'dumpdir'"
        del conf["dumpdir"]
    res: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in _VZDUMP_SCHEMA_DEFAULTS.items()}
    res.update(conf)
    if "storage" in call.params:
        res["storage"] = call.params["storage"]
    if "dumpdir" not in res and "storage" not in res:
        res["storage"] = "local"
    if "storage" in res:
        sid = str(res["storage"])
        if not any(call.can(f"/storage/{sid}", priv) for priv in ("Datastore.Audit", "Datastore.AllocateSpace")):
            raise ApiError(403, f"Permission check failed (/storage/{sid}, Datastore.Audit|Datastore.AllocateSpace)")
        storage = c.storages.get(sid)
        if storage is None:
            raise ApiError(500, f"storage '{sid}' does not exist")
        if "backup" not in storage.content:
            raise ApiError(500, f"can't use storage '{sid}' for backups - wrong content type")
        prune = storage.options.get("prune-backups")
        maxfiles = storage.options.get("maxfiles")
        if prune is None and maxfiles is not None and major(c.version) < 9:  # stable-8 Storage.pm storage_config
            prune = f"keep-last={maxfiles}" if int(maxfiles) else "keep-all=1"
        if prune:
            res["prune-backups"] = prune
        if storage.type != "pbs":  # storage_info: PVE::Storage::get_backup_dir
            res["dumpdir"] = f"{storage.options.get('path') or '/mnt/pve/' + sid}/dump"
    if not call.can(f"/nodes/{call.params['node']}", "Sys.Audit"):  # 'normal backup users don't need to know these'
        for key in ("mailto", "tmpdir", "dumpdir", "script", "ionice"):
            res.pop(key, None)
    for key in ("mailto", "exclude-path"):  # lists in read_vzdump_defaults, joined again for the answer
        if isinstance(res.get(key), list):
            res[key] = ",".join(str(v) for v in res[key])
    if "pool" in res and not call.can(f"/pool/{res['pool']}", "Pool.Audit"):
        del res["pool"]
    return res
