"""Guest hygiene and operations diagnostics; the aggregate report; the code registry."""

from __future__ import annotations

import pytest

from pve_steward.analysis.codes import CODES, render_codes
from pve_steward.analysis.data import Missing
from pve_steward.analysis.findings import Severity, Subject, finding
from pve_steward.analysis.guests import analyze_guests
from pve_steward.analysis.health import AREAS, diagnose
from pve_steward.analysis.operations import (
    analyze_certificates,
    analyze_hardware,
    analyze_repositories,
    analyze_tasks,
    analyze_updates,
)
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import DAY, HOUR, NOW, cluster_status, data, guest_row, node_row, qemu_config, task

T = Thresholds()


def test_stuck_lock_vs_lock_held_by_task() -> None:
    guests = [
        guest_row(111, "pve3", lock="backup"),
        guest_row(112, "pve3", lock="migrate"),
        guest_row(113, "pve3", lock="backup"),
        guest_row(114, "pve3", lock="snapshot"),
        guest_row(115, "pve2", lock="backup"),
    ]
    tasks = [
        task("pve2", "vzdump", "", 600, status="RUNNING"),  # /nodes/{node}/tasks: running, holds 115's lock
        task("pve3", "vzdump", "", 14 * HOUR),  # ended long ago: 111's lock is stuck
        task("pve3", "qmigrate", "112", 60, status=None),  # running: 112 legitimately locked
        task("pve3", "qmsnapshot", "114", 30 * 60 + 60, duration=60),
    ]  # ended 30 min ago: not yet stuck
    d = data(resources=guests, tasks=tasks)
    found = {(f.code, f.subject.id): f for f in analyze_guests(d, T)}
    assert found[("GUEST_LOCK_STUCK", "111")].evidence["last_related_task_age_hours"] == 14.0
    assert ("GUEST_LOCKED", "112") in found
    assert ("GUEST_LOCK_STUCK", "113") in found  # no related task hist: cannot be attributed to anything
    assert ("GUEST_LOCK_STUCK", "114") not in found
    assert ("GUEST_LOCKED", "115") in found and ("GUEST_LOCK_STUCK", "115") not in found


def test_snapshots_agent_onboot_hibernation() -> None:
    snaps = [
        {"name": "old", "snaptime": int(NOW - 31 * DAY), "description": ""},
        {"name": "new", "snaptime": int(NOW - DAY), "description": ""},
        {"name": "current", "description": "You are here!"},
    ]
    many = [{"name": f"s{i}", "snaptime": int(NOW - HOUR)} for i in range(11)]
    d = data(
        resources=[
            guest_row(100, "pve1"),
            guest_row(101, "pve1"),
            guest_row(102, "pve1"),
            guest_row(103, "pve1", status="stopped", lock="suspended"),
        ],
        snapshots={100: snaps, 101: many},
        agent={100: False, 101: True},
        configs={100: qemu_config("a"), 101: qemu_config("b"), 102: qemu_config("c", onboot=None)},
    )
    found = sorted((f.code, f.subject.id) for f in analyze_guests(d, T))
    assert found == [
        ("GUEST_AGENT_NOT_RUNNING", "100"),
        ("GUEST_HIBERNATED", "103"),
        ("GUEST_NO_ONBOOT", "102"),
        ("SNAPSHOT_COUNT_HIGH", "101"),
        ("SNAPSHOT_OLD", "100"),
    ]


def test_failed_tasks_grouped_by_node_and_type() -> None:
    tasks = [
        task("a", "vzdump", "", HOUR, "job errors"),
        task("a", "vzdump", "", 2 * HOUR, "job errors"),
        task("a", "qmstart", "100", HOUR, "start failed"),
        task("b", "qmstart", "101", 25 * HOUR, "old"),
        task("b", "vzdump", "", HOUR, "WARNINGS: 1"),
        task("b", "qmigrate", "102", 60, None),
        task("b", "vzdump", "", 600, "RUNNING"),  # Tasks.pm node_tasks: still running, not failed
    ]
    found = analyze_tasks(data(tasks=tasks), T)
    assert [(f.subject.id, f.evidence["count"]) for f in found] == [("a/qmstart", 1), ("a/vzdump", 2)]


