"""Duplicate IP addresses and stopped onboot guests that will clash (issue 41 item 3), on configs shaped as
qemu-server and pve-container answer them."""

from __future__ import annotations

from pve_steward.analysis.checks.guests_common import duplicate_addresses
from pve_steward.analysis.cluster import analyze_ha
from pve_steward.analysis.guestaddr import addresses, segment
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import cluster_status, data, guest_row, lxc_config, node_row, qemu_config

T = Thresholds()


def _d(guests: list[tuple[dict, dict]], **kw: object):  # type: ignore[no-untyped-def,type-arg]
    return data(
        cluster_status=cluster_status({"a": True, "b": True}),
        resources=[node_row("a"), node_row("b")] + [g for g, _ in guests],
        configs={g["vmid"]: c for g, c in guests},
        **kw,
    )


def _vm(vmid: int, node: str = "a", status: str = "running", **cfg: object) -> tuple[dict, dict]:  # type: ignore[type-arg]
    cfg.setdefault("net0", f"virtio=BC:24:11:00:00:{vmid % 100:02X},bridge=vmbr0")
    return guest_row(vmid, node, status=status), qemu_config(f"vm{vmid}", **cfg)


def _ct(vmid: int, net0: str, node: str = "b", status: str = "running", **cfg: object) -> tuple[dict, dict]:  # type: ignore[type-arg]
    return guest_row(vmid, node, gtype="lxc", status=status), lxc_config(f"ct{vmid}", net0=net0, **cfg)


def test_addresses_as_cloud_init_and_containers_configure_them() -> None:
    guests = [
        _vm(100, ipconfig0="ip=10.0.0.5/24,gw=10.0.0.1,ip6=2001:db8::5/64", ipconfig1="ip=dhcp,ip6=auto"),
        _ct(200, "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,ip=10.0.0.6/24,ip6=fe80::1/64,tag=5"),
        _ct(201, "name=eth0,bridge=vmbr0,ip=manual"),
    ]
    d = _d(guests)
    assert set(addresses(d, 100)) == {
        ("mac", "BC:24:11:00:00:00", "net0"),
        ("ip", "10.0.0.5", "net0"),
        ("ip", "2001:db8::5", "net0"),
    }
    assert set(addresses(d, 200)) == {("mac", "BC:24:11:AA:BB:CC", "net0"), ("ip", "10.0.0.6", "net0")}  # no fe80::
    assert segment(d.configs[200], "net0") == ("vmbr0", "5") and segment(d.configs[100], "net0") == ("vmbr0", "")
    assert [a.kind for a in addresses(d, 201)] == []
    # a config read apart (the planner's running guests): the same answer without the parsed one
    assert addresses(d, 999, d.configs[100]) == addresses(d, 100)


def test_duplicate_ip_names_both_guests_and_is_critical_when_both_run() -> None:
    guests = [
        _vm(100, ipconfig0="ip=10.0.0.5/24"),
        _ct(200, "name=eth0,bridge=vmbr0,ip=10.0.0.5/16"),  # another prefix, the same address
        _vm(101, status="stopped", onboot=0, ipconfig0="ip=10.0.0.9/24"),
        _vm(102, ipconfig0="ip=10.0.0.9/24"),
        _vm(103, ipconfig0="ip=127.0.0.1/8"),
        _vm(104, ipconfig0="ip=127.0.0.1/8"),
    ]
    found = duplicate_addresses(_d(guests), T)
    ip = {
        (f.subject.id, f.severity.value, tuple(f.evidence["also_used_by"]))
        for f in found
        if f.code == "GUEST_IP_DUPLICATE"
    }
    assert ip == {
        ("100", "critical", (200,)),
        ("200", "critical", (100,)),
        ("101", "warning", (102,)),
        ("102", "warning", (101,)),
    }
    text = next(f.message for f in found if f.subject.id == "100")
    assert "10.0.0.5" in text and "200 (guest200)" in text
    assert not [f for f in found if f.code == "GUEST_ONBOOT_ADDRESS_CLASH"]  # 101 has onboot=0


def test_other_vlan_is_another_network_and_templates_are_left_out() -> None:
    guests = [
        _vm(100, ipconfig0="ip=10.0.0.5/24"),
        _ct(200, "name=eth0,bridge=vmbr0,tag=20,ip=10.0.0.5/24"),
        _vm(101, ipconfig0="ip=10.0.0.5/24", template=1),
    ]
    guests[2][0]["template"] = 1
    assert duplicate_addresses(_d(guests), T) == []


