"""Upgrade readiness, PVE 8 to 9: pve8to9's virtual-guest checks (guests on PVE 8 nodes)."""

from __future__ import annotations

import re
from typing import Any

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.data import ClusterData, guest_subject
from pve_steward.analysis.findings import Finding
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.upgradeinfo import (
    APT_VERSIONS,
    NODE_NETWORK,
    SOURCE,
    graded,
    guests_to_upgrade,
)
from pve_steward.pve.guestconfig import nic, parse_property_string


def _kind(data: ClusterData, vmid: int) -> str:
    return "CT" if data.guests[vmid].get("type") == "lxc" else "VM"


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_GUEST_DESCRIPTION_LONG",
            "warning",
            "Guest description over 8 KiB",
            "pve8to9 WARNs for a VM or CT whose config description is longer than the new limit of 8 KiB "
            "(8192 characters: Perl's length of the decoded text, as the schema's maxLength counts).",
            "Shorten the guest's notes (Summary > Notes) below 8 KiB.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:guest-description"],
    pve=f"{SOURCE} check_virtual_guests",
)
def guest_description(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for vmid in guests_to_upgrade(data):
        raw = data.configs.get(vmid) or {}
        desc = raw.get("description")
        size = len(str(desc)) if desc is not None else 0  # characters: parse_vm_config decode_text's utf8 text
        if size > 8 * 1024:
            out.append(
                graded(
                    "UPGRADE_GUEST_DESCRIPTION_LONG",
                    "WARN",
                    guest_subject(data, vmid),
                    f"{_kind(data, vmid)} {vmid}: config description too long for the new limit of 8 KiB",
                    "guest-description",
                    {"characters": size},
                )
            )
    return out


def _lxc_keys(raw: dict[str, Any]) -> list[str]:
    """Raw LXC keys of a CT config: PVE answers them as ``lxc: [[key, value], ...]``."""
    keys = [k for k in raw if k.startswith("lxc.")]
    pairs = raw.get("lxc")
    if isinstance(pairs, list):
        keys += [str(p[0]) for p in pairs if isinstance(p, list | tuple) and p]
    return keys


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_LXC_CGROUP_KEYS",
            "warning",
            "Container uses legacy lxc.cgroup keys",
            "pve8to9 WARNs for a CT with raw 'lxc.cgroup.*' keys, which the unified cgroup v2 hierarchy ignores "
            "(a NOTICE instead when the node is forced to the legacy hierarchy, cgroup-mode 1).",
            "Rename the keys to the 'lxc.cgroup2.' prefix in /etc/pve/lxc/<vmid>.conf.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:lxc-cgroup-keys"],
    pve=f"{SOURCE} check_virtual_guests",
)
def lxc_cgroup_keys(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for vmid in guests_to_upgrade(data):
        if data.guests[vmid].get("type") != "lxc":
            continue
        keys = [k for k in _lxc_keys(data.configs.get(vmid) or {}) if k.startswith("lxc.cgroup.")]
        if keys:
            legacy = str(data.nodes.get(str(data.guests[vmid].get("node")), {}).get("cgroup-mode")) == "1"
            out.append(
                graded(
                    "UPGRADE_LXC_CGROUP_KEYS",
                    "NOTICE" if legacy else "WARN",
                    guest_subject(data, vmid),
                    f"CT {vmid} has 'lxc.cgroup' keys configured, which will be ignored in the unified cgroupv2",
                    "lxc-cgroup-keys",
                    {"keys": sorted(set(keys))},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CT_NO_OSTYPE",
            "warning",
            "Container without ostype",
            "pve8to9 (with --full) WARNs for a CT without 'ostype' in its config.",
            "Set the ostype: pct set <vmid> --ostype <debian|ubuntu|...>.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:ct-ostype"],
    pve=f"{SOURCE} check_containers_cgroup_compat",
)
def ct_ostype(data: ClusterData, t: Thresholds) -> list[Finding]:
    return [
        graded("UPGRADE_CT_NO_OSTYPE", "WARN", guest_subject(data, vmid), f"CT {vmid} has no 'ostype' set", "ct-ostype")
        for vmid in guests_to_upgrade(data)
        if data.guests[vmid].get("type") == "lxc" and vmid in data.configs and not data.configs[vmid].get("ostype")
    ]


# qemu-server PVE/QemuServer/Machine.pm extract_version
_MACHINE_VERSION = re.compile(r"^(?:pc(?:-i440fx|-q35)?|virt)-(\d+)\.(\d+)")
_CREATION_QEMU = re.compile(r"^(\d+)\.(\d+)")


def _windows(ostype: Any) -> bool:
    """qemu-server Helpers.pm windows_version: true for wxp, w2k, w2k3, w2k8, wvista and win<N>."""
    text = str(ostype or "")
    return text in ("wxp", "w2k", "w2k3", "w2k8", "wvista") or re.fullmatch(r"win\d+", text) is not None


def _vm_machine(conf: dict[str, Any], force: Any = None) -> str:
    """qemu-server (stable-bookworm) Machine.pm get_vm_machine($conf, $forcemachine), as far as the version goes:
    an unversioned type (none, pc, q35, virt) stays unversioned, except on a Windows VM, which is pinned to 5.1,
    or to its creation QEMU from 9.1 on (meta creation-qemu)."""
    machine = str(force or "") or parse_property_string(str(conf.get("machine") or ""), "type").get("type", "")
    if machine in ("", "pc", "q35", "virt") and _windows(conf.get("ostype")):
        base = "5.1"
        created = _CREATION_QEMU.match(parse_property_string(str(conf.get("meta") or "")).get("creation-qemu", ""))
        if created and (int(created.group(1)), int(created.group(2))) >= (9, 1):
            base = f"{created.group(1)}.{created.group(2)}"
        machine = {"q35": "pc-q35", "virt": "virt"}.get(machine, "pc-i440fx") + f"-{base}"
    return machine


def _machine_version(machine: str) -> tuple[int, int] | None:
    m = _MACHINE_VERSION.match(machine)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _old(machine: str) -> bool:
    """extract_version gives a version and is_machine_version_at_least(6, 0) says no."""
    version = _machine_version(machine)
    return version is not None and version < (6, 0)


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_MACHINE_VERSION_OLD",
            "warning",
            "VM pinned to a machine version older than 6.0",
            "pve8to9 gives a NOTICE that QEMU machine versions older than 6.0 will be dropped during the PVE 9 "
            "life cycle and WARNs for each VM configured with one, hibernated with one (runningmachine), or "
            "with snapshots that hold one (live snapshots by their runningmachine). A Windows VM without a "
            "machine version counts as pinned to 5.1 unless it was created with QEMU 9.1 or later (meta "
            "creation-qemu), as qemu-server starts it.",
            "Update the VM's machine version (Hardware > Machine) and reboot it; resume hibernated VMs before "
            "the upgrade; after rolling back to an old snapshot, update the machine version before starting.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:machine-version"],
    pve=f"{SOURCE} check_qemu_machine_versions; qemu-server (stable-bookworm) src/PVE/QemuServer/Machine.pm "
    "get_vm_machine, extract_version; src/PVE/QemuServer/Helpers.pm windows_version",
)
def machine_version(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for vmid in guests_to_upgrade(data):
        raw = data.configs.get(vmid)
        if raw is None or data.guests[vmid].get("type") != "qemu":
            continue
        found: list[tuple[str, dict[str, str], bool]] = []  # (what, {where: effective machine}, of snapshots)
        configured = _vm_machine(raw)
        if _old(configured):
            text = "has an old machine version configured; it may need an update to start in PVE 9"
            found.append((text, {"config": configured}, False))
        running = _vm_machine(raw, raw.get("runningmachine"))
        if raw.get("vmstate") and _old(running):
            found.append(
                ("is hibernated with an old machine version; it may not resume in PVE 9", {"vmstate": running}, False)
            )
        live: dict[str, str] = {}
        offline: dict[str, str] = {}
        for name, snap in sorted((data.snapshot_configs.get(vmid) or {}).items()):
            machine = _vm_machine(snap, snap.get("runningmachine")) if isinstance(snap, dict) else ""
            if _old(machine):
                (live if snap.get("vmstate") else offline)[name] = machine
        if live:
            text = "has live snapshots with an old machine version; rolling back to them may not work in PVE 9"
            found.append((text, live, True))
        if offline:
            text = (
                "has snapshots with an old machine version configured; after a rollback it may need an update to "
                "start in PVE 9"
            )
            found.append((text, offline, True))
        for text, machines, of_snapshots in found:
            snapshots = list(machines) if of_snapshots else []
            out.append(
                graded(
                    "UPGRADE_MACHINE_VERSION_OLD",
                    "WARN",
                    guest_subject(data, vmid),
                    f"VM {vmid} {text}" + (f" ({', '.join(snapshots)})" if snapshots else ""),
                    "machine-version",
                    {
                        "machine": raw.get("machine"),
                        "runningmachine": raw.get("runningmachine"),
                        "ostype": raw.get("ostype"),
                        "effective": machines,
                        "versions": sorted({".".join(map(str, _machine_version(m) or ())) for m in machines.values()}),
                        **({"snapshots": snapshots} if snapshots else {}),
                    },
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_BRIDGE_MTU",
            "info",
            "VirtIO NIC will take its bridge's MTU",
            "pve8to9 gives a NOTICE for each VirtIO NIC without an explicit mtu on a bridge whose MTU is not "
            "1500: after the upgrade the NIC's MTU is forced to the bridge's. pve8to9 reads the bridge's running "
            "MTU (/sys/class/net); we read its configured mtu (/nodes/{node}/network), so a bridge without an mtu "
            "of its own that takes a larger one from its ports, or an SDN VNet, is not seen.",
            "Nothing to do if the bridge MTU is wanted inside the guest; otherwise set mtu= on the NIC.",
        )
    ],
    needs=[NODE_NETWORK, APT_VERSIONS],
    anchors=["pve8to9:bridge-mtu"],
    pve=f"{SOURCE} check_bridge_mtu",
)
def bridge_mtu(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for vmid in guests_to_upgrade(data):
        raw = data.configs.get(vmid)
        node = str(data.guests[vmid].get("node"))
        ifaces = data.read("node_network", node)
        if raw is None or data.guests[vmid].get("type") != "qemu" or not isinstance(ifaces, list):
            continue
        mtus = {str(i.get("iface")): i.get("mtu") for i in ifaces if isinstance(i, dict)}
        for key in sorted(k for k in raw if re.fullmatch(r"net\d+", k)):
            net = parse_property_string(str(raw[key]))
            if nic(str(raw[key]), "qemu")[0] != "virtio" or "mtu" in net:  # parse_net: virtio=MAC or model=virtio
                continue
            bridge = net.get("bridge")
            mtu = int(mtus.get(str(bridge)) or 1500)
            if bridge is not None and mtu != 1500:
                out.append(
                    graded(
                        "UPGRADE_BRIDGE_MTU",
                        "NOTICE",
                        guest_subject(data, vmid),
                        f"network interface {key} of VM {vmid} will have its MTU forced to {mtu}",
                        "bridge-mtu",
                        {"nic": key, "bridge": bridge, "bridge_mtu": mtu},
                    )
                )
    return out
