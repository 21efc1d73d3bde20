"""PVE's named parameter formats (pve-common's JSONSchema registry), as pvesim needs them.

The API schema names formats (``pve-node``, ``pve-vmid``...) but does not carry their regexes;
these follow pve-common's ``PVE::JSONSchema`` so that pvesim refuses what PVE refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_NODE = re.compile(r"^(?=.{1,63}$)[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$")
_CONFIGID = re.compile(r"^[a-z][a-z0-9_-]+$", re.IGNORECASE)  # JSONSchema.pm $CONFIGID_RE
_STORAGE_ID = re.compile(r"^[a-z][a-z0-9\-_.]*[a-z0-9]$", re.IGNORECASE)
_VMID_LIST = re.compile(r"^\d+(,\d+)*$")
_LABEL = r"[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?"
_DNS_NAME = re.compile(rf"^(?=.{{1,255}}$){_LABEL}(\.{_LABEL})*$")
_CONTENT = {"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import"}
_TASK_STATUS = {"ok", "error", "warning", "unknown"}
_SID = r"[a-z][a-z0-9\-_.]*[a-z0-9]"
_STORAGE_PAIR = re.compile(rf"^{_SID}(:{_SID})?(,{_SID}(:{_SID})?)*$", re.IGNORECASE)


def _node(v: str) -> str | None:
    return None if _NODE.match(v) else "value does not look like a valid node name"


def _vmid(v: str) -> str | None:
    if not v.isdigit() or not 100 <= int(v) <= 999999999:
        return "value does not look like a valid VM ID"
    return None


def _configid(v: str) -> str | None:
    return None if _CONFIGID.match(v) else f"invalid configuration ID '{v}'"


def _storage_id(v: str) -> str | None:
    return None if _STORAGE_ID.match(v) else f"storage ID '{v}' contains illegal characters"


def _vmid_list(v: str) -> str | None:
    return None if _VMID_LIST.match(v) else "value does not look like a valid VM ID list"


def _content(v: str) -> str | None:
    return None if v in _CONTENT else f"invalid content type '{v}'"


def _task_status_list(v: str) -> str | None:
    bad = [s for s in v.split(",") if s.strip().lower() not in _TASK_STATUS]
    return f"invalid task status '{bad[0]}'" if bad else None


def _storage_pair_list(v: str) -> str | None:
    return None if _STORAGE_PAIR.match(v) else "invalid storage pair list"


def _dns_name(v: str) -> str | None:
    return None if _DNS_NAME.match(v) else "value does not look like a valid DNS name"


FORMATS: dict[str, Callable[[str], str | None]] = {
    "pve-node": _node,
    "pve-vmid": _vmid,
    "pve-configid": _configid,
    "pve-storage-id": _storage_id,
    "pve-vmid-list": _vmid_list,
    "pve-storage-content": _content,
    "pve-task-status-type-list": _task_status_list,
    "storage-pair-list": _storage_pair_list,
    "dns-name": _dns_name,
}


def check_format(fmt: str, value: str) -> str | None:
    """Return PVE's message for a value that does not match ``fmt``; None when it matches or is unknown.
    JSONSchema.pm check_type adds "invalid format - " to the verifier's ``die``, newline and all."""
    checker = FORMATS.get(fmt)
    if checker is None:
        return None
    msg = checker(value)
    return f"invalid format - {msg}\n" if msg else None
