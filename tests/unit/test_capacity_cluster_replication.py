"""Capacity, cluster/HA and replication diagnostics: rules and threshold boundaries."""

from __future__ import annotations

import pytest

from pve_steward.analysis.capacity import analyze_nodes, analyze_storage
from pve_steward.analysis.catalog import code_info
from pve_steward.analysis.cluster import analyze_cluster, analyze_ha
from pve_steward.analysis.findings import Finding, Severity
from pve_steward.analysis.replication import analyze_replication
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from tests.unit.pve_fixtures import (
    HOUR,
    NOW,
    GiB,
    cluster_status,
    data,
    guest_row,
    node_row,
    node_storage_row,
    qemu_config,
    storage_cfg,
)

T = Thresholds()


@pytest.mark.parametrize(
    ("used_pct", "expected"),
    [(79.9, None), (80.0, Severity.WARNING), (89.9, Severity.WARNING), (90.0, Severity.CRITICAL)],
)
def test_storage_usage_boundaries(used_pct: float, expected: Severity | None) -> None:
    total = 1000 * GiB
    d = data(
        resources=[node_row("pve1")],
        cluster_status=cluster_status({"pve1": True}),
        storage_config=[storage_cfg("local-lvm", "lvmthin")],
        node_storage={"pve1": [node_storage_row("local-lvm", "lvmthin", total, int(total * used_pct / 100))]},
    )
    found = [f for f in analyze_storage(d, T) if f.code == "STORAGE_USAGE_HIGH"]
    assert [f.severity for f in found] == ([expected] if expected else [])


def test_storage_sizes_that_are_no_integer_are_not_measured() -> None:
    """An infinite or textual size (a decoder's Infinity, a broken plugin) is no measurement: skipped, not a crash
    (int(inf) raises OverflowError, which the old reader let through)."""
    rows = [
        node_storage_row("local-lvm", "lvmthin", 10 * GiB, 9 * GiB),
        {**node_storage_row("tank", "zfspool", 10 * GiB, 9 * GiB), "total": float("inf")},
        {**node_storage_row("nfs", "nfs", 10 * GiB, 9 * GiB), "used": "n/a"},
    ]
    d = data(
        resources=[node_row("pve1")],
        cluster_status=cluster_status({"pve1": True}),
        storage_config=[storage_cfg("local-lvm", "lvmthin"), storage_cfg("tank", "zfspool"), storage_cfg("nfs", "nfs")],
        node_storage={"pve1": rows},
    )
    assert [(f.code, f.subject.id) for f in analyze_storage(d, T)] == [("STORAGE_USAGE_HIGH", "local-lvm")]


def test_shared_storage_counted_once_and_inactive_storage() -> None:
    rows = [node_storage_row("ceph-vm", "rbd", 100 * GiB, 95 * GiB, shared=1)]
    d = data(
        resources=[node_row("a"), node_row("b")],
        cluster_status=cluster_status({"a": True, "b": True}),
        storage_config=[storage_cfg("ceph-vm", "rbd"), storage_cfg("nfs", "nfs")],
        node_storage={"a": [*rows, node_storage_row("nfs", "nfs", 10, 1, active=0, shared=1)], "b": rows},
    )
    found = analyze_storage(d, T)
    assert sorted((f.code, f.subject.id) for f in found) == [
        ("STORAGE_INACTIVE", "nfs"),
        ("STORAGE_USAGE_HIGH", "ceph-vm"),
    ]


def _three(node_storage: dict[str, list[dict[str, object]]], **cfg: object) -> list[tuple[str, str, str | None]]:
    d = data(
        resources=[node_row(n) for n in ("pve1", "pve2", "pve3")],
        cluster_status=cluster_status(dict.fromkeys(("pve1", "pve2", "pve3"), True)),
        storage_config=[storage_cfg("nfs1", "nfs", "images", shared=1, **cfg)],
        node_storage=node_storage,
    )
    return sorted((f.code, f.subject.id, f.subject.node) for f in analyze_storage(d, T))


