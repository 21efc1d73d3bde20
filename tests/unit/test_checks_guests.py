"""The VM and container hygiene checks (analysis/checks/guests_*.py) on configs shaped like PVE's answers.

Each code has a case that raises it and near-miss cases that must not; a well-kept VM and container
raise nothing at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.catalog import checks_in
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from pve_steward.errors import PvePermissionError
from pve_steward.testing import FakeClient
from pve_steward.tools.collect import collect
from tests.unit.pve_fixtures import cluster_status, data, guest_row, lxc_config, node_row, qemu_config

T = Thresholds()
MODULES = ("guests_common", "guests_vm", "guests_lxc")

# what a careful admin's VM and container look like: nothing for these checks to say
GOOD_VM: dict[str, Any] = {
    "ostype": "l26",
    "scsihw": "virtio-scsi-single",
    "agent": "1",
    "protection": 1,
    "machine": "pc-q35-9.2+pve1",
    "ide2": "none,media=cdrom",
}
GOOD_CT: dict[str, Any] = {"protection": 1, "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:02:10,ip=dhcp"}


def _cluster(*guests: tuple[int, str, dict[str, Any]], templates: tuple[int, ...] = (), **extra: Any) -> ClusterData:
    return data(
        cluster_status=cluster_status({"pve1": True}),
        resources=[node_row("pve1")] + [guest_row(v, "pve1", gtype, template=v in templates) for v, gtype, _ in guests],
        configs={v: cfg for v, _, cfg in guests},
        **extra,
    )


def _vm(vmid: int = 100, **over: Any) -> tuple[int, str, dict[str, Any]]:
    cfg = {**GOOD_VM, **over}
    return (vmid, "qemu", qemu_config(f"vm{vmid}", **cfg))


def _ct(vmid: int = 200, **over: Any) -> tuple[int, str, dict[str, Any]]:
    name = over.pop("hostname", f"ct{vmid}")
    cfg = lxc_config("", **{**GOOD_CT, **over})
    cfg.pop("hostname")
    if name is not None:
        cfg["hostname"] = name
    return (vmid, "lxc", cfg)


def _run(d: ClusterData, t: Thresholds = T) -> list[Finding]:
    out: list[Finding] = []
    for c in checks_in(["guests"]):
        if c.name.split(".")[0] in MODULES:
            out += c.func(d, t)
    return out


def _codes(d: ClusterData, t: Thresholds = T) -> list[tuple[str, str]]:
    return sorted((f.code, f.subject.id) for f in _run(d, t))


def test_a_well_kept_vm_and_container_raise_nothing() -> None:
    assert _codes(_cluster(_vm(), _ct())) == []


# (code, guest, the evidence that proves it)
RAISED = [
    ("GUEST_OSTYPE_UNSET", _vm(ostype=None), {"ostype": None}),
    ("GUEST_OS_EOL", _vm(ostype="win7"), {"ostype": "win7"}),
    ("GUEST_OS_EOL", _vm(ostype="l24"), {"ostype": "l24"}),
    ("GUEST_AGENT_NOT_CONFIGURED", _vm(agent="enabled=0,fstrim_cloned_disks=1"), {"agent": False}),
    ("GUEST_AGENT_NOT_CONFIGURED", _vm(agent=None), {"agent": False}),
    ("GUEST_SCSI_CONTROLLER_NOT_VIRTIO", _vm(scsihw=None), {"scsihw": None}),
    ("GUEST_SCSI_CONTROLLER_NOT_VIRTIO", _vm(scsihw="megasas"), {"scsihw": "megasas"}),
    (
        "GUEST_DISK_BUS_SLOW",
        _vm(sata1="local-lvm:vm-100-disk-1,size=8G"),
        {"disks": {"sata1": "local-lvm:vm-100-disk-1"}},
    ),
    ("GUEST_NIC_NOT_VIRTIO", _vm(net1="e1000=BC:24:11:00:00:09,bridge=vmbr1"), {"models": {"net1": "e1000"}}),
    (
        "GUEST_CDROM_MOUNTED",
        _vm(ide2="local:iso/debian-13.iso,media=cdrom,size=700M"),
        {"cdrom": {"ide2": "local:iso/debian-13.iso"}},
    ),
    ("GUEST_CDROM_MOUNTED", _vm(ide2="cdrom,media=cdrom"), {"cdrom": {"ide2": "cdrom"}}),
    (
        "GUEST_CDROM_MOUNTED",
        _vm(ide2="local:iso/ubuntu-24.04-cloudinit-seed.iso,media=cdrom"),
        {"cdrom": {"ide2": "local:iso/ubuntu-24.04-cloudinit-seed.iso"}},
    ),
    ("GUEST_CPU_KVM64", _vm(cpu="kvm64,flags=+aes"), {"cpu": "kvm64,flags=+aes", "effective": "kvm64"}),
    ("GUEST_CPU_KVM64", _vm(cpu=None), {"cpu": None, "effective": "kvm64"}),
    ("GUEST_CPU_HOTPLUG_WINDOWS", _vm(ostype="win10", hotplug="disk,network,cpu"), {"hotplug": "disk,network,cpu"}),
    ("GUEST_BALLOON_DISABLED", _vm(balloon=0), {"balloon": 0}),
    ("GUEST_BALLOON_NO_ROOM", _vm(memory="4096", balloon=4000), {"balloon_mib": 4000, "memory_mib": 4096}),
    ("GUEST_DISK_CACHE_UNSAFE", _vm(scsi1="ceph-vm:vm-100-disk-1,cache=unsafe,size=8G"), {"cache": "unsafe"}),
    (
        "GUEST_DISK_WRITEBACK_NO_BACKUP",
        _vm(scsi1="ceph-vm:vm-100-disk-1,backup=0,cache=writeback,size=8G"),
        {"disks": {"scsi1": "ceph-vm:vm-100-disk-1"}},
    ),
    (
        "GUEST_WIN11_NO_UEFI",
        _vm(ostype="win11", tpmstate0="local-lvm:vm-100-disk-2,size=4M,version=v2.0"),
        {"bios": None},
    ),
    (
        "GUEST_WIN11_NO_TPM",
        _vm(ostype="win11", bios="ovmf", efidisk0="local-lvm:vm-100-disk-1,size=4M"),
        {"tpmstate0": None},
    ),
    ("GUEST_RNG_DEVICE", _vm(rng0="source=/dev/urandom"), {"rng0": "source=/dev/urandom"}),
    ("GUEST_SERIAL_CONSOLE", _vm(serial0="socket"), {"serial": {"serial0": "socket"}}),
    ("GUEST_NO_NETWORK", _vm(net0=None), {"net": None}),
    ("GUEST_DISK_UNUSED", _vm(unused0="ceph-vm:vm-100-disk-7"), {"unused": {"unused0": "ceph-vm:vm-100-disk-7"}}),
    ("GUEST_DISK_UNUSED", _ct(unused0="local-lvm:vm-200-disk-1"), {"unused": {"unused0": "local-lvm:vm-200-disk-1"}}),
    ("CT_PRIVILEGED", _ct(unprivileged=None), {"unprivileged": None}),
    (
        "CT_APPARMOR_UNCONFINED",
        _ct(unprivileged=0, lxc=[["lxc.apparmor.profile", "unconfined"], ["lxc.cgroup2.devices.allow", "a"]]),
        {"lxc.apparmor.profile": "unconfined"},
    ),
    ("CT_NESTING_WITHOUT_KEYCTL", _ct(features="nesting=1"), {"features": "nesting=1"}),
    ("CT_RAW_LXC_CONFIG", _ct(lxc=[["lxc.cgroup2.devices.allow", "c 10:200 rwm"]]), {}),
    ("CT_SWAP_DISABLED", _ct(swap=0), {"swap": 0}),
    ("CT_NO_HOSTNAME", _ct(hostname=None), {"hostname": None}),
]


@pytest.mark.parametrize(("code", "guest", "evidence"), RAISED, ids=[f"{c}-{i}" for i, (c, *_) in enumerate(RAISED)])
def test_each_code_is_raised_with_its_evidence(
    code: str, guest: tuple[int, str, dict[str, Any]], evidence: dict[str, Any]
) -> None:
    found = [f for f in _run(_cluster(guest)) if f.code == code]
    assert len(found) == 1, _codes(_cluster(guest))
    got = found[0]
    assert got.subject.id == str(guest[0]) and got.subject.kind == "guest"
    plain = got.model_dump()["evidence"]
    for key, want in evidence.items():
        assert _unmark(plain[key]) == want, (key, plain[key])
    assert got.remediation  # every code says how to fix it


def _unmark(value: Any) -> Any:
    """Evidence strings come marked as untrusted cluster text: {untrusted, text}."""
    if isinstance(value, dict) and set(value) == {"untrusted", "text"}:
        return value["text"]
    if isinstance(value, dict):
        return {_unmark(k): _unmark(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unmark(v) for v in value]
    return value


# near misses: each must raise nothing
QUIET = [
    ("host cpu is not kvm64", _vm(cpu="host")),
    ("win10 is still supported", _vm(ostype="win10")),
    (
        "windows hotplug without cpu",
        _vm(ostype="win11", bios="ovmf", tpmstate0="x:vm-100-disk-2,size=4M", efidisk0="x:1", hotplug="1"),
    ),
    ("balloon unset keeps the device", _vm(balloon=None)),
    ("balloon 0 with hugepages", _vm(balloon=0, hugepages="1024")),
    ("balloon at exactly 95 %", _vm(memory="4000", balloon=3800)),
    ("lsi controller without scsi drives", _vm(scsihw=None, scsi0=None, virtio0="ceph-vm:vm-100-disk-0,size=32G")),
    ("ide cd-rom is not a slow disk", _vm(ide0="none,media=cdrom")),
    ("cloud-init drive is not a mounted cd-rom", _vm(ide2="ceph-vm:vm-100-cloudinit,media=cdrom")),
    # Drive.pm drive_is_cloudinit: a volume named [vm-N-]cloudinit[.fmt], not any name holding the word
    ("cloud-init drive on a directory storage", _vm(ide2="local:100/vm-100-cloudinit.qcow2,media=cdrom")),
    ("writeback with backup", _vm(scsi1="ceph-vm:vm-100-disk-1,cache=writeback,size=8G")),
    ("template with agent off and no protection", (9000, "qemu", qemu_config("tmpl", template=1, agent="0"))),
    ("privileged without unconfined apparmor keyctl is moot", _ct(unprivileged=0, features="nesting=1")),
    ("nesting with keyctl", _ct(features="keyctl=1,nesting=1")),
    ("swap unset is 512", _ct(swap=None)),
    ("pinned machine with pve suffix", _vm(machine="pc-i440fx-8.1+pve0")),
    # CPUConfig.pm get_default_cpu_type: kvm64 only for x86_64 with KVM (qemu64 without, aarch64's own)
    ("unset cpu of an aarch64 vm is not kvm64", _vm(cpu=None, arch="aarch64")),
    ("unset cpu without kvm is qemu64", _vm(cpu=None, kvm=0)),
]


@pytest.mark.parametrize(("why", "guest"), QUIET, ids=[w for w, _ in QUIET])
def test_near_misses_raise_nothing(why: str, guest: tuple[int, str, dict[str, Any]]) -> None:
    d = _cluster(guest, templates=(9000,))
    expected = [("CT_PRIVILEGED", "200")] if why.startswith("privileged") else []
    assert _codes(d) == expected, why


def test_nesting_under_the_admins_own_seccomp_profile_is_not_judged_for_keyctl() -> None:
    """LXC.pm make_seccomp_config: an explicit lxc.seccomp.profile replaces PVE's rules, keyctl's too."""
    own = _ct(features="nesting=1", lxc=[["lxc.seccomp.profile", "/etc/pve/lxc/allow.seccomp"]])
    assert _codes(_cluster(own)) == [("CT_RAW_LXC_CONFIG", "200")]


def test_template_with_agent_is_flagged_and_templates_skip_guest_checks() -> None:
    d = _cluster((9000, "qemu", qemu_config("tmpl", template=1, agent="1", ostype=None)), templates=(9000,))
    assert _codes(d) == [("GUEST_TEMPLATE_AGENT", "9000")]


def test_duplicate_macs_across_vms_and_containers_but_not_templates() -> None:
    mac = "BC:24:11:AA:BB:CC"
    d = _cluster(
        _vm(100, net0=f"virtio={mac},bridge=vmbr0"),
        _vm(101, net0=f"virtio={mac.lower()},bridge=vmbr0,firewall=1"),
        _ct(200, net0=f"name=eth0,bridge=vmbr0,hwaddr={mac}"),
        (9000, "qemu", qemu_config("tmpl", template=1, net0=f"virtio={mac},bridge=vmbr0")),
        _vm(102, net0="virtio=BC:24:11:00:00:02,bridge=vmbr0"),
        templates=(9000,),
    )
    found = {f.subject.id: _unmark(f.model_dump()["evidence"]) for f in _run(d) if f.code == "GUEST_MAC_DUPLICATE"}
    assert found == {
        "100": {"mac": mac, "device": "net0", "also_used_by": [101, 200]},
        "101": {"mac": mac, "device": "net0", "also_used_by": [100, 200]},
        "200": {"mac": mac, "device": "net0", "also_used_by": [100, 101]},
    }


def test_unique_macs_raise_nothing() -> None:
    d = _cluster(_vm(100), _vm(101, net0="virtio=BC:24:11:00:00:02,bridge=vmbr0"), _ct(200))
    assert [f for f in _run(d) if f.code == "GUEST_MAC_DUPLICATE"] == []


def test_balloon_threshold_is_configurable() -> None:
    d = _cluster(_vm(memory="4096", balloon=3500))  # 85 %
    assert _codes(d) == []
    assert _codes(d, thresholds_from({"balloon_room_pct": 80})) == [("GUEST_BALLOON_NO_ROOM", "100")]


PENDING = [
    {"key": "memory", "value": "4096", "pending": "8192"},
    {"key": "cores", "value": 2},
    {"key": "net1", "delete": 1},
    {"key": "vmstate", "value": "local-lvm:vm-100-state-suspend"},
]


def test_pending_changes_are_reported_with_current_and_pending_values() -> None:
    d = _cluster(_vm(100), _ct(200), pending={100: PENDING, 200: [{"key": "cores", "value": 1}]})
    found = [f for f in _run(d) if f.code == "GUEST_CONFIG_PENDING"]
    assert [f.subject.id for f in found] == ["100"]
    assert _unmark(found[0].model_dump()["evidence"]) == {
        "pending": {
            "memory": {"current": "4096", "pending": "8192", "delete": None},
            "net1": {"current": None, "pending": None, "delete": 1},
        }
    }


def test_no_pending_and_vmstate_alone_raise_nothing() -> None:
    d = _cluster(_vm(100), pending={100: [{"key": "cores", "value": 2}, PENDING[3]]})
    assert [f for f in _run(d) if f.code == "GUEST_CONFIG_PENDING"] == []


def test_a_guest_whose_config_was_not_read_is_not_judged() -> None:
    d = _cluster(_vm(100, ostype=None, agent=None))
    d.configs.pop(100)
    assert _run(d) == []


def test_health_runs_the_guest_checks_beside_the_legacy_ones() -> None:
    d = _cluster(_vm(100, unused0="ceph-vm:vm-100-disk-7"))
    report = diagnose(d, T, ["guests"], limit=None)
    assert ("GUEST_DISK_UNUSED", "100") in {(f.code, f.subject.id) for f in report.findings}


@pytest.mark.anyio
async def test_collector_reads_pending_of_running_guests_up_to_the_cap() -> None:
    """One GET .../pending per running guest, lowest vmids first; past the cap one CHECK_SKIPPED, a 403 too."""
    fake = FakeClient()
    rows = [
        guest_row(100, "pve1"),
        guest_row(101, "pve1", status="stopped"),
        guest_row(102, "pve1"),
        guest_row(103, "pve1"),
    ]
    rows.append(guest_row(200, "pve1", "lxc"))
    fake.on("GET", "/version", {"version": "9.1.2", "release": "9.1"})
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True}))
    fake.on("GET", "/cluster/resources", [node_row("pve1"), *rows])
    fake.on("GET", "/storage", [])
    fake.on("GET", "/cluster/ha/resources", [])
    fake.on("GET", "/nodes/{node}/tasks", [])
    for v in (100, 101, 102, 103):
        fake.on("GET", f"/nodes/pve1/qemu/{v}/config", qemu_config(f"g{v}"))
    fake.on("GET", "/nodes/pve1/lxc/200/config", lxc_config("c"))
    fake.on("GET", "/nodes/pve1/qemu/100/pending", PENDING)
    fake.on("GET", "/nodes/pve1/qemu/102/pending", PvePermissionError("Permission check failed (/vms/102, VM.Audit)"))
    d = await collect(fake, 1_800_000_000.0, ["guests"], pending_probe_limit=2)
    asked = [r for r in fake.requested("GET") if r.endswith("/pending")]
    assert asked == ["GET /nodes/pve1/qemu/100/pending", "GET /nodes/pve1/qemu/102/pending"]
    assert d.pending == {100: PENDING}
    skipped = sorted(m.what for m in d.missing if m.optional)
    assert skipped == [
        "pending changes of 1 guest(s) (optional: needs more privileges)",
        "pending-change reads beyond the first 2 of 4 running guests",
    ]
    untouched = await collect(fake, 1_800_000_000.0, ["guests"])  # a caller that does not ask reads none
    assert untouched.pending == {} and not [m for m in untouched.missing if "pending" in m.what]


def _snap(name: str, vmstate: int = 0, description: str = "") -> dict[str, Any]:
    return {"name": name, "snaptime": 1_799_000_000, "vmstate": vmstate, "description": description}


def test_snapshots_with_ram_and_legacy_autosnap() -> None:
    current = {"name": "current", "digest": "0" * 40, "running": 1, "description": "You are here!"}
    d = _cluster(
        _vm(100, parent="auto"),
        snapshots={
            100: [
                _snap("before-upgrade", vmstate=1),
                _snap("auto", description="eve4pve-autosnap\n"),
                _snap("autonew", description="cv4pve-autosnap"),
                current,
            ]
        },
    )
    found = {f.code: _unmark(f.model_dump()["evidence"]) for f in _run(d)}
    assert found == {
        "GUEST_SNAPSHOT_WITH_RAM": {"snapshots": ["before-upgrade"], "vmstate": 1},
        "GUEST_AUTOSNAP_LEGACY": {"snapshots": ["auto"], "description": "eve4pve-autosnap"},
    }


def test_snapshots_without_ram_by_the_current_tool_raise_nothing() -> None:
    d = _cluster(_vm(100, parent="a"), snapshots={100: [_snap("a", description="cv4pve-autosnap\n")]})
    assert _codes(d) == []


def test_guests_outside_ha_only_where_the_cluster_uses_ha() -> None:
    ha = [{"sid": "vm:100", "state": "started", "type": "vm"}, {"sid": "vm:101", "state": "ignored", "type": "vm"}]
    d = _cluster(_vm(100), _vm(101, net0="virtio=BC:24:11:00:00:02,bridge=vmbr0"), _ct(200), ha_resources=ha)
    found = [f for f in _run(d) if f.code == "GUEST_NOT_HA"]
    assert [(f.subject.kind, _unmark(f.model_dump()["evidence"])) for f in found] == [
        ("cluster", {"vmids": [101, 200], "count": 2, "judged": 3, "ha_resources_in_cluster": 2})
    ]
    assert _codes(_cluster(_vm(100), _ct(200))) == []  # no HA in use: nothing to say


MACHINES = [
    {"id": "pc-q35-10.1", "type": "q35", "version": "10.1"},
    {"id": "pc-i440fx-10.1", "type": "i440fx", "version": "10.1"},
    {"id": "pc-q35-10.0+pve1", "type": "q35", "version": "10.0+pve1", "changes": "Set host_mtu vNIC option"},
    {"id": "pc-q35-9.2+pve1", "type": "q35", "version": "9.2+pve1"},
    {"id": "pc-i440fx-8.1", "type": "i440fx", "version": "8.1"},
]


def test_machine_pinned_behind_the_nodes_qemu() -> None:
    d = _cluster(_vm(100, machine="pc-q35-9.2+pve1,viommu=virtio"), reads={"qemu_machines": {"pve1": MACHINES}})
    found = [f for f in _run(d) if f.code == "GUEST_MACHINE_OUTDATED"]
    assert [_unmark(f.model_dump()["evidence"]) for f in found] == [
        {"machine": "pc-q35-9.2+pve1", "newest_on_node": "pc-q35-10.1"}
    ]


def test_machine_versions_are_judged_against_each_nodes_own_qemu() -> None:
    """Each VM against its own node's list and its own family, however many VMs share a node."""
    older = [{"id": "pc-q35-9.2+pve1"}, {"id": "pc-i440fx-9.0"}, {"id": "pc-q35-8.1"}]
    placed = {100: "pve1", 101: "pve2", 102: "pve1", 103: "pve2", 104: "pve1"}
    pinned = {100: "pc-q35-8.1", 101: "pc-q35-8.1", 102: "pc-i440fx-8.1", 103: "pc-i440fx-8.1", 104: "pc-q35-9.2"}
    d = data(
        cluster_status=cluster_status({"pve1": True, "pve2": True}),
        resources=[node_row("pve1"), node_row("pve2")] + [guest_row(v, n, "qemu") for v, n in placed.items()],
        configs={v: qemu_config(f"vm{v}", **{**GOOD_VM, "machine": m}) for v, m in pinned.items()},
        reads={"qemu_machines": {"pve1": MACHINES, "pve2": older}},
    )
    found = [f for f in _run(d) if f.code == "GUEST_MACHINE_OUTDATED"]
    assert {f.subject.id: _unmark(f.model_dump()["evidence"])["newest_on_node"] for f in found} == {
        "100": "pc-q35-10.1",
        "101": "pc-q35-9.2",
        "102": "pc-i440fx-10.1",
        "103": "pc-i440fx-9.0",
        "104": "pc-q35-10.1",
    }


