"""Migratability decision list: every rule, per target, and the cross-check with PVE's precondition."""

from __future__ import annotations

from pve_steward.analysis.migration.findings import analyze_migratability
from pve_steward.analysis.migration.targets import eligible_targets
from pve_steward.analysis.migration.verdict import assess
from tests.unit.pve_fixtures import cluster_status, data, guest_row, lxc_config, node_row, qemu_config, storage_cfg

AMD = {"cpuinfo": {"model": "AMD EPYC 7302P", "cpus": 32}}
INTEL = {"cpuinfo": {"model": "Intel Xeon E-2288G", "cpus": 16}}
STORAGES = [
    storage_cfg("ceph-vm", "rbd"),
    storage_cfg("local-lvm", "lvmthin"),
    storage_cfg("local", "dir", "iso,vztmpl,backup"),
    storage_cfg("nfs-iso", "nfs", "iso"),
    storage_cfg("local-zfs", "zfspool", nodes="pve1,pve3"),
    storage_cfg("iscsi-lun", "iscsidirect"),
    storage_cfg("old", "dir", disable=1),
]


def _data(guest, config, **kw):  # type: ignore[no-untyped-def]
    base = {
        "cluster_status": cluster_status({"pve1": True, "pve2": True, "pve3": True}),
        "resources": [node_row("pve1"), node_row("pve2"), node_row("pve3"), guest],
        "storage_config": STORAGES,
        "configs": {guest["vmid"]: config},
        "node_status": {"pve1": AMD, "pve2": AMD, "pve3": INTEL},
    }
    base.update(kw)
    return data(**base)


def modes(m):  # type: ignore[no-untyped-def]
    return {n: t.mode for t in m.targets for n in t.nodes}


def codes(m):  # type: ignore[no-untyped-def]
    return sorted({r.code for r in m.reasons} | {r.code for t in m.targets for r in t.reasons})


def test_shared_storage_vm_moves_live_everywhere() -> None:
    m = assess(_data(guest_row(100, "pve1"), qemu_config("web")), 100)
    assert m.verdict == "live" and modes(m) == {"pve2": "live", "pve3": "live"} and codes(m) == []
    cpu_host = assess(_data(guest_row(100, "pve1"), qemu_config("web", cpu="host")), 100)
    assert [t.nodes for t in cpu_host.targets] == [["pve2"], ["pve3"]]  # grouped only where it matters
    assert [t.nodes for t in m.targets] == [["pve2", "pve3"]]


def test_stopped_vm_and_template_move_offline() -> None:
    assert assess(_data(guest_row(100, "pve1", status="stopped"), qemu_config("a")), 100).verdict == "offline"
    tpl = assess(_data(guest_row(9000, "pve1", status="stopped", template=True), qemu_config("t", template=1)), 9000)
    assert tpl.verdict == "offline" and "MIGRATE_TEMPLATE" in codes(tpl)


def test_lock_blocks() -> None:
    m = assess(_data(guest_row(100, "pve1", lock="backup"), qemu_config("a", lock="backup")), 100)
    assert m.verdict == "blocked" and [r.code for r in m.blocking] == ["MIGRATE_LOCKED"]


def test_passthrough_blocks_but_mapped_usb_spice_and_serial_socket_do_not_pin() -> None:
    m = assess(_data(guest_row(100, "pve1"), qemu_config("gpu", hostpci0="0000:41:00.0,pcie=1")), 100)
    assert m.verdict == "blocked" and m.blocking[0].code == "MIGRATE_PASSTHROUGH"
    ok = assess(_data(guest_row(100, "pve1"), qemu_config("a", usb0="spice", serial0="socket")), 100)
    assert ok.verdict == "live"
    mapped = assess(_data(guest_row(100, "pve1", status="stopped"), qemu_config("a", hostpci0="mapping=gpu")), 100)
    assert mapped.verdict == "blocked" and mapped.blocking[0].code == "MIGRATE_NOT_PROVABLE"  # no mapping config


