"""PBS checks on payloads shaped like proxmox-backup's API answers (pbs-api-types, kebab-case): each finding,
and its absence when the same payload is healthy."""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.backups import analyze_backups
from pve_steward.analysis.catalog import checks_in
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.pbsdata import PbsData, ns_covers, prune_marks, storage_maps, upid_start
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from pve_steward.tools.pbsread import not_configured
from tests.unit.pve_fixtures import DAY, HOUR, NOW, data, guest_row, storage_cfg

T = Thresholds()
TiB = 1024**4
FP = "ab" * 32


def upid(kind: str, ident: str, start: float) -> str:
    """pbs-api-types upid.rs: UPID:node:pid:pstart:task_id:starttime:type:id:auth:"""
    return f"UPID:pbs:00001F2E:0000ABCD:00000000:{int(start):08X}:{kind}:{ident}:root@pam:"


def usage(store: str = "main", used: float = 0.5, full_in: float | None = None, error: str | None = None) -> dict:
    """An item of GET /status/datastore-usage (DataStoreStatusListItem)."""
    if error:
        return {"store": store, "error": error}
    row: dict[str, Any] = {"store": store, "total": 10 * TiB, "used": int(10 * TiB * used), "avail": 1}
    if full_in is not None:
        row["estimated-full-date"] = int(NOW + full_in)
    return row


def gc(store: str = "main", age: float | None = 10 * HOUR, state: str = "OK", bad: int = 0, **kw: Any) -> dict:
    """GET /admin/datastore/{store}/gc (GarbageCollectionJobStatus, status flattened)."""
    row: dict[str, Any] = {"store": store, "still-bad": bad, "removed-bad": 0, "disk-bytes": 1, "index-file-count": 1}
    if age is not None:
        row |= {"upid": upid("garbage_collection", store, NOW - age - 60), "last-run-endtime": int(NOW - age)}
        row["last-run-state"] = state
    return row | kw


def job(ident: str, store: str = "main", state: str | None = "OK", next_in: float = 10 * HOUR, **kw: Any) -> dict:
    """A verify/prune/sync job with its JobScheduleStatus (GET /admin/verify etc.)."""
    row: dict[str, Any] = {"id": ident, "store": store, "schedule": "daily", "next-run": int(NOW + next_in)}
    if state is not None:
        row |= {"last-run-state": state, "last-run-endtime": int(NOW - HOUR), "last-run-upid": upid("x", ident, NOW)}
    return row | kw


def snap(kind: str, ident: str, age: float, verify: str | None = None, verified_age: float | None = None, **kw: Any):
    """A SnapshotListItem of GET /admin/datastore/{store}/snapshots (with the namespace the reader adds)."""
    row: dict[str, Any] = {
        "backup-type": kind,
        "backup-id": ident,
        "backup-time": int(NOW - age),
        "files": [{"filename": "drive-scsi0.img.fidx", "size": 1}, {"filename": "index.json.blob", "size": 1}],
        "size": 2,
        "protected": False,
        "ns": "",
    }
    if verify:
        when = NOW - (verified_age if verified_age is not None else age - HOUR)
        row["verification"] = {"state": verify, "upid": upid("verificationjob", "main", when)}
    return row | kw


def pbs_data(**kw: Any) -> ClusterData:
    d = data(resources=[guest_row(100, "pve1"), guest_row(101, "pve1")])
    d.storage_config = [storage_cfg("pbs-main", "pbs", "backup", server="10.0.0.50", datastore="main")]
    kw.setdefault("usage", [usage("main")])  # the datastore pbs-main names exists unless a test says otherwise
    d.pbs = PbsData(host="10.0.0.50:8007", **kw)
    return d


def codes(d: ClusterData, t: Thresholds = T) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for c in checks_in(["pbs"]):
        for f in c.func(d, t):
            out.setdefault(f.code, []).append(f)
    return out


