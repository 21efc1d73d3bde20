"""What a token cannot see is 'not visible to this token', never missing, absent, uncovered or blocked: each
consumer of a privilege-filtered list, on PVE-shaped fixtures (pve/visibility.py, design record 261206-55).

Each test states the verdict once for a token that sees the object (the verdict stands) and once for one that
does not (no false verdict); the visibility comes from the token's privilege map as PVE answers it."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.backups import analyze_backups
from pve_steward.analysis.checks import cluster_config as cc
from pve_steward.analysis.checks import storage as sc
from pve_steward.analysis.checks.node_consistency import _odd_ones
from pve_steward.analysis.checks.upgrade_storage import volume_content
from pve_steward.analysis.guests import analyze_guests
from pve_steward.analysis.migration.findings import analyze_migratability
from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.visibility import Visibility
from tests.unit.pve_fixtures import (
    DAY,
    HOUR,
    backup_row,
    cluster_status,
    data,
    guest_row,
    node_row,
    qemu_config,
    storage_cfg,
    task,
)

T = Thresholds()
NODES = {"pve1": True, "pve2": True, "pve3": True}
AUDITOR = {
    p: {"Sys.Audit": 1, "VM.Audit": 1, "Datastore.Audit": 1, "Pool.Audit": 1, "SDN.Audit": 1}
    for p in ("/", "/access", "/sdn")
}
# PVEAuditor on /, with /storage out of sight but for one storage (NoAccess on /storage: an ACL-tree path
# the map leaves out), as pve-access-control get_effective_permissions answers it
SOME_STORAGE = Visibility(
    {**AUDITOR, "/vms": {"VM.Audit": 1}, "/nodes": {"Sys.Audit": 1}, "/storage/local": {"Datastore.Audit": 1}},
    acl_paths=["/", "/storage", "/storage/local"],
)
SEES_ALL = Visibility(
    {**AUDITOR, "/vms": {"VM.Audit": 1}, "/nodes": {"Sys.Audit": 1}, "/storage": {"Datastore.Audit": 1}},
    acl_paths=["/"],
)
JOB = {"id": "nightly", "type": "vzdump", "schedule": "21:00", "storage": "pbs", "all": 1, "enabled": 1}


def _cluster(vis: Visibility, **kw: Any) -> Any:
    base: dict[str, Any] = {
        "cluster_status": cluster_status(NODES),
        "resources": [node_row(n) for n in NODES] + [guest_row(100, "pve1")],
        "storage_config": [storage_cfg("local", "dir", "iso,backup")],  # ceph-vm and pbs: not listed
        "configs": {100: qemu_config("web")},  # scsi0 on ceph-vm
        "visibility": vis,
    }
    base.update(kw)
    return data(**base)


def test_a_guest_on_a_storage_the_token_cannot_see_is_not_provable_not_blocked() -> None:
    hidden = assess(_cluster(SOME_STORAGE), 100)
    (why,) = hidden.blocking
    assert why.code == "MIGRATE_NOT_PROVABLE" and "does not exist" not in why.detail
    assert "storage ceph-vm is not visible to this token" in why.detail
    assert "Datastore.Audit or Datastore.AllocateSpace on /storage/ceph-vm" in why.detail
    missing = assess(_cluster(SEES_ALL), 100)  # the token would see it: it really is gone
    assert [r.code for r in missing.blocking] == ["MIGRATE_STORAGE_UNAVAILABLE"]
    assert "does not exist in the storage config" in missing.blocking[0].detail


def test_an_ha_guest_on_a_hidden_storage_is_not_called_unmovable() -> None:
    ha = [{"sid": "vm:100", "state": "started", "type": "vm"}]
    found, _ = analyze_migratability(_cluster(SOME_STORAGE, ha_resources=ha), verdicts=False)
    assert [f.code for f in found] == ["MIGRATE_NOT_PROVABLE"] and "not visible to this token" in found[0].message
    found, _ = analyze_migratability(_cluster(SEES_ALL, ha_resources=ha), verdicts=False)
    assert [f.code for f in found] == ["HA_GUEST_NOT_MIGRATABLE"]


def test_without_the_ha_list_no_guest_is_planned_as_a_plain_move() -> None:
    """PVE lists HA resources only with Sys.Audit on /: whether a guest is HA-managed (an HA request, its rules
    deciding where) is not visible, so its move is not provable, and the plan says it is partial."""
    storages = [storage_cfg("ceph-vm", "rbd")]
    refused = {"ha_resources": "Permission check failed (/, Sys.Audit)"}
    d = _cluster(SEES_ALL, storage_config=storages, unread=refused)
    (why,) = assess(d, 100).blocking
    assert why.code == "MIGRATE_NOT_PROVABLE" and "whether it is HA-managed" in why.detail
    assert "Sys.Audit on /" in why.detail
    plan = plan_evacuation(d, "pve1")
    assert plan.steps == [] and [b.code for b in plan.blockers] == ["MIGRATE_NOT_PROVABLE"]
    assert assess(_cluster(SEES_ALL, storage_config=storages), 100).verdict == "live"  # list read: it moves


def test_a_target_whose_memory_the_token_cannot_see_makes_room_not_provable() -> None:
    """/cluster/resources keeps a node's row without Sys.Audit on it but drops its figures (API2Tools.pm
    extract_node_stats): the planner does not call a guest short of room on that account."""
    no_pve2 = Visibility(
        {**AUDITOR, "/vms": {"VM.Audit": 1}, "/nodes": {"Sys.Audit": 1}, "/storage": {"Datastore.Audit": 1}},
        acl_paths=["/", "/nodes/pve2", "/nodes/pve3"],  # NoAccess on pve2 and pve3: left out of the map
    )
    rows = [node_row("pve1"), {"id": "node/pve2", "type": "node", "node": "pve2", "status": "online"}]
    rows += [{"id": "node/pve3", "type": "node", "node": "pve3", "status": "online"}, guest_row(100, "pve1")]
    d = _cluster(no_pve2, resources=rows, storage_config=[storage_cfg("ceph-vm", "rbd")])
    plan = plan_evacuation(d, "pve1")
    assert [b.code for b in plan.blockers] == ["MIGRATE_NOT_PROVABLE"]
    assert "memory of pve2, pve3 is not visible to this token" in plan.blockers[0].detail


def test_backups_judged_only_where_every_backup_storage_is_visible() -> None:
    rows = [guest_row(100, "pve1")]
    hidden = _cluster(SOME_STORAGE, backup_jobs=[JOB], backups=[], backup_storages_read=["local"], not_backed_up=[])
    assert "BACKUP_NONE" not in {f.code for f in analyze_backups(hidden, T)}  # its job writes to hidden pbs
    seen = _cluster(
        SEES_ALL,
        resources=[node_row(n) for n in NODES] + rows,
        storage_config=[storage_cfg("pbs", "pbs", "backup"), storage_cfg("local", "dir", "iso,backup")],
        backup_jobs=[JOB],
        backups=[],
        backup_storages_read=["pbs", "local"],
        not_backed_up=[],
    )
    assert "BACKUP_NONE" in {f.code for f in analyze_backups(seen, T)}


def test_without_the_job_list_no_guest_is_uncovered_or_stale() -> None:
    """/cluster/backup needs Sys.Audit on /: refused, it is not 'no job', and a backup's age has no schedule."""
    kw: dict[str, Any] = {
        "storage_config": [storage_cfg("pbs", "pbs", "backup")],
        "backups": [backup_row(100, "pbs", 3 * DAY, "ok")],
        "backup_storages_read": ["pbs"],
    }
    refused = _cluster(SEES_ALL, unread={"backup_jobs": "Permission check failed (/, Sys.Audit)"}, **kw)
    assert not {"BACKUP_NOT_SCHEDULED", "BACKUP_STALE"} & {f.code for f in analyze_backups(refused, T)}
    read = _cluster(SEES_ALL, **kw)  # read, and empty: every guest is uncovered, and 3 days is stale
    assert {"BACKUP_NOT_SCHEDULED", "BACKUP_STALE"} <= {f.code for f in analyze_backups(read, T)}