def test_local_iso_blocks_shared_iso_does_not() -> None:
    local = qemu_config("a", ide2="local:iso/debian.iso,media=cdrom")
    assert assess(_data(guest_row(100, "pve1"), local), 100).blocking[0].code == "MIGRATE_LOCAL_CDROM"
    host = qemu_config("a", ide2="cdrom,media=cdrom")
    assert assess(_data(guest_row(100, "pve1"), host), 100).blocking[0].code == "MIGRATE_LOCAL_CDROM"
    shared = qemu_config("a", ide2="nfs-iso:iso/debian.iso,media=cdrom")
    assert assess(_data(guest_row(100, "pve1"), shared), 100).verdict == "live"
    empty = qemu_config("a", ide2="none,media=cdrom")
    assert assess(_data(guest_row(100, "pve1"), empty), 100).verdict == "live"


def test_local_disks_are_copied_unless_unsupported() -> None:
    m = assess(_data(guest_row(100, "pve1"), qemu_config("a", scsi0="local-lvm:vm-100-disk-0,size=40G")), 100)
    assert m.verdict == "live" and m.local_disk_bytes == 40 * 1024**3
    assert [r.code for r in m.reasons] == ["MIGRATE_LOCAL_DISK"] and "with-local-disks" in m.reasons[0].detail
    iscsi = assess(_data(guest_row(100, "pve1"), qemu_config("a", scsi0="iscsi-lun:0.0.1.scsi-xyz,size=1T")), 100)
    assert iscsi.verdict == "live"  # iscsidirect is shared
    raw = assess(_data(guest_row(100, "pve1"), qemu_config("a", scsi1="/dev/sdb,size=1T")), 100)
    assert raw.blocking[0].code == "MIGRATE_LOCAL_DISK_UNSUPPORTED"
    snap = assess(
        _data(guest_row(100, "pve1"), qemu_config("a", scsi0="local-lvm:vm-100-disk-0,size=8G", parent="pre")), 100
    )
    assert snap.blocking[0].code == "MIGRATE_NOT_PROVABLE" and "snapshot" in snap.blocking[0].detail
    zfs = assess(
        _data(guest_row(100, "pve1", status="stopped"), qemu_config("a", scsi0="local-zfs:vm-100-disk-0", parent="p")),
        100,
    )
    assert zfs.verdict == "offline"  # zfs snapshots migrate offline


def test_storage_availability_is_per_target() -> None:
    m = assess(_data(guest_row(100, "pve1"), qemu_config("a", scsi0="local-zfs:vm-100-disk-0,size=8G")), 100)
    assert modes(m) == {"pve2": None, "pve3": "live"} and m.verdict == "live"
    assert m.target("pve2").reasons[0].code == "MIGRATE_STORAGE_UNAVAILABLE"  # type: ignore[union-attr]
    disabled = assess(_data(guest_row(100, "pve1"), qemu_config("a", scsi0="old:100/vm-100-disk-0.qcow2,size=8G")), 100)
    assert disabled.verdict == "blocked"


def test_cpu_host_only_between_identical_models_and_only_when_running() -> None:
    m = assess(_data(guest_row(100, "pve1"), qemu_config("a", cpu="host")), 100)
    assert modes(m) == {"pve2": "live", "pve3": None}
    assert m.target("pve3").reasons[0].code == "MIGRATE_CPU_HOST"  # type: ignore[union-attr]
    stopped = assess(_data(guest_row(100, "pve1", status="stopped"), qemu_config("a", cpu="host")), 100)
    assert modes(stopped) == {"pve2": "offline", "pve3": "offline"}
    unknown = assess(_data(guest_row(100, "pve1"), qemu_config("a", cpu="host"), node_status={}), 100)
    assert unknown.verdict == "blocked"  # CPU models not known: not provable


def test_containers_restart_bind_mounts_and_devices() -> None:
    running = guest_row(200, "pve1", gtype="lxc")
    m = assess(_data(running, lxc_config("ct")), 200)
    assert m.verdict == "blocked" and m.blocking[0].code == "MIGRATE_RESTART_REQUIRED"
    assert assess(_data(running, lxc_config("ct")), 200, allow_downtime=True).verdict == "restart"
    bind = assess(_data(running, lxc_config("ct", mp0="/srv/share,mp=/share")), 200, allow_downtime=True)
    assert bind.blocking[0].code == "MIGRATE_BIND_MOUNT"
    shared_bind = assess(
        _data(running, lxc_config("ct", mp0="/srv/share,mp=/share,shared=1")), 200, allow_downtime=True
    )
    assert shared_bind.verdict == "restart"
    dev = assess(_data(running, lxc_config("ct", dev0="/dev/ttyUSB0")), 200, allow_downtime=True)
    assert dev.blocking[0].code == "MIGRATE_CT_DEVICE"
    stopped = assess(_data(guest_row(200, "pve1", gtype="lxc", status="stopped"), lxc_config("ct")), 200)
    assert stopped.verdict == "offline"