def test_shared_storage_restricted_to_other_nodes_is_measured_where_it_is_enabled() -> None:
    """Storage.pm storage_info lists nfs1 (nodes pve2,pve3) on pve1 too, with enabled 0 and zeros: pve1's row
    must not stand for the storage, which is 95 % full where it is mounted."""
    off = node_storage_row("nfs1", "nfs", 0, 0, active=0, enabled=0, shared=1)
    full = node_storage_row("nfs1", "nfs", 100 * GiB, 95 * GiB, shared=1)
    assert _three({"pve1": [off], "pve2": [full], "pve3": [full]}, nodes="pve2,pve3") == [
        ("STORAGE_USAGE_HIGH", "nfs1", None)
    ]


def test_shared_storage_not_mounted_on_one_node_is_inactive_there() -> None:
    """pve8to9 check_storage_health judges each node: nfs1 active on pve1 but not on pve2 is inactive on pve2,
    even though pve1 already measured it (enabled 1, active 0, zeros)."""
    ok = node_storage_row("nfs1", "nfs", 100 * GiB, 10 * GiB, shared=1)
    down = node_storage_row("nfs1", "nfs", 0, 0, active=0, shared=1)
    assert _three({"pve1": [ok], "pve2": [down], "pve3": [ok]}) == [("STORAGE_INACTIVE", "nfs1", "pve2")]
    assert _three({"pve1": [down], "pve2": [ok], "pve3": [down]}) == [
        ("STORAGE_INACTIVE", "nfs1", "pve1"),
        ("STORAGE_INACTIVE", "nfs1", "pve3"),
    ]


def test_disabled_storage_rows_are_never_measured() -> None:
    """A disabled storage's rows are enabled 0 with zeros in PVE; a row saying otherwise is still not judged."""
    odd = node_storage_row("nfs1", "nfs", 100 * GiB, 99 * GiB, active=1, enabled=0, shared=1)
    assert _three({"pve1": [odd]}, disable=1) == []


def test_thin_overcommit() -> None:
    d = data(
        resources=[node_row("pve1"), guest_row(100, "pve1"), guest_row(101, "pve1")],
        cluster_status=cluster_status({"pve1": True}),
        storage_config=[storage_cfg("local-lvm", "lvmthin")],
        node_storage={"pve1": [node_storage_row("local-lvm", "lvmthin", 100 * GiB, 50 * GiB)]},
        configs={
            100: qemu_config("a", scsi0="local-lvm:vm-100-disk-0,size=80G"),
            101: qemu_config("b", scsi0="local-lvm:vm-101-disk-0,size=40G"),
        },
    )
    found = [f for f in analyze_storage(d, T) if f.code == "STORAGE_THIN_OVERCOMMIT"]
    assert len(found) == 1 and found[0].evidence["ratio"] == 1.2 and found[0].severity is Severity.WARNING


@pytest.mark.parametrize(
    ("configured_gib", "expected"),
    [(128, None), (129, Severity.WARNING), (192, Severity.WARNING), (193, Severity.CRITICAL)],
)
def test_memory_overcommit_counts_configured_memory_of_running_guests(
    configured_gib: int, expected: Severity | None
) -> None:
    guests = [
        guest_row(100, "pve1", memory_mib=configured_gib * 1024),
        guest_row(101, "pve1", status="stopped", memory_mib=512 * 1024),
    ]
    d = data(
        resources=[node_row("pve1", maxmem=128 * GiB, mem=10 * GiB), *guests],
        cluster_status=cluster_status({"pve1": True}),
    )
    found = [f for f in analyze_nodes(d, T) if f.code == "NODE_MEMORY_OVERCOMMIT"]
    assert [f.severity for f in found] == ([expected] if expected else [])


