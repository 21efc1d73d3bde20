"""Backup diagnostics on PVE-shaped fixtures with a fixed clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pve_steward.analysis.backups import analyze_backups, job_covers, vzdump_refusals
from pve_steward.analysis.data import Missing
from pve_steward.analysis.findings import Severity
from pve_steward.analysis.schedule import interval_seconds
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.visibility import Visibility
from tests.unit.pve_fixtures import (
    DAY,
    HOUR,
    backup_row,
    data,
    guest_row,
    lxc_config,
    node_row,
    pool_row,
    qemu_config,
    storage_cfg,
    task,
    vzdump_defaults,
)

T = Thresholds()
STORAGES = [storage_cfg("pbs", "pbs", "backup"), storage_cfg("local", "dir", "iso,backup")]
DAILY = {
    "id": "backup-daily",
    "type": "vzdump",
    "schedule": "21:00",
    "storage": "pbs",
    "all": 1,
    "enabled": 1,
    "prune-backups": {"keep-daily": 7},
}


def _data(guests, backups, jobs=(DAILY,), **kw):  # type: ignore[no-untyped-def]
    return data(
        resources=[node_row("pve1"), node_row("pve2"), *guests],
        storage_config=STORAGES,
        backup_jobs=list(jobs),
        backups=list(backups),
        backup_storages_read=["pbs"],
        not_backed_up=[],
        **kw,
    )


def codes(findings):  # type: ignore[no-untyped-def]
    return sorted((f.code, f.subject.id) for f in findings)


@pytest.mark.parametrize(
    ("schedule", "seconds"),
    [
        ("21:00", DAY),
        ("daily", DAY),
        ("*/15", 900),
        ("hourly", HOUR),
        ("sun 02:00", 7 * DAY),
        ("mon..fri 21:00", 3 * DAY),
        ("sat,sun 03:30", 6 * DAY),
        ("0/6:00", 6 * HOUR),
        ("8..17:00", 15 * HOUR),
        ("weekly", 7 * DAY),
        ("*/5:00", 5 * HOUR),
        ("2026-01-01 00:00", None),
        ("bogus", None),
        ("", None),
        # dates and seconds, as proxmox-time parses them (calendar_event.rs)
        ("sat *-1..7 15:00", 35 * DAY),  # the GUI's 'first Saturday of the month': five weeks at most
        ("*-*-01 02:00", 31 * DAY),
        ("monthly", 31 * DAY),
        ("quarterly", 92 * DAY),
        ("*-*-28..31 23:00", 28 * DAY),  # 31 January to 28 February
        ("02:00:00", DAY),
        ("mon..fri 21:00 UTC", 3 * DAY),
        ("monday,thursday 03:00", 4 * DAY),
        ("*:*:*", 1),
        ("*/0", None),
        ("12:61", None),
        ("mon 2026-13-01", None),
        ("daily extra", None),
    ],
)
def test_schedule_intervals(schedule: str, seconds: float | None) -> None:
    assert interval_seconds(schedule) == seconds


@pytest.mark.parametrize(
    ("job", "vmid", "node", "expected"),
    [
        ({"all": 1}, 100, "pve1", True),
        ({"all": 1, "exclude": "100,101"}, 100, "pve1", False),
        ({"vmid": "100,102"}, 102, "pve1", True),
        ({"vmid": "100,102"}, 101, "pve1", False),
        ({"all": 1, "node": "pve2"}, 100, "pve1", False),
        ({"pool": "prod"}, 100, "pve1", None),
        ({}, 100, "pve1", False),
        ({"all": 0, "exclude": "100"}, 101, "pve1", False),
        ({"all": "bogus"}, 100, "pve1", False),  # malformed: covers nobody, no traceback
        ({"vmid": "100,²,x"}, 100, "pve1", True),  # digits int() refuses are skipped, not a traceback
        ({"vmid": "100", "pool": "prod"}, 100, "pve1", None),  # get_included_guests reads the pool first
        ({"all": 1, "node": "pve1"}, 100, None, True),  # node unknown: the node filter cannot exclude
    ],
)
def test_job_selection_follows_pve(job, vmid: int, node: str, expected) -> None:  # type: ignore[no-untyped-def]
    assert job_covers(job, vmid, node) is expected


@pytest.mark.parametrize(
    ("guest_pool", "visible", "expected"),
    [
        ("prod", frozenset({"prod"}), True),
        ("prod", None, True),  # a row naming the pool proves membership
        (None, frozenset({"prod"}), False),  # pool visible, guest not in it
        ("dev", frozenset({"prod", "dev"}), False),
        (None, frozenset(), None),  # pool not visible (no Pool.Audit): cannot tell
    ],
)
def test_pool_jobs_cover_the_pools_members(guest_pool, visible, expected) -> None:  # type: ignore[no-untyped-def]
    assert job_covers({"pool": "prod"}, 100, "pve1", guest_pool, visible) is expected
    assert job_covers({"pool": "prod", "node": "pve2"}, 100, "pve1", guest_pool, visible) is False


def test_pool_job_coverage_and_its_weekly_schedule() -> None:
    """VZDump.pm get_included_guests: a pool job covers its members; staleness follows its weekly schedule."""
    weekly = {"id": "weekly-prod", "schedule": "sat 02:00", "storage": "pbs", "pool": "prod", "enabled": 1}
    weekly["prune-backups"] = {"keep-weekly": 4}
    guests = [guest_row(100, "pve1", pool="prod"), guest_row(101, "pve1")]
    backups = [backup_row(100, "pbs", 3 * DAY, "ok"), backup_row(101, "pbs", DAY, "ok")]
    d = _data(guests, backups, [weekly])
    d.resources.append(pool_row("prod"))
    assert codes(analyze_backups(d, T)) == [("BACKUP_NOT_SCHEDULED", "101")]
    hidden = _data(guests[1:], backups[1:], [weekly])  # no pool rows: membership unknown, no verdict
    assert codes(analyze_backups(hidden, T)) == []
    # no Pool.Audit: the row has no pool and no pool rows exist; judged by the weekly schedule, not the 26 h default
    unseen = [guest_row(100, "pve1")]
    assert codes(analyze_backups(_data(unseen, backups[:1], [weekly]), T)) == []
    late = analyze_backups(_data(unseen, [backup_row(100, "pbs", 8 * DAY, "ok")], [weekly]), T)
    assert codes(late) == [("BACKUP_STALE", "100")] and "membership not visible" in late[0].evidence["basis"]
    stale = _data(guests[:1], [backup_row(100, "pbs", 8 * DAY, "ok")], [weekly])
    stale.resources.append(pool_row("prod"))
    assert codes(analyze_backups(stale, T)) == [("BACKUP_STALE", "100")]


def test_fresh_backup_is_clean() -> None:
    d = _data([guest_row(100, "pve1")], [backup_row(100, "pbs", 10 * HOUR, "ok")])
    assert analyze_backups(d, T) == []


def test_no_backup_and_not_scheduled() -> None:
    jobs = [dict(DAILY, exclude="101")]
    d = _data([guest_row(100, "pve1"), guest_row(101, "pve1")], [backup_row(100, "pbs", HOUR, "ok")], jobs)
    d.not_backed_up = [{"vmid": 101, "type": "qemu", "name": "guest101"}]
    found = analyze_backups(d, T)
    assert codes(found) == [("BACKUP_NONE", "101"), ("BACKUP_NOT_SCHEDULED", "101")]
    none = next(f for f in found if f.code == "BACKUP_NONE")
    assert none.severity is Severity.CRITICAL
    sched = next(f for f in found if f.code == "BACKUP_NOT_SCHEDULED")
    assert sched.evidence["in_pve_not_backed_up"] is True


def test_only_disabled_job_counts_as_not_scheduled() -> None:
    disabled = dict(DAILY, id="old", enabled=0)
    d = _data([guest_row(100, "pve1")], [backup_row(100, "pbs", HOUR, "ok")], [disabled])
    found = analyze_backups(d, T)
    sched = next(f for f in found if f.code == "BACKUP_NOT_SCHEDULED")
    assert sched.evidence["covered_only_by_disabled"] == ["old"]
    assert "BACKUP_JOB_DISABLED" in {f.code for f in found}


def test_templates_are_covered_and_judged_like_guests() -> None:
    """vzdump selects templates (get_included_guests walks the vmlist) and backs them up."""
    template = guest_row(9000, "pve1", template=True, status="stopped")
    assert codes(analyze_backups(_data([template], []), T)) == [("BACKUP_NONE", "9000")]
    assert codes(analyze_backups(_data([template], [backup_row(9000, "pbs", 3 * DAY, "ok")]), T)) == [
        ("BACKUP_STALE", "9000")
    ]
    assert analyze_backups(_data([template], [backup_row(9000, "pbs", HOUR, "ok")]), T) == []
    excluded = _data([template], [backup_row(9000, "pbs", HOUR, "ok")], [dict(DAILY, exclude="9000")])
    assert codes(analyze_backups(excluded, T)) == [("BACKUP_NOT_SCHEDULED", "9000")]


@pytest.mark.parametrize(
    ("age_hours", "expected"),
    [
        (26.3, None),  # daily job: threshold 24 h + max(2 h, 10 %) = 26.4 h
        (26.5, Severity.WARNING),
        (52.8, Severity.WARNING),  # exactly 2x is not beyond it
        (53.0, Severity.CRITICAL),
    ],
)
def test_stale_threshold_from_job_schedule(age_hours: float, expected: Severity | None) -> None:
    d = _data([guest_row(100, "pve1")], [backup_row(100, "pbs", age_hours * HOUR, "ok")])
    stale = [f for f in analyze_backups(d, T) if f.code == "BACKUP_STALE"]
    if expected is None:
        assert stale == []
    else:
        assert [f.severity for f in stale] == [expected]
        assert stale[0].evidence["threshold_hours"] == 26.4


def test_stale_default_without_schedule_and_weekly_job() -> None:
    no_sched = dict(DAILY, schedule=None)
    d = _data([guest_row(100, "pve1")], [backup_row(100, "pbs", 27 * HOUR, "ok")], [no_sched])
    stale = [f for f in analyze_backups(d, T) if f.code == "BACKUP_STALE"]
    assert stale and stale[0].evidence["basis"] == "default" and stale[0].evidence["threshold_hours"] == 26
    weekly = dict(DAILY, schedule="sun 02:00")
    d = _data([guest_row(100, "pve1")], [backup_row(100, "pbs", 6 * DAY, "ok")], [weekly])
    assert not [f for f in analyze_backups(d, T) if f.code == "BACKUP_STALE"]
    # the GUI's 'first Saturday of the month' (a date in the schedule): five days old is not stale
    monthly = dict(DAILY, schedule="sat *-1..7 15:00")
    d = _data([guest_row(100, "pve1")], [backup_row(100, "pbs", 5 * DAY, "ok")], [monthly])
    assert not [f for f in analyze_backups(d, T) if f.code == "BACKUP_STALE"]


def test_newest_of_several_backups_counts() -> None:
    d = _data([guest_row(100, "pve1")], [backup_row(100, "pbs", 9 * DAY, "ok"), backup_row(100, "pbs", HOUR, "ok")])
    assert analyze_backups(d, T) == []


def test_verification_failed_and_missing() -> None:
    d = _data(
        [guest_row(100, "pve1"), guest_row(101, "pve1")],
        [backup_row(100, "pbs", HOUR, "failed"), backup_row(100, "pbs", DAY, "ok"), backup_row(101, "pbs", HOUR)],
    )
    found = {f.subject.id: f for f in analyze_backups(d, T) if f.code.startswith("BACKUP_")}
    assert found["100"].code == "BACKUP_VERIFY_FAILED" and found["100"].severity is Severity.CRITICAL
    assert found["100"].evidence["verification"] == "failed"
    # PBSPlugin list_volumes copies `verification` only when a verify job ran: unverified, not failed
    assert found["101"].code == "BACKUP_NOT_VERIFIED" and found["101"].severity is Severity.INFO
    assert found["101"].evidence["verification"] is None
    local = _data([guest_row(100, "pve1")], [backup_row(100, "local", HOUR, pbs=False)], [dict(DAILY, storage="local")])
    assert analyze_backups(local, T) == []  # verification only exists on PBS


def test_failed_last_run_and_recovered_run() -> None:
    guests = [guest_row(107, "pve2"), guest_row(108, "pve2")]
    backups = [backup_row(107, "pbs", 30 * HOUR, "ok"), backup_row(108, "pbs", HOUR, "ok")]
    failed = task("pve2", "vzdump", "", 10 * HOUR, status="job errors")
    log = {failed["upid"]: ["ERROR: Backup of VM 107 failed - job aborted", "TASK ERROR: job errors"]}
    d = _data(guests, backups, tasks=[failed, task("pve2", "vzdump", "", 34 * HOUR)], task_logs=log)
    found = [f for f in analyze_backups(d, T) if f.code == "BACKUP_JOB_FAILED"]
    assert (
        len(found) == 1 and found[0].evidence["failed_vmids"] == [107] and found[0].evidence["jobs"] == ["backup-daily"]
    )
    # a later run of the node (id '' for any run of several guests, API2/VZDump.pm) may be another job's:
    # only a backup of 107 newer than the failure settles it
    later = _data(guests, backups, tasks=[failed, task("pve2", "vzdump", "", 2 * HOUR)], task_logs=log)
    assert [f.evidence["failed_vmids"] for f in analyze_backups(later, T) if f.code == "BACKUP_JOB_FAILED"] == [[107]]
    fresh = [backup_row(107, "pbs", 2 * HOUR, "ok"), backup_row(108, "pbs", HOUR, "ok")]
    recovered = _data(guests, fresh, tasks=[failed, task("pve2", "vzdump", "", 2 * HOUR)], task_logs=log)
    assert not [f for f in analyze_backups(recovered, T) if f.code == "BACKUP_JOB_FAILED"]
    # the failed run wrote to 'local' (its command line): a newer backup on pbs does not settle it
    to_local = {
        failed["upid"]: [
            "INFO: starting new backup job: vzdump 107 108 --storage local --mode snapshot",
            *log[failed["upid"]],
        ]
    }
    other = _data(guests, fresh, tasks=[failed], task_logs=to_local)
    assert [f.evidence["failed_vmids"] for f in analyze_backups(other, T) if f.code == "BACKUP_JOB_FAILED"] == [[107]]
    # two failures of the same guest: the newer speaks for both
    again = task("pve2", "vzdump", "", 5 * HOUR, status="job errors")
    twice = _data(guests, backups, tasks=[failed, again], task_logs={**log, again["upid"]: log[failed["upid"]]})
    assert [f.subject.id for f in analyze_backups(twice, T) if f.code == "BACKUP_JOB_FAILED"] == [again["upid"]]
    too_old = _data(guests, backups, tasks=[task("pve2", "vzdump", "", 49 * HOUR, status="job errors")])
    assert not [f for f in analyze_backups(too_old, T) if f.code == "BACKUP_JOB_FAILED"]
    running = _data(guests, backups, tasks=[task("pve2", "vzdump", "", HOUR, status=None)])
    assert not [f for f in analyze_backups(running, T) if f.code == "BACKUP_JOB_FAILED"]
    # the node's task list (Tasks.pm node_tasks, source all) sends a running run with status RUNNING
    running = _data(guests, backups, tasks=[task("pve2", "vzdump", "", HOUR, status="RUNNING")])
    assert not [f for f in analyze_backups(running, T) if f.code == "BACKUP_JOB_FAILED"]
    # a failed run whose log names no guest: the newest run of its node and id decides, as before
    unnamed = task("pve2", "vzdump", "", 10 * HOUR, status="job errors")
    assert [
        f.code for f in analyze_backups(_data(guests, backups, tasks=[unnamed]), T) if f.code == "BACKUP_JOB_FAILED"
    ]
    cleared = _data(guests, backups, tasks=[unnamed, task("pve2", "vzdump", "", 2 * HOUR)])
    assert not [f for f in analyze_backups(cleared, T) if f.code == "BACKUP_JOB_FAILED"]


def test_unreadable_storage_never_yields_a_false_none() -> None:
    d = _data([guest_row(100, "pve1")], [])
    d.backup_storages_read = []
    d.missing.append(
        Missing(what="backup contents", path="/nodes/pve1/storage/pbs/content", error="timeout", affects=("backups",))
    )
    assert [f.code for f in analyze_backups(d, T)] == []


def test_excluded_disks_and_orphans() -> None:
    d = _data(
        [guest_row(100, "pve1")],
        [backup_row(100, "pbs", HOUR, "ok"), backup_row(555, "pbs", 9 * DAY, "ok")],
        configs={100: qemu_config("web", scsi1="ceph-vm:vm-100-disk-1,backup=0,size=1T")},
    )
    # the token would see a guest 555 (VM.Audit on /vms, and the ACL tree has no entry hiding it): it is gone
    d.visibility = Visibility({"/vms": {"VM.Audit": 1}, "/access": {"Sys.Audit": 1}}, acl_paths=["/vms/7"])
    found = {f.code: f for f in analyze_backups(d, T)}
    assert found["BACKUP_DISK_EXCLUDED"].evidence["disks"] == ["scsi1"]
    assert found["BACKUP_ORPHANED"].subject.id == "555"
    # a NoAccess ACL on /vms/555 (in the ACL tree, left out of the map), or no ACL tree to tell: a hidden guest is
    # not a deleted one
    for hidden in (
        Visibility({"/vms": {"VM.Audit": 1}}, acl_paths=["/vms/555"]),
        Visibility({"/vms": {"VM.Audit": 1}}),
        Visibility.unreadable("timeout"),
    ):
        d.visibility = hidden
        assert "BACKUP_ORPHANED" not in {f.code for f in analyze_backups(d, T)}


def test_a_backup_belongs_to_a_guest_of_its_type() -> None:
    """A reused vmid: the deleted container's backups are not the new VM's (pve-storage subtype, pbs-vm/pbs-ct,
    vzdump-qemu-/vzdump-lxc-; prune groups by type and vmid). Old OpenVZ archives restore as containers."""
    old_ct = backup_row(100, "pbs", HOUR, "ok", gtype="lxc")
    found = analyze_backups(_data([guest_row(100, "pve1")], [old_ct]), T)
    assert sorted(f.code for f in found) == ["BACKUP_NONE", "BACKUP_ORPHANED"]
    orphan = next(f for f in found if f.code == "BACKUP_ORPHANED")
    assert "deleted container 100" in orphan.message and orphan.evidence["vmid_in_use"] is True
    unnamed = {k: v for k, v in backup_row(200, "local", HOUR, pbs=False).items() if k != "subtype"}
    unnamed["volid"] = "local:backup/vzdump-openvz-200-2026_12_01-02_00_00.tar.gz"
    ct = _data([guest_row(200, "pve1", gtype="lxc")], [unnamed], [dict(DAILY, storage="local")])
    ct.backup_storages_read = ["pbs", "local"]
    assert [f.code for f in analyze_backups(ct, T)] == []  # an OpenVZ archive of a container: its backup
    ct.backups = [{**unnamed, "volid": "local:backup/vzdump-qemu-200-2026_12_01-02_00_00.vma.zst"}]
    assert sorted(f.code for f in analyze_backups(ct, T)) == ["BACKUP_NONE", "BACKUP_ORPHANED"]


def test_container_mount_points_are_backed_up_only_when_marked() -> None:
    """pve-container LXC/Config.pm mountpoint_backup_enabled: rootfs always; a volume mount point only with
    backup set (the GUI sets it, pct set and the API do not); a bind mount never (host data: not reported).
    A VM disk is included unless backup is off, in any of PVE's boolean forms."""
    ct = lxc_config(
        "files",
        mp0="ceph-vm:vm-200-disk-1,mp=/data,size=500G",
        mp1="ceph-vm:vm-200-disk-2,mp=/keep,backup=1,size=8G",
        mp2="ceph-vm:vm-200-disk-3,mp=/scratch,backup=0,size=8G",
        mp3="/srv/share,mp=/share",
    )
    vm = qemu_config("web", scsi1="ceph-vm:vm-100-disk-1,backup=no,size=1T", scsi2="ceph-vm:vm-100-disk-2,size=1G")
    rows = [guest_row(100, "pve1"), guest_row(200, "pve1", gtype="lxc")]
    backups = [backup_row(100, "pbs", HOUR, "ok"), backup_row(200, "pbs", HOUR, "ok", gtype="lxc")]
    found = analyze_backups(_data(rows, backups, configs={100: vm, 200: ct}), T)
    excluded = {f.subject.id: f for f in found if f.code == "BACKUP_DISK_EXCLUDED"}
    assert excluded["200"].evidence["disks"] == ["mp0", "mp2"] and "without backup=1" in excluded["200"].message
    assert excluded["100"].evidence["disks"] == ["scsi1"] and "backup=0" in excluded["100"].message


