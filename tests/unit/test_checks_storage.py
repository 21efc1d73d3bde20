"""Storage checks (analysis/checks/storage.py) on fixtures shaped like /storage, /cluster/resources
and /cluster/backup answers."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.checks import storage as sc
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.storagecfg import SHARED_STORAGE
from tests.unit.pve_fixtures import GiB, cluster_status, data, guest_row, node_row, storage_cfg
from tests.unit.test_checks_node import codes

T = Thresholds()
NODES = ("pve1", "pve2", "pve3")


def resource(sid: str, node: str, plugintype: str, available: bool = True, content: str = "images") -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"storage/{node}/{sid}",
        "type": "storage",
        "storage": sid,
        "node": node,
        "status": "available" if available else "unknown",
        "plugintype": plugintype,
        "shared": int(plugintype in SHARED_STORAGE),
        "content": content,
    }
    if available:
        row.update({"disk": 100 * GiB, "maxdisk": 1000 * GiB})
    return row


def job(jid: str, storage: str, enabled: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "id": jid,
        "type": "vzdump",
        "schedule": "21:00",
        "storage": storage,
        "all": 1,
        "enabled": enabled,
        "mode": "snapshot",
        **extra,
    }


def cluster(
    config: list[dict[str, Any]], resources: list[dict[str, Any]], jobs: list[dict[str, Any]] | None = None
) -> ClusterData:
    return data(
        cluster_status=cluster_status(dict.fromkeys(NODES, True)),
        resources=[node_row(n) for n in NODES] + resources,
        storage_config=config,
        reads={} if jobs is None else {"backup_job_config": {"": jobs}},
    )


HEALTHY_CONFIG = [
    storage_cfg("local", "dir", "iso,vztmpl,backup", path="/var/lib/vz"),
    storage_cfg("pbs-main", "pbs", "backup", server="10.0.0.50", datastore="main"),
    storage_cfg("nfs-iso", "nfs", "iso", server="10.0.0.60", export="/export/iso"),
]
HEALTHY_RESOURCES = [
    resource(sid, n, kind) for n in NODES for sid, kind in (("local", "dir"), ("pbs-main", "pbs"), ("nfs-iso", "nfs"))
]


def test_healthy_storage_is_no_finding() -> None:
    d = cluster(HEALTHY_CONFIG, HEALTHY_RESOURCES, [job("backup-nightly", "pbs-main")])
    found = sc.disabled(d, T) + sc.shared_single_node(d, T) + sc.no_backup_target(d, T) + sc.backup_target_missing(d, T)
    assert found == []


def test_disabled_storage_names_the_jobs_that_still_use_it() -> None:
    config = [*HEALTHY_CONFIG, storage_cfg("nfs-archive", "nfs", "backup", disable=1)]
    jobs = [job("old-archive", "nfs-archive"), job("off", "nfs-archive", enabled=0)]
    found = sc.disabled(cluster(config, HEALTHY_RESOURCES, jobs), T)
    assert codes(found) == [("STORAGE_DISABLED", "nfs-archive", "warning")]
    assert found[0].evidence["backup_jobs"] == ["old-archive"]


def test_shared_storage_on_one_node_only() -> None:
    resources = [r for r in HEALTHY_RESOURCES if not (r["storage"] == "nfs-iso" and r["node"] != "pve1")]
    resources += [resource("nfs-iso", n, "nfs", available=False) for n in ("pve2", "pve3")]
    found = sc.shared_single_node(cluster(HEALTHY_CONFIG, resources), T)
    assert codes(found) == [("STORAGE_SHARED_SINGLE_NODE", "nfs-iso", "warning")]
    assert found[0].evidence["available_on"] == ["pve1"]


def test_shared_storage_limited_to_one_node_on_purpose_is_no_finding() -> None:
    config = [*HEALTHY_CONFIG[:2], storage_cfg("nfs-iso", "nfs", "iso", nodes="pve1")]
    resources = [r for r in HEALTHY_RESOURCES if not (r["storage"] == "nfs-iso" and r["node"] != "pve1")]
    assert sc.shared_single_node(cluster(config, resources), T) == []


def test_shared_single_node_counts_only_the_online_nodes_the_storage_is_configured_for() -> None:
    """Cluster.pm resources has a row per node only where storage_check_enabled: nfs-iso with nodes pve1,pve2 and
    pve2 offline is expected on pve1 alone (no finding); with nodes pve1,pve3 and pve3 not reaching it, it is."""
    base = [r for r in HEALTHY_RESOURCES if r["storage"] != "nfs-iso"]
    d = cluster([*HEALTHY_CONFIG[:2], storage_cfg("nfs-iso", "nfs", "iso", nodes="pve1,pve2")], base)
    d.cluster_status = cluster_status({"pve1": True, "pve2": False, "pve3": True})
    d.resources = [node_row("pve1"), node_row("pve2", online=False), node_row("pve3"), *base]
    d.resources += [resource("nfs-iso", "pve1", "nfs"), resource("nfs-iso", "pve2", "nfs", available=False)]
    assert sc.shared_single_node(d, T) == []
    restricted = [*HEALTHY_CONFIG[:2], storage_cfg("nfs-iso", "nfs", "iso", nodes="pve1,pve3")]
    rows = [*base, resource("nfs-iso", "pve1", "nfs"), resource("nfs-iso", "pve3", "nfs", available=False)]
    found = sc.shared_single_node(cluster(restricted, rows), T)
    assert codes(found) == [("STORAGE_SHARED_SINGLE_NODE", "nfs-iso", "warning")]
    assert found[0].evidence["expected_on"] == ["pve1", "pve3"]


def test_shared_single_node_decides_shared_by_the_flag_and_pves_list() -> None:
    """Plugin.pm @SHARED_STORAGE has zfs (over iSCSI) and pbs; an LVM on a SAN LUN is shared by its flag."""
    config = [
        *HEALTHY_CONFIG,
        storage_cfg("zfs-san", "zfs", "images", portal="10.0.0.9", target="iqn.x", pool="tank"),
        storage_cfg("lun", "lvm", "images", vgname="san", shared=1),
        storage_cfg("vg", "lvm", "images", vgname="pve"),  # local LVM on each node: not shared
    ]
    resources = [r for r in HEALTHY_RESOURCES if not (r["storage"] == "pbs-main" and r["node"] != "pve1")]
    resources += [resource("pbs-main", n, "pbs", available=False) for n in ("pve2", "pve3")]
    for sid, kind in (("zfs-san", "zfs"), ("lun", "lvm"), ("vg", "lvm")):
        resources += [resource(sid, "pve1", kind)] + [resource(sid, n, kind, available=False) for n in NODES[1:]]
    found = sc.shared_single_node(cluster(config, resources), T)
    assert sorted(f.subject.id for f in found) == ["lun", "pbs-main", "zfs-san"]


def test_no_storage_for_backups() -> None:
    config = [storage_cfg("local", "dir", "iso,vztmpl"), storage_cfg("old", "nfs", "backup", disable=1)]
    found = sc.no_backup_target(cluster(config, []), T)
    assert codes(found) == [("STORAGE_NO_BACKUP_TARGET", "cluster", "warning")]


def test_backup_job_storage_missing_on_a_node() -> None:
    resources = [r for r in HEALTHY_RESOURCES if not (r["storage"] == "pbs-main" and r["node"] == "pve3")]
    jobs = [job("backup-nightly", "pbs-main"), job("pinned", "pbs-main", node="pve1")]
    found = sc.backup_target_missing(cluster(HEALTHY_CONFIG, resources, jobs), T)
    assert codes(found) == [("STORAGE_BACKUP_TARGET_MISSING", "pve3:pbs-main", "warning")]
    assert found[0].evidence["job"] == "backup-nightly" and found[0].evidence["available_on"] == ["pve1", "pve2"]


def test_a_job_that_names_its_guests_runs_only_where_they_are() -> None:
    """API2/VZDump.pm vzdump: 'silent exit if specified VMs run on other nodes'. A USB disk on pve1 with a job for
    pve1's guests (by vmid or pool) is not missing elsewhere; an 'all' job still reaches it on every node."""
    usb = [*HEALTHY_CONFIG, storage_cfg("usb", "dir", "backup", nodes="pve1")]
    resources = [*HEALTHY_RESOURCES, resource("usb", "pve1", "dir")]
    guests = [guest_row(100, "pve1", pool="prod"), guest_row(200, "pve2")]
    pool_row = {"id": "/pool/prod", "type": "pool", "pool": "prod"}
    for selected in ({"vmid": "100"}, {"pool": "prod"}):
        jobs = [job("usb-daily", "usb", **{"all": 0, **selected})]
        assert sc.backup_target_missing(cluster(usb, [*resources, *guests, pool_row], jobs), T) == [], selected
    wide = [job("usb-vm200", "usb", all=0, vmid="100,200")]
    found = sc.backup_target_missing(cluster(usb, [*resources, *guests, pool_row], wide), T)
    assert codes(found) == [("STORAGE_BACKUP_TARGET_MISSING", "pve2:usb", "warning")]
    every = sc.backup_target_missing(cluster(usb, [*resources, *guests], [job("usb-all", "usb")]), T)
    assert sorted(f.subject.id for f in every) == ["pve2:usb", "pve3:usb"]
    # a pool whose members cannot be seen (no Pool.Audit): no verdict on any node
    hidden = [job("usb-pool", "usb", all=0, pool="prod")]
    assert sc.backup_target_missing(cluster(usb, [*resources, guest_row(200, "pve2")], hidden), T) == []