def test_replication_constraints() -> None:
    jobs = [{"id": "100-0", "guest": 100, "target": "pve3", "type": "local", "schedule": "*/15"}]
    m = assess(_data(guest_row(100, "pve1"), qemu_config("a"), replication_jobs=jobs), 100)
    assert modes(m) == {"pve2": None, "pve3": "live"}
    removal = [dict(jobs[0], remove_job="full")]
    assert assess(_data(guest_row(100, "pve1"), qemu_config("a"), replication_jobs=removal), 100).verdict == "blocked"


def test_target_eligibility() -> None:
    d = _data(guest_row(100, "pve1"), qemu_config("a"))
    d.resources[2] = node_row("pve2", online=False)
    d.cluster_status = cluster_status({"pve1": True, "pve2": False, "pve3": True})
    d.ha_status = [{"id": "lrm:pve3", "type": "lrm", "node": "pve3", "status": "pve3 (maintenance mode, Tue ...)"}]
    ok, excluded = eligible_targets(d, "pve1")
    assert ok == [] and excluded == {"pve2": "offline", "pve3": "in HA maintenance mode"}
    m = assess(d, 100)
    assert m.verdict == "blocked" and m.blocking[0].code == "MIGRATE_NO_TARGET"
    assert assess(_data(guest_row(100, "pve1"), qemu_config("a")), 100, allowed=["pve3"]).targets[0].nodes == ["pve3"]
    shared = _data(guest_row(100, "pve1"), qemu_config("a"))  # restrictions are part of what verdicts share
    assert assess(shared, 100, allowed=["pve2"]).movable_to() == ["pve2"]
    assert assess(shared, 100, allowed=[]).blocking[0].code == "MIGRATE_NO_TARGET"
    assert assess(shared, 100, denied=["pve2"]).movable_to() == ["pve3"]
    assert assess(shared, 100).movable_to() == ["pve2", "pve3"]


def test_missing_config_or_unknown_state_is_not_provable() -> None:
    d = _data(guest_row(100, "pve1"), qemu_config("a"))
    d.configs = {}
    assert assess(d, 100).blocking[0].code == "MIGRATE_NOT_PROVABLE"
    unknown = assess(_data(guest_row(100, "pve1", status="unknown"), qemu_config("a")), 100)
    assert unknown.blocking[0].code == "MIGRATE_NOT_PROVABLE"


def test_pve_precondition_cross_check_stricter_wins() -> None:
    pre = {
        "running": 1,
        "local_resources": ["usb0"],
        "local_disks": [],
        "allowed_nodes": ["pve2", "pve3"],
        "not_allowed_nodes": {"pve2": {}, "pve3": {"unavailable_storages": ["ceph-vm"]}},
        "mapped-resources": [],
        "mapped-resource-info": {},
        "has-dbus-vmstate": 1,
    }
    m = assess(_data(guest_row(100, "pve1"), qemu_config("a"), preconditions={100: pre}), 100)
    assert m.verdict == "blocked"
    assert any(r.code == "MIGRATE_PVE_DISAGREES" and r.keys == ["usb0"] for r in m.reasons)
    pre_ok = dict(pre, local_resources=[], not_allowed_nodes={"pve2": {}, "pve3": {"unavailable_storages": ["x"]}})
    m2 = assess(_data(guest_row(100, "pve1"), qemu_config("a"), preconditions={100: pre_ok}), 100)
    assert modes(m2) == {"pve2": "live", "pve3": None}
    mapped = dict(
        pre_ok,
        **{
            "mapped-resources": ["hostpci0"],
            "mapped-resource-info": {"hostpci0": {"name": "gpu", "live-migration": 1}},
            "not_allowed_nodes": {"pve2": {}, "pve3": {"unavailable-resources": ["gpu"]}},
        },
    )
    m3 = assess(
        _data(guest_row(100, "pve1"), qemu_config("a", hostpci0="mapping=gpu"), preconditions={100: mapped}), 100
    )
    assert modes(m3) == {"pve2": "live", "pve3": None}