LOCAL_JOB = dict(DAILY, id="local-daily", storage="local", **{"prune-backups": None})


def _retention(
    job, defaults, version="9.1.2", storages=STORAGES, code="BACKUP_JOB_NO_RETENTION", backups=(), vzdump_storage=None
):  # type: ignore[no-untyped-def]
    rows = list(backups) or [backup_row(100, "pbs", HOUR, "ok")]
    d = _data([guest_row(100, "pve1")], rows, [job], version={"version": version})
    d.storage_config = list(storages)
    d.vzdump_defaults = dict(defaults)
    d.vzdump_storage = dict.fromkeys(d.online_nodes, vzdump_storage) if vzdump_storage else {}
    return [f for f in analyze_backups(d, T) if f.code == code]


def test_retention_follows_job_storage_node_defaults_then_keep_all() -> None:
    """VZDump.pm: job prune-backups // storage's // /etc/vzdump.conf's // keep-all=1."""
    keep_all = {n: vzdump_defaults("local") for n in ("pve1@local", "pve2@local")}
    found = _retention(LOCAL_JOB, keep_all)
    assert len(found) == 1 and sorted(found[0].evidence["keeps_all"]) == ["pve1", "pve2"]
    # the node's vzdump.conf (or the storage, folded in by the defaults endpoint) prunes: no finding
    assert _retention(LOCAL_JOB, {n: vzdump_defaults("local", "keep-last=5") for n in keep_all}) == []
    # one node without: only that node is named
    mixed = {"pve1@local": vzdump_defaults("local", "keep-last=5"), "pve2@local": vzdump_defaults("local")}
    assert list(_retention(LOCAL_JOB, mixed)[0].evidence["keeps_all"]) == ["pve2"]
    # the job's own setting wins over everything; keep-all on the job is no retention
    assert _retention(dict(LOCAL_JOB, **{"prune-backups": {"keep-daily": 7}}), keep_all) == []
    assert _retention(dict(LOCAL_JOB, **{"prune-backups": "keep-all=1"}), {})[0].evidence["keeps_all"] == {
        "job": "the job's prune-backups keeps all (keep-all=1)"
    }
    # remove=0 (job or vzdump.conf) with keep-* limits: not pruned, and backups stop at the limit
    # (VZDump.pm exec_backup_task 'max backup limit'); with keep-all nothing is limited and all is kept
    capped = dict(LOCAL_JOB, remove=0, **{"prune-backups": {"keep-daily": 7}})
    assert _retention(capped, {}) == []
    assert _retention(capped, {}, code="BACKUP_JOB_LIMIT")[0].evidence["limits"] == {"job": 7}
    assert _retention(dict(LOCAL_JOB, remove=0, **{"prune-backups": "keep-all=1"}), {})
    removal_off = {n: vzdump_defaults("local", "keep-last=5", remove=0) for n in keep_all}
    assert _retention(LOCAL_JOB, removal_off) == []
    limited = _retention(LOCAL_JOB, removal_off, code="BACKUP_JOB_LIMIT")
    assert limited[0].evidence["limits"] == {"pve1": 5, "pve2": 5} and limited[0].severity.value == "warning"
    full = [backup_row(100, "local", n * DAY, pbs=False) for n in range(1, 6)]
    at_limit = _retention(LOCAL_JOB, removal_off, code="BACKUP_JOB_LIMIT", backups=full)
    assert at_limit[0].evidence["guests_at_limit"] == [100] and at_limit[0].severity.value == "critical"
    assert _retention(dict(LOCAL_JOB, remove=0), keep_all)  # remove=0, keep-all: every backup kept
    # the job's own remove=1 stands against vzdump.conf's remove=0 (VZDump.pm new fills only undefined keys)
    assert _retention(dict(LOCAL_JOB, remove=1), removal_off) == []
    # defaults not read (failed read: DATA_INCOMPLETE says so): no verdict
    assert _retention(LOCAL_JOB, {}) == []