def test_unread_backup_jobs_give_no_backup_target_finding() -> None:
    resources = [r for r in HEALTHY_RESOURCES if r["storage"] != "pbs-main"]
    assert sc.backup_target_missing(cluster(HEALTHY_CONFIG, resources, None), T) == []


def test_one_list_of_shared_types_equal_to_pves() -> None:
    """pve-storage Plugin.pm @SHARED_STORAGE (stable-8): parse_config sets shared=1 for these types. The server
    has one list (pve/storagecfg.py), pvesim its own copy; both must be PVE's."""
    from pve_steward.pve.storagecfg import SHARED_STORAGE, is_shared
    from pvesim.state import SHARED_STORAGE as SIMULATED

    pve = {"iscsi", "nfs", "cifs", "rbd", "cephfs", "iscsidirect", "glusterfs", "zfs", "drbd", "pbs"}
    assert SHARED_STORAGE == SIMULATED == pve
    assert is_shared({"type": "lvm", "shared": 1}) and is_shared({"type": "zfs"}) and is_shared({"type": "pbs"})
    assert not is_shared({"type": "dir"}) and not is_shared({"type": "lvmthin", "shared": "0"}) and not is_shared({})


def test_backup_job_to_a_storage_without_backup_content_fails_every_run() -> None:
    """VZDump.pm storage_info dies "can't use storage 'nfs-iso' for backups - wrong content type" on every node:
    STORAGE_NO_BACKUP_TARGET passes (pbs-main takes backups), the job still never writes a backup."""
    jobs = [job("iso-backup", "nfs-iso"), job("off", "nfs-iso", enabled=0), job("fine", "pbs-main")]
    d = cluster(HEALTHY_CONFIG, HEALTHY_RESOURCES, jobs)
    assert sc.no_backup_target(d, T) == []
    found = sc.backup_target_wrong_content(d, T)
    assert codes(found) == [("STORAGE_BACKUP_TARGET_WRONG_CONTENT", "nfs-iso", "critical")]
    assert found[0].evidence["backup_jobs"] == ["iso-backup"] and found[0].evidence["content"] == ["iso"]