@pytest.mark.parametrize(
    ("days", "code", "severity"),
    [
        (-1, "CERT_EXPIRED", Severity.CRITICAL),
        (6.9, "CERT_EXPIRING", Severity.CRITICAL),
        (29.9, "CERT_EXPIRING", Severity.WARNING),
        (30.1, None, None),
    ],
)
def test_certificates(days: float, code: str | None, severity: Severity | None) -> None:
    certs = {"a": [{"filename": "pveproxy-ssl.pem", "notafter": int(NOW + days * DAY), "subject": "/CN=a"}]}
    found = analyze_certificates(data(certificates=certs), T)
    assert [(f.code, f.severity) for f in found] == ([(code, severity)] if code else [])


CA = "/CN=Proxmox Virtual Environment/OU=0f3c/O=PVE Cluster Manager CA"


def _cert(name: str, days: float, issuer: str = CA) -> dict[str, object]:
    return {"filename": name, "notafter": int(NOW + days * DAY), "subject": f"/CN={name}", "issuer": issuer}


def _expiring(certs: list[dict[str, object]], node_config: dict[str, object] | None) -> list[tuple[str, float]]:
    rows = [{"filename": "pve-root-ca.pem", "notafter": int(NOW + 3000 * DAY), "subject": CA, "issuer": CA}, *certs]
    reads = {"node_config": {"a": node_config}} if node_config is not None else {}
    found = analyze_certificates(data(certificates={"a": rows}, reads=reads), T)
    return [(str(f.subject.id), f.evidence["days_left"]) for f in found]


def test_certificates_pve_renews_itself_count_only_past_their_renewal_day() -> None:
    """bin/pveupdate renews pve-ssl.pem (issued by the cluster CA) below 14 days and an ACME certificate (node config
    acme domains) below 30, daily: before that day (and a day's slack) nothing is wrong; after it the renewal
    failed. An uploaded certificate (no ACME domains) and one another CA issued are renewed by nobody."""
    config = {"digest": "x"}
    acme = {"acme": "account=default,domains=a.example.com", "digest": "x"}
    assert _expiring([_cert("pve-ssl.pem", 20)], config) == []
    assert _expiring([_cert("pve-ssl.pem", 12)], config) == [("a/pve-ssl.pem", 12.0)]
    assert _expiring([_cert("pve-ssl.pem", 20, issuer="/CN=corp-ca")], config) == [("a/pve-ssl.pem", 20.0)]
    assert _expiring([_cert("pveproxy-ssl.pem", 29.5)], acme) == []
    assert _expiring([_cert("pveproxy-ssl.pem", 12)], acme) == [("a/pveproxy-ssl.pem", 12.0)]
    assert _expiring([_cert("pveproxy-ssl.pem", 29.5)], {"acmedomain0": "domain=a.example.com"}) == []
    assert _expiring([_cert("pveproxy-ssl.pem", 29.5)], config) == [("a/pveproxy-ssl.pem", 29.5)]
    assert _expiring([_cert("pveproxy-ssl.pem", 29.5)], None) == [("a/pveproxy-ssl.pem", 29.5)]  # config unread


