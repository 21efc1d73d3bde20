"""Cluster configuration checks: backup job compression and overlap, HA and replication in use, kernels,
metric servers, the cluster log (PVE-shaped /cluster/backup, /nodes/{n}/status, /cluster/metrics/server,
/cluster/log rows)."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.checks import cluster_config as cc
from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from tests.unit.pve_fixtures import NOW, data, guest_row, node_row, storage_cfg, vzdump_defaults

T = Thresholds()
STORAGES = [storage_cfg("pbs", "pbs", "backup"), storage_cfg("nfs", "nfs", "backup")]


def job(jid: str, storage: str = "nfs", schedule: str = "21:00", **kw: Any) -> dict[str, Any]:
    return {
        "id": jid,
        "type": "vzdump",
        "schedule": schedule,
        "storage": storage,
        "all": 1,
        "enabled": 1,
        "mode": "snapshot",
        **kw,
    }


def backups(*jobs: dict[str, Any], **kw: Any) -> ClusterData:
    return data(backup_jobs=list(jobs), storage_config=STORAGES, resources=[node_row("pve1")], **kw)


def test_compressed_and_pbs_jobs_have_no_finding() -> None:
    d = backups(job("a", compress="zstd"), job("b", storage="pbs", schedule="22:00"), job("c", compress="0", enabled=0))
    assert cc.backup_job_settings(d, T) == []


def test_an_uncompressed_job_to_a_file_storage() -> None:
    found = cc.backup_job_settings(backups(job("a"), job("b", compress="0", schedule="03:00")), T)
    assert [(f.code, f.subject.id) for f in found] == [
        ("BACKUP_JOB_NO_COMPRESSION", "a"),
        ("BACKUP_JOB_NO_COMPRESSION", "b"),
    ]
    assert found[0].evidence == {"compress": None, "storage": "nfs", "storage_type": "nfs"}


def test_vzdump_conf_compression_covers_a_job_without_its_own() -> None:
    d = backups(job("a"), vzdump_defaults={"pve1@nfs": vzdump_defaults("nfs", compress="zstd")})
    assert cc.backup_job_settings(d, T) == []
    unset = backups(job("a"), vzdump_defaults={"pve1@nfs": vzdump_defaults("nfs")})  # compress "0": none
    assert [f.code for f in cc.backup_job_settings(unset, T)] == ["BACKUP_JOB_NO_COMPRESSION"]
    # an explicit compress=0 (the GUI's 'none') stands: vzdump.conf fills only what the job leaves undefined
    explicit = backups(job("a", compress="0"), vzdump_defaults={"pve1@nfs": vzdump_defaults("nfs", compress="zstd")})
    assert [f.code for f in cc.backup_job_settings(explicit, T)] == ["BACKUP_JOB_NO_COMPRESSION"]


def test_a_job_without_storage_is_judged_on_each_nodes_vzdump_default() -> None:
    """VZDump.pm new: no storage on the job, so /etc/vzdump.conf's (else 'local'); a PBS default compresses
    chunks itself; a node whose default was not read leaves the job unjudged; a dumpdir job writes files."""
    bare = {k: v for k, v in job("a").items() if k != "storage"}
    to_pbs = backups(bare, vzdump_defaults={"pve1@": vzdump_defaults("pbs")}, vzdump_storage={"pve1": "pbs"})
    assert cc.backup_job_settings(to_pbs, T) == []
    to_nfs = backups(bare, vzdump_defaults={"pve1@": vzdump_defaults("nfs")}, vzdump_storage={"pve1": "nfs"})
    assert [(f.code, f.evidence["storage"]) for f in cc.backup_job_settings(to_nfs, T)] == [
        ("BACKUP_JOB_NO_COMPRESSION", "nfs")
    ]
    assert cc.backup_job_settings(backups(bare), T) == []
    dumpdir = backups({**bare, "dumpdir": "/mnt/usb"})
    assert [(f.code, f.evidence["storage"]) for f in cc.backup_job_settings(dumpdir, T)] == [
        ("BACKUP_JOB_NO_COMPRESSION", "/mnt/usb")
    ]


def test_two_enabled_jobs_on_one_storage_at_one_schedule() -> None:
    d = backups(
        job("a", compress="zstd"),
        job("b", compress="zstd", schedule=" 21:00 "),
        job("c", compress="zstd", schedule="22:00"),
        job("d", compress="zstd", enabled=0),
    )
    found = cc.backup_job_settings(d, T)
    assert sorted((f.code, f.subject.id, tuple(f.evidence["overlapping_jobs"])) for f in found) == [
        ("BACKUP_JOB_OVERLAP", "a", ("b",)),
        ("BACKUP_JOB_OVERLAP", "b", ("a",)),
    ]


def cluster(**kw: Any) -> ClusterData:
    return data(resources=[node_row("pve1"), node_row("pve2"), guest_row(100, "pve1")], **kw)


def test_no_ha_resource_on_a_multi_node_cluster() -> None:
    assert [f.code for f in cc.ha_used(cluster(), T)] == ["HA_NONE"]
    assert cc.ha_used(cluster(ha_resources=[{"sid": "vm:100", "state": "started", "type": "vm"}]), T) == []
    unread = cluster(missing=[Missing("HA", "/cluster/ha/resources", "timeout")], unread={"ha_resources": "timeout"})
    assert cc.ha_used(unread, T) == []
    # PVE lists HA resources only with Sys.Audit on /: refused is not "none"
    hidden = cluster(unread={"ha_resources": "Permission check failed (/, Sys.Audit)"})
    assert cc.ha_used(hidden, T) == []
    single = data(resources=[node_row("pve1"), guest_row(100, "pve1")])
    assert cc.ha_used(single, T) == []  # CLUSTER_STANDALONE says it


def test_no_replication_job_on_a_multi_node_cluster() -> None:
    assert [f.code for f in cc.replication_used(cluster(), T)] == ["REPLICATION_NONE"]
    job_row = {"id": "100-0", "guest": 100, "target": "pve2", "type": "local", "jobnum": 0}
    assert cc.replication_used(cluster(replication_jobs=[job_row]), T) == []


def _status(release: str) -> dict[str, Any]:
    return {
        "kversion": f"Linux {release} #1 SMP PREEMPT_DYNAMIC PMX {release}",
        "current-kernel": {"sysname": "Linux", "release": release, "machine": "x86_64", "version": "#1 SMP"},
    }


def test_nodes_on_different_kernels() -> None:
    same = data(node_status={"pve1": _status("6.14.8-2-pve"), "pve2": _status("6.14.8-2-pve")})
    assert cc.kernels(same, T) == []
    mixed = data(node_status={"pve1": _status("6.14.8-2-pve"), "pve2": {"kversion": "Linux 6.8.12-9-pve #1 SMP"}})
    found = cc.kernels(mixed, T)
    assert [f.code for f in found] == ["NODE_KERNEL_MISMATCH"]
    assert found[0].evidence["kernels"] == {"pve1": "6.14.8-2-pve", "pve2": "6.8.12-9-pve"}


def test_metric_servers_none_all_disabled_or_one_enabled() -> None:
    def with_servers(servers: list[dict[str, Any]]) -> ClusterData:
        return data(reads={"metric_servers": {"": servers}})

    influx = {"id": "influx", "type": "influxdb", "server": "10.0.0.9", "port": 8086, "disable": 0}
    assert [f.code for f in cc.metrics(with_servers([]), T)] == ["METRICS_NONE"]
    assert [f.code for f in cc.metrics(with_servers([{**influx, "disable": 1}]), T)] == ["METRICS_ALL_DISABLED"]
    assert cc.metrics(with_servers([influx, {**influx, "id": "old", "disable": 1}]), T) == []
    assert cc.metrics(data(reads={}), T) == []


def _log(pri: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "uid": i,
            "id": f"{i}:pve1",
            "time": int(NOW) - i,
            "node": "pve1",
            "pri": pri,
            "tag": "pvestatd",
            "pid": 100 + i,
            "user": "root@pam",
            "msg": "storage 'nfs' is not online",
        }
        for i in range(n)
    ]


def test_cluster_log_errors_against_the_threshold() -> None:
    found = cc.cluster_log(data(reads={"cluster_log": {"": _log(3, 10) + _log(6, 50)}}), T)
    assert [(f.code, f.evidence["errors"], f.evidence["by_tag"]) for f in found] == [
        ("CLUSTER_LOG_ERRORS", 10, {"pvestatd": 10})
    ]
    assert cc.cluster_log(data(reads={"cluster_log": {"": _log(3, 9) + _log(4, 40)}}), T) == []
    raised = thresholds_from({"cluster_log_errors_max": 11})
    assert cc.cluster_log(data(reads={"cluster_log": {"": _log(2, 10)}}), raised) == []


def test_ha_groups_and_affinity_rules_with_an_offline_node() -> None:
    nodes = [node_row("pve1"), node_row("pve2"), node_row("pve3", online=False)]
    d = data(
        resources=nodes,
        ha_groups=[
            {"group": "db", "nodes": "pve1:2,pve3:1", "restricted": 1, "type": "group"},
            {"group": "web", "nodes": "pve1,pve2", "type": "group"},
        ],
        ha_rules=[
            {"rule": "pin", "type": "node-affinity", "resources": "vm:100", "nodes": "pve3"},
            {"rule": "old", "type": "node-affinity", "resources": "vm:101", "nodes": "pve3", "disable": 1},
            {"rule": "apart", "type": "resource-affinity", "resources": "vm:100,vm:101", "affinity": "negative"},
        ],
    )
    found = cc.ha_offline_members(d, T)
    assert [(f.code, f.subject.id, f.evidence["offline"]) for f in found] == [
        ("HA_RULE_NODE_OFFLINE", "db", ["pve3"]),
        ("HA_RULE_NODE_OFFLINE", "pin", ["pve3"]),
    ]
    all_online = data(resources=nodes[:2], ha_groups=[{"group": "db", "nodes": "pve1,pve2", "type": "group"}])
    assert cc.ha_offline_members(all_online, T) == []


def _task(status: str, ttype: str = "qmstart") -> dict[str, Any]:
    return {
        "upid": f"UPID:pve1:1:2:3:{ttype}:100:root@pam:",
        "node": "pve1",
        "type": ttype,
        "status": status,
        "starttime": int(NOW) - 600,
        "endtime": int(NOW) - 590,
        "user": "root@pam",
        "id": "100",
    }


def test_task_failure_rate_counts_errors_not_warnings() -> None:
    tasks = (
        [_task("OK")] * 7 + [_task("WARNINGS: 2", "vzdump")] * 2 + [_task("command 'qm start 100' failed: exit code 1")]
    )
    found = cc.task_failure_rate(data(tasks=tasks), T)
    assert [(f.code, f.evidence["failed"], f.evidence["ended"], f.evidence["by_type"]) for f in found] == [
        ("TASK_FAILURE_RATE", 1, 10, {"qmstart": 1})
    ]
    assert cc.task_failure_rate(data(tasks=tasks[:7] + tasks[-1:]), T) == []  # fewer than 10 ended tasks
    assert cc.task_failure_rate(data(tasks=[_task("OK")] * 10 + tasks[-1:]), T) == []  # 1 of 11 < 10 %
    running = {**_task("OK"), "endtime": None, "status": None}
    assert cc.task_failure_rate(data(tasks=[running] * 20), T) == []