def test_backup_job_without_storage_writes_to_each_nodes_vzdump_default() -> None:
    """VZDump.pm new: a job without storage and dumpdir takes /etc/vzdump.conf's storage, else 'local'
    (get_storage_param); each node answers its own (GET /nodes/{node}/vzdump/defaults). pve3's vzdump.conf names
    nfs-iso, whose content lacks backup: the job fails there, a fact, not a guess. A job with dumpdir has no storage
    to judge; a node whose default was not read is not judged (DATA_INCOMPLETE says so)."""
    bare = {k: v for k, v in job("bare", "").items() if k != "storage"}
    dumpdir = {**bare, "id": "to-dir", "dumpdir": "/mnt/usb"}
    d = cluster(HEALTHY_CONFIG, HEALTHY_RESOURCES, [bare, dumpdir, job("iso-named", "nfs-iso")])
    d.vzdump_storage = {"pve1": "local", "pve2": "local", "pve3": "nfs-iso"}
    found = sc.backup_target_wrong_content(d, T)
    assert codes(found) == [("STORAGE_BACKUP_TARGET_WRONG_CONTENT", "nfs-iso", "critical")]
    assert found[0].evidence["backup_jobs"] == ["bare", "iso-named"]
    assert found[0].evidence["storage_from_job"] is False
    assert found[0].evidence["from_vzdump_default"] == {"bare": ["pve3"]}
    assert "by the vzdump default of pve3" in found[0].message
    d.vzdump_storage = {"pve1": "local", "pve2": "local"}  # pve3's default unread
    named_only = sc.backup_target_wrong_content(d, T)
    assert codes(named_only) == [("STORAGE_BACKUP_TARGET_WRONG_CONTENT", "nfs-iso", "critical")]
    assert named_only[0].evidence["backup_jobs"] == ["iso-named"]
    d.vzdump_storage = {}
    no_backup_local = [storage_cfg("local", "dir", "iso,vztmpl", path="/var/lib/vz"), *HEALTHY_CONFIG[1:]]
    assert sc.backup_target_wrong_content(cluster(no_backup_local, HEALTHY_RESOURCES, [bare, dumpdir]), T) == []