def test_memory_pressure_swap_vcpu() -> None:
    status = {
        "pve1": {
            "memory": {"total": 100 * GiB, "used": 96 * GiB},
            "swap": {"total": 8 * GiB, "used": 2 * GiB},
            "cpuinfo": {"cpus": 4},
        }
    }
    guests = [guest_row(v, "pve1", cpus=6, memory_mib=1024) for v in (100, 101, 102)]
    d = data(
        resources=[node_row("pve1", maxcpu=4), *guests],
        cluster_status=cluster_status({"pve1": True}),
        node_status=status,
    )
    found = {f.code: f for f in analyze_nodes(d, T)}
    assert found["NODE_MEMORY_PRESSURE"].severity is Severity.CRITICAL
    assert found["NODE_SWAP_USED"].severity is Severity.WARNING and found["NODE_SWAP_USED"].evidence["pct"] == 25
    assert found["NODE_VCPU_OVERCOMMIT"].evidence["ratio"] == 4.5


def test_memory_pressure_leaves_the_zfs_arc_out_where_pve_9_records_it() -> None:
    """pvestatd's pve-node-9.0 RRD has arcsize; we judge pressure without it (ZFS gives it back). A node 90 % used
    of which 30 % is ARC is 60 % used; PVE 8's RRD has no arcsize, so used stands."""
    status = {"a": {"memory": {"total": 100 * GiB, "used": 90 * GiB}}}

    def pressure(rrd: list[dict[str, object]] | None) -> list[object]:
        reads = {"node_rrd_day": {"a": rrd}} if rrd is not None else {}
        d = data(resources=[node_row("a")], cluster_status=cluster_status({"a": True}), node_status=status, reads=reads)
        return [f.evidence for f in analyze_nodes(d, T) if f.code == "NODE_MEMORY_PRESSURE"]

    assert pressure([{"time": 1, "arcsize": 10 * GiB}, {"time": 2, "arcsize": 30 * GiB}, {"time": 3}]) == []
    assert pressure([{"time": 1, "memused": 90 * GiB}]) == [
        {"used_bytes": 90 * GiB, "zfs_arc_bytes": 0, "total_bytes": 100 * GiB, "pct": 90.0}
    ]
    assert pressure(None)[0]["pct"] == 90.0  # RRD unread: used as PVE reports it
    assert pressure([{"time": 1, "arcsize": 3 * GiB}])[0] == {
        "used_bytes": 90 * GiB,
        "zfs_arc_bytes": 3 * GiB,
        "total_bytes": 100 * GiB,
        "pct": 87.0,
    }


def test_zfs_arc_wording_says_what_pves_node_summary_does() -> None:
    """Issue 41 item 5: PVE's node summary counts the ARC as used in its memory bar (StatusView.js, 'TODO: split out
    ARC usage'; the status API's memory.used includes it) and leaves it out only in the memory chart's Used tooltip
    ('Without ZFS ARC', Summary.js): the finding must not claim PVE shows the use without it."""
    from pve_steward.analysis.codes import CODES

    status = {"a": {"memory": {"total": 100 * GiB, "used": 90 * GiB}}}
    reads = {"node_rrd_day": {"a": [{"time": 1, "arcsize": 3 * GiB}]}}
    d = data(resources=[node_row("a")], cluster_status=cluster_status({"a": True}), node_status=status, reads=reads)
    message = next(f.message for f in analyze_nodes(d, T) if f.code == "NODE_MEMORY_PRESSURE")
    assert "as PVE shows it" not in message and "memory bar counts it as used" in message
    rule = CODES["NODE_MEMORY_PRESSURE"].rule
    assert "as PVE's node summary does" not in rule and "'Without ZFS ARC' in the Used tooltip" in rule


