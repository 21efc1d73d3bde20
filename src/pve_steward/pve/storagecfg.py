"""A storage.cfg entry as the API shows it (GET /storage, /nodes/{node}/storage rows), read as pve-storage reads it.

The one list of shared storage types and the one reading of the ``shared`` flag: every check that asks
"is this storage shared?" asks :func:`is_shared`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pve_steward.pve.values import flag

# pve-storage src/PVE/Storage/Plugin.pm @SHARED_STORAGE (stable-8; master drops glusterfs with its plugin).
# parse_config sets shared=1 on every storage of these types, so their GET /storage and /nodes/{n}/storage
# rows carry "shared": 1; any other type is shared only when configured with ``shared 1``.
SHARED_STORAGE = frozenset({"iscsi", "nfs", "cifs", "rbd", "cephfs", "iscsidirect", "glusterfs", "zfs", "drbd", "pbs"})


def is_shared(row: Mapping[str, Any]) -> bool:
    """The row's ``shared`` flag, which PVE sets for every @SHARED_STORAGE type; the type decides only for a
    row that lacks the flag (a fixture or a trimmed answer)."""
    return flag(row.get("shared", 0)) or row.get("type") in SHARED_STORAGE


def allowed_nodes(row: Mapping[str, Any]) -> list[str] | None:
    """The nodes a storage is restricted to (``nodes``), None for every node."""
    nodes = [n.strip() for n in str(row.get("nodes") or "").split(",") if n.strip()]
    return nodes or None


def enabled_on(row: Mapping[str, Any], node: str) -> bool:
    """pve-storage src/PVE/Storage.pm storage_check_enabled: not ``disable``, and the node in ``nodes`` (if set)."""
    nodes = allowed_nodes(row)
    return not flag(row.get("disable", 0)) and (nodes is None or node in nodes)


def content_types(row: Mapping[str, Any]) -> set[str]:
    """The content types of the row's ``content`` list (PVE shows 'none' for a storage that holds none)."""
    return {c.strip() for c in str(row.get("content") or "").split(",") if c.strip()}