def test_a_backup_job_target_the_token_cannot_see_is_not_missing() -> None:
    resources = [node_row(n) for n in NODES]
    reads = {"backup_job_config": {"": [JOB]}}
    hidden = _cluster(SOME_STORAGE, resources=resources, reads=reads)
    assert sc.backup_target_missing(hidden, T) == []
    assert cc.backup_job_settings(_cluster(SOME_STORAGE, backup_jobs=[{**JOB, "storage": "nfs"}]), T) == []
    gone = _cluster(SEES_ALL, resources=resources, reads=reads)  # it would be listed: not available anywhere
    assert {f.subject.node for f in sc.backup_target_missing(gone, T)} == set(NODES)


def test_storage_status_rows_need_datastore_audit_alone() -> None:
    """/storage lists a storage with Datastore.AllocateSpace, /cluster/resources its rows only with
    Datastore.Audit: a job's storage without rows is then not 'unavailable'."""
    space_only = Visibility(
        {**AUDITOR, "/storage": {"Datastore.AllocateSpace": 1}, "/vms": {"VM.Audit": 1}}, acl_paths=["/"]
    )
    d = _cluster(
        space_only,
        resources=[node_row(n) for n in NODES],
        storage_config=[storage_cfg("pbs", "pbs", "backup")],
        reads={"backup_job_config": {"": [JOB]}},
    )
    assert sc.backup_target_missing(d, T) == []