def test_retention_of_a_job_without_storage_comes_from_each_nodes_own_default() -> None:
    """VZDump.pm new: no storage on the job, so each node's /etc/vzdump.conf storage (else 'local'), whose
    prune-backups the defaults endpoint folds in when asked without storage ("node@"). A ``?storage=local`` answer
    is not the one vzdump uses; a dumpdir job's retention is not provable (no answer leaves a storage's out)."""
    bare = {k: v for k, v in LOCAL_JOB.items() if k != "storage"}
    own = {"pve1@": vzdump_defaults("nfs", "keep-last=3"), "pve2@": vzdump_defaults("local")}
    assert list(_retention(bare, own)[0].evidence["keeps_all"]) == ["pve2"]
    assert _retention(bare, {n: vzdump_defaults("local") for n in ("pve1@local", "pve2@local")}) == []
    assert _retention({**bare, "dumpdir": "/mnt/usb"}, {n: vzdump_defaults("local") for n in ("pve1@", "pve2@")}) == []
    # the default is a PBS storage: PBS prune jobs may hold retention, not judged without a PBS connection
    to_pbs = {n: vzdump_defaults("pbs") for n in ("pve1@", "pve2@")}
    assert _retention(bare, to_pbs, vzdump_storage="pbs") == [] and _retention(bare, to_pbs)
    # remove=0 on the job: the limit counts the guest's backups on the storage it writes to there
    capped = dict(bare, remove=0)
    limited = {n: vzdump_defaults("nfs", "keep-last=2") for n in ("pve1@", "pve2@")}
    rows = [backup_row(100, "nfs", n * DAY, pbs=False) for n in (1, 2)] + [backup_row(100, "local", DAY, pbs=False)]
    found = _retention(capped, limited, code="BACKUP_JOB_LIMIT", backups=rows, vzdump_storage="nfs")
    assert found[0].evidence["storage"] == "nfs" and found[0].evidence["guests_at_limit"] == [100]