def test_n_plus_1() -> None:
    """The planner's room: total minus max(used, configured running) minus 10 % headroom, per surviving node."""
    nodes = [node_row("a", maxmem=64 * GiB, mem=4 * GiB), node_row("b", maxmem=64 * GiB, mem=4 * GiB)]
    fits = data(
        resources=[*nodes, guest_row(100, "a", memory_mib=40 * 1024)],
        cluster_status=cluster_status({"a": True, "b": True}),
    )
    assert not [f for f in analyze_nodes(fits, T) if f.code == "CLUSTER_NO_N_PLUS_1"]
    too_much = data(
        resources=[*nodes, guest_row(100, "a", memory_mib=40 * 1024), guest_row(101, "b", memory_mib=40 * 1024)],
        cluster_status=cluster_status({"a": True, "b": True}),
    )
    found = [f for f in analyze_nodes(too_much, T) if f.code == "CLUSTER_NO_N_PLUS_1"]
    assert [f.code for f in analyze_nodes(too_much, T)] == ["CLUSTER_NO_N_PLUS_1"]
    assert found[0].evidence["configured_bytes"] == 40 * GiB
    assert found[0].evidence["ha_bytes"] == 0 and found[0].severity is Severity.WARNING


def test_n_plus_1_is_critical_when_ha_alone_would_overload_the_survivors() -> None:
    """Manager.pm recover_fenced_service restarts a failed node's HA resources requested 'started' elsewhere,
    whether they fit or not; other guests stay down (an 'ignored' resource is not HA's, a 'stopped' one stays off)."""
    nodes = [node_row("a", maxmem=64 * GiB, mem=4 * GiB), node_row("b", maxmem=64 * GiB, mem=4 * GiB)]
    guests = [guest_row(100, "a", memory_mib=40 * 1024), guest_row(101, "b", memory_mib=40 * 1024)]

    def n_plus_1(state: str) -> Finding:
        ha = [{"sid": "vm:101", "state": state, "type": "vm"}]
        d = data(resources=[*nodes, *guests], cluster_status=cluster_status({"a": True, "b": True}), ha_resources=ha)
        return next(f for f in analyze_nodes(d, T) if f.code == "CLUSTER_NO_N_PLUS_1")

    started = n_plus_1("started")
    assert started.severity is Severity.CRITICAL and started.evidence["failing_node"] == "b"
    assert started.evidence["ha_bytes"] == 40 * GiB and "HA restarts there by itself" in started.message
    assert n_plus_1("ignored").severity is Severity.WARNING and n_plus_1("ignored").evidence["ha_bytes"] == 0


def test_quorum_offline_nodes_versions() -> None:
    status = cluster_status({"a": True, "b": False, "c": False}, quorate=False)
    d = data(
        cluster_status=status,
        resources=[node_row("a"), node_row("b", False), node_row("c", False)],
        node_status={"a": {"pveversion": "pve-manager/9.1.2/abc"}},
    )
    found = {(f.code, f.subject.id): f for f in analyze_cluster(d)}
    assert found[("CLUSTER_NOT_QUORATE", "lab")].severity is Severity.CRITICAL
    assert found[("NODE_OFFLINE", "b")].severity is Severity.CRITICAL  # 1 of 3 online
    one_down = data(
        cluster_status=cluster_status({"a": True, "b": True, "c": False}),
        resources=[node_row("a"), node_row("b"), node_row("c", False)],
        node_status={"a": {"pveversion": "pve-manager/9.1.2/x"}, "b": {"pveversion": "pve-manager/9.1.3/x"}},
    )
    found2 = {f.code: f for f in analyze_cluster(one_down)}
    assert found2["NODE_OFFLINE"].severity is Severity.WARNING
    assert found2["NODE_VERSION_MISMATCH"].evidence["versions"] == {"a": "9.1.2", "b": "9.1.3"}
    standalone = data(cluster_status=[{"type": "node", "id": "node/a", "name": "a", "online": 1}])
    assert [f.code for f in analyze_cluster(standalone)] == ["CLUSTER_STANDALONE"]