def test_datastore_usage_full_soon_and_error() -> None:
    found = codes(pbs_data(usage=[usage(used=0.92, full_in=5 * DAY), usage("b", error="unable to open chunk store")]))
    assert found["PBS_DATASTORE_NEAR_FULL"][0].severity == "critical"
    assert found["PBS_DATASTORE_NEAR_FULL"][0].evidence["used_pct"] == 92.0
    assert found["PBS_DATASTORE_FULL_SOON"][0].severity == "critical"
    assert found["PBS_DATASTORE_ERROR"][0].subject.id == "datastore/b"
    warn = codes(pbs_data(usage=[usage(used=0.82, full_in=20 * DAY)]))
    assert warn["PBS_DATASTORE_NEAR_FULL"][0].severity == "warning"
    assert warn["PBS_DATASTORE_FULL_SOON"][0].severity == "warning"
    # healthy: room left, the estimate far away or in the past (usage flat or falling: PBS sets it to 0)
    assert codes(pbs_data(usage=[usage(used=0.5, full_in=90 * DAY), usage("c", full_in=-NOW)])) == {}
    # thresholds are configurable
    strict = thresholds_from({"pbs_datastore_warning_pct": 40, "pbs_full_warning_days": 100})
    assert set(codes(pbs_data(usage=[usage(used=0.5, full_in=90 * DAY)]), strict)) == {
        "PBS_DATASTORE_NEAR_FULL",
        "PBS_DATASTORE_FULL_SOON",
    }


def test_maintenance_mode_is_critical_when_pve_writes_there() -> None:
    rows = [{"store": "main", "maintenance": "type=read-only,message=swap"}, {"store": "other", "maintenance": None}]
    found = codes(pbs_data(datastores=rows))["PBS_DATASTORE_MAINTENANCE"]
    assert len(found) == 1 and found[0].severity == "critical" and found[0].evidence["type"] == "read-only"
    assert found[0].evidence["pve_storages"] == ["pbs-main"]
    unused = codes(pbs_data(datastores=[{"store": "x", "maintenance": "type=offline"}]))["PBS_DATASTORE_MAINTENANCE"]
    assert unused[0].severity == "warning"
    assert codes(pbs_data(datastores=[{"store": "main"}])) == {}


def test_offline_maintenance_is_maintenance_not_a_datastore_error() -> None:
    """status.rs datastore_status lists a datastore lookup_datastore refuses with that error; offline and delete
    maintenance refuse reads ("datastore 'x' is in offline maintenance mode: msg", maintenance.rs check)."""
    refused = usage("main", error="datastore 'main' is in offline maintenance mode: disk swap")
    found = codes(
        pbs_data(usage=[refused], datastores=[{"store": "main", "maintenance": "type=offline,message=disk swap"}])
    )
    assert (
        set(found) == {"PBS_DATASTORE_MAINTENANCE"}
        and found["PBS_DATASTORE_MAINTENANCE"][0].evidence["type"] == "offline"
    )
    deleting = usage("main", error="datastore 'main' is in datastore is being deleted")
    assert set(codes(pbs_data(usage=[deleting], datastores=[{"store": "main", "maintenance": "delete"}]))) == {
        "PBS_DATASTORE_MAINTENANCE"
    }
    # a real fault of a datastore in read-only maintenance, or a refusal whose maintenance PBS did not list: an error
    broken = usage("main", error="unable to open chunk store 'main'")
    ro = codes(pbs_data(usage=[broken], datastores=[{"store": "main", "maintenance": "type=read-only"}]))
    assert set(ro) == {"PBS_DATASTORE_ERROR", "PBS_DATASTORE_MAINTENANCE"}
    assert set(codes(pbs_data(usage=[refused]))) == {"PBS_DATASTORE_ERROR"}


def test_pbs_simulator_refuses_maintenance_as_pbs_does() -> None:
    from pvesim.pbs import app
    from pvesim.pbs.state import build

    state = build(
        {
            "tokens": [{"id": "root@pam!t", "acl": [{"path": "/", "role": "Admin"}]}],
            "datastores": [
                {"name": "a", "maintenance": "type=offline,message=disk%20swap"},
                {"name": "b", "maintenance": "delete"},
                {"name": "c", "maintenance": "read-only"},
            ],
        },
        now=NOW,
    )
    token = state.tokens["root@pam!t"]
    rows = {r["store"]: r for r in app.datastore_usage(state, token, {}, {})}
    assert rows["a"] == {"store": "a", "error": "datastore 'a' is in offline maintenance mode: disk swap"}
    assert rows["b"] == {"store": "b", "error": "datastore 'b' is in datastore is being deleted"}
    assert "error" not in rows["c"]
    pbs = PbsData(host="pbs", usage=list(rows.values()), datastores=app.datastore_list(state, token, {}, {}))
    d = data()
    d.pbs = pbs
    assert {f.subject.id for f in codes(d).get("PBS_DATASTORE_ERROR", [])} == set()


