"""The PBS API subset pve-steward reads, as proxmox/proxmox-backup ``src/api2`` serves it.

Authentication is ``Authorization: PBSAPIToken=user@realm!name:secret`` (proxmox-backup
src/server/auth.rs, ``:`` separates the secret). Lists filter what the token may not see;
per-datastore reads answer 403 without Datastore.Audit; an unknown datastore is 400 "no such
datastore" (section-config lookup). Each handler cites the Rust function it mirrors.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pvesim.app import error_response
from pvesim.pbs.state import Datastore, PbsState, PbsToken

Handler = Callable[[PbsState, PbsToken, dict[str, str], dict[str, str]], Any]
DAY = 86400


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _store(state: PbsState, name: str) -> Datastore:
    store = state.datastores.get(name)
    if store is None:
        raise ApiError(400, f"no such datastore '{name}'")
    return store


def _audit(token: PbsToken, store: str, also: str = "") -> None:
    privs = token.privs(f"/datastore/{store}")
    if "Datastore.Audit" not in privs and (not also or also not in privs):
        raise ApiError(403, "permission check failed")


def _visible(token: PbsToken, store: str) -> bool:
    return bool(token.privs(f"/datastore/{store}") & {"Datastore.Audit", "Datastore.Backup"})


def _open(store: Datastore) -> None:
    """DataStore::lookup_datastore(Operation::Read): offline or delete maintenance refuses it first
    ("datastore '{name}' is in {error}", pbs-api-types maintenance.rs MaintenanceMode::check), then an error."""
    mode = _maintenance(store.maintenance)
    if mode.get("type") == "delete":
        raise ApiError(400, f"datastore '{store.name}' is in datastore is being deleted")
    if mode.get("type") == "offline":
        message = unquote(mode.get("message", ""))
        raise ApiError(400, f"datastore '{store.name}' is in offline maintenance mode: {message}")
    if store.error:
        raise ApiError(400, store.error)


def _maintenance(mode: str | None) -> dict[str, str]:
    """A maintenance-mode property string (default key ``type``)."""
    out = {}
    for part in (mode or "").split(","):
        key, eq, value = part.partition("=")
        out[key if eq else "type"] = value if eq else key
    return out


def version(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    return {"version": state.version.rsplit(".", 1)[0], "release": state.version.rsplit(".", 1)[-1], "repoid": "sim"}


def datastore_usage(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/status.rs datastore_status: stores without Audit/Backup are left out."""
    out: list[dict[str, Any]] = []
    now = state.now()
    for name, store in sorted(state.datastores.items()):
        if not _visible(token, name):
            continue
        try:
            _open(store)
        except ApiError as exc:
            out.append({"store": name, "error": exc.message})
            continue
        history, times = _history(store, now)
        item: dict[str, Any] = {
            "store": name,
            "total": store.total,
            "used": store.used,
            "avail": store.total - store.used,
            "history": history,
            "history-start": times[0],
            "history-delta": DAY,
            "gc-status": {k: v for k, v in store.gc.items() if not k.startswith(("last-run", "duration"))},
        }
        full = _estimate(times, history)
        if full is not None:
            item["estimated-full-date"] = full
        out.append(item)
    return out


def _history(store: Datastore, now: int) -> tuple[list[float], list[int]]:
    times = [now - (29 - i) * DAY for i in range(30)]
    used = [max(0, store.used - store.growth_per_day * (29 - i)) for i in range(30)]
    return [u / store.total for u in used], times


def _estimate(times: list[int], usage: list[float]) -> int | None:
    """proxmox-backup src/api2/status.rs: least squares over the month; b == 0 gives 0 (a date in the past)."""
    n = len(times)
    if n < 7:
        return None
    mx, my = sum(times) / n, sum(usage) / n
    var = sum((x - mx) ** 2 for x in times)
    if var == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(times, usage, strict=True)) / var
    a = my - b * mx
    return 0 if b == 0 else int((1.0 - a) / b)


