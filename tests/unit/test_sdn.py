"""SDN checks and the SDN migration rule on fixtures shaped like pve-network's and pve-manager's answers."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.checks.sdn import fabric_neighbors, fabric_status, pending_config, zone_status
from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import cluster_status, data, guest_row, node_row, qemu_config, storage_cfg

NODES = ("pve1", "pve2", "pve3")
AMD = {"cpuinfo": {"model": "AMD EPYC 7302P", "cpus": 32}, "pveversion": "pve-manager/9.1.2/abc"}


def network_zone(node: str, zone: str, status: str, ztype: str = "vxlan") -> dict[str, Any]:
    """A PVE 9.1 /cluster/resources row (pvestatd update_network_status)."""
    return {
        "id": f"network/{node}/zone/{zone}",
        "type": "network",
        "network-type": "zone",
        "network": zone,
        "node": node,
        "status": status,
        "zone-type": ztype,
    }


def sdn_zone(node: str, zone: str, status: str) -> dict[str, Any]:
    """A PVE 8 /cluster/resources row (pvestatd update_sdn_status)."""
    return {"id": f"sdn/{node}/{zone}", "sdn": zone, "node": node, "type": "sdn", "status": status}


def fabric_row(node: str, fabric: str, status: str) -> dict[str, Any]:
    return {
        "id": f"network/{node}/fabric/{fabric}",
        "type": "network",
        "network-type": "fabric",
        "network": fabric,
        "node": node,
        "protocol": "openfabric",
        "status": status,
    }


def _data(extra_rows: list[dict[str, Any]], guests: list[tuple[dict[str, Any], dict[str, Any]]] = (), **reads: Any):  # type: ignore[assignment,no-untyped-def]
    d = data(
        cluster_status=cluster_status(dict.fromkeys(NODES, True)),
        resources=[node_row(n) for n in NODES] + [g for g, _ in guests] + extra_rows,
        storage_config=[storage_cfg("ceph-vm", "rbd")],
        configs={g["vmid"]: c for g, c in guests},
        node_status=dict.fromkeys(NODES, AMD),
    )
    for key, value in reads.items():
        d.reads[key] = {"": value}
    return d


ZONES = [
    {"zone": "tenants", "type": "vxlan", "nodes": "pve1,pve2", "peers": "10.0.0.11,10.0.0.12", "digest": "x"},
    {"zone": "lab", "type": "vlan", "bridge": "vmbr0", "digest": "x"},
]
VNETS = [
    {"vnet": "tenant1", "zone": "tenants", "tag": 10100, "type": "vnet", "digest": "x"},
    {"vnet": "lab20", "zone": "lab", "tag": 20, "type": "vnet", "digest": "x"},
]


def test_zone_error_and_pending_per_node_both_row_shapes() -> None:
    d = _data([network_zone("pve2", "lab", "error", "vlan"), sdn_zone("pve3", "lab", "pending")])
    found = {(f.code, f.subject.id, f.subject.node) for f in zone_status(d, Thresholds())}
    assert found == {("SDN_ZONE_ERROR", "lab", "pve2"), ("SDN_ZONE_PENDING", "lab", "pve3")}


def test_available_zones_and_localnetwork_are_no_finding() -> None:
    rows = [network_zone(n, "lab", "available") for n in NODES]
    rows += [{"id": "network/pve1/zone/localnetwork", "type": "network", "network-type": "zone",
              "network": "localnetwork", "node": "pve1", "status": "ok"}]  # fmt: skip
    rows += [sdn_zone("pve1", "localnetwork", "ok")]
    assert zone_status(_data(rows), Thresholds()) == []


def test_pending_config_names_new_changed_and_deleted_objects() -> None:
    zones = [
        *ZONES,
        {"zone": "dmz", "type": "simple", "state": "new", "pending": {"ipam": "pve"}},
        {"zone": "old", "type": "simple", "state": "deleted", "pending": {}},
    ]
    vnets = [{**VNETS[0], "state": "changed", "pending": {"tag": 10200}}, VNETS[1]]
    found = pending_config(_data([], sdn_zones=zones, sdn_vnets=vnets), Thresholds())
    assert {(f.subject.kind, f.subject.id, f.evidence["state"]) for f in found} == {
        ("sdn_zone", "dmz", "new"),
        ("sdn_zone", "old", "deleted"),
        ("sdn_vnet", "tenant1", "changed"),
    }
    assert next(f for f in found if f.subject.id == "tenant1").evidence["pending_keys"] == ["tag"]


def test_pending_controller_is_an_unapplied_change_too() -> None:
    # SDN.pm has_pending_changes covers controllers (and subnets) besides zones and vnets
    controllers = [
        {"controller": "evpn1", "type": "evpn", "asn": 65000, "peers": "10.0.0.1", "digest": "x"},
        {"controller": "evpn2", "type": "evpn", "asn": 65000, "state": "changed", "pending": {"peers": "10.0.0.2"}},
    ]
    found = pending_config(_data([], sdn_zones=ZONES, sdn_vnets=VNETS, sdn_controllers=controllers), Thresholds())
    assert [(f.subject.kind, f.subject.id, f.evidence["pending_keys"]) for f in found] == [
        ("sdn_controller", "evpn2", ["peers"])
    ]


def test_applied_config_is_no_finding_and_unread_config_emits_nothing() -> None:
    assert pending_config(_data([], sdn_zones=ZONES, sdn_vnets=VNETS), Thresholds()) == []
    assert pending_config(_data([]), Thresholds()) == []  # the collector's gap says it


def test_fabric_not_ok_on_a_node() -> None:
    rows = [fabric_row("pve1", "fab1", "ok"), fabric_row("pve3", "fab1", "not ok")]
    found = fabric_status(_data(rows), Thresholds())
    assert [(f.code, f.subject.id, f.subject.node) for f in found] == [("SDN_FABRIC_NOT_OK", "fab1", "pve3")]
    assert fabric_status(_data(rows[:1]), Thresholds()) == []


# ---------------------------------------------------------------- migration: vnet zone on the target

VM_ON_VNET = qemu_config("mail", scsi0="ceph-vm:vm-104-disk-0,size=32G", net1="virtio=BC:24:11:00:00:01,bridge=tenant1")


def _blocked_on(m: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for t in m.targets:
        for n in t.nodes:
            out[n] = {r.code for r in t.reasons if r.blocking}
    return out


def test_zone_node_restriction_makes_a_target_ineligible() -> None:
    d = _data([], [(guest_row(104, "pve1"), VM_ON_VNET)], sdn_zones=ZONES, sdn_vnets=VNETS)
    m = assess(d, 104, allow_downtime=False)
    assert _blocked_on(m) == {"pve2": set(), "pve3": {"MIGRATE_SDN_VNET_UNAVAILABLE"}}
    assert m.movable_to() == ["pve2"]
    detail = next(r.detail for t in m.targets for r in t.reasons)
    assert "tenant1" in detail and "pve1, pve2" in detail


def test_zone_pending_or_error_on_a_target_makes_it_ineligible() -> None:
    vm = qemu_config("lab", scsi0="ceph-vm:vm-105-disk-0,size=32G", net0="virtio=BC:24:11:00:00:02,bridge=lab20")
    rows = [network_zone("pve2", "lab", "error", "vlan"), sdn_zone("pve3", "lab", "pending")]
    d = _data(rows, [(guest_row(105, "pve1"), vm)], sdn_zones=ZONES, sdn_vnets=VNETS)
    m = assess(d, 105, allow_downtime=False)
    assert _blocked_on(m) == {"pve2": {"MIGRATE_SDN_VNET_UNAVAILABLE"}, "pve3": {"MIGRATE_SDN_VNET_UNAVAILABLE"}}
    assert m.verdict == "blocked"


def test_plain_bridges_and_unrestricted_available_zones_leave_targets_alone() -> None:
    vm = qemu_config("lab", scsi0="ceph-vm:vm-105-disk-0,size=32G", net0="virtio=BC:24:11:00:00:02,bridge=lab20")
    plain = qemu_config("web", scsi0="ceph-vm:vm-106-disk-0,size=32G", net0="virtio=BC:24:11:00:00:03,bridge=vmbr0")
    rows = [network_zone(n, "lab", "available", "vlan") for n in NODES]
    guests = [(guest_row(105, "pve1"), vm), (guest_row(106, "pve1"), plain)]
    d = _data(rows, guests, sdn_zones=ZONES, sdn_vnets=VNETS)
    for vmid in (105, 106):
        assert assess(d, vmid, allow_downtime=False).movable_to() == ["pve2", "pve3"]


def test_unapplied_zone_nodes_edit_refuses_a_node_the_running_config_still_has() -> None:
    # Zones.pm tap_plug reads the zone from the edited config (get_plugin_config): pve3 is refused although
    # the running config (and pve3's bridge) still includes it
    zones = [{**ZONES[0], "nodes": "pve1,pve2,pve3", "state": "changed", "pending": {"nodes": "pve1,pve2"}}, ZONES[1]]
    d = _data([], [(guest_row(104, "pve1"), VM_ON_VNET)], sdn_zones=zones, sdn_vnets=VNETS)
    m = assess(d, 104, allow_downtime=False)
    assert _blocked_on(m) == {"pve2": set(), "pve3": {"MIGRATE_SDN_VNET_UNAVAILABLE"}}
    detail = next(r.detail for t in m.targets for r in t.reasons)
    assert "edited nodes (pve1, pve2, not applied yet) leave pve3 out" in detail


def test_unapplied_widening_still_needs_the_running_bridge() -> None:
    # the edit drops the restriction, but pve3 has no bridge until it is applied (generate_etc_network_config)
    zones = [{**ZONES[0], "state": "changed", "pending": {"nodes": "deleted"}}, ZONES[1]]
    d = _data([], [(guest_row(104, "pve1"), VM_ON_VNET)], sdn_zones=zones, sdn_vnets=VNETS)
    assert _blocked_on(assess(d, 104, allow_downtime=False)) == {
        "pve2": set(),
        "pve3": {"MIGRATE_SDN_VNET_UNAVAILABLE"},
    }


def test_zone_deleted_but_not_applied_fails_on_every_node() -> None:
    zones = [{**ZONES[0], "nodes": None, "state": "deleted", "pending": {}}, ZONES[1]]
    vnets = [{**VNETS[0], "state": "deleted", "pending": {}}, VNETS[1]]
    d = _data([], [(guest_row(104, "pve1"), VM_ON_VNET)], sdn_zones=zones, sdn_vnets=vnets)
    m = assess(d, 104, allow_downtime=False)
    assert _blocked_on(m) == {"pve2": {"MIGRATE_SDN_VNET_UNAVAILABLE"}, "pve3": {"MIGRATE_SDN_VNET_UNAVAILABLE"}}
    assert "zone tenants is deleted" in next(r.detail for t in m.targets for r in t.reasons)


def test_zone_error_blocks_only_the_vnet_that_fails_when_the_content_was_read() -> None:
    # Zones.pm status marks the zone 'error' when any one vnet fails; the sibling lab30 plugs fine on pve2
    vnets = [*VNETS, {"vnet": "lab30", "zone": "lab", "tag": 30, "type": "vnet", "digest": "x"}]
    on = {
        105: qemu_config("a", scsi0="ceph-vm:vm-105-disk-0,size=8G", net0="virtio=BC:24:11:00:00:02,bridge=lab20"),
        107: qemu_config("b", scsi0="ceph-vm:vm-107-disk-0,size=8G", net0="virtio=BC:24:11:00:00:07,bridge=lab30"),
    }
    rows = [network_zone("pve2", "lab", "error", "vlan"), network_zone("pve3", "lab", "available", "vlan")]
    d = _data(rows, [(guest_row(v, "pve1"), c) for v, c in on.items()], sdn_zones=ZONES, sdn_vnets=vnets)
    d.reads["sdn_zone_content"] = {
        "pve2": {
            "lab": [
                {"vnet": "lab30", "status": "available"},
                {"vnet": "lab20", "status": "error", "statusmsg": "missing vmbr0v20"},
            ]
        }
    }
    assert assess(d, 107, allow_downtime=False).movable_to() == ["pve2", "pve3"]
    m = assess(d, 105, allow_downtime=False)
    assert _blocked_on(m) == {"pve2": {"MIGRATE_SDN_VNET_UNAVAILABLE"}, "pve3": set()}
    assert "vnet lab20 is 'error' on pve2 (missing vmbr0v20)" in next(r.detail for t in m.targets for r in t.reasons)
    del d.reads["sdn_zone_content"]  # content not read: the zone's status decides, as before
    d.memo.clear()
    assert _blocked_on(assess(d, 107, allow_downtime=False))["pve2"] == {"MIGRATE_SDN_VNET_UNAVAILABLE"}


def test_vlan_tag_on_a_vnet_that_is_not_vlan_aware_is_refused_everywhere() -> None:
    # Zones/Plugin.pm tap_plug: die "vm vlans are not allowed on vnet X" if !$vlan_aware && ($tag || $trunks)
    rows = [network_zone(n, "lab", "available", "vlan") for n in NODES]
    tagged = qemu_config("t", scsi0="ceph-vm:vm-105-disk-0,size=8G", net0="virtio=BC:24:11:00:00:02,bridge=lab20,tag=5")
    trunks = qemu_config(
        "u", scsi0="ceph-vm:vm-106-disk-0,size=8G", net0="virtio=BC:24:11:00:00:03,bridge=lab20,trunks=5;6"
    )
    guests = [(guest_row(105, "pve1"), tagged), (guest_row(106, "pve1"), trunks)]
    d = _data(rows, guests, sdn_zones=ZONES, sdn_vnets=VNETS)
    for vmid in (105, 106):
        m = assess(d, vmid, allow_downtime=False)
        assert _blocked_on(m) == {n: {"MIGRATE_SDN_VNET_UNAVAILABLE"} for n in ("pve2", "pve3")}
        assert "vnet lab20 is not VLAN-aware" in next(r.detail for t in m.targets for r in t.reasons)
    aware = [VNETS[0], {**VNETS[1], "vlanaware": 1}]
    d = _data(rows, guests, sdn_zones=ZONES, sdn_vnets=aware)
    assert assess(d, 105, allow_downtime=False).movable_to() == ["pve2", "pve3"]


def test_vnet_not_applied_yet_has_no_bridge_on_any_target() -> None:
    # Zones.pm tap_create: get_vnet($bridge, 1) finds no running vnet -> PVE::Network::tap_create ->
    # read_bridge_mtu: "bridge 'tenant1' does not exist"
    vnets = [{"vnet": "tenant1", "type": "vnet", "state": "new", "pending": {"zone": "tenants"}}]
    d = _data([], [(guest_row(104, "pve1"), VM_ON_VNET)], sdn_zones=ZONES, sdn_vnets=vnets)
    m = assess(d, 104, allow_downtime=False)
    assert _blocked_on(m) == {n: {"MIGRATE_SDN_VNET_UNAVAILABLE"} for n in ("pve2", "pve3")}
    assert "vnet tenant1 is created but not applied" in next(r.detail for t in m.targets for r in t.reasons)
    assert assess(_data([], [(guest_row(104, "pve1"), VM_ON_VNET)]), 104, allow_downtime=False).movable_to() == [
        "pve2",
        "pve3",
    ]  # SDN config not read: nothing to judge


def test_evacuation_plan_places_the_vnet_guest_only_where_its_zone_is() -> None:
    d = _data([], [(guest_row(104, "pve1"), VM_ON_VNET)], sdn_zones=ZONES, sdn_vnets=VNETS)
    plan = plan_evacuation(d, "pve1", allowed=["pve3"])
    assert [s.vmid for s in plan.steps] == []
    assert any(b.code == "MIGRATE_SDN_VNET_UNAVAILABLE" for b in plan.blockers if b.vmid == 104), plan.blockers
    plan = plan_evacuation(d, "pve1")
    assert [(s.vmid, s.target) for s in plan.steps] == [(104, "pve2")]


def test_fabric_neighbours_not_up_per_protocol() -> None:
    rows = [fabric_row("pve1", "fab1", "ok"), {**fabric_row("pve1", "ospf1", "ok"), "protocol": "ospf"}]
    d = _data(rows)
    d.reads["sdn_fabric_neighbors"] = {
        "pve1": {
            "fab1": [
                {"neighbor": "pve2", "status": "Up", "uptime": "12d4h"},
                {"neighbor": "pve3", "status": "Down", "uptime": ""},
                {"neighbor": "pve4", "status": "Initializing", "uptime": ""},
            ],
            "ospf1": [
                {"neighbor": "10.99.0.2", "status": "Full/-", "uptime": "1d"},
                {"neighbor": "10.99.0.3", "status": "2-Way/DROther", "uptime": "1d"},
                {"neighbor": "10.99.0.4", "status": "Init/DROther", "uptime": "0s"},
            ],
        }
    }
    found = fabric_neighbors(d, Thresholds())
    assert {(f.subject.id, f.evidence["neighbor"]) for f in found} == {
        ("fab1", "pve3"),
        ("fab1", "pve4"),
        ("ospf1", "10.99.0.4"),
    }
    d.reads["sdn_fabric_neighbors"] = {"pve1": {"fab1": [{"neighbor": "pve2", "status": "Up", "uptime": "1d"}]}}
    assert fabric_neighbors(d, Thresholds()) == []