def test_pbs_simulator_gc_tasks_and_subscription_as_pbs_sends_them() -> None:
    """GarbageCollectionStatus.upid is null until GC ran; TaskListItem.node is "localhost" (tasks.rs
    into_task_list_item); without Sys.Audit on / the subscription keeps status, message and url."""
    from pvesim.pbs import app
    from pvesim.pbs.state import build

    state = build(
        {
            "tokens": [{"id": "a@pbs!t", "acl": [{"path": "/", "role": "DatastoreAudit"}]}],
            "datastores": [{"name": "main", "gc-schedule": "daily"}],
            "tasks": [{"type": "backup", "id": "main:vm/100", "age": "1h", "status": "unable to connect"}],
            "subscription": {
                "status": "notfound",
                "message": "There is no subscription key",
                "url": "u",
                "serverid": "x",
            },
        },
        now=NOW,
    )
    token = state.tokens["a@pbs!t"]
    status = app.gc_status(state, token, {"store": "main"}, {})
    assert status["upid"] is None and "last-run-state" not in status
    assert app.datastore_usage(state, token, {}, {})[0]["gc-status"]["upid"] is None
    assert [t["node"] for t in app.tasks(state, token, {"node": "localhost"}, {})] == []  # no Sys.Audit: own only
    state.tokens["a@pbs!t"].acl.append(("/system/tasks", "Audit", True))
    assert [t["node"] for t in app.tasks(state, token, {"node": "localhost"}, {})] == ["localhost"]
    sub = app.subscription(state, token, {"node": "localhost"}, {})
    assert sub == {"status": "notfound", "message": "There is no subscription key", "url": "u"}
    found = codes(pbs_data(gc={"main": status}, subscription=sub))
    assert "never run" in str(found["PBS_GC_STALE"][0].message) and "PBS_NO_SUBSCRIPTION" in found


def test_garbage_collection_failed_stale_and_bad_chunks() -> None:
    found = codes(pbs_data(gc={"main": gc(state="TASK ERROR: no space left on device", bad=4)}))
    assert set(found) == {"PBS_GC_FAILED", "PBS_BAD_CHUNKS"}
    assert found["PBS_BAD_CHUNKS"][0].evidence["still_bad"] == 4
    never = codes(pbs_data(gc={"main": gc(age=None)}))["PBS_GC_STALE"][0]
    assert "never run" in str(never.message)
    old = codes(pbs_data(gc={"main": gc(age=20 * DAY)}))
    assert "PBS_GC_STALE" in old
    overdue = codes(pbs_data(gc={"main": gc(schedule="daily", **{"next-run": int(NOW - 3 * DAY)})}))
    assert "PBS_GC_STALE" in overdue
    # healthy: ran 10 h ago with OK (WARNINGS counts as OK too), next run ahead, no bad chunks
    assert (
        codes(pbs_data(gc={"main": gc(state="WARNINGS: 2", schedule="daily", **{"next-run": int(NOW + HOUR)})})) == {}
    )


@pytest.mark.parametrize("kind", ["verify_jobs", "prune_jobs", "sync_jobs"])
def test_jobs_failed_and_stale(kind: str) -> None:
    failed = codes(pbs_data(**{kind: [job("j1", state="verification failed - please check the log")]}))
    assert failed["PBS_JOB_FAILED"][0].subject.id == f"job/{kind.split('_', maxsplit=1)[0]}/j1"
    stale = codes(pbs_data(**{kind: [job("j2", next_in=-3 * DAY)]}))
    assert stale["PBS_JOB_STALE"][0].evidence["kind"] == kind.split("_", maxsplit=1)[0]
    unscheduled = job("j3", state=None, schedule=None)
    assert "PBS_JOB_STALE" in codes(pbs_data(**{kind: [unscheduled]}))
    # still running (JobState::Started: last-run-upid, no state): next-run counts from its start, not overdue
    running = job("j4", state=None, next_in=-2 * DAY, **{"last-run-upid": upid("x", "j4", NOW - 3 * DAY)})
    assert codes(pbs_data(**{kind: [running]})) == {}
    # healthy, or disabled (a disabled prune job is not expected to run)
    assert codes(pbs_data(**{kind: [job("ok"), job("off", next_in=-9 * DAY, disable=True)]})) == {}


