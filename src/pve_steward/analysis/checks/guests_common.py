"""Guest checks that hold for VMs and containers alike: pending changes, unused volumes, protection, MACs and IPs.

Every check here reads the guest configs the collector already holds (``data.configs`` as
``GET .../config`` answers them, pending values applied) except pending changes, which PVE only
answers per guest (``GET .../pending``): the collector reads those for running guests, at most
``pending_probe_limit`` of them (CHECK_SKIPPED says when more were left out).
"""

from __future__ import annotations

from collections import Counter

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import CLUSTER, Finding, Severity, finding
from pve_steward.analysis.guestaddr import Address, Segment, agent_ips, same_network, segment, static_ips
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.guestconfig import SERIALS, GuestConfig, in_pve_order

CLI = {"qemu": "qm", "lxc": "pct"}
KIND = {"qemu": "VM", "lxc": "CT"}


def guests_with_config(
    data: ClusterData, gtype: str | None = None, templates: bool = False
) -> list[tuple[int, Row, Row, GuestConfig]]:
    """(vmid, resources row, raw config, parsed config) of each guest whose config was read, in vmid order.

    A guest whose config could not be read is not judged: the collector's gap says so. Some twenty
    checks walk these lists, so each selection is made once per snapshot (``data.memo``).
    """
    memo = data.memo["guests_with_config"]
    key = (gtype, templates)
    if key not in memo:
        every = memo.get((None, True))
        if every is None:  # one pass over the lookups; the other selections filter its rows
            configs, parsed, guests = data.configs, data.parsed, data.guests
            every = memo[(None, True)] = [
                (vmid, guests[vmid], configs[vmid], parsed[vmid])
                for vmid in data.guest_ids
                if configs.get(vmid) is not None
            ]
        # the parsed type is the resources row's for every listed guest (ClusterData.parsed)
        memo[key] = [e for e in every if (gtype is None or e[3].type == gtype) and (templates or not e[3].template)]
    return memo[key]  # type: ignore[no-any-return]


# the keys PVE gives serial ports (pve/guestconfig.py SERIALS; its NET_KEYS for network devices)
SERIAL_KEYS = frozenset(SERIALS)


def keys_in(raw: Row, keys: frozenset[str]) -> list[str]:
    """The config's keys among ``keys``, in the order PVE walks them (guestconfig.in_pve_order; the API's own
    order is Perl hash order): one C-level intersection first (most configs have one or none)."""
    found = keys.intersection(raw)
    return list(found) if len(found) < 2 else in_pve_order(found)


def label(vmid: int, g: Row) -> str:
    return f"{KIND.get(str(g.get('type')), 'guest')} {vmid} ({g.get('name')})"


def flag(raw: Row, key: str) -> bool:
    """A PVE boolean option as the config answers it (0/1, sometimes as text)."""
    value = raw.get(key)
    if value is None:
        return False
    if type(value) is str or type(value) is int:  # 0/1 as most configs answer: no text handling
        if value in ("0", 0):
            return False
        if value in ("1", 1):
            return True
    return str(value).strip().lower() in ("1", "yes", "on", "true")


# ---------------------------------------------------------------- pending changes

PENDING_PROBE_LIMIT = "pending_probe_limit"


