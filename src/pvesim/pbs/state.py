"""The simulated Proxmox Backup Server: datastores, backup groups and snapshots, jobs, tasks, tokens.

Built from a scenario (``scenarios/*.yaml`` here); ages are relative to the time the server starts,
so a scenario reads the same whenever it runs. Payload shapes follow proxmox/proxmox-backup
``pbs-api-types`` (kebab-case fields) and ``src/api2``.

Knobs a scenario plants problems with: a datastore's ``used``/``total``/``growth_per_day`` (PBS's
estimated full date follows), ``error``, ``maintenance``, ``gc`` (``last_run_age``, ``state``,
``still_bad``; without ``last_run_age`` GC never ran), keep-* / gc-schedule / prune-schedule (served in the
datastore config as PBS does; PBS >= 2.2 runs only prune jobs, never a datastore's prune-schedule); a job's
``state``, ``last_run_age``, ``next_run_age`` (negative: overdue), ``never_ran``, ``running`` (started
``last_run_age`` ago, still going), ``disable``; a group's
snapshots with ``age``, ``verify`` (ok/failed), ``verify_age``, ``manifest: false``, ``protected``;
``tasks`` (type, id, age, status, user), ``subscription`` and ``updates``; tokens with ACL entries.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pvesim.scenario import parse_age, safe_yaml, size

# PBS roles (proxmox-backup src/config/acl.rs ROLE_* privilege sets), the part the simulator needs
ROLES: dict[str, frozenset[str]] = {
    "Admin": frozenset({"Sys.Audit", "Sys.Modify", "Datastore.Audit", "Datastore.Backup", "Datastore.Modify"}),
    "Audit": frozenset({"Sys.Audit", "Datastore.Audit"}),
    "DatastoreAdmin": frozenset({"Datastore.Audit", "Datastore.Backup", "Datastore.Modify", "Datastore.Verify"}),
    "DatastoreAudit": frozenset({"Datastore.Audit"}),
    "DatastoreBackup": frozenset({"Datastore.Backup"}),
    "DatastoreReader": frozenset({"Datastore.Audit", "Datastore.Read"}),
    "NoAccess": frozenset(),
}


@dataclass
class PbsToken:
    full_id: str  # user@realm!name
    secret: str
    acl: list[tuple[str, str, bool]]  # (path, role, propagate)

    def privs(self, path: str) -> set[str]:
        """Privileges on ``path``: walking from ``/``, the entries on the deepest path level that has any win;
        above the last level only propagating entries count (proxmox-backup pbs-config acl.rs roles)."""
        parts = [p for p in path.split("/") if p]
        out: set[str] = set()
        for depth in range(len(parts) + 1):
            here = "/" + "/".join(parts[:depth])
            exact = depth == len(parts)
            roles = [r for p, r, prop in self.acl if _norm(p) == here and (prop or exact)]
            if roles:
                out = set().union(*(ROLES.get(r, frozenset()) for r in roles))
        return out

    @property
    def user(self) -> str:
        return self.full_id.split("!", 1)[0]


def _norm(path: str) -> str:
    return "/" + "/".join(p for p in path.split("/") if p)


@dataclass
class Snapshot:
    time: int
    files: list[dict[str, Any]]
    verification: dict[str, str] | None = None
    protected: bool = False
    owner: str = "root@pam"


@dataclass
class Datastore:
    name: str
    total: int
    used: int
    growth_per_day: int = 0
    error: str | None = None
    maintenance: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # gc-schedule, prune-schedule, keep-*, comment
    gc: dict[str, Any] = field(default_factory=dict)
    groups: dict[tuple[str, str, str], list[Snapshot]] = field(default_factory=dict)  # (ns, type, id)


@dataclass
class PbsState:
    version: str
    started: float
    datastores: dict[str, Datastore]
    tokens: dict[str, PbsToken]
    verify_jobs: list[dict[str, Any]]
    prune_jobs: list[dict[str, Any]]
    sync_jobs: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    subscription: dict[str, Any]
    updates: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0  # API requests served, answered or refused (as pvesim's Simulator counts them)

    def now(self) -> int:
        return int(time.time())


def upid(kind: str, ident: str, start: int, user: str = "root@pam") -> str:
    """A PBS UPID: ``UPID:node:pid:pstart:task_id:starttime:type:id:auth:`` (pbs-api-types upid.rs)."""
    escaped = ident.replace(":", "\\x3a")  # proxmox-sys systemd escape, as PBS writes worker ids into UPIDs
    return f"UPID:pbs:{0x1F2E:08X}:{0xABCD:08X}:{0:08X}:{start:08X}:{kind}:{escaped}:{user}:"


def load(name_or_path: str = "demo") -> dict[str, Any]:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.exists():
        return dict(safe_yaml(path.read_text(encoding="utf-8")))
    text = resources.files("pvesim.pbs").joinpath(f"scenarios/{name_or_path}.yaml").read_text(encoding="utf-8")
    return dict(safe_yaml(text))


def build(data: dict[str, Any], now: float | None = None) -> PbsState:
    t = int(now if now is not None else time.time())
    stores = {d["name"]: _datastore(d, t) for d in data.get("datastores", [])}
    for g in data.get("groups", []):
        key = (str(g.get("ns", "")), str(g["type"]), str(g["id"]))
        stores[g["store"]].groups[key] = [_snapshot(s, key, t) for s in g.get("snapshots", [])]
    tokens = {}
    for tok in data.get("tokens", []):
        acl = [(e["path"], e["role"], bool(e.get("propagate", True))) for e in tok.get("acl", [])]
        tokens[tok["id"]] = PbsToken(tok["id"], tok.get("secret") or secrets.token_hex(16), acl)
    return PbsState(
        version=str(data.get("version", "3.4.1")),
        started=t,
        datastores=stores,
        tokens=tokens,
        verify_jobs=[_job(j, t, "verificationjob") for j in data.get("verify_jobs", [])],
        prune_jobs=[_job(j, t, "prunejob") for j in data.get("prune_jobs", [])],
        sync_jobs=[_job(j, t, "syncjob") for j in data.get("sync_jobs", [])],
        tasks=[_task(x, t) for x in data.get("tasks", [])],
        subscription=dict(data.get("subscription", {"status": "notfound", "message": "There is no subscription key"})),
        updates=[_update(u) for u in data.get("updates", [])],
    )


def _datastore(d: dict[str, Any], t: int) -> Datastore:
    config = {k: v for k, v in d.items() if k.startswith("keep-") or k in ("gc-schedule", "prune-schedule", "comment")}
    gc = dict(d.get("gc") or {})
    store = Datastore(
        name=d["name"],
        total=size(d.get("total", "10T")),
        used=size(d.get("used", "1T")),
        growth_per_day=size(d.get("growth_per_day", 0)),
        error=d.get("error"),
        maintenance=d.get("maintenance"),
        config=config,
    )
    status: dict[str, Any] = {
        "index-file-count": 0,
        "index-data-bytes": 0,
        "disk-bytes": store.used,
        "disk-chunks": 0,
        "removed-bytes": 0,
        "removed-chunks": 0,
        "pending-bytes": 0,
        "pending-chunks": 0,
        "removed-bad": int(gc.get("removed_bad", 0)),
        "still-bad": int(gc.get("still_bad", 0)),
        "upid": None,  # GarbageCollectionStatus.upid is Option without skip_serializing_if: null until GC ran
    }
    if "last_run_age" in gc:
        end = t - int(parse_age(gc["last_run_age"]))
        status["upid"] = upid("garbage_collection", store.name, end - 600)
        status |= {"last-run-endtime": end, "last-run-state": gc.get("state", "OK"), "duration": 600}
    store.gc = status
    return store


def _snapshot(s: dict[str, Any], key: tuple[str, str, str], t: int) -> Snapshot:
    taken = t - int(parse_age(s.get("age", "1d")))
    kind = key[1]
    files = [
        {"filename": "drive-scsi0.img.fidx" if kind == "vm" else "root.pxar.didx", "size": size(s.get("size", "10G"))}
    ]
    if kind == "vm":
        files.append({"filename": "qemu-server.conf.blob", "size": 512})
    if s.get("manifest", True):
        files.append({"filename": "index.json.blob", "size": 900})
    for f in files:
        f["crypt-mode"] = "none"
    verification = None
    if s.get("verify") in ("ok", "failed"):
        when = t - int(parse_age(s.get("verify_age", s.get("age", "1d"))))
        verification = {"upid": upid("verificationjob", "main", when), "state": s["verify"]}
    return Snapshot(taken, files, verification, bool(s.get("protected", False)))


def _job(j: dict[str, Any], t: int, worker: str) -> dict[str, Any]:
    job = {k: v for k, v in j.items() if k not in ("last_run_age", "state", "next_run_age", "never_ran", "running")}
    if j.get("running"):  # JobState::Started: the upid of the run going on, no state, no end time (jobstate.rs)
        job["last-run-upid"] = upid(worker, str(j["id"]), t - int(parse_age(j.get("last_run_age", "1h"))))
    elif not j.get("never_ran"):
        end = t - int(parse_age(j.get("last_run_age", "10h")))
        job |= {
            "last-run-upid": upid(worker, str(j["id"]), end - 300),
            "last-run-endtime": end,
            "last-run-state": j.get("state", "OK"),
        }
    if j.get("schedule"):
        job["next-run"] = t + int(parse_age(j.get("next_run_age", "14h")))
    return job


def _update(u: dict[str, Any]) -> dict[str, Any]:
    """An APTUpdateInfo (pbs-api-types, PascalCase fields)."""
    return {
        "Package": u["package"],
        "Title": u.get("title", u["package"]),
        "Arch": "amd64",
        "Description": u.get("title", u["package"]),
        "Version": u["version"],
        "OldVersion": u.get("old_version", ""),
        "Origin": u.get("origin", "Proxmox"),
        "Priority": "optional",
        "Section": "admin",
    }


def _task(x: dict[str, Any], t: int) -> dict[str, Any]:
    start = t - int(parse_age(x.get("age", "2h")))
    user = x.get("user", "root@pam")
    return {
        "upid": upid(x["type"], x.get("id", ""), start, user),
        "node": "localhost",  # src/api2/node/tasks.rs into_task_list_item
        "pid": 0x1F2E,
        "pstart": 0xABCD,
        "starttime": start,
        "worker_type": x["type"],
        "worker_id": x.get("id"),
        "user": user,
        "endtime": start + 60,
        "status": x.get("status", "OK"),
    }