def test_findings_capability_view_and_ha() -> None:
    d = _data(guest_row(100, "pve1"), qemu_config("a", cpu="host"))
    found, verdicts = analyze_migratability(d)
    assert [f.code for f in found] == ["MIGRATE_CPU_HOST"] and verdicts[0].verdict == "live"
    ha = _data(
        guest_row(101, "pve1"),
        qemu_config("db", scsi0="local-lvm:vm-101-disk-0,size=8G"),
        ha_resources=[{"sid": "vm:101", "type": "vm", "state": "started"}],
    )
    found, _ = analyze_migratability(ha)
    assert [f.code for f in found] == ["HA_GUEST_NOT_MIGRATABLE"]
    assert "without replication" in found[0].message


def test_an_ha_guest_counts_as_replicated_only_for_the_disks_its_job_copies() -> None:
    """QemuConfig.pm get_replicatable_volumes skips replicate=0 and needs the replicate feature (zfspool);
    only an enabled job not marked for removal keeps a copy on the target (Replication.pm replicate)."""
    disks = {
        "scsi0": "local-zfs:vm-101-disk-0,size=8G",
        "scsi1": "local-zfs:vm-101-disk-1,size=8G,replicate=0",
        "scsi2": "ceph-vm:vm-101-disk-2,size=8G",
    }
    job = {"id": "101-0", "guest": 101, "target": "pve3", "type": "local"}
    ha = [{"sid": "vm:101", "type": "vm", "state": "started"}]

    def problems(config: dict[str, str], jobs: list[dict[str, object]]) -> list[str]:
        d = _data(guest_row(101, "pve1"), qemu_config("db", **config), ha_resources=ha, replication_jobs=jobs)
        return [f.message for f in analyze_migratability(d)[0] if f.code == "HA_GUEST_NOT_MIGRATABLE"]

    (found,) = problems(disks, [job])
    assert "without replication (scsi1:" in found and "scsi0" not in found and "scsi2" not in found
    assert problems({**disks, "scsi1": "local-zfs:vm-101-disk-1,size=8G"}, [job]) == []
    (lvm,) = problems({"scsi0": "local-lvm:vm-101-disk-0,size=8G"}, [job])  # no replicate feature on lvmthin
    assert "(scsi0:" in lvm
    for idle in ({**job, "disable": 1}, {**job, "remove_job": "full"}):
        (none,) = problems({"scsi0": "local-zfs:vm-101-disk-0,size=8G"}, [idle])
        assert "local disk without replication: a failover" in none


