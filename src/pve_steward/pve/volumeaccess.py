"""Which volumes PVE's storage content index shows a caller: the rule of pve-storage check_volume_access.

``GET /nodes/{node}/storage/{storage}/content`` needs Datastore.Audit or Datastore.AllocateSpace on the
storage, then skips every volume ``check_volume_access`` refuses (src/PVE/API2/Storage/Content.pm
index): a backup of guest N only with Datastore.AllocateSpace on the storage and VM.Backup on /vms/N,
unless Datastore.Allocate on the storage shows everything (src/PVE/Storage.pm check_volume_access).
PVEAuditor has neither, so it lists no backup at all: absent backups must not be read as missing ones.

Privileges come from ``GET /access/permissions`` (the caller's own): path -> {privilege: 1} for the
paths that have an ACL, each with its effective privileges; a path not listed has its nearest listed
ancestor's (PVE's ACLs propagate down).
"""

from __future__ import annotations

from typing import Any

from pve_steward.errors import PveError

Permissions = dict[str, dict[str, Any]]
Answer = Permissions | PveError  # what the read of /access/permissions gave: unread privileges decide nothing


def privileges_at(perms: Permissions, path: str) -> set[str]:
    """The caller's privileges on ``path``: those of the nearest listed path at or above it."""
    at = path.rstrip("/") or "/"
    while True:
        listed = perms.get(at)
        if listed is not None:
            return {p for p, v in listed.items() if v}
        if at == "/":
            return set()
        at = at.rsplit("/", 1)[0] or "/"


def _every_guest_has(perms: Permissions, privilege: str) -> bool:
    """``privilege`` on /vms and on every guest path the permissions list (one listed without it hides it)."""
    guests = [p for p in perms if p.startswith("/vms/")]
    return privilege in privileges_at(perms, "/vms") and all(privilege in privileges_at(perms, p) for p in guests)


def backups_hidden(perms: Answer, storage: str, vmid: int | None = None) -> str | None:
    """Why the content index would hide backups of ``storage`` (of every guest, or of ``vmid``) from the
    caller, or None if it shows them all."""
    return _owned_hidden(perms, storage, vmid, "backups", "Datastore.AllocateSpace", "VM.Backup")


def images_hidden(perms: Answer, storage: str, vmid: int | None = None) -> str | None:
    """Why the content index would hide disk images (``images``/``rootdir``) of ``storage`` from the caller."""
    return _owned_hidden(perms, storage, vmid, "disk images", "Datastore.Audit", "VM.Config.Disk")


def _owned_hidden(
    perms: Answer, storage: str, vmid: int | None, what: str, on_storage: str, on_guest: str
) -> str | None:
    """A guest's volume is listed with ``on_storage`` on the storage and ``on_guest`` on the guest, or with
    Datastore.Allocate on the storage (check_volume_access, per volume type)."""
    if isinstance(perms, PveError):
        return f"own privileges unread ({perms.message})"
    held = privileges_at(perms, f"/storage/{storage}")
    if "Datastore.Allocate" in held:
        return None
    guests = _every_guest_has(perms, on_guest) if vmid is None else on_guest in privileges_at(perms, f"/vms/{vmid}")
    if on_storage in held and guests:
        return None
    whose = "each guest (/vms)" if vmid is None else f"/vms/{vmid}"
    return (
        f"PVE lists {what} only with {on_storage} on /storage/{storage} and {on_guest} on {whose}, "
        f"or with Datastore.Allocate on /storage/{storage}"
    )


def content_hidden(perms: Answer, storage: str, content: str | None, vmid: int | None = None) -> str | None:
    """Why a content listing of ``storage`` (one content type, or all) would be partial for the caller."""
    rules = {"backup": backups_hidden, "images": images_hidden, "rootdir": images_hidden}
    chosen = [rules[content]] if content in rules else [] if content else [backups_hidden, images_hidden]
    reasons = [why for rule in chosen if (why := rule(perms, storage, vmid)) is not None]
    return "; ".join(dict.fromkeys(reasons)) or None  # an unread answer gives one reason, not two
