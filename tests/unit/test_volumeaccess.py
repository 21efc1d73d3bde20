"""Which backups PVE's storage content index shows a token (pve-storage check_volume_access), read from the
token's own /access/permissions answer as PVE returns it (path -> {privilege: 1})."""

from __future__ import annotations

from pve_steward.pve.volumeaccess import backups_hidden, privileges_at

AUDITOR = {"/": {"Datastore.Audit": 1, "VM.Audit": 1, "Sys.Audit": 1}, "/access": {}, "/access/groups": {}}
LISTER = {"/": {"Datastore.Audit": 1, "VM.Audit": 1, "Datastore.AllocateSpace": 1, "VM.Backup": 1}}


def test_privileges_come_from_the_nearest_listed_path() -> None:
    perms = {"/": {"VM.Audit": 1}, "/vms": {"VM.Backup": 1, "VM.Audit": 1}, "/vms/7": {"VM.Audit": 1}}
    assert privileges_at(perms, "/vms/100") == {"VM.Backup", "VM.Audit"}
    assert privileges_at(perms, "/vms/7") == {"VM.Audit"}
    assert privileges_at(perms, "/storage/local") == {"VM.Audit"}
    assert privileges_at({}, "/vms") == set()


def test_an_auditor_sees_no_backup() -> None:
    why = backups_hidden(AUDITOR, "local")
    assert why is not None and "Datastore.AllocateSpace on /storage/local and VM.Backup" in why


def test_allocate_space_and_vm_backup_show_every_backup() -> None:
    assert backups_hidden(LISTER, "local") is None
    assert backups_hidden({"/storage": {"Datastore.Allocate": 1}}, "pbs") is None, "Datastore.Allocate shows all"


def test_one_guest_without_vm_backup_makes_the_list_partial() -> None:
    perms = {**LISTER, "/vms/105": {"VM.Audit": 1}}  # an ACL on one guest that does not grant VM.Backup
    assert backups_hidden(perms, "local") is not None
    assert backups_hidden(perms, "local", vmid=104) is None, "one guest's list needs its own privilege only"
    assert "/vms/105" in (backups_hidden(perms, "local", vmid=105) or "")


def test_vm_backup_without_space_on_the_storage_is_not_enough() -> None:
    perms = {"/": {"Datastore.Audit": 1, "VM.Backup": 1}, "/storage/nfs": {"Datastore.AllocateSpace": 1}}
    assert backups_hidden(perms, "local") is not None
    assert backups_hidden(perms, "nfs") is None


def test_a_listing_of_every_content_type_names_each_rule_it_breaks() -> None:
    from pve_steward.pve.volumeaccess import content_hidden

    assert content_hidden(LISTER, "local", "backup") is None
    assert content_hidden(LISTER, "local", "iso") is None, "ISOs need only what the listing itself needs"
    images = content_hidden(LISTER, "local", "images") or ""
    assert "VM.Config.Disk" in images and "VM.Backup" not in images
    both = content_hidden(AUDITOR, "local", None) or ""
    assert "VM.Backup" in both and "VM.Config.Disk" in both
    assert content_hidden({"/": {"Datastore.Allocate": 1}}, "local", None) is None


def test_unread_privileges_decide_nothing() -> None:
    from pve_steward.errors import PvePermissionError
    from pve_steward.pve.volumeaccess import content_hidden

    unread = PvePermissionError("Permission check failed (/access, Sys.Audit)")
    assert backups_hidden(unread, "local") == f"own privileges unread ({unread.message})"
    assert content_hidden(unread, "local", None) == f"own privileges unread ({unread.message})", "said once"