def test_verification_per_group() -> None:
    rows = [
        snap("vm", "100", 14 * HOUR),  # the newest, still within the grace period
        snap("vm", "100", 2 * DAY),  # judged: never verified
        snap("vm", "101", 14 * HOUR, "failed"),  # the newest verified one failed
        snap("vm", "101", 2 * DAY, "ok"),
        snap("ct", "200", 60 * DAY, "ok", verified_age=55 * DAY),  # verified long ago
        snap("host", "fw", 5 * DAY, "ok"),  # healthy
    ]
    found = codes(pbs_data(snapshots={"main": rows}))
    assert [f.subject.id for f in found["PBS_GROUP_NOT_VERIFIED"]] == ["100"]
    assert found["PBS_GROUP_NOT_VERIFIED"][0].subject.kind == "guest"  # a PVE guest is named as the guest
    assert [f.subject.id for f in found["PBS_GROUP_VERIFY_FAILED"]] == ["101"]
    assert [f.subject.id for f in found["PBS_GROUP_VERIFY_OUTDATED"]] == ["group/main/ct/200"]
    assert set(found) == {"PBS_GROUP_NOT_VERIFIED", "PBS_GROUP_VERIFY_FAILED", "PBS_GROUP_VERIFY_OUTDATED"}
    healthy = [snap("vm", "100", 14 * HOUR), snap("vm", "100", 2 * DAY, "ok"), snap("vm", "101", DAY * 3, "ok")]
    assert codes(pbs_data(snapshots={"main": healthy})) == {}


def test_snapshot_without_manifest() -> None:
    partial = snap("vm", "100", 3 * DAY, files=[{"filename": "drive-scsi0.img.fidx"}])
    running = snap("vm", "100", HOUR, files=[{"filename": "drive-scsi0.img.fidx"}])  # a backup in progress
    found = codes(pbs_data(snapshots={"main": [snap("vm", "100", 14 * HOUR, "ok"), partial, running]}))
    assert list(found) == ["PBS_SNAPSHOT_NO_MANIFEST"] and len(found["PBS_SNAPSHOT_NO_MANIFEST"]) == 1


def test_failed_tasks_and_subscription() -> None:
    tasks = [
        {
            "upid": upid("syncjob", "s1", NOW - HOUR),
            "worker_type": "syncjob",
            "status": "connection refused",
            "starttime": int(NOW - HOUR),
            "endtime": int(NOW - HOUR + 5),
        },
        {
            "upid": upid("backup", "b", NOW - HOUR),
            "worker_type": "backup",
            "status": "OK",
            "starttime": int(NOW - HOUR),
            "endtime": int(NOW - HOUR + 5),
        },
        {"upid": upid("verify", "v", NOW - HOUR), "worker_type": "verify", "starttime": int(NOW - HOUR)},  # running
    ]
    updates = [{"Package": "proxmox-backup-server", "Version": "3.4.2-1", "OldVersion": "3.4.1-1"}]
    found = codes(pbs_data(tasks=tasks, subscription={"status": "notfound"}, updates=updates))
    assert [f.subject.id for f in found["PBS_TASK_FAILED"]] == ["tasks/syncjob"]
    assert "PBS_NO_SUBSCRIPTION" in found
    assert found["PBS_UPDATES_PENDING"][0].evidence["packages"] == ["proxmox-backup-server"]
    assert codes(pbs_data(tasks=tasks[1:], subscription={"status": "active"}, updates=[])) == {}


