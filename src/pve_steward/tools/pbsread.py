"""Read Proxmox Backup Server over the optional second connection (design record 261203-20).

PBS filters what a token may not see instead of refusing it: ``/status/datastore-usage`` and
``/admin/datastore`` leave out datastores without Datastore.Audit or Datastore.Backup
(proxmox-backup src/api2/status.rs datastore_status, src/api2/admin/datastore.rs get_datastore_list),
the job lists leave out jobs without Datastore.Audit. A datastore a PVE storage names is therefore
read directly too, so a missing privilege shows up as a 403 (CHECK_SKIPPED naming Datastore.Audit)
instead of an empty, clean-looking answer. An unreachable PBS is DATA_INCOMPLETE. A datastore whose
usage row carries an error (it cannot be opened) is not read further: PBS_DATASTORE_ERROR says why.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.data import Missing, Row
from pve_steward.analysis.pbsdata import PbsData, storage_maps
from pve_steward.errors import PveError, PvePermissionError, advice
from pve_steward.pve.ids import InvalidIdentifier
from pve_steward.pveio.client import ApiPath, ProxmoxClient, api_path, datastore, gather, node
from pve_steward.pveio.pbslink import PbsLink, pbs_link

__all__ = ["PbsLink", "not_configured", "pbs_link", "read_pbs"]

AREA = ("pbs",)
TASK_WINDOW = 24 * 3600
PRIVILEGE = "Datastore.Audit on /datastore/{store}"
SYSTEM_PRIVILEGE = {"updates": "Sys.Audit on /"}  # proxmox-backup src/api2/node/apt.rs apt_update_available


def not_configured() -> Missing:
    return Missing(
        what="PBS checks",
        path="pbs",
        error="PBS: not configured (set pbs_url, pbs_token_id and pbs_token_secret_file to check Proxmox Backup "
        "Server datastores, garbage collection, verify, prune and sync jobs)",
        affects=AREA,
        optional=True,
    )


async def read_pbs(link: PbsLink, storages: list[Row], now: float) -> tuple[PbsData | None, list[Missing]]:
    """The PBS payloads; None when PBS could not be read at all (unreachable, 401, its first read failed)."""
    first = await gather(
        link.client,
        [
            ("usage", api_path("status", "datastore-usage"), {}),
            ("datastores", api_path("admin", "datastore"), {}),
            ("verify", api_path("admin", "verify"), {}),
            ("prune", api_path("admin", "prune"), {}),
            ("sync", api_path("admin", "sync"), {}),
            # limit 0: all of the window's failures (PBS lists 50 by default: src/api2/node/tasks.rs list_tasks)
            (
                "tasks",
                api_path("nodes", node("localhost"), "tasks"),
                {"since": int(now) - TASK_WINDOW, "errors": 1, "limit": 0},
            ),
            ("subscription", api_path("nodes", node("localhost"), "subscription"), {}),
            ("updates", api_path("nodes", node("localhost"), "apt", "update"), {}),
        ],
    )
    if isinstance(first["usage"], PveError):
        return None, [_missing("PBS datastore usage", first["usage"])]
    data = PbsData(host=link.host, fingerprint=link.fingerprint, usage=first["usage"] or [])
    missing: list[Missing] = []
    for key, attr in (
        ("datastores", "datastores"),
        ("verify", "verify_jobs"),
        ("prune", "prune_jobs"),
        ("sync", "sync_jobs"),
        ("tasks", "tasks"),
        ("subscription", "subscription"),
        ("updates", "updates"),
    ):
        value = first[key]
        if isinstance(value, PveError):
            missing.append(_missing(f"PBS {key}", value, privilege=SYSTEM_PRIVILEGE.get(key)))
        else:
            setattr(data, attr, value)
    stores, namespaces = _stores(data, storages, missing)
    missing += await _read_stores(link.client, data, stores, namespaces)
    return data, missing


def _stores(data: PbsData, storages: list[Row], missing: list[Missing]) -> tuple[list[str], dict[str, set[str]]]:
    """Datastores to read: those PBS lists, and those a PVE storage on this PBS names (with their namespaces)."""
    namespaces: dict[str, set[str]] = {}
    broken = {str(r.get("store")) for r in data.usage if r.get("error")}  # PBS_DATASTORE_ERROR says why
    for row in [*data.usage, *data.datastores]:
        if row.get("store") and str(row["store"]) not in broken:
            namespaces.setdefault(str(row["store"]), set()).add("")
    for s in storages:
        if storage_maps(s, data) and s.get("datastore") and str(s["datastore"]) not in broken:
            namespaces.setdefault(str(s["datastore"]), set()).add(str(s.get("namespace") or ""))
    valid = []
    for store in sorted(namespaces):
        try:
            datastore(store)
            valid.append(store)
        except InvalidIdentifier as exc:
            missing.append(Missing(f"PBS datastore {store!r}", "pbs", str(exc), affects=AREA))
    return valid, namespaces


async def _read_stores(
    client: ProxmoxClient, data: PbsData, stores: list[str], namespaces: dict[str, set[str]]
) -> list[Missing]:
    reads: list[tuple[str, ApiPath, dict[str, Any]]] = []
    for store in stores:
        seg = datastore(store)
        reads += [
            (f"gc\0{store}", api_path("admin", "datastore", seg, "gc"), {}),
            (f"config\0{store}", api_path("config", "datastore", seg), {}),
        ]
        for ns in sorted(namespaces[store]):
            params = {"ns": ns} if ns else {}
            reads.append((f"snapshots\0{store}\0{ns}", api_path("admin", "datastore", seg, "snapshots"), params))
    missing = []
    for key, value in sorted((await gather(client, reads)).items()):
        kind, store, *rest = key.split("\0")
        if isinstance(value, PveError) and _no_such(value):
            continue  # a datastore a PVE storage names and PBS lacks: PBS_STORAGE_DATASTORE_MISSING says it
        if isinstance(value, PveError):
            where = f" (namespace {rest[0]})" if rest and rest[0] else ""
            missing.append(_missing(f"PBS {kind} of datastore {store}{where}", value, store=store))
        elif kind == "gc":
            data.gc[store] = value
        elif kind == "config":
            data.config[store] = value
        else:
            data.snapshots.setdefault(store, []).extend({**row, "ns": rest[0]} for row in value or [])
    return missing


def _no_such(err: PveError) -> bool:
    """PBS's answer for an unknown datastore: 400 "no such datastore 'x'" (section-config lookup)."""
    return err.status in (400, 404) and "no such datastore" in err.message.lower()


def _missing(what: str, err: PveError, *, store: str | None = None, privilege: str | None = None) -> Missing:
    denied = isinstance(err, PvePermissionError)
    privilege = privilege or (PRIVILEGE.format(store=store) if store else "Datastore.Audit on /datastore")
    # the fix is in PBS's own settings (--pbs-url, --pbs-fingerprint, its token), which no other answer names
    hint = "" if denied else advice(err)
    return Missing(
        what=what + (f" (needs {privilege})" if denied else ""),
        path="pbs:" + (err.path or "/"),
        error=err.message + (f". Fix: {hint}" if hint else ""),
        status=err.status,
        affects=AREA,
        optional=denied,
    )