def test_disabled_storage_names_jobs_that_reach_it_by_their_vzdump_default() -> None:
    config = [*HEALTHY_CONFIG, storage_cfg("nfs-archive", "nfs", "backup", disable=1)]
    bare = {k: v for k, v in job("bare", "").items() if k != "storage"}
    d = cluster(config, HEALTHY_RESOURCES, [bare, job("named", "pbs-main")])
    d.vzdump_storage = {"pve2": "nfs-archive"}
    assert sc.disabled(d, T)[0].evidence["backup_jobs"] == ["bare"]


def test_backup_job_that_runs_nowhere_or_to_an_unknown_storage_is_not_wrong_content() -> None:
    """A job whose guests are on no node exits silently (API2/VZDump.pm vzdump); an unknown storage is
    STORAGE_BACKUP_TARGET_MISSING's."""
    jobs = [job("nobody", "nfs-iso", all=0, vmid="999"), job("ghost", "gone")]
    assert sc.backup_target_wrong_content(cluster(HEALTHY_CONFIG, HEALTHY_RESOURCES, jobs), T) == []


def test_backup_job_without_storage_needs_its_default_storage_on_the_nodes_it_runs_on() -> None:
    bare = {k: v for k, v in job("bare", "").items() if k != "storage"}
    resources = [r for r in HEALTHY_RESOURCES if not (r["storage"] == "local" and r["node"] == "pve3")]
    d = cluster(HEALTHY_CONFIG, resources, [bare])
    d.vzdump_storage = dict.fromkeys(NODES, "local")
    found = sc.backup_target_missing(d, T)
    assert codes(found) == [("STORAGE_BACKUP_TARGET_MISSING", "pve3:local", "warning")]
    d.vzdump_storage["pve3"] = "pbs-main"  # pve3's vzdump.conf names a storage it has
    assert sc.backup_target_missing(d, T) == []
    d.vzdump_storage = {}  # not read: not judged
    assert sc.backup_target_missing(d, T) == []