def test_storage_naming_a_missing_datastore() -> None:
    d = pbs_data(usage=[usage("other")])
    assert codes(d)["PBS_STORAGE_DATASTORE_MISSING"][0].subject.id == "pbs-main"
    assert codes(pbs_data(usage=[usage("main")])) == {}
    # a storage on another PBS server is not ours to judge
    d.storage_config = [storage_cfg("far", "pbs", "backup", server="10.9.9.9", datastore="main")]
    assert codes(d) == {}


def test_storage_maps_by_server_or_pinned_fingerprint() -> None:
    pbs = PbsData(host="pbs.lan:8007", fingerprint=FP)
    assert storage_maps({"type": "pbs", "server": "pbs.lan"}, pbs)
    assert storage_maps({"type": "pbs", "server": "10.1.1.1", "fingerprint": ":".join([FP[:2].upper()] * 32)}, pbs)
    assert not storage_maps({"type": "pbs", "server": "10.1.1.1"}, pbs)
    assert not storage_maps({"type": "nfs", "server": "pbs.lan"}, pbs)


def test_prune_selection_follows_pbs() -> None:
    """pbs-datastore prune.rs compute_prune_info: keep-last, then the newest of each period not yet kept."""
    daily = [snap("vm", "100", 12 * HOUR + k * DAY) for k in range(6)]
    marks = prune_marks(daily, {"keep-last": 2, "keep-daily": 2})
    kept = sorted((NOW - t) // DAY for t, m in marks.items() if m == "keep")
    assert kept == [0, 1, 2, 3]
    protected = dict(daily[5], protected=True)
    assert prune_marks([*daily[:5], protected], {"keep-last": 1})[protected["backup-time"]] == "protected"
    partial = snap("vm", "100", HOUR, files=[])
    assert prune_marks([partial, *daily], {"keep-last": 1})[partial["backup-time"]] == "keep-partial"
    assert ns_covers("", None, "a/b") and ns_covers("a", 1, "a/b") and not ns_covers("a", 0, "a/b")
    assert not ns_covers("x", None, "a")
    assert upid_start(upid("verify", "m", 1234567)) == 1234567 and upid_start("garbage") is None


def test_guest_whose_only_verified_backup_the_next_prune_removes() -> None:
    rows = [snap("vm", "100", 12 * HOUR + k * DAY) for k in range(4)]
    rows[3] = snap("vm", "100", 12 * HOUR + 3 * DAY, "ok")  # only the oldest is verified
    prune = [job("daily", **{"keep-last": 2})]
    found = codes(pbs_data(snapshots={"main": rows}, prune_jobs=prune))["PBS_PRUNE_DROPS_LAST_VERIFIED"]
    assert found[0].subject.id == "100" and found[0].evidence["pruned_by"] == ["PBS prune job daily"]
    # a prune job that keeps enough, or none at all: nothing lost
    roomy = [job("daily", **{"keep-last": 4})]
    assert "PBS_PRUNE_DROPS_LAST_VERIFIED" not in codes(pbs_data(snapshots={"main": rows}, prune_jobs=roomy))
    assert "PBS_PRUNE_DROPS_LAST_VERIFIED" not in codes(pbs_data(snapshots={"main": rows}))
    stale_config = {"main": {"name": "main", "prune-schedule": "daily", "keep-last": 1}}  # not run by PBS >= 2.2
    assert "PBS_PRUNE_DROPS_LAST_VERIFIED" not in codes(pbs_data(snapshots={"main": rows}, config=stale_config))
    # vzdump's prune-backups on the PVE side prunes the same group
    d = pbs_data(snapshots={"main": rows})
    d.backup_jobs = [{"id": "nightly", "storage": "pbs-main", "enabled": 1, "all": 1, "prune-backups": "keep-last=1"}]
    assert codes(d)["PBS_PRUNE_DROPS_LAST_VERIFIED"][0].evidence["pruned_by"] == ["PVE backup job nightly"]


def test_vzdump_prunes_after_its_new_backup() -> None:
    """VZDump.pm exec_backup_task prunes right after the backup: the new snapshot takes a keep-last slot."""
    rows = [snap("vm", "100", 12 * HOUR), snap("vm", "100", 12 * HOUR + DAY, "ok")]
    d = pbs_data(snapshots={"main": rows})
    d.backup_jobs = [{"id": "j", "storage": "pbs-main", "vmid": "100", "prune-backups": "keep-last=2"}]
    found = codes(d)["PBS_PRUNE_DROPS_LAST_VERIFIED"]
    assert found[0].evidence["verified_backup_times"] == [rows[1]["backup-time"]]
    # a PBS prune job runs on its own schedule: keep-last=2 keeps both snapshots there are
    assert "PBS_PRUNE_DROPS_LAST_VERIFIED" not in codes(
        pbs_data(snapshots={"main": rows}, prune_jobs=[job("p", **{"keep-last": 2})])
    )
    d.backup_jobs[0]["prune-backups"] = "keep-last=3"
    assert "PBS_PRUNE_DROPS_LAST_VERIFIED" not in codes(d)


def test_vzdump_prunes_pbs_with_the_nodes_vzdump_conf() -> None:
    """VZDump.pm new: the job's prune-backups, else /etc/vzdump.conf's (the storage's folded in), else keep-all."""
    from tests.unit.pve_fixtures import vzdump_defaults

    rows = [snap("vm", "100", 12 * HOUR), snap("vm", "100", 12 * HOUR + DAY, "ok")]
    d = pbs_data(snapshots={"main": rows})
    d.backup_jobs = [{"id": "j", "storage": "pbs-main", "vmid": "100"}]
    d.cluster_status = [{"type": "node", "name": "pve1", "online": 1, "id": "node/pve1"}]
    d.vzdump_defaults = {"pve1@pbs-main": vzdump_defaults("pbs-main", "keep-last=1")}
    assert codes(d)["PBS_PRUNE_DROPS_LAST_VERIFIED"][0].evidence["pruned_by"] == ["PVE backup job j"]
    d.vzdump_defaults = {"pve1@pbs-main": vzdump_defaults("pbs-main", "keep-last=1", remove=0)}
    assert "PBS_PRUNE_DROPS_LAST_VERIFIED" not in codes(d)
    d.vzdump_defaults = {"pve1@pbs-main": vzdump_defaults("pbs-main")}  # keep-all
    assert "PBS_PRUNE_DROPS_LAST_VERIFIED" not in codes(d)


def test_vzdump_prunes_only_the_groups_of_guests_its_job_backs_up() -> None:
    """VZDump.pm exec_backup_task prunes the guest's own group (PBSPlugin prune_backups: "$type/$vmid")."""

    def group(kind: str, ident: str) -> list[dict[str, Any]]:
        rows = [snap(kind, ident, 12 * HOUR + k * DAY) for k in range(3)]
        rows[2] = snap(kind, ident, 12 * HOUR + 2 * DAY, "ok")  # only the oldest is verified
        return rows

    d = pbs_data(snapshots={"main": group("vm", "100") + group("vm", "101") + group("ct", "100")})
    d.backup_jobs = [{"id": "j100", "storage": "pbs-main", "vmid": "100", "prune-backups": "keep-last=1"}]
    found = codes(d)["PBS_PRUNE_DROPS_LAST_VERIFIED"]
    # vm/101 is not in the job; ct/100 is not guest 100's type (a VM): vzdump never prunes either
    assert [(f.evidence["group"], f.evidence["pruned_by"]) for f in found] == [("vm/100", ["PVE backup job j100"])]
    d.backup_jobs = [{"id": "all", "storage": "pbs-main", "all": 1, "exclude": "100", "prune-backups": "keep-last=1"}]
    assert [f.evidence["group"] for f in codes(d)["PBS_PRUNE_DROPS_LAST_VERIFIED"]] == ["vm/101"]


def test_backup_job_retention_on_pbs_consults_pbs() -> None:
    job_row = {"id": "nightly", "storage": "pbs-main", "enabled": 1, "schedule": "21:00", "all": 1}

    def retention(d: ClusterData) -> list[Any]:
        d.backup_jobs = [job_row]
        return [f for f in analyze_backups(d, T) if f.code == "BACKUP_JOB_NO_RETENTION"]

    why = "no prune-backups on the job, storage or /etc/vzdump.conf, and no PBS prune job prunes datastore main"
    assert retention(pbs_data())[0].evidence["keeps_all"] == {"pbs": why}
    # vzdump prunes PBS targets with /etc/vzdump.conf's prune-backups too (VZDump.pm new, exec_backup_task)
    from tests.unit.pve_fixtures import vzdump_defaults

    nodes = [{"type": "node", "name": n, "online": 1, "id": f"node/{n}"} for n in ("pve1", "pve2")]
    conf = pbs_data()
    conf.cluster_status = nodes
    conf.vzdump_defaults = {f"{n}@pbs-main": vzdump_defaults("pbs-main", "keep-last=7") for n in ("pve1", "pve2")}
    assert retention(conf) == []
    some = pbs_data()
    some.vzdump_defaults = {
        "pve1@pbs-main": vzdump_defaults("pbs-main", "keep-last=7"),
        "pve2@pbs-main": vzdump_defaults("pbs-main"),
    }
    some.cluster_status = nodes
    assert list(retention(some)[0].evidence["keeps_all"]) == ["pve2"]
    assert retention(pbs_data(prune_jobs=[job("p", **{"keep-daily": 7})])) == []
    # a datastore's own prune-schedule/keep-* (datastore.cfg before PBS 2.2) is never run: PBS's scheduler reads
    # only prune jobs (proxmox-backup-proxy.rs schedule_datastore_prune_jobs)
    assert retention(pbs_data(config={"main": {"prune-schedule": "daily", "keep-last": 5}}))
    assert retention(
        pbs_data(prune_jobs=[job("p", disable=True, **{"keep-daily": 7})])
    )  # a disabled job prunes nothing
    assert retention(pbs_data(prune_jobs=[job("p", ns="other", **{"keep-daily": 7})]))  # another namespace
    without_pbs = pbs_data()
    without_pbs.pbs = None  # no PBS connection: PVE cannot see PBS's side, so no verdict
    assert retention(without_pbs) == []


def test_not_configured_is_said_never_clean() -> None:
    d = data(resources=[guest_row(100, "pve1")])
    d.missing.append(not_configured())
    report = diagnose(d, T, ["pbs"])
    assert [f.code for f in report.findings] == ["CHECK_SKIPPED"]
    assert "PBS: not configured" in str(report.findings[0].message)
    assert codes(d) == {}  # the checks themselves say nothing without data


def test_pbs_settings_are_checked_and_the_secret_stays_secret(tmp_path: Any) -> None:
    from pve_steward.config import ConfigError, load_settings
    from pve_steward.pve.ids import InvalidIdentifier
    from pve_steward.pveio.client import ProxmoxerClient, api_path, datastore

    with pytest.raises(ConfigError, match=r"pbs_url .*: the PBS API is only served over HTTPS"):
        load_settings(pbs_url="http://pbs.lan", pbs_token_id="ops@pbs!mon")
    with pytest.raises(ConfigError, match="pbs_url needs pbs_token_id"):
        load_settings(pbs_url="pbs.lan")
    with pytest.raises(ConfigError, match=r"pbs_token_id .*user@realm!tokenname"):
        load_settings(pbs_url="pbs.lan", pbs_token_id="nobang")
    with pytest.raises(ConfigError, match=r"pbs_fingerprint .*64 hex digits"):
        load_settings(pbs_url="pbs.lan", pbs_token_id="ops@pbs!mon", pbs_fingerprint="AB:CD")
    settings = load_settings(
        pbs_url="https://pbs.lan:8007/", pbs_token_id="ops@pbs!mon", pbs_token_secret="s3cr3t-value", pbs_fingerprint=FP
    )
    assert settings.pbs_url == "pbs.lan:8007" and "s3cr3t-value" not in repr(settings)
    with pytest.raises(ValueError, match="PBS token secret is required"):
        ProxmoxerClient.for_pbs(load_settings(pbs_url="pbs.lan", pbs_token_id="ops@pbs!mon"))
    assert str(api_path("admin", "datastore", datastore("main"), "gc")) == "/admin/datastore/main/gc"
    for bad in ("..", "a/b", "ab", "x" * 33, "-lead"):
        with pytest.raises(InvalidIdentifier):
            datastore(bad)