@pytest.mark.parametrize(
    ("machine", "reads"),
    [
        ("pc-q35-10.1", {"qemu_machines": {"pve1": MACHINES}}),  # already the newest
        ("pc-i440fx-10.1+pve0", {"qemu_machines": {"pve1": MACHINES}}),
        ("pc-q35-8.1", {}),  # the node's list was not read: the collector's gap says so
    ],
)
def test_machine_current_or_unknown_raises_nothing(machine: str, reads: dict[str, Any]) -> None:
    d = _cluster(_vm(100, machine=machine), reads=reads)
    assert [f for f in _run(d) if f.code == "GUEST_MACHINE_OUTDATED"] == []


@pytest.mark.parametrize(
    ("code", "guests", "vmids"),
    [
        ("GUEST_PROTECTION_OFF", [_vm(100, protection=None), _ct(200, protection=0), _vm(101)], [100, 200]),
        (
            "GUEST_MACHINE_UNPINNED",
            [
                _vm(100, machine=None),
                _vm(101, machine="q35,viommu=virtio"),
                _vm(102, machine="pc-8.1.pxe"),
                _ct(),
                # Machine.pm get_vm_machine pins a Windows VM's unversioned machine itself (5.1 or creation-qemu)
                _vm(103, machine=None, ostype="win10"),
                _vm(104, machine="q35", ostype="win11", bios="ovmf", efidisk0="x:1", tpmstate0="x:2,version=v2.0"),
            ],
            [100, 101],
        ),
    ],
)
def test_checks_of_pve_defaults_give_one_finding_for_the_cluster(
    code: str, guests: list[tuple[int, str, dict[str, Any]]], vmids: list[int]
) -> None:
    """Most guests keep these defaults: one finding names them all, not one line per guest."""
    found = [f for f in _run(_cluster(*guests)) if f.code == code]
    assert len(found) == 1 and found[0].subject.kind == "cluster"
    evidence = _unmark(found[0].model_dump()["evidence"])
    assert evidence["vmids"] == vmids and evidence["count"] == len(vmids)