def test_retention_not_judged_on_pbs_and_maxfiles_only_on_pve8() -> None:
    pbs_job = dict(DAILY, **{"prune-backups": None})
    assert _retention(pbs_job, {"pve1@pbs": vzdump_defaults("pbs")}) == []  # PBS prune jobs hold retention
    keep_all = {"pve1@local": vzdump_defaults("local"), "pve2@local": vzdump_defaults("local")}
    maxfiles = dict(LOCAL_JOB, maxfiles=3)
    assert _retention(maxfiles, keep_all, version="8.4.14") == []  # PVE 8: maxfiles=3 is keep-last=3
    assert _retention(maxfiles, keep_all, version="9.1.2")  # PVE 9 dropped maxfiles (pve8to9 fails on it)
    # storage maxfiles: PVE 8's defaults endpoint already answers keep-last (storage_config converts it)
    converted = {n: vzdump_defaults("local", "keep-last=3") for n in keep_all}
    storage_maxfiles = [STORAGES[0], storage_cfg("local", "dir", "iso,backup", maxfiles=3)]
    assert _retention(LOCAL_JOB, converted, version="8.4.14", storages=storage_maxfiles) == []


def test_empty_cluster() -> None:
    assert analyze_backups(data(), T) == []


_JOB = st.fixed_dictionaries(
    {"enabled": st.sampled_from([0, 1])},
    optional={
        "all": st.sampled_from([0, 1]),
        "exclude": st.sets(st.integers(100, 106)).map(lambda s: ",".join(map(str, sorted(s)))),
        "vmid": st.sets(st.integers(100, 106)).map(lambda s: ",".join(map(str, sorted(s)))),
        "pool": st.just("prod"),
        "node": st.sampled_from(["pve1", "pve2"]),
    },
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_JOB, max_size=4), st.lists(st.sampled_from(["pve1", "pve2"]), min_size=7, max_size=7))
def test_coverage_matches_each_jobs_own_selection(jobs: list[dict], nodes: list[str]) -> None:  # type: ignore[type-arg]
    """Guests no job lists share their node's answer: the report must equal asking every job per guest."""
    jobs = [dict(DAILY, id=f"job{i}", **job) for i, job in enumerate(jobs)]
    guests = [guest_row(100 + i, node) for i, node in enumerate(nodes)]
    d = _data(guests, [backup_row(100 + i, "pbs", HOUR, "ok") for i in range(7)], jobs)
    found = {f.subject.id: f for f in analyze_backups(d, T) if f.code == "BACKUP_NOT_SCHEDULED"}
    for g in guests:
        verdicts = [(job_covers(j, g["vmid"], g["node"]), bool(j["enabled"])) for j in jobs]
        enabled = any(c and on for c, on in verdicts)
        maybe = any(c is None and on for c, on in verdicts)  # only an enabled job can cover
        assert (str(g["vmid"]) in found) == (not enabled and not maybe), (g, jobs)
        if str(g["vmid"]) in found:
            disabled = [j["id"] for j, (c, on) in zip(jobs, verdicts, strict=True) if c and not on]
            assert found[str(g["vmid"])].evidence["covered_only_by_disabled"] == disabled


