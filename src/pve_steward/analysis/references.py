"""The objects checks name that a privilege-filtered list did not show: absent, or merely hidden.

A guest's volume names a storage, a backup job names its storage, a backup or an HA resource names a
vmid. When PVE's list leaves that object out, a check may call it missing only if this token would see
it (pve/visibility.py); the collector asks about the ones its privilege map cannot settle (design record
261206-55). This module lists them; it decides nothing.
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData
from pve_steward.pve.visibility import GUESTS, STORAGE, STORAGE_ROWS, Filter


def _vmid(sid: object) -> int | None:
    num = str(sid).partition(":")[2]
    return int(num) if num.isdecimal() else None


def absent_references(data: ClusterData) -> list[tuple[Filter, set[str], tuple[str, ...]]]:
    """Per filter: the ids that something read names and the filtered list lacks, and the areas that judge them."""
    storages: set[str] = set()
    for cfg in data.parsed.values():
        storages.update(str(v.storage) for v in cfg.volumes if v.storage and not v.host_path)
    storages.update(str(j["storage"]) for j in data.backup_jobs if j.get("storage"))
    storages.update(data.vzdump_storage.values())
    vmids = {int(b["vmid"]) for b in data.backups if str(b.get("vmid", "")).isdecimal()}
    vmids.update(v for r in data.ha_resources if (v := _vmid(r.get("sid"))) is not None)
    rows = {str(r.get("storage")) for r in data.resources if r.get("type") == "storage"}
    return [
        (STORAGE, {s for s in storages if s not in data.storage_defs}, _STORAGE_AREAS),
        (GUESTS, {str(v) for v in vmids if v not in data.guests}, ("backups", "ha", "migration")),
        # a storage /storage shows (Datastore.AllocateSpace will do) without rows here (Datastore.Audit alone)
        (STORAGE_ROWS, {s for s in data.storage_defs if s not in rows}, ("storage", "capacity")),
    ]


_STORAGE_AREAS = ("backups", "storage", "migration", "capacity", "upgrade", "pbs")