def _ha(services: list[dict], lrm: dict[str, str] | None = None, **kw):  # type: ignore[no-untyped-def]
    status = [
        {"id": "quorum", "type": "quorum", "node": "a", "status": "OK", "quorate": 1},
        {"id": "master", "type": "master", "node": "a", "status": "a (active, Tue Dec  1 10:00:00 2026)"},
    ]
    for node, text in (lrm or {"a": "active", "b": "active"}).items():
        status.append({"id": f"lrm:{node}", "type": "lrm", "node": node, "status": f"{node} ({text}, ...)"})
    status += [{"id": f"service:{s['sid']}", "type": "service", **s} for s in services]
    base = {
        "cluster_status": cluster_status({"a": True, "b": True}),
        "resources": [node_row("a"), node_row("b")],
        "ha_status": status,
        "ha_resources": [{"sid": s["sid"], "state": s.get("request_state", "started")} for s in services],
    }
    base.update(kw)
    return data(**base)


def test_ha_states() -> None:
    d = _ha(
        [
            {"sid": "vm:100", "node": "a", "crm_state": "error", "request_state": "started"},
            {"sid": "vm:101", "node": "b", "crm_state": "fence", "request_state": "started"},
            {"sid": "vm:102", "node": "a", "crm_state": "stopped", "request_state": "started"},
            {"sid": "vm:103", "node": "a", "crm_state": "migrate", "request_state": "started"},
            {"sid": "vm:104", "node": "a", "crm_state": "started", "request_state": "started"},
        ],
        lrm={"a": "active", "b": "maintenance mode"},
    )
    found = sorted((f.code, f.subject.id) for f in analyze_ha(d))
    assert found == [
        ("HA_NODE_MAINTENANCE", "b"),
        ("HA_RESOURCE_ERROR", "vm:100"),
        ("HA_RESOURCE_FENCING", "vm:101"),
        ("HA_RESOURCE_STATE_MISMATCH", "vm:102"),
    ]


def test_ha_manager_health_and_disarm() -> None:
    d = _ha(
        [{"sid": "vm:100", "node": "a", "crm_state": "started", "request_state": "started"}],
        lrm={"a": "active", "b": "old timestamp - dead?"},
    )
    d.ha_status[1]["status"] = "a (wait_for_quorum)"
    d.ha_status.append({"id": "fencing", "type": "fencing", "node": "a", "status": "x", "armed-state": "disarmed"})
    assert sorted(f.code for f in analyze_ha(d)) == ["HA_DISARMED", "HA_LRM_DEAD", "HA_NO_MASTER"]
    assert analyze_ha(data()) == []


def test_ha_rules_that_leave_nowhere_to_go() -> None:
    rules = [
        {"rule": "pin", "type": "node-affinity", "resources": "vm:100", "nodes": "a:2", "strict": 1},
        {"rule": "dead", "type": "node-affinity", "resources": "vm:101", "nodes": "c", "strict": 1},
        {"rule": "soft", "type": "node-affinity", "resources": "vm:102", "nodes": "a", "strict": 0},
        {
            "rule": "broken",
            "type": "resource-affinity",
            "resources": "vm:100,vm:101",
            "affinity": "negative",
            "errors": {"resources": ["infeasible"]},
        },
        {"rule": "off", "type": "node-affinity", "resources": "vm:102", "nodes": "b", "strict": 1, "disable": 1},
    ]
    d = _ha(
        [{"sid": f"vm:{v}", "node": "a", "crm_state": "started", "request_state": "started"} for v in (100, 101, 102)],
        ha_rules=rules,
    )
    found = {(f.code, f.subject.id): f for f in analyze_ha(d)}
    assert found[("HA_RULE_NO_TARGET", "vm:100")].severity is Severity.WARNING
    assert found[("HA_RULE_NO_TARGET", "vm:101")].severity is Severity.CRITICAL
    assert ("HA_RULE_ERRORS", "broken") in found and ("HA_RULE_NO_TARGET", "vm:102") not in found
    assert found[("HA_RULE_ERRORS", "broken")].severity is Severity.WARNING
    assert found[("HA_RULE_ERRORS", "off")].severity is Severity.INFO  # disabled on purpose: skipped, not broken
    groups = _ha(
        [{"sid": "vm:100", "node": "a", "crm_state": "started", "request_state": "started"}],
        ha_groups=[{"group": "g", "nodes": "a,b", "restricted": 1}],
    )
    groups.ha_resources[0]["group"] = "g"
    assert [f.code for f in analyze_ha(groups)] == []