def test_no_backup_storage_is_claimed_only_over_the_whole_list() -> None:
    config = [storage_cfg("local", "dir", "iso")]
    assert sc.no_backup_target(_cluster(SOME_STORAGE, storage_config=config), T) == []
    assert [f.code for f in sc.no_backup_target(_cluster(SEES_ALL, storage_config=config), T)] == [
        "STORAGE_NO_BACKUP_TARGET"
    ]


def test_no_replication_is_claimed_only_when_every_guest_is_visible() -> None:
    some_guests = Visibility({**AUDITOR, "/vms": {"VM.Audit": 1}}, acl_paths=["/", "/vms/101"])
    assert cc.replication_used(_cluster(some_guests), T) == []
    assert [f.code for f in cc.replication_used(_cluster(SEES_ALL), T)] == ["REPLICATION_NONE"]


def test_a_lock_is_not_stuck_for_want_of_a_task_the_token_cannot_see() -> None:
    locked = [node_row(n) for n in NODES] + [guest_row(100, "pve1", lock="backup")]
    old = [task("pve1", "vzdump", "100", 5 * HOUR)]
    hidden = _cluster(SEES_ALL, resources=locked, tasks=[], unread={"tasks:pve1": "not visible to this token"})
    assert "GUEST_LOCK_STUCK" not in {f.code for f in analyze_guests(hidden, T)}
    assert "GUEST_LOCK_STUCK" in {f.code for f in analyze_guests(_cluster(SEES_ALL, resources=locked, tasks=old), T)}


def test_onboot_is_judged_only_where_ha_membership_is_known() -> None:
    off = {100: qemu_config("web", onboot=None)}
    refused = _cluster(SEES_ALL, configs=off, unread={"ha_resources": "Permission check failed (/, Sys.Audit)"})
    assert "GUEST_NO_ONBOOT" not in {f.code for f in analyze_guests(refused, T)}
    assert "GUEST_NO_ONBOOT" in {f.code for f in analyze_guests(_cluster(SEES_ALL, configs=off), T)}


def test_an_odd_node_only_against_a_majority_the_unread_nodes_cannot_turn() -> None:
    """pve2's answer is unread (a NoAccess ACL on /nodes/pve2): pve1 against pve3 proves nothing."""
    assert _odd_ones({"pve1": "a", "pve3": "b"}, unread=1)[0] == []
    assert _odd_ones({"pve1": "a", "pve3": "b"})[0] == ["pve3"]  # all read: the tie goes by name, as before
    assert _odd_ones({"pve1": "a", "pve2": "a", "pve3": "a", "pve4": "b"}, unread=1)[0] == ["pve4"]


def test_upgrade_volume_check_skips_a_storage_the_token_cannot_see() -> None:
    versions = {n: [{"Package": "pve-manager", "Version": "8.4.14", "CurrentState": "Installed"}] for n in NODES}
    kw: dict[str, Any] = {"reads": {"apt_versions": versions}}
    assert volume_content(_cluster(SOME_STORAGE, **kw), T) == []
    assert "storage does not exist" in volume_content(_cluster(SEES_ALL, **kw), T)[0].message


def test_a_nic_is_not_proven_off_sdn_where_the_token_cannot_see_the_vnets() -> None:
    """A vnet decides the targets (migrate.sdn-vnet-on-target); PVE lists vnets, and a node's bridges, only with
    SDN.Audit on their zone: without it on /sdn, a NIC's bridge may be a vnet."""
    storages = [storage_cfg("ceph-vm", "rbd")]
    seen = {p: v for p, v in AUDITOR.items() if p != "/sdn"}  # a NoAccess entry on /sdn: left out of the map
    no_sdn = Visibility({**seen, "/vms": {"VM.Audit": 1}, "/nodes": {"Sys.Audit": 1}}, acl_paths=["/", "/sdn"])
    (why,) = assess(_cluster(no_sdn, storage_config=storages), 100).blocking
    assert why.code == "MIGRATE_NOT_PROVABLE" and "SDN.Audit or SDN.Allocate on /sdn/zones/<id>" in why.detail
    assert assess(_cluster(SEES_ALL, storage_config=storages), 100).verdict == "live"
    no_nic = {100: qemu_config("web", net0=None)}
    assert assess(_cluster(no_sdn, storage_config=storages, configs=no_nic), 100).verdict == "live"