def test_guests_alike_share_a_verdict_but_not_what_sets_them_apart() -> None:
    """Verdicts are shared between guests in the same situation; identity, local sizes and locks are not."""
    rows = [
        guest_row(101, "pve1", name="a"),
        guest_row(102, "pve1", name="b"),  # same situation as 101: same answer, own name
        guest_row(103, "pve1", name="c"),  # a bigger local disk: its own copy size
        guest_row(104, "pve1", name="d", lock="backup"),
        guest_row(105, "pve2", name="e"),  # another source node: other targets
    ]
    local = "local-lvm:vm-{}-disk-0,size={}G"
    configs = {
        101: qemu_config("a", scsi0=local.format(101, 32)),
        102: qemu_config("b", scsi0=local.format(102, 32)),
        103: qemu_config("c", scsi0=local.format(103, 64)),
        104: qemu_config("d", scsi0=local.format(104, 32), lock="backup"),
        105: qemu_config("e", scsi0=local.format(105, 32)),
    }
    d = _data(rows[0], configs[101], resources=[node_row("pve1"), node_row("pve2"), node_row("pve3"), *rows])
    d.configs = configs
    findings, verdicts = analyze_migratability(d)
    by_vmid = {m.vmid: m for m in verdicts}
    assert by_vmid[101].reasons is by_vmid[102].reasons  # shared, read-only
    assert (by_vmid[101].name, by_vmid[102].name) == ("a", "b")
    assert (by_vmid[101].local_disk_bytes, by_vmid[103].local_disk_bytes) == (32 * 1024**3, 64 * 1024**3)
    assert by_vmid[104].verdict == "blocked" and by_vmid[101].verdict == "live"
    assert by_vmid[101].movable_to() == ["pve2", "pve3"] and by_vmid[105].movable_to() == ["pve1", "pve3"]
    messages = {(f.subject.id, f.code): f.message for f in findings}
    assert messages[("101", "MIGRATE_LOCAL_DISK")].startswith("101 (a): local disks scsi0 (local-lvm)")
    assert messages[("102", "MIGRATE_LOCAL_DISK")].startswith("102 (b): local disks scsi0 (local-lvm)")
    assert "64 GiB" in messages[("103", "MIGRATE_LOCAL_DISK")] and "32 GiB" in messages[("101", "MIGRATE_LOCAL_DISK")]
    assert messages[("104", "MIGRATE_LOCKED")] == "104 (d) cannot migrate: config lock 'backup'"
    only_findings, none = analyze_migratability(d, verdicts=False)  # the health check's path: same findings
    assert none == [] and [f.model_dump() for f in only_findings] == [f.model_dump() for f in findings]


def test_ha_membership_follows_the_guest_type_and_ignores_ignored() -> None:
    rows = [guest_row(101, "pve1"), guest_row(102, "pve1", gtype="lxc"), guest_row(103, "pve1")]
    d = _data(
        rows[0],
        qemu_config("a"),
        resources=[node_row("pve1"), *rows],
        ha_resources=[
            {"sid": "ct:101", "state": "started"},  # 101 is a VM: a ct: sid does not manage it
            {"sid": "ct:102", "state": "started"},
            {"sid": "vm:103", "state": "ignored"},
            {"sid": "vm:0104", "state": "started"},  # not PVE's spelling of a sid
            {"sid": "vm:²", "state": "started"},  # not a number int() takes: skipped
            {"sid": "vm:105", "state": "started"},  # no such guest: a VM sid still counts
        ],
    )
    assert [v for v in (101, 102, 103, 104, 105) if d.ha_managed(v) is not None] == [102, 105]


def test_health_wording_shared_across_nodes_matches_per_guest_verdicts() -> None:
    """The health path words alike guests on different nodes once; each finding still names its own node."""
    local = "local-lvm:vm-{}-disk-0,size=32G"
    zfs = "local-zfs:vm-{}-disk-0,size=8G"  # local-zfs exists on pve1 and pve3 only: targets depend on the node
    guests = {
        101: ("pve1", {}, local),
        102: ("pve2", {}, local),
        103: ("pve1", {"lock": "backup"}, local),
        104: ("pve3", {"lock": "backup"}, local),
        105: ("pve1", {}, zfs),
        106: ("pve3", {}, zfs),
        107: ("pve1", {}, local),  # HA-managed, local disk without replication
        108: ("pve2", {}, local),  # HA-managed
        109: ("pve2", {"cpu": "host"}, "ceph-vm:vm-{}-disk-0,size=8G"),  # pve3 has another CPU model
        110: ("pve3", {"cpu": "host"}, "ceph-vm:vm-{}-disk-0,size=8G"),
    }
    rows = [guest_row(v, node, name=f"g{v}", lock=extra.get("lock")) for v, (node, extra, _) in guests.items()]
    configs = {v: qemu_config(f"g{v}", scsi0=disk.format(v), **extra) for v, (_, extra, disk) in guests.items()}

    def snapshot():  # type: ignore[no-untyped-def]
        d = _data(
            rows[0],
            configs[101],
            resources=[node_row("pve1"), node_row("pve2"), node_row("pve3"), *rows],
            ha_resources=[{"sid": "vm:107", "state": "started"}, {"sid": "vm:108", "state": "started"}],
        )
        d.configs = configs
        return d

    with_verdicts, _ = analyze_migratability(snapshot())
    health, _ = analyze_migratability(snapshot(), verdicts=False)
    assert [f.model_dump() for f in health] == [f.model_dump() for f in with_verdicts]
    codes_by_guest = {(f.subject.id, f.code) for f in health}
    assert {("103", "MIGRATE_LOCKED"), ("104", "MIGRATE_LOCKED"), ("107", "HA_GUEST_NOT_MIGRATABLE")} <= codes_by_guest
    assert {("105", "MIGRATE_STORAGE_UNAVAILABLE"), ("109", "MIGRATE_CPU_HOST")} <= codes_by_guest
    for f in health:
        if "node" in f.evidence:
            assert f.evidence["node"] == guests[int(f.subject.id)][0], f