def test_replication() -> None:
    jobs = [
        {"id": "100-0", "guest": 100, "target": "b", "schedule": "*/15", "type": "local"},
        {"id": "101-0", "guest": 101, "target": "b", "schedule": "*/15", "type": "local"},
        {"id": "102-0", "guest": 102, "target": "b", "type": "local", "disable": 1},
        {"id": "103-0", "guest": 103, "target": "b", "type": "local", "remove_job": "full"},
    ]
    state = {
        "a": [
            {"id": "100-0", "fail_count": 3, "error": "out of space", "last_sync": int(1_800_000_000 - 5 * HOUR)},
            {"id": "101-0", "fail_count": 0, "last_sync": (1_800_000_000 - 59 * 60)},
        ]
    }
    d = data(replication_jobs=jobs, replication_state=state, resources=[guest_row(v, "a") for v in range(100, 104)])
    found = {(f.code, f.subject.id): f for f in analyze_replication(d, T)}
    assert found[("REPLICATION_FAILING", "100-0")].severity is Severity.CRITICAL
    assert ("REPLICATION_STALE", "100-0") in found and ("REPLICATION_STALE", "101-0") not in found
    assert ("REPLICATION_DISABLED", "102-0") in found and ("REPLICATION_PENDING_REMOVAL", "103-0") in found
    lenient = thresholds_from({"replication_fail_critical": 5})
    assert {f.severity for f in analyze_replication(d, lenient) if f.code == "REPLICATION_FAILING"} == {
        Severity.WARNING
    }


def test_failed_job_to_an_offline_or_departed_target_is_paused() -> None:
    """ReplicationState.pm job_status: a failed job is retried only while its target is an online member;
    otherwise next_sync is 0, get_next_job skips it and fail_count freezes (at 1 here)."""
    jobs = [
        {"id": f"{v}-0", "guest": v, "target": target, "schedule": "*/15", "type": "local"}
        for v, target in ((100, "b"), (101, "c"), (102, "gone"), (103, "c"))
    ]
    row = {"fail_count": 1, "error": "No route to host", "last_sync": int(NOW - 24 * HOUR), "next_sync": 0}
    state = {"a": [{**row, "id": f"{v}-0"} for v in (100, 101, 102)]}
    state["a"].append({**row, "id": "103-0", "next_sync": int(NOW + 300)})  # a member's retry: still failing
    nodes = {"a": True, "b": False, "c": True}
    d = data(
        replication_jobs=jobs,
        replication_state=state,
        cluster_status=cluster_status(nodes),
        resources=[
            *(node_row(n, online) for n, online in nodes.items()),
            *(guest_row(v, "a") for v in range(100, 104)),
        ],
    )
    found = {(f.code, f.subject.id): f for f in analyze_replication(d, T) if f.code != "REPLICATION_STALE"}
    assert sorted(found) == [
        ("REPLICATION_FAILING", "103-0"),
        ("REPLICATION_PAUSED", "100-0"),
        ("REPLICATION_PAUSED", "101-0"),
        ("REPLICATION_PAUSED", "102-0"),
    ]
    offline, by_state, gone = (found[("REPLICATION_PAUSED", f"{v}-0")] for v in (100, 101, 102))
    assert offline.severity is Severity.WARNING and "target b is offline" in offline.message
    assert (
        by_state.severity is Severity.WARNING and by_state.evidence["cause"] == "PVE schedules no retry (next_sync 0)"
    )
    assert gone.severity is Severity.CRITICAL and "not a cluster member" in gone.message
    assert "force=1" in gone.remediation and gone.evidence["error"] == "No route to host"
    assert found[("REPLICATION_FAILING", "103-0")].severity is Severity.WARNING