def datastore_list(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/admin/datastore.rs get_datastore_list."""
    return [
        {"store": n, "comment": s.config.get("comment"), "maintenance": s.maintenance}
        for n, s in sorted(state.datastores.items())
        if _visible(token, n)
    ]


def gc_status(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/admin/datastore.rs garbage_collection_status (Datastore.Audit on /datastore/{store})."""
    _audit(token, path["store"])
    store = _store(state, path["store"])
    _open(store)
    out: dict[str, Any] = {"store": store.name, **store.gc}
    schedule = store.config.get("gc-schedule")
    if schedule:
        out["schedule"] = schedule
        last = int(store.gc.get("last-run-endtime") or state.now())
        out["next-run"] = last + DAY
    return out


def snapshots(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/admin/datastore.rs list_snapshots: Audit lists all groups, Backup only the token's own."""
    privs = token.privs(f"/datastore/{path['store']}")
    if not privs & {"Datastore.Audit", "Datastore.Backup"}:
        raise ApiError(403, "permission check failed")
    store = _store(state, path["store"])
    _open(store)
    ns = q.get("ns", "")
    out = []
    for (gns, kind, ident), snaps in sorted(store.groups.items()):
        if gns != ns:
            continue
        for s in snaps:
            if "Datastore.Audit" not in privs and s.owner != token.full_id:
                continue
            row: dict[str, Any] = {
                "backup-type": kind,
                "backup-id": ident,
                "backup-time": s.time,
                "files": s.files,
                "owner": s.owner,
                "protected": s.protected,
            }
            if any(f["filename"] == "index.json.blob" for f in s.files):
                row["size"] = sum(int(f.get("size", 0)) for f in s.files)
                if s.verification:
                    row["verification"] = s.verification
            else:
                row["files"] = [{"filename": f["filename"]} for f in s.files]
            out.append(row)
    return out


def groups(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/admin/datastore.rs list_groups."""
    _audit(token, path["store"], also="Datastore.Backup")
    store = _store(state, path["store"])
    _open(store)
    ns = q.get("ns", "")
    return [
        {
            "backup-type": kind,
            "backup-id": ident,
            "last-backup": max(s.time for s in snaps),
            "backup-count": len(snaps),
            "files": [f["filename"] for f in max(snaps, key=lambda s: s.time).files],
            "owner": snaps[0].owner,
        }
        for (gns, kind, ident), snaps in sorted(store.groups.items())
        if gns == ns and snaps
    ]


def _jobs(attr: str) -> Handler:
    def handler(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
        """src/api2/admin/{verify,prune,sync}.rs: jobs on datastores without Datastore.Audit are left out."""
        return [dict(j) for j in getattr(state, attr) if "Datastore.Audit" in token.privs(f"/datastore/{j['store']}")]

    return handler


def config_list(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    return [
        _config(s) for n, s in sorted(state.datastores.items()) if "Datastore.Audit" in token.privs(f"/datastore/{n}")
    ]


def config_one(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/config/datastore.rs read_datastore (Datastore.Audit on /datastore/{name})."""
    _audit(token, path["store"])
    return _config(_store(state, path["store"]))


def _config(store: Datastore) -> dict[str, Any]:
    out = {"name": store.name, "path": f"/mnt/datastore/{store.name}", **store.config}
    if store.maintenance:
        out["maintenance-mode"] = store.maintenance
    return out


def tasks(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/node/tasks.rs list_tasks: without Sys.Audit on /system/tasks only the caller's own tasks."""
    everyone = "Sys.Audit" in token.privs("/system/tasks")
    since = int(q.get("since", 0))
    errors = q.get("errors") in ("1", "true")
    out = []
    for task in sorted(state.tasks, key=lambda x: -int(x["starttime"])):
        if not everyone and task["user"] not in (token.full_id, token.user):
            continue
        if task["starttime"] < since or (errors and task.get("status") == "OK"):
            continue
        out.append(dict(task))
    limit = int(q.get("limit", 50))
    return out[:limit] if limit else out


def subscription(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/node/subscription.rs get_subscription: without Sys.Audit on / only status, message and url."""
    if "Sys.Audit" not in token.privs("/"):
        return {k: v for k, v in state.subscription.items() if k in ("status", "message", "url")}
    return dict(state.subscription)


def apt_updates(state: PbsState, token: PbsToken, path: dict[str, str], q: dict[str, str]) -> Any:
    """src/api2/node/apt.rs apt_update_available (Sys.Audit on /)."""
    if "Sys.Audit" not in token.privs("/"):
        raise ApiError(403, "permission check failed")
    return [dict(u) for u in state.updates]


ROUTES: list[tuple[str, Handler]] = [
    ("/version", version),
    ("/status/datastore-usage", datastore_usage),
    ("/admin/datastore", datastore_list),
    ("/admin/datastore/{store}/gc", gc_status),
    ("/admin/datastore/{store}/snapshots", snapshots),
    ("/admin/datastore/{store}/groups", groups),
    ("/admin/verify", _jobs("verify_jobs")),
    ("/admin/prune", _jobs("prune_jobs")),
    ("/admin/sync", _jobs("sync_jobs")),
    ("/config/datastore", config_list),
    ("/config/datastore/{store}", config_one),
    ("/nodes/{node}/tasks", tasks),
    ("/nodes/{node}/subscription", subscription),
    ("/nodes/{node}/apt/update", apt_updates),
]


def authenticate(state: PbsState, header: str | None) -> PbsToken | None:
    if not header or not header.startswith("PBSAPIToken="):
        return None
    ident, _, secret = header[len("PBSAPIToken=") :].partition(":")
    token = state.tokens.get(ident)
    if token is None or not hmac.compare_digest(token.secret, secret):
        return None
    return token


def create_app(state: PbsState) -> Starlette:
    lock = threading.Lock()

    def endpoint(handler: Handler) -> Callable[[Request], Any]:
        async def serve(request: Request) -> Response:
            state.requests += 1
            token = authenticate(state, request.headers.get("authorization"))
            if token is None:
                return error_response(401, "authentication failed - invalid credentials")
            if request.path_params.get("node", "localhost") not in ("localhost", "pbs"):
                return error_response(400, f"no such node '{request.path_params['node']}'")
            try:
                with lock:
                    data = handler(state, token, dict(request.path_params), dict(request.query_params))
            except ApiError as exc:
                return error_response(exc.status, exc.message)
            return JSONResponse({"data": data})

        return serve

    async def unknown(request: Request) -> Response:
        state.requests += 1
        return error_response(404, f"Path '{request.url.path}' not found.")

    routes = [Route("/api2/json" + p, endpoint(h), methods=["GET"]) for p, h in ROUTES]
    routes.append(Route("/api2/json/{rest:path}", unknown, methods=["GET", "POST", "PUT", "DELETE"]))
    return Starlette(routes=routes)