@check(
    "guests",
    codes=[
        Code(
            "GUEST_CONFIG_PENDING",
            "info",
            "Config changes pending a restart",
            "A running guest has configuration changes PVE could not apply live (GET .../pending lists a key "
            "with a pending value or a pending delete; the hibernation state 'vmstate' is GUEST_HIBERNATED's "
            "business): they take effect only when the guest is stopped and started again. The collector asks "
            "PVE for at most pending_probe_limit (100) running guests per check.",
            "Review the pending values (GUI: the guest > Hardware/Options, orange entries; or qm pending <vmid> "
            "/ pct pending <vmid>), then restart the guest in a maintenance window (guest_shutdown, then "
            "guest_start; a reboot from inside the guest does not apply them), or revert them with "
            "qm set <vmid> --revert <keys>.",
        )
    ],
    thresholds=[
        Threshold(
            PENDING_PROBE_LIMIT,
            100,
            "most running guests whose pending changes are read per check (one API call each)",
            maximum=100_000,
        )
    ],
    anchors=["cv4pve-diag:IG0010"],
    pve="qemu-server src/PVE/API2/Qemu.pm vm_pending + pve-guest-common src/PVE/GuestHelpers.pm "
    "config_with_pending_array; pve-container src/PVE/API2/LXC.pm vm_pending",
)
def pending_changes(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Pending values or deletes in the per-guest pending answers the collector read."""
    out: list[Finding] = []
    for vmid, rows in sorted(data.pending.items()):
        g = data.guests.get(vmid)
        if g is None:
            continue
        changed = [
            row
            for row in rows
            if row.get("key") != "vmstate" and (row.get("pending") is not None or int(row.get("delete") or 0) > 0)
        ]
        if not changed:
            continue
        out.append(
            finding(
                "GUEST_CONFIG_PENDING",
                guest_subject(data, vmid),
                f"{label(vmid, g)} has {len(changed)} pending config change(s) that need a restart: "
                + ", ".join(str(r.get("key")) for r in changed),
                {
                    "pending": {
                        str(r.get("key")): {
                            "current": r.get("value"),
                            "pending": r.get("pending"),
                            "delete": int(r.get("delete") or 0) or None,
                        }
                        for r in changed
                    }
                },
            )
        )
    return out


# ---------------------------------------------------------------- unused volumes


@check(
    "guests",
    codes=[
        Code(
            "GUEST_DISK_UNUSED",
            "warning",
            "Detached disk still in storage",
            "The guest config holds unusedN entries: volumes detached from the guest but not deleted, still "
            "taking space on their storage (and still counted by backups of the storage, not of the guest).",
            "If the data is not needed, delete the volume: GUI the guest > Hardware > select 'Unused Disk N' > "
            "Remove, or qm set <vmid> --delete unusedN / pct set <vmid> --delete unusedN (this destroys the "
            "volume); to keep it, re-attach it (qm set <vmid> --scsiN <volid>).",
        )
    ],
    anchors=["cv4pve-diag:WG0018"],
    pve="qemu-server src/PVE/QemuConfig.pm add_unused_volume; pve-container src/PVE/LXC/Config.pm "
    "add_unused_volume (pve-guest-common AbstractConfig add_unused_volume)",
)
def unused_disks(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Each guest (templates too: their unused volumes use space as well) with unusedN keys."""
    out: list[Finding] = []
    for vmid, g, _raw, cfg in guests_with_config(data, templates=True):
        for v in cfg.volumes:  # most guests have none: no list for them
            if v.unused:
                break
        else:
            continue
        unused = [v for v in cfg.volumes if v.unused]
        sized = [v.size_bytes for v in unused if v.size_bytes]
        out.append(
            finding(
                "GUEST_DISK_UNUSED",
                guest_subject(data, vmid),
                f"{label(vmid, g)} has {len(unused)} detached volume(s) still in storage: "
                + ", ".join(f"{v.key}={v.volid}" for v in unused),
                {
                    "unused": {v.key: v.volid for v in unused},
                    "known_size_bytes": sum(sized) if sized else None,
                },
            )
        )
    return out


# ---------------------------------------------------------------- protection


@check(
    "guests",
    codes=[
        Code(
            "GUEST_PROTECTION_OFF",
            "info",
            "Guests without the protection flag",
            "Non-template guests have protection unset (PVE's default 0): PVE lets anyone with the right "
            "privileges remove them or their disks without a second step. One finding for the cluster lists "
            "them all (most guests keep the default).",
            "For production guests set it: GUI the guest > Options > Protection, or qm set <vmid> --protection 1 "
            "/ pct set <vmid> --protection 1 (removal then needs the flag cleared first).",
        )
    ],
    anchors=["cv4pve-diag:IG0011"],
    pve="qemu-server src/PVE/QemuServer.pm confdesc protection + src/PVE/API2/Qemu.pm destroy_vm "
    "(check_protection); pve-container src/PVE/LXC/Config.pm confdesc protection",
)
def protection_off(data: ClusterData, t: Thresholds) -> list[Finding]:
    judged = list(guests_with_config(data))
    bare = [vmid for vmid, _g, raw, _cfg in judged if not flag(raw, "protection")]
    return cluster_wide(
        "GUEST_PROTECTION_OFF", bare, len(judged), "can be removed without clearing a protection flag first"
    )


def cluster_wide(code: str, vmids: list[int], judged: int, text: str, **evidence: object) -> list[Finding]:
    """One finding for the cluster naming every guest: for checks that fire on PVE's own default, which
    most guests keep (design record 261203-17), so a large cluster's report is not thousands of lines."""
    if not vmids:
        return []
    return [
        finding(
            code,
            CLUSTER,
            f"{len(vmids)} of {judged} guest(s) {text}: {', '.join(map(str, vmids[:20]))}"
            + (f" and {len(vmids) - 20} more" if len(vmids) > 20 else ""),
            {"vmids": vmids, "count": len(vmids), "judged": judged, **evidence},
        )
    ]


# ---------------------------------------------------------------- duplicate MACs


@check(
    "guests",
    codes=[
        Code(
            "GUEST_MAC_DUPLICATE",
            "warning",
            "MAC address used by two guests",
            "Two or more non-template guests (VMs or containers) configure the same MAC address on a network "
            "device: on a shared bridge the switch tables flap and both lose traffic. Templates are left out "
            "(a clone gets a new address).",
            "Give each a new address: remove the MAC from the netN line (GUI the guest > Hardware > Network "
            "Device > MAC address, clear it; or qm set <vmid> --netN virtio,bridge=<bridge> / "
            "pct set <vmid> --netN name=eth0,bridge=<bridge>) and PVE generates a unique one; restart the guest.",
        )
    ],
    anchors=["cv4pve-diag:WG0033"],
    pve="qemu-server src/PVE/QemuServer/Network.pm parse_net (model=macaddr); pve-container "
    "src/PVE/LXC/Config.pm parse_lxc_network (hwaddr)",
)
def duplicate_macs(data: ClusterData, t: Thresholds) -> list[Finding]:
    """One finding per guest that shares an address, naming the other guests."""
    every = guests_with_config(data)
    # count in C first: a cluster has thousands of addresses and, hopefully, no repeat among them
    counted = Counter([mac for _v, _g, _raw, cfg in every for _key, _model, mac in cfg.nets if mac])
    repeated = {mac for mac, n in counted.items() if n > 1}
    holders: dict[str, list[tuple[int, str]]] = {}
    if repeated:
        for vmid, _g, _raw, cfg in every:
            for key, _model, mac in cfg.nets:
                if mac in repeated:
                    holders.setdefault(mac, []).append((vmid, key))
    out: list[Finding] = []
    for mac, users in sorted((mac, users) for mac, users in holders.items() if len(users) > 1):
        if len({v for v, _ in users}) < 2:
            continue
        for vmid, key in users:
            others = sorted({v for v, _ in users if v != vmid})
            if not others:
                continue
            g = data.guests[vmid]
            out.append(
                finding(
                    "GUEST_MAC_DUPLICATE",
                    guest_subject(data, vmid),
                    f"{label(vmid, g)} uses MAC {mac} on {key}, as do guest(s) {', '.join(map(str, others))}",
                    {"mac": mac, "device": key, "also_used_by": others},
                )
            )
    return out


# ---------------------------------------------------------------- duplicate IP addresses


@pve_rule(
    "guests.onboot-start",
    rule="When a node boots, PVE starts every guest on it with onboot=1 that is not a template and not managed by HA "
    "(HA starts those itself; an ignored resource, or any while HA is disarmed in ignore mode, counts as unmanaged).",
    pve="pve-manager PVE/API2/Nodes.pm startall, get_start_stop_list, get_filtered_vmlist (vm_is_ha_managed); "
    "pve-ha-manager src/PVE/HA/Config.pm $service_check_ha_state",
    codes=("GUEST_ONBOOT_ADDRESS_CLASH",),
)
def starts_at_boot(data: ClusterData, vmid: int) -> bool:
    cfg = data.parsed.get(vmid)
    return cfg is not None and cfg.onboot and not cfg.template and data.ha_managed(vmid) is None


@check(
    "guests",
    codes=[
        Code(
            "GUEST_IP_DUPLICATE",
            "warning",
            "IP address configured on two guests",
            "Two or more non-template guests hold the same IP address on the same network (the device's bridge "
            "and VLAN tag; an address on two different VLANs is no clash): a static address in the config (a VM's "
            "cloud-init ipconfigN ip=/ip6=, a container's netN ip=/ip6=) or, for a running VM whose guest agent "
            "answered, an address its OS holds on an interface PVE gave it (matched by MAC; evidence source: "
            "agent). Whichever runs second fights the first for the address. Critical when two of them run. "
            "dhcp, auto and manual, loopback and link-local addresses are left out, as are interfaces inside the "
            "guest that PVE did not give it (container bridges, tunnels).",
            "Give one of them another address (qm set <vmid> --ipconfigN ip=<address>/<prefix>,gw=<gateway> and "
            "regenerate its cloud-init drive; pct set <vmid> --netN ...,ip=<address>/<prefix>), then restart it.",
        ),
        Code(
            "GUEST_ONBOOT_ADDRESS_CLASH",
            "warning",
            "Stopped guest will clash at the next boot",
            "A stopped guest with onboot=1 (not a template, not HA-managed) configures an IP address or MAC address "
            "that a running guest uses on the same network (configured, or reported by its guest agent): its node "
            "starts it at the next boot (pve-manager "
            "startall), and from then on both fight for the address.",
            "Change the stopped guest's address (or the running one's), or set onboot=0 on the stopped guest "
            "(qm set <vmid> --onboot 0 / pct set <vmid> --onboot 0) if it should stay off.",
        ),
    ],
    pve="qemu-server src/PVE/QemuServer/Cloudinit.pm (ipconfigN), src/PVE/QemuServer/Network.pm parse_net; "
    "pve-container src/PVE/LXC/Config.pm parse_lxc_network; pve-manager PVE/API2/Nodes.pm startall",
)
def duplicate_addresses(data: ClusterData, t: Thresholds) -> list[Finding]:
    """One GUEST_IP_DUPLICATE per guest sharing a static IP (naming the others); one GUEST_ONBOOT_ADDRESS_CLASH per
    stopped onboot guest whose IP or MAC a running guest uses."""
    every = guests_with_config(data)
    # MACs counted in C first, as duplicate_macs does; the IPs of the few guests that configure one
    counted = Counter([mac for _v, _g, _raw, cfg in every for _key, _model, mac in cfg.nets if mac])
    repeated = {mac for mac, n in counted.items() if n > 1}
    holders: dict[tuple[str, str], list[tuple[int, str]]] = {}
    reported: set[tuple[int, str, str]] = set()  # (vmid, device, ip) the agent reports and the config does not set
    for vmid, _g, raw, cfg in every:
        configured = static_ips(raw, cfg.type == "lxc")
        for kind, value, device in configured:
            holders.setdefault((kind, value), []).append((vmid, device))
        for a in agent_ips(data, vmid):
            if a not in configured:
                holders.setdefault((a.kind, a.value), []).append((vmid, a.device))
                reported.add((vmid, a.device, a.value))
        if repeated:
            for key, _model, mac in cfg.nets:
                if mac in repeated:
                    holders.setdefault(("mac", mac), []).append((vmid, key))
    out: list[Finding] = []
    shared = [(key, users) for key, users in holders.items() if len(users) > 1]  # nearly none
    for (kind, value), users in sorted(shared):
        if len({v for v, _ in users}) < 2:
            continue
        nets = {(v, d): segment(data.configs[v], d) for v, d in users}
        for vmid, device in users:
            here = nets[(vmid, device)]
            peers = sorted({v for v, d in users if v != vmid and same_network(here, nets[(v, d)])})
            if not peers:
                continue
            g = data.guests[vmid]
            if kind == "ip":
                agent = (vmid, device, value) in reported
                out.append(_ip_duplicate(data, vmid, g, Address(kind, value, device), here, peers, agent))
            if g.get("status") != "running" and starts_at_boot(data, vmid):
                running = [v for v in peers if data.guests[v].get("status") == "running"]
                if running:
                    out.append(_onboot_clash(data, vmid, g, Address(kind, value, device), running))
    return out


def _ip_duplicate(
    data: ClusterData, vmid: int, g: Row, a: Address, net: Segment, peers: list[int], agent: bool
) -> Finding:
    running = [v for v in [vmid, *peers] if data.guests[v].get("status") == "running"]
    how = "holds IP {} on {} (its guest agent reports it)" if agent else "configures IP {} on {}"
    return finding(
        "GUEST_IP_DUPLICATE",
        guest_subject(data, vmid),
        f"{label(vmid, g)} {how.format(a.value, a.device)}, as do guest(s) "
        + ", ".join(f"{v} ({data.guests[v].get('name')})" for v in peers),
        {
            "ip": a.value,
            "device": a.device,
            "source": "agent" if agent else "config",
            "network": list(net) if net else None,
            "also_used_by": peers,
            "running": running,
        },
        severity=Severity.CRITICAL if len(running) > 1 else None,
    )


def _onboot_clash(data: ClusterData, vmid: int, g: Row, a: Address, running: list[int]) -> Finding:
    what = "IP" if a.kind == "ip" else "MAC"
    return finding(
        "GUEST_ONBOOT_ADDRESS_CLASH",
        guest_subject(data, vmid),
        f"{label(vmid, g)} is stopped with onboot=1 and configures {what} {a.value} on {a.device}, which running "
        "guest(s) " + ", ".join(f"{v} ({data.guests[v].get('name')})" for v in running) + " use: it starts at "
        f"{g.get('node')}'s next boot and clashes then",
        {"kind": a.kind, "address": a.value, "device": a.device, "running": running, "node": g.get("node")},
    )


# ---------------------------------------------------------------- snapshots


@check(
    "guests",
    codes=[
        Code(
            "GUEST_SNAPSHOT_WITH_RAM",
            "warning",
            "Snapshot includes RAM state",
            "A VM snapshot was taken with its RAM (vmstate=1 in the snapshot list): each keeps a state volume as "
            "large as the VM's memory on storage for as long as the snapshot lives.",
            "If the running state is not needed, delete the snapshot (snapshot_delete, or qm delsnapshot <vmid> "
            "<name>) and take snapshots without RAM (GUI: untick 'Include RAM'; qm snapshot without --vmstate).",
        ),
        Code(
            "GUEST_AUTOSNAP_LEGACY",
            "warning",
            "Snapshots of the old eve4pve-autosnap",
            "Snapshots carry the description 'eve4pve-autosnap': made by the predecessor of cv4pve-autosnap, "
            "which no longer rotates them once the tool was replaced.",
            "Update to cv4pve-autosnap and delete the leftovers (list_snapshots, snapshot_delete, or qm "
            "delsnapshot / pct delsnapshot).",
        ),
    ],
    anchors=["cv4pve-diag:WG0035", "cv4pve-diag:WG0022"],
    pve="qemu-server src/PVE/API2/Qemu.pm snapshot_list (vmstate) + src/PVE/QemuConfig.pm __snapshot_save_vmstate",
)
def snapshot_contents(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Judged on the snapshot lists the collector reads (guests with a snapshot: ``parent`` in the config)."""
    out: list[Finding] = []
    for vmid, rows in sorted(data.snapshots.items()):
        g = data.guests.get(vmid)
        if g is None:
            continue
        snaps = [s for s in rows if s.get("name") != "current"]
        with_ram = [str(s.get("name")) for s in snaps if str(s.get("vmstate", 0)) == "1"]
        if with_ram:
            out.append(
                finding(
                    "GUEST_SNAPSHOT_WITH_RAM",
                    guest_subject(data, vmid),
                    f"{label(vmid, g)} has {len(with_ram)} snapshot(s) with RAM state: {', '.join(with_ram)}",
                    {"snapshots": with_ram, "vmstate": 1},
                )
            )
        legacy = [str(s.get("name")) for s in snaps if str(s.get("description", "")).strip() == "eve4pve-autosnap"]
        if legacy:
            out.append(
                finding(
                    "GUEST_AUTOSNAP_LEGACY",
                    guest_subject(data, vmid),
                    f"{label(vmid, g)} has {len(legacy)} snapshot(s) made by eve4pve-autosnap",
                    {"snapshots": legacy, "description": "eve4pve-autosnap"},
                )
            )
    return out


# ---------------------------------------------------------------- HA coverage


@check(
    "guests",
    codes=[
        Code(
            "GUEST_NOT_HA",
            "info",
            "Running guests outside HA",
            "The cluster uses HA (it has HA resources) but running, non-template guests are not among them "
            "(or are 'ignored'): when their node fails, nothing restarts them elsewhere. One finding for the "
            "cluster lists them all.",
            "If it must survive a node failure, add it: GUI Datacenter > HA > Add, or ha-manager add vm:<vmid> "
            "(ct:<vmid>); it then needs shared or replicated storage.",
        )
    ],
    anchors=["cv4pve-diag:IG0015"],
    pve="pve-ha-manager src/PVE/HA/Config.pm vm_is_ha_managed",
)
def not_ha_managed(data: ClusterData, t: Thresholds) -> list[Finding]:
    if not data.ha_resources or data.ha_disarmed_ignore:  # disarmed: HA_DISARMED says so, not one guest at a time
        return []
    running = [vmid for vmid, g, _raw, _cfg in guests_with_config(data) if g.get("status") == "running"]
    outside = [vmid for vmid in running if data.ha_managed(vmid) is None]
    return cluster_wide(
        "GUEST_NOT_HA",
        outside,
        len(running),
        "run outside HA",
        ha_resources_in_cluster=len(data.ha_resources),
    )