def test_a_removal_that_keeps_failing_is_a_warning_with_its_error() -> None:
    """ReplicationState.pm job_status gives a remove_job job next_sync 1 without a retry limit; Replication.pm
    replicate dies when the target is unreachable (fail_count++), and only DELETE force=1/keep=1 ends it."""
    jobs = [
        {"id": "100-1", "guest": 100, "target": "pve9", "type": "local", "remove_job": "full"},
        {"id": "101-0", "guest": 101, "target": "b", "type": "local", "remove_job": "local", "disable": 1},
    ]
    state = {
        "a": [
            {"id": "100-1", "fail_count": 812, "error": "ssh: connect to host pve9: No route", "next_sync": 1},
            {"id": "101-0", "fail_count": 0, "last_sync": int(NOW - HOUR), "next_sync": 1},
        ]
    }
    d = data(replication_jobs=jobs, replication_state=state, resources=[guest_row(v, "a") for v in (100, 101)])
    found = {f.subject.id: f for f in analyze_replication(d, T)}
    assert {f.code for f in found.values()} == {"REPLICATION_PENDING_REMOVAL"}
    stuck, running = found["100-1"], found["101-0"]
    assert stuck.severity is Severity.WARNING and "failed 812 times" in stuck.message
    assert "No route" in stuck.message and stuck.evidence["error"].startswith("ssh:")
    assert "force=1" in stuck.remediation and "keep=1" in stuck.remediation
    assert running.severity is Severity.INFO and "fail_count" not in running.evidence
    # the texts say what PVE blocks: VM migration, to that job's target only (QemuMigrate.pm prepare)
    assert "a VM cannot migrate to that job's target" in code_info(stuck.code).rule


def test_a_job_no_node_reports_is_never_scheduled() -> None:
    """ReplicationState.pm job_status skips a job whose guest does not exist and, without remove_job, one whose
    target is the guest's node: no node reports it and PVE never runs it. A node that did not answer is a gap."""
    jobs = [
        {"id": "105-0", "guest": 105, "target": "b", "type": "local", "remove_job": "full"},  # guest destroyed
        {"id": "100-0", "guest": 100, "target": "a", "type": "local"},  # target = the guest's node
        {"id": "101-0", "guest": 101, "target": "a", "type": "local"},  # guest on c, which did not answer
        {"id": "102-0", "guest": 102, "target": "b", "type": "local"},  # guest on d, no longer a member
        {"id": "103-0", "guest": 103, "target": "b", "type": "local"},  # reported
    ]
    state = {"a": [{"id": "103-0", "last_sync": int(NOW - 60), "fail_count": 0}], "b": []}
    nodes = {"a": True, "b": True, "c": False}
    guests = [guest_row(100, "a"), guest_row(101, "c"), guest_row(102, "d"), guest_row(103, "a")]
    d = data(
        replication_jobs=jobs,
        replication_state=state,
        cluster_status=cluster_status(nodes),
        resources=[*(node_row(n, online) for n, online in nodes.items()), *guests],
    )
    found = {f.subject.id: f for f in analyze_replication(d, T)}
    assert sorted(found) == ["100-0", "102-0", "105-0"]
    assert {f.code for f in found.values()} == {"REPLICATION_NOT_SCHEDULED"}
    assert "guest 105 does not exist" in found["105-0"].message
    assert "target a is the node guest 100 is on" in found["100-0"].message
    assert "d, which is not a cluster member" in found["102-0"].message
    assert "force=1" in found["105-0"].remediation
    # a job to its guest's node marked for removal is reported (job_status keeps it): no verdict without its row
    jobs[1]["remove_job"] = "local"
    again = data(
        replication_jobs=jobs, replication_state=state, cluster_status=cluster_status(nodes), resources=d.resources
    )
    assert "100-0" not in {f.subject.id for f in analyze_replication(again, T) if f.code == "REPLICATION_NOT_SCHEDULED"}