def test_repositories_updates_disks_zfs() -> None:
    def repos(**status: int) -> dict:  # type: ignore[type-arg]
        return {"standard-repos": [{"handle": h, "name": h, "status": s} for h, s in status.items()]}

    d = data(
        repositories={
            "a": repos(enterprise=1),
            "b": repos(),
            "c": repos(**{"no-subscription": 1, "test": 1}),
            # APTRepositories.js: a Ceph enterprise repository needs the subscription too; test alone gives updates
            "d": repos(**{"no-subscription": 1, "ceph-squid-enterprise": 1, "ceph-squid-no-subscription": 0}),
            "e": repos(test=1),
        },
        subscriptions={
            "a": {"status": "notfound"},
            "b": {"status": "active"},
            "c": {"status": "notfound"},
            "d": {"status": "notfound"},
            "e": {"status": "notfound"},
        },
        updates={
            "a": [{"Package": "pve-manager", "Version": "9.1.3"}, {"Package": "openssl", "Version": "3"}],
            "b": [],
        },
        disks={
            "a": [
                {"devpath": "/dev/sda", "health": "FAILED", "wearout": 14},
                {"devpath": "/dev/sdb", "health": "UNKNOWN", "wearout": "N/A"},
                {"devpath": "/dev/sdc", "health": "OK", "wearout": 31},
                {"devpath": "/dev/sdd", "health": "SMART Disabled", "wearout": "N/A"},  # Diskmanage.pm: no verdict
            ]
        },
        zfs={"a": [{"name": "rpool", "health": "ONLINE"}, {"name": "tank", "health": "DEGRADED"}]},
    )
    repo = sorted((f.code, f.subject.id) for f in analyze_repositories(d))
    assert repo == [
        ("REPO_ENTERPRISE_WITHOUT_SUBSCRIPTION", "a"),
        ("REPO_ENTERPRISE_WITHOUT_SUBSCRIPTION", "d"),
        ("REPO_NO_PVE_REPO", "b"),
        ("REPO_NO_SUBSCRIPTION", "c"),
        ("REPO_NO_SUBSCRIPTION", "d"),
        ("REPO_TEST_ENABLED", "c"),
        ("REPO_TEST_ENABLED", "e"),
    ]
    updates = analyze_updates(d)
    assert len(updates) == 1 and updates[0].evidence == {"count": 2, "proxmox_packages": ["pve-manager"]}
    hw = sorted((f.code, f.subject.id, f.severity.value) for f in analyze_hardware(d, T))
    assert hw == [
        ("DISK_SMART_FAILED", "a:/dev/sda", "critical"),
        ("DISK_WEAROUT_HIGH", "a:/dev/sda", "critical"),
        ("ZFS_POOL_DEGRADED", "a:tank", "critical"),
    ]


def test_aggregate_is_ranked_compact_and_honest() -> None:
    d = data(
        cluster_status=cluster_status({"a": True, "b": False}),
        resources=[node_row("a"), node_row("b", False)],
        tasks=[task("a", "qmstart", "100", HOUR, "failed")],
    )
    d.missing.append(
        Missing(
            what="everything on offline node b",
            path="/nodes/b",
            error="node is offline",
            node="b",
            affects=tuple(AREAS),
        )
    )
    report = diagnose(d, T, limit=1)
    assert report.complete is False and "INCOMPLETE" in report.summary
    assert report.findings[0].code == "NODE_OFFLINE" and report.findings[0].severity is Severity.CRITICAL
    total = report.counts.critical + report.counts.warning + report.counts.info
    assert len(report.findings) == 1 and report.omitted == total - 1
    assert report.by_code["DATA_INCOMPLETE"] == 1  # reported once although every area depends on it
    clean = diagnose(data(cluster_status=cluster_status({"a": True}), resources=[node_row("a")]), T)
    assert clean.status == "ok" and clean.complete and clean.findings == []


def test_every_code_is_documented_and_unknown_codes_are_refused() -> None:
    text = render_codes()
    for code, info in CODES.items():
        assert f"`{code}`" in text and info.rule and info.title
        assert info.severity in ("info", "warning", "critical")
    with pytest.raises(KeyError):
        finding("NOT_A_CODE", Subject(kind="cluster", id="x"), "x")