@pytest.mark.parametrize(
    ("value", "gtype"),
    [
        ("virtio=BC:24:11:AA:BB:01,bridge=vmbr0,firewall=1", "qemu"),
        ("e1000=bc:24:11:aa:bb:02,bridge=vmbr0", "qemu"),
        ("model=vmxnet3,macaddr=BC:24:11:AA:BB:03,bridge=vmbr1", "qemu"),
        ("bridge=vmbr0,virtio=BC:24:11:AA:BB:04", "qemu"),
        ("virtio,bridge=vmbr0", "qemu"),
        ("name=eth0,bridge=vmbr0,hwaddr=bc:24:11:aa:bb:05,ip=dhcp,type=veth", "lxc"),
        ("hwaddr=BC:24:11:AA:BB:06,name=eth0,bridge=vmbr0", "lxc"),
        ("name=eth0,bridge=vmbr0,ip=dhcp", "lxc"),
    ],
)
def test_the_nic_fast_path_reads_what_the_general_parser_reads(value: str, gtype: str) -> None:
    """nic() takes a shortcut for ``model=MAC,...`` and ``...,hwaddr=MAC,...``; every form must agree with
    reading the whole property string (qemu-server Network.pm parse_net, pve-container parse_lxc_network)."""
    from pve_steward.pve.guestconfig import NIC_MODELS, nic, parse_property_string

    opts = parse_property_string(value)
    if gtype == "lxc":
        expected: tuple[str | None, str | None] = (None, opts.get("hwaddr", "").upper() or None)
    else:
        model = opts.get("model") or next((k for k in opts if k in NIC_MODELS), None)
        mac = opts.get("macaddr") or next((v for k, v in opts.items() if k in NIC_MODELS and v != "1"), None)
        expected = (model, mac.upper() if mac else None)
    assert nic(value, gtype) == expected


def test_flag_reads_pve_booleans_in_every_form() -> None:
    """0/1 as numbers or text take the short path; anything else is read as text, as before."""
    from pve_steward.analysis.checks.guests_common import flag

    forms = [(None, False), (0, False), (1, True), ("0", False), ("1", True), (" 1", True), ("yes", True)]
    forms += [("On", True), ("true", True), ("false", False), ("", False), (True, True), (False, False)]
    forms += [(2, False), (1.0, False)]
    for value, expected in forms:
        assert flag({"k": value}, "k") is expected, value
    assert flag({}, "k") is False


def test_keys_in_lists_a_configs_devices_in_pves_order() -> None:
    """Network devices and serial ports by their number, whatever order the API sent them in."""
    from pve_steward.analysis.checks.guests_common import SERIAL_KEYS, keys_in
    from pve_steward.pve.guestconfig import NET_KEYS

    raw = {"net10": "x", "serial3": "socket", "memory": "1", "net2": "y", "serial0": "socket", "net0": "z"}
    assert keys_in(raw, NET_KEYS) == ["net0", "net2", "net10"]
    assert keys_in(dict(reversed(raw.items())), SERIAL_KEYS) == ["serial0", "serial3"]