def test_first_sync_pending_is_not_stale() -> None:
    """ReplicationState.pm: state starts at last_sync=0/fail_count=0; only a failed run raises fail_count."""
    jobs = [{"id": f"{v}-0", "guest": v, "target": "b", "schedule": "*/15", "type": "local"} for v in (100, 101)]
    state = {
        "a": [
            {"id": "100-0", "last_sync": 0, "last_try": 0, "fail_count": 0},
            {"id": "101-0", "last_sync": 0, "last_try": (1_800_000_000 - 600), "fail_count": 2, "error": "no"},
        ]
    }
    d = data(replication_jobs=jobs, replication_state=state, resources=[guest_row(v, "a") for v in (100, 101)])
    found = sorted((f.code, f.subject.id) for f in analyze_replication(d, T))
    assert found == [("REPLICATION_FAILING", "101-0"), ("REPLICATION_STALE", "101-0")]
    stale = next(f for f in analyze_replication(d, T) if f.code == "REPLICATION_STALE")
    assert "never" in stale.message


def test_ha_status_texts_and_transitional_states() -> None:
    d = _ha(
        [
            {"sid": "vm:100", "node": "a", "crm_state": "stopped", "state": "starting", "request_state": "started"},
            {"sid": "vm:101", "node": "a", "crm_state": "request_start_balance", "request_state": "started"},
            {"sid": "vm:102", "node": "a", "crm_state": "started", "state": "ignore", "request_state": "started"},
        ],
        lrm={"a": "active", "b": "unable to read lrm status"},
    )
    d.ha_status[-4]["status"] = "b (unable to read lrm status)"  # Status.pm: no timestamp at all
    assert sorted((f.code, f.subject.id) for f in analyze_ha(d)) == [("HA_LRM_DEAD", "b")]


def test_ha_status_states_are_read_apart_from_node_names() -> None:
    """Status.pm writes '<node> (<state>, ...)': a node called deadbeef with an active LRM is not dead, and a
    master on inactive1 whose status is old is not active."""
    d = _ha([{"sid": "vm:100", "node": "a", "crm_state": "started", "request_state": "started"}])
    d.ha_status[1]["status"] = "inactive1 (old timestamp - dead?, Tue Dec  1 10:00:00 2026)"
    d.ha_status[2]["status"] = "deadbeef (active, watchdog active, Tue Dec  1 10:00:00 2026)"
    d.ha_status[3]["status"] = "maintenance-b (active, watchdog active, Tue Dec  1 10:00:00 2026)"
    assert sorted(f.code for f in analyze_ha(d)) == ["HA_NO_MASTER"]


def test_strict_rule_whose_other_node_is_in_maintenance_has_no_target() -> None:
    """Manager.pm places only on nodes whose HA node state is online; maintenance is not."""
    rules = [{"rule": "pin", "type": "node-affinity", "resources": "vm:100", "nodes": "a,b", "strict": 1}]
    service = [{"sid": "vm:100", "node": "a", "crm_state": "started", "request_state": "started"}]
    free = _ha(service, ha_rules=rules)
    assert [f.code for f in analyze_ha(free)] == []
    held = _ha(service, lrm={"a": "active", "b": "maintenance mode"}, ha_rules=rules)
    found = {f.code: f for f in analyze_ha(held)}
    assert found["HA_RULE_NO_TARGET"].evidence["in_maintenance"] == ["b"]
    assert found["HA_RULE_NO_TARGET"].severity is Severity.WARNING


def test_unknown_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown threshold"):
        thresholds_from({"storage_warn": 70})