def test_shared_flags_answer_as_storage_shared_for_every_storage() -> None:
    """The per-volume loops read shared_flags; it must say what storage_shared says, an unknown storage not shared."""
    from pve_steward.analysis.migration.storage import shared_flags, storage_shared

    d = _data(guest_row(100, "pve1"), qemu_config("web"))
    d.storage_config.append({**storage_cfg("lvm-shared", "lvm"), "shared": 1})
    flags = shared_flags(d)
    assert flags == {s: storage_shared(d, s) for s in d.storage_defs}
    assert flags["ceph-vm"] and flags["lvm-shared"] and not flags["local-lvm"] and not flags["local"]
    assert "nowhere" not in flags and not storage_shared(d, "nowhere")


def test_running_containers_share_one_restart_finding_per_node() -> None:
    """PVE moves every running container by restart: one finding per node lists them, the verdicts keep it per
    guest, and a running VM that can only move offline still gets its own (design record 261204-42)."""
    rows = [
        guest_row(201, "pve1", gtype="lxc", name="c1"),
        guest_row(202, "pve1", gtype="lxc", name="c2"),
        guest_row(203, "pve2", gtype="lxc", name="c3"),
        guest_row(204, "pve2", gtype="lxc", name="c4", status="stopped"),  # moves offline: no restart
        guest_row(205, "pve2", gtype="lxc", name="c5"),  # HA-managed: HA relocates it, as before
        guest_row(206, "pve1", name="sev"),  # a running VM that PVE will not move live
        guest_row(207, "pve1", name="web"),  # moves live
    ]
    configs = {v: lxc_config(f"c{v - 200}", rootfs=f"ceph-vm:vm-{v}-disk-0,size=8G") for v in range(201, 206)}
    configs[206] = qemu_config("sev", **{"amd-sev": "type=std"}, scsi0="ceph-vm:vm-206-disk-0,size=8G")
    configs[207] = qemu_config("web", scsi0="ceph-vm:vm-207-disk-0,size=8G")

    def snapshot():  # type: ignore[no-untyped-def]
        d = _data(
            rows[0],
            configs[201],
            resources=[node_row("pve1"), node_row("pve2"), node_row("pve3"), *rows],
            ha_resources=[{"sid": "ct:205", "state": "started"}],
        )
        d.configs = configs
        return d

    findings, verdicts = analyze_migratability(snapshot())
    restarts = [f for f in findings if f.code == "MIGRATE_RESTART_REQUIRED"]
    by_node = {f.subject.id: f for f in restarts if f.subject.kind == "node"}
    assert sorted(by_node) == ["pve1", "pve2"]
    assert by_node["pve1"].evidence == {"vmids": [201, 202], "count": 2, "verdict": "restart"}
    assert by_node["pve2"].evidence["vmids"] == [203]
    assert by_node["pve1"].message.startswith("2 running container(s) on pve1 move only by restart migration")
    per_guest = [f for f in restarts if f.subject.kind == "guest"]
    assert [(f.subject.id, f.message.split(":")[0]) for f in per_guest] == [("206", "206 (sev)")]
    assert "cannot move live" in per_guest[0].message
    verdict_of = {m.vmid: m for m in verdicts}
    assert {v for v, m in verdict_of.items() if m.verdict == "restart"} == {201, 202, 203, 205}
    assert all("MIGRATE_RESTART_REQUIRED" in codes(verdict_of[v]) for v in (201, 202, 203))
    health, _ = analyze_migratability(snapshot(), verdicts=False)
    assert [f.model_dump() for f in health] == [f.model_dump() for f in findings]