def test_vzdump_refusals_follow_exec_backup_task() -> None:
    """pve-manager PVE/VZDump.pm exec_backup_task, for backup_now's remove=0."""
    two = [{"subtype": "qemu"}, {"subtype": "qemu", "protected": 1}, {"subtype": "lxc"}]
    # keep-last=1: one unprotected qemu backup reaches it (the protected and the lxc one do not count)
    assert "limit of 1" in vzdump_refusals("qemu", "snapshot", False, "keep-last=1", two, {}, False, None)[0]
    assert vzdump_refusals("qemu", "snapshot", False, "keep-last=2", two, {}, False, None) == []
    assert vzdump_refusals("qemu", "snapshot", False, "keep-all=1", two * 9, {}, False, None) == []
    assert vzdump_refusals("qemu", "snapshot", False, None, two * 9, {}, False, None) == []
    # protected: the storage's cap, else 5, else none with Datastore.Allocate; the keep-* limit is not applied
    assert (
        vzdump_refusals("qemu", "snapshot", True, "keep-last=1", two, {"max-protected-backups": 2}, False, None) == []
    )
    assert vzdump_refusals("qemu", "snapshot", True, None, two * 5, {}, False, None)
    assert vzdump_refusals("qemu", "snapshot", True, None, two * 5, {}, True, None) == []
    assert vzdump_refusals("qemu", "snapshot", True, None, two * 5, {"max-protected-backups": -1}, False, None) == []
    # stop mode only for an HA resource requested started
    assert vzdump_refusals("qemu", "stop", False, None, [], {}, False, "started")
    assert vzdump_refusals("qemu", "stop", False, None, [], {}, False, "stopped") == []
    assert vzdump_refusals("qemu", "snapshot", False, None, [], {}, False, "started") == []