def test_no_onboot_is_not_reported_for_ha_resources() -> None:
    """Nodes.pm get_filtered_vmlist skips every HA resource (vm_is_ha_managed, any state) at start-all."""
    guests = [guest_row(v, "pve1") for v in (100, 101, 102, 103)] + [guest_row(104, "pve1", gtype="lxc")]
    d = data(
        resources=guests,
        configs={v: qemu_config(f"g{v}", onboot=None) for v in (100, 101, 102, 103, 104)},
        ha_resources=[
            {"sid": "vm:101", "state": "started"},
            {"sid": "vm:102", "state": "ignored"},  # still an HA resource for start-all
            {"sid": "ct:104", "state": "stopped"},
        ],
    )
    onboot = sorted(f.subject.id for f in analyze_guests(d, T) if f.code == "GUEST_NO_ONBOOT")
    assert onboot == ["100", "103"]


def test_clone_lock_is_held_by_the_clone_task_of_its_source() -> None:
    """API2/Qemu.pm clone_vm locks the new vmid 'clone' but forks 'qmclone' with the source vmid."""
    guests = [guest_row(9000, "pve1", template=True, status="stopped"), guest_row(150, "pve2", lock="clone")]
    running = data(resources=guests, tasks=[task("pve1", "qmclone", "9000", 60, status=None)])
    assert [f.code for f in analyze_guests(running, T)] == ["GUEST_LOCKED"]
    done = data(resources=guests, tasks=[task("pve1", "qmclone", "9000", 5 * HOUR)])
    assert [f.code for f in analyze_guests(done, T)] == ["GUEST_LOCK_STUCK"]


def test_container_clone_locks_source_disk_and_target_create_under_the_sources_task() -> None:
    """pve-container API2/LXC.pm clone_vm: the source is locked 'disk', the new CT 'create' (it may sit on
    another node), and the one 'vzclone' task carries the source's vmid."""
    guests = [guest_row(200, "pve1", gtype="lxc", lock="disk"), guest_row(201, "pve2", gtype="lxc", lock="create")]
    running = data(resources=guests, tasks=[task("pve1", "vzclone", "200", 60, status=None)])
    assert sorted((f.code, f.subject.id) for f in analyze_guests(running, T)) == [
        ("GUEST_LOCKED", "200"),
        ("GUEST_LOCKED", "201"),
    ]


def test_container_backup_in_snapshot_mode_holds_the_snapshot_locks() -> None:
    """pve-container VZDump/LXC.pm snapshot: vzdump swaps its 'backup' lock for AbstractConfig's 'snapshot'
    (snapshot_create) and 'snapshot-delete' (snapshot_delete of 'vzdump') while it runs."""
    guests = [
        guest_row(200, "pve1", gtype="lxc", lock="snapshot"),
        guest_row(201, "pve1", gtype="lxc", lock="snapshot-delete"),
    ]
    job = data(resources=guests, tasks=[task("pve1", "vzdump", "", 60, status=None)])
    assert sorted((f.code, f.subject.id) for f in analyze_guests(job, T)) == [
        ("GUEST_LOCKED", "200"),
        ("GUEST_LOCKED", "201"),
    ]


def test_incoming_remote_migration_holds_create_then_migrate() -> None:
    """qemu-server API2/Qemu.pm mtunnel ('qmtunnel') and pve-container API2/LXC.pm ('vzmtunnel') lock the
    incoming guest 'create', then 'migrate'."""
    guests = [guest_row(300, "pve1", lock="create"), guest_row(301, "pve1", gtype="lxc", lock="migrate")]
    tunnels = [task("pve1", "qmtunnel", "300", 60, status=None), task("pve1", "vzmtunnel", "301", 60, status=None)]
    assert sorted((f.code, f.subject.id) for f in analyze_guests(data(resources=guests, tasks=tunnels), T)) == [
        ("GUEST_LOCKED", "300"),
        ("GUEST_LOCKED", "301"),
    ]