def test_stopped_onboot_guest_whose_ip_or_mac_is_in_use_is_named() -> None:
    guests = [
        _vm(100, ipconfig0="ip=10.0.0.5/24"),
        _vm(101, status="stopped", ipconfig0="ip=10.0.0.5/24"),  # onboot=1 in the fixture's config
        _vm(102, status="stopped", net0="virtio=BC:24:11:00:00:00,bridge=vmbr0"),  # 100's MAC
    ]
    found = duplicate_addresses(_d(guests), T)
    clashes = {
        (f.subject.id, f.evidence["kind"], f.evidence["address"])
        for f in found
        if f.code == "GUEST_ONBOOT_ADDRESS_CLASH"
    }
    assert clashes == {("101", "ip", "10.0.0.5"), ("102", "mac", "BC:24:11:00:00:00")}
    assert "next boot" in next(f.message for f in found if f.code == "GUEST_ONBOOT_ADDRESS_CLASH")
    # an HA guest is started by HA, not at boot (pve-manager startall skips it)
    ha = duplicate_addresses(_d(guests, ha_resources=[{"sid": "vm:101", "state": "started"}]), T)
    assert {f.subject.id for f in ha if f.code == "GUEST_ONBOOT_ADDRESS_CLASH"} == {"102"}


def _nic(name: str, mac: str, *ips: str) -> dict:  # type: ignore[type-arg]
    """A row of QGA guest-network-get-interfaces, as qemu-server passes it on."""
    return {
        "name": name,
        "hardware-address": mac,
        "ip-addresses": [
            {"ip-address-type": "ipv6" if ":" in ip else "ipv4", "ip-address": ip, "prefix": 24} for ip in ips
        ],
    }


def test_addresses_a_running_vms_agent_reports_clash_with_configured_ones() -> None:
    """An address set inside the guest's OS (no cloud-init) is seen through its agent, on the netN whose MAC the
    interface has; interfaces PVE did not give the guest (docker0, a tunnel) and link-local ones are left out."""
    guests = [
        _vm(100, ipconfig0="ip=10.0.0.5/24"),
        _vm(101),  # configures nothing: its OS holds 10.0.0.5 on eth0 (net0's MAC) and docker0's 172.17.0.1
        _vm(102),  # docker0 too: no clash with 101's
        _vm(103, status="stopped", ipconfig0="ip=10.0.0.7/24"),  # onboot=1: starts at the next boot
        _vm(104),  # holds 10.0.0.7, which 103 will take at the next boot
        _vm(105, net0="virtio=BC:24:11:00:00:05,bridge=vmbr0,tag=9"),  # 10.0.0.5 on VLAN 9: another network
    ]
    d = _d(guests)
    d.agent_interfaces = {
        100: [_nic("eth0", "bc:24:11:00:00:00", "10.0.0.5", "fe80::be24:11ff:fe00:0%eth0")],
        101: [
            _nic("lo", "00:00:00:00:00:00", "127.0.0.1"),
            _nic("eth0", "bc:24:11:00:00:01", "10.0.0.5", "fe80::1"),
            _nic("docker0", "02:42:ac:11:00:01", "172.17.0.1"),
        ],
        102: [_nic("eth0", "bc:24:11:00:00:02", "10.0.0.8"), _nic("docker0", "02:42:ac:11:00:02", "172.17.0.1")],
        103: [_nic("eth0", "bc:24:11:00:00:03", "10.0.0.99")],  # stale: the VM is stopped, its agent not asked
        104: [_nic("eth0", "bc:24:11:00:00:04", "10.0.0.7")],
        105: [_nic("eth0", "bc:24:11:00:00:05", "10.0.0.5")],
    }
    found = duplicate_addresses(d, T)
    ip = {
        (f.subject.id, f.severity.value, f.evidence["source"], tuple(f.evidence["also_used_by"]))
        for f in found
        if f.code == "GUEST_IP_DUPLICATE"
    }
    assert ip == {
        ("100", "critical", "config", (101,)),
        ("101", "critical", "agent", (100,)),
        ("103", "warning", "config", (104,)),
        ("104", "warning", "agent", (103,)),
    }
    assert "holds IP 10.0.0.5 on net0 (its guest agent reports it)" in next(
        f.message for f in found if f.subject.id == "101"
    )
    clash = [(f.subject.id, f.evidence["running"]) for f in found if f.code == "GUEST_ONBOOT_ADDRESS_CLASH"]
    assert clash == [("103", [104])]
    # the same address in the config and from the agent is one holder, not a duplicate of itself
    d.agent_interfaces = {100: [_nic("eth0", "bc:24:11:00:00:00", "10.0.0.5")]}
    assert duplicate_addresses(d, T) == []


def test_lrm_time_drift_is_its_own_finding() -> None:
    """pve-ha-manager API2/HA/Status.pm: a status stamped more than 2 s ahead reads 'detected time drift!'."""
    rows = [
        {"type": "service", "sid": "vm:100", "node": "a", "crm_state": "started", "state": "started"},
        {"type": "master", "node": "a", "status": "a (active, Tue Dec  1 10:00:00 2026)"},
        {"type": "lrm", "node": "a", "status": "a (detected time drift!, watchdog standby, Tue Dec  1 10:00:00 2026)"},
        {"type": "lrm", "node": "b", "status": "b (unable to read lrm status)"},
    ]
    d = _d([_vm(100)], ha_status=rows, ha_resources=[{"sid": "vm:100", "state": "started"}])
    found = {(f.code, f.subject.id) for f in analyze_ha(d, T)}
    assert {("HA_LRM_TIME_DRIFT", "a"), ("HA_LRM_DEAD", "b")} <= found
