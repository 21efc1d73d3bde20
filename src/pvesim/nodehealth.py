"""Node health as PVE reports it: services, clock, installed kernels, DNS, network
interfaces, LVM-thin pools and the day's RRD averages.

A healthy node by default; the scenario key ``health`` of a node plants problems:

    health:
      services: {pve-ha-lrm: dead, chrony: failed}   # SubState per service (failed -> active-state failed)
      clock_offset: 120                               # seconds the node's clock is ahead (negative: behind)
      timezone: Europe/Vienna
      kernel_installed: 6.14.11-5-pve                 # newest installed kernel (default: the running one)
      packages: {qemu-server: 9.0.18}                 # installed versions that differ (a partial upgrade)
      dns: {dns1: 10.0.0.1, search: lan}
      hosts_extra: ["10.0.0.99 old-node.lan old-node"]  # /etc/hosts as installed (own name only); these on top
      network: {eno2: {active: 0}, bond0: {type: bond, slaves: eno3}}   # merged into the default interfaces
      lvmthin: [{vg: pve, lv: data, metadata_pct: 93}]
      iommu: false                                    # no IOMMU: PCI devices in group -1
      smart: {/dev/sdb: {5: 1240, 197: 16, 194: 58}}  # ATA attribute raw values (5 reallocated, 194 temp, ...)
      zfs_errors: {tank: "2 data errors, use '-v' for a list"}
      rrd: {cpu: 0.9, iowait: 0.02, pressurecpusome: 50}  # day averages: cpu/iowait fractions, PSI in percent

Only pveconfig is imported from pvesim (state.Node holds a NodeHealth).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pvesim import pveconfig

GiB = 1024**3

# pve-manager PVE/API2/Services.pm $service_name_list, with the state a default PVE 8/9 install shows:
# (SubState, ActiveState, UnitFileState). chrony is the default time daemon since PVE 7, so
# systemd-timesyncd is not installed; rsyslog ("syslog") is not installed by default either.
DEFAULT_SERVICES: dict[str, tuple[str, str, str]] = {
    "chrony": ("running", "active", "enabled"),
    "corosync": ("running", "active", "enabled"),
    "cron": ("running", "active", "enabled"),
    "ksmtuned": ("running", "active", "enabled"),
    "lxcfs": ("running", "active", "enabled"),
    "postfix": ("running", "active", "enabled"),
    "proxmox-firewall": ("running", "active", "enabled"),
    "pve-cluster": ("running", "active", "enabled"),
    "pve-firewall": ("running", "active", "enabled"),
    "pve-ha-crm": ("running", "active", "enabled"),
    "pve-ha-lrm": ("running", "active", "enabled"),
    "pve-lxc-syscalld": ("running", "active", "enabled"),
    "pvedaemon": ("running", "active", "enabled"),
    "pvefw-logger": ("running", "active", "enabled"),
    "pveproxy": ("running", "active", "enabled"),
    "pvescheduler": ("running", "active", "enabled"),
    "pvestatd": ("running", "active", "enabled"),
    "qmeventd": ("running", "active", "enabled"),
    "spiceproxy": ("running", "active", "enabled"),
    "sshd": ("running", "active", "enabled"),
    "syslog": ("dead", "inactive", "not-found"),
    "systemd-journald": ("running", "active", "static"),
    "systemd-timesyncd": ("dead", "inactive", "not-found"),
}
_DESCRIPTIONS = {
    "chrony": "chrony, an NTP client/server",
    "corosync": "Corosync Cluster Engine",
    "pve-cluster": "The Proxmox VE cluster filesystem",
    "pvedaemon": "PVE API Daemon",
    "pveproxy": "PVE API Proxy Server",
    "pvestatd": "PVE Status Daemon",
}
# SubState -> ActiveState for planted states
_ACTIVE_OF = {"running": "active", "dead": "inactive", "failed": "failed", "exited": "active"}


@dataclass
class NodeHealth:
    services: dict[str, tuple[str, str, str]] = field(default_factory=lambda: dict(DEFAULT_SERVICES))
    clock_offset: float = 0.0
    timezone: str = "Europe/Berlin"
    kernel_installed: str | None = None  # None: the running kernel is the newest installed
    dns: dict[str, str] = field(default_factory=lambda: {"dns1": "10.0.0.1", "search": "lan"})
    packages: dict[str, str] = field(default_factory=dict)  # package -> installed version (a partial upgrade)
    hosts_extra: list[str] = field(default_factory=list)  # lines /etc/hosts has beyond the installer's
    network: dict[str, dict[str, Any]] = field(default_factory=dict)  # iface -> row (merged over defaults)
    lvmthin: list[dict[str, Any]] = field(default_factory=list)
    iommu: bool = True  # False: the kernel found no IOMMU (every PCI device in group -1)
    smart: dict[str, dict[int, int]] = field(default_factory=dict)  # devpath -> ATA attribute id -> raw value
    zfs_errors: dict[str, str] = field(default_factory=dict)  # pool -> the errors line of zpool status
    rrd: dict[str, float] = field(default_factory=dict)  # day averages, fractions
    mdev: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # PCI id -> mediated device types
    network_changes: str | None = None  # the diff of a pending /etc/network/interfaces.new (not applied yet)


def health_from(spec: dict[str, Any] | None, ip: str) -> NodeHealth:
    """Build a node's health from its scenario ``health`` mapping (absent: a healthy node)."""
    spec = spec or {}
    h = NodeHealth()
    for name, state in (spec.get("services") or {}).items():
        unit = h.services.get(name, ("", "", "enabled"))[2]
        h.services[name] = (str(state), _ACTIVE_OF.get(str(state), "inactive"), unit)
    h.hosts_extra = [str(line) for line in spec.get("hosts_extra", [])]
    h.packages = {str(k): str(v) for k, v in (spec.get("packages") or {}).items()}
    h.smart = {str(d): {int(k): int(v) for k, v in a.items()} for d, a in (spec.get("smart") or {}).items()}
    h.zfs_errors = {str(k): str(v) for k, v in (spec.get("zfs_errors") or {}).items()}
    for key in ("clock_offset", "timezone", "kernel_installed", "iommu"):
        if key in spec:
            setattr(h, key, spec[key])
    if "dns" in spec:
        h.dns = {k: str(v) for k, v in spec["dns"].items()}
    h.network = default_network(ip)
    for iface, row in (spec.get("network") or {}).items():
        h.network.setdefault(iface, {"iface": iface, "type": "eth", "active": 1, "exists": 1, "families": ["inet"]})
        h.network[iface].update(row)
    h.lvmthin = [_thinpool(p) for p in spec.get("lvmthin", [{"vg": "pve", "lv": "data"}])]
    h.network_changes = spec.get("network_changes")
    h.mdev = {str(k): [dict(t) for t in v] for k, v in (spec.get("mdev") or {}).items()}
    h.rrd = {"cpu": 0.12, "iowait": 0.004, **{k: float(v) for k, v in (spec.get("rrd") or {}).items()}}
    return h


def etc_hosts(h: NodeHealth, name: str, ip: str) -> str:
    """/etc/hosts as the installer writes it (pve-installer Proxmox/Install.pm: localhost, the node's own name, the
    IPv6 block; joining a cluster adds no line), then the planted extra lines."""
    lines = ["127.0.0.1 localhost.localdomain localhost", f"{ip} {name}.lan {name}", *h.hosts_extra, ""]
    lines += ["# The following lines are desirable for IPv6 capable hosts", "", "::1     ip6-localhost ip6-loopback"]
    lines += ["fe00::0 ip6-localnet", "ff00::0 ip6-mcastprefix", "ff02::1 ip6-allnodes", "ff02::2 ip6-allrouters"]
    return "\n".join(lines) + "\n"


def default_network(ip: str) -> dict[str, dict[str, Any]]:
    """Two NICs in an active-backup bond under a VLAN-aware bridge, as many PVE installs have, and a third NIC
    with its own address on the storage network. As pve-common's interfaces parser reads them
    (INotify.pm __read_etc_network_interfaces): method and method6 'manual' unless set, a bridge's stp 'off' and
    forward delay 0 (as the installer writes them), the VLAN-aware bridge's ``bridge-vids``, the comments."""
    base = {
        "active": 1,
        "exists": 1,
        "autostart": 1,
        "families": ["inet"],
        "method": "manual",
        "method6": "manual",
        "priority": 3,
    }
    last = ip.rsplit(".", 1)[-1]
    return {
        "eno1": {**base, "iface": "eno1", "type": "eth", "mtu": 1500},
        "eno2": {**base, "iface": "eno2", "type": "eth", "mtu": 1500},
        "eno3": {
            **base,
            "iface": "eno3",
            "type": "eth",
            "mtu": 1500,
            "priority": 5,
            "method": "static",
            "address": f"10.10.0.{last}",
            "netmask": "24",
            "cidr": f"10.10.0.{last}/24",
            "comments": "storage network\n",
        },
        "bond0": {
            **base,
            "iface": "bond0",
            "type": "bond",
            "slaves": "eno1 eno2",
            "bond_mode": "active-backup",
            "bond-primary": "eno1",
        },
        "vmbr0": {
            **base,
            "iface": "vmbr0",
            "type": "bridge",
            "method": "static",
            "bridge_ports": "bond0",
            "bridge_stp": "off",
            "bridge_fd": 0,
            "bridge_vlan_aware": 1,
            "bridge_vids": "2-4094",
            "address": ip,
            "netmask": "24",
            "cidr": f"{ip}/24",
            "gateway": ".".join([*ip.split(".")[:3], "1"]),
        },
    }


# (id, class, vendor, device, vendor_name, device_name) of a typical server, as PCI.pm pciscan lists them
_PCI = (
    ("0000:01:00.0", "0x010802", "0x144d", "0xa80a", "Samsung Electronics Co Ltd", "NVMe SSD Controller PM9A1"),
    ("0000:41:00.0", "0x020000", "0x8086", "0x1521", "Intel Corporation", "I350 Gigabit Network Connection"),
    ("0000:41:00.1", "0x020000", "0x8086", "0x1521", "Intel Corporation", "I350 Gigabit Network Connection"),
    ("0000:c1:00.0", "0x030000", "0x1a03", "0x2000", "ASPEED Technology, Inc.", "ASPEED Graphics Family"),
    ("0000:c3:00.3", "0x0c0330", "0x1022", "0x148c", "Advanced Micro Devices, Inc. [AMD]", "Starship USB 3.0"),
)


def pci_devices(h: NodeHealth) -> list[dict[str, Any]]:
    return [
        {
            "id": pid,
            "class": cls,
            "vendor": vendor,
            "device": device,
            "vendor_name": vname,
            "device_name": dname,
            "subsystem_vendor": vendor,
            "subsystem_device": "0x0000",
            "iommugroup": group if h.iommu else -1,
        }
        for group, (pid, cls, vendor, device, vname, dname) in enumerate(_PCI, start=10)
    ]


def _bytes(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else pveconfig.parse_size(str(value))


def _thinpool(p: dict[str, Any]) -> dict[str, Any]:
    size = _bytes(p.get("metadata_size", 1 * GiB))
    return {
        "vg": p.get("vg", "pve"),
        "lv": p.get("lv", "data"),
        "lv_size": _bytes(p.get("lv_size", 800 * GiB)),
        "used": _bytes(p.get("used", 200 * GiB)),
        "metadata_size": size,
        "metadata_used": int(size * float(p.get("metadata_pct", 12)) / 100),
    }


def services(h: NodeHealth) -> list[dict[str, Any]]:
    """Services.pm index: sorted by id, each with its systemd states."""
    return [
        {
            "service": name,
            "name": name,
            "desc": _DESCRIPTIONS.get(name, f"{name} service"),
            "state": sub,
            "active-state": active,
            "unit-state": unit,
        }
        for name, (sub, active, unit) in sorted(h.services.items())
    ]


def installed_kernel_packages(h: NodeHealth, running: str) -> list[dict[str, Any]]:
    """APT.pm versions lists every installed (pve|proxmox)-kernel-* package, newest first."""
    releases = sorted({running, h.kernel_installed or running}, key=_release_key, reverse=True)
    return [
        _pkg(f"proxmox-kernel-{r}-signed", r.removesuffix("-pve"), "Proxmox Kernel Image (signed)") for r in releases
    ]


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.replace("-", ".").split(".") if x.isdecimal())


def _pkg(name: str, version: str, title: str) -> dict[str, Any]:
    return {
        "Package": name,
        "Title": title,
        "Description": title,
        "Version": version,
        "OldVersion": version,
        "CurrentState": "Installed",
        "Arch": "amd64",
        "Origin": "Proxmox",
        "Priority": "optional",
        "Section": "admin",
    }


def rrd_day(h: NodeHealth, now: float, with_pressure: bool, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The day at 30-minute resolution (RRD AVERAGE): values alternate 5 % around the planted averages,
    so the day's mean is exactly the average; ``base`` holds the node's sizes (memtotal, roottotal, ...)."""
    step, points = 1800, 48
    start = int(now // step * step) - step * (points - 1)
    rows = []
    for i in range(points):
        jitter = 1.05 if i % 2 else 0.95
        row: dict[str, Any] = {
            "time": start + i * step,
            **base,
            "cpu": h.rrd["cpu"] * jitter,
            "iowait": h.rrd["iowait"] * jitter,
            "netin": 120_000.0 * jitter,
            "netout": 80_000.0 * jitter,
        }
        if with_pressure:
            for key in ("pressurecpusome", "pressureiosome", "pressureiofull", "pressurememorysome"):
                row[key] = h.rrd.get(key, 0.1) * jitter  # /proc/pressure avg10: a percentage
            row["pressurememoryfull"] = h.rrd.get("pressurememoryfull", 0.0) * jitter
        rows.append(row)
    return rows


# ATA attributes smartctl -A -f brief prints for a healthy drive: id -> (name, flags, normalized, threshold, raw)
_ATA = {
    1: ("Raw_Read_Error_Rate", "POSR-K", 100, 6, 0),
    5: ("Reallocated_Sector_Ct", "PO--CK", 100, 10, 0),
    9: ("Power_On_Hours", "-O--CK", 92, 0, 36512),
    12: ("Power_Cycle_Count", "-O--CK", 100, 20, 31),
    187: ("Reported_Uncorrect", "-O--CK", 100, 0, 0),
    194: ("Temperature_Celsius", "-O---K", 64, 0, 36),
    197: ("Current_Pending_Sector", "-O--C-", 100, 0, 0),
    198: ("Offline_Uncorrectable", "----C-", 100, 0, 0),
    199: ("UDMA_CRC_Error_Count", "-OSRCK", 200, 0, 0),
}


def smart(h: NodeHealth, disk: dict[str, Any]) -> dict[str, Any]:
    """Diskmanage.pm get_smart_data: ATA drives list attributes (id right-aligned to three columns), NVMe and
    SAS drives (``transport: sas``) answer smartctl's text."""
    health = str(disk.get("health", "PASSED"))
    planted = h.smart.get(str(disk.get("devpath")), {})
    if disk.get("transport") == "sas":  # smartctl's SCSI report: health status OK, the temperature in text
        temp = planted.get(194, 36)
        text = (
            f"Current Drive Temperature:     {temp} C\nDrive Trip Temperature:        68 C\n\n"
            "Accumulated start-stop cycles:  34\nElements in grown defect list: 0\n"
        )
        return {"health": "OK" if health == "PASSED" else health, "type": "text", "text": text}
    if disk.get("type") == "nvme":
        temp = planted.get(194, 38)
        text = (
            "SMART overall-health self-assessment test result: PASSED\n\n"
            "SMART/Health Information (NVMe Log 0x02)\nCritical Warning:                   0x00\n"
            f"Temperature:                        {temp} Celsius\nAvailable Spare:                    100%\n"
            f"Percentage Used:                    {100 - int(disk.get('wearout', 99))}%\n"
            "Media and Data Integrity Errors:    0\n"
        )
        return {"health": health, "type": "text", "text": text, "wearout": disk.get("wearout", 99)}
    attributes = []
    for ident, (name, flags, norm, thresh, raw) in _ATA.items():
        value = planted.get(ident, raw)
        shown = f"{value} (Min/Max 24/{max(value, 45)})" if ident == 194 else str(value)
        attributes.append(
            {
                "id": f"{ident:>3}",
                "name": name,
                "flags": flags,
                "value": norm,
                "normalized": norm,
                "worst": norm,
                "threshold": thresh,
                "fail": "-",
                "raw": shown,
            }
        )
    return {"health": health, "type": "ata", "attributes": attributes}


_DEGRADED_STATUS = (
    "One or more devices are faulted in response to persistent errors. Sufficient replicas exist for the pool "
    "to continue functioning in a degraded state."
)


def zfs_detail(h: NodeHealth, pool: dict[str, Any]) -> dict[str, Any]:
    """ZFS.pm detail of a two-disk mirror: a DEGRADED pool has its second disk FAULTED with errors."""
    name, state = str(pool["name"]), str(pool.get("health", "ONLINE"))
    ok = state == "ONLINE"
    disks = [
        {
            "name": f"/dev/disk/by-id/ata-{name}-{i}-part1",
            "state": "ONLINE",
            "read": 0,
            "write": 0,
            "cksum": 0,
            "msg": "",
        }
        for i in (1, 2)
    ]
    if not ok:
        disks[1].update({"state": "FAULTED", "read": 3, "cksum": 41, "msg": "too many errors"})
    mirror = {"name": "mirror-0", "state": state, "read": 0, "write": 0, "cksum": 0, "msg": "", "children": disks}
    root = {"name": name, "state": state, "read": 0, "write": 0, "cksum": 0, "msg": "", "children": [mirror]}
    out: dict[str, Any] = {
        "name": name,
        "state": state,
        "scan": "scrub repaired 0B in 00:12:31 with 0 errors on Sun Nov 29 00:36:32 2026",
        "errors": h.zfs_errors.get(name, "No known data errors"),
        "children": [root],
    }
    if not ok:
        out["status"] = _DEGRADED_STATUS
        out["action"] = "Replace the faulted device, or use 'zpool clear' to mark the device repaired."
    return out


_REPO_URIS = {
    "enterprise": ("https://enterprise.proxmox.com/debian/pve", "pve-enterprise"),
    "no-subscription": ("http://download.proxmox.com/debian/pve", "pve-no-subscription"),
    "test": ("http://download.proxmox.com/debian/pve", "pve-test"),
}


def apt_sources(standard: list[dict[str, Any]], major: int) -> list[dict[str, Any]]:
    """The files behind /apt/repositories (proxmox-apt, deb822 .sources): Debian's own, then one entry per
    Proxmox standard repository configured (``status`` 1 enabled, 0 present but disabled)."""
    suite = "trixie" if major >= 9 else "bookworm"

    def repo(uris: str, suites: list[str], components: list[str], enabled: bool) -> dict[str, Any]:
        return {
            "Types": ["deb"],
            "URIs": [uris],
            "Suites": suites,
            "Components": components,
            "Options": [{"Key": "Signed-By", "Values": ["/usr/share/keyrings/proxmox-archive-keyring.gpg"]}],
            "Comment": "",
            "FileType": "sources",
            "Enabled": 1 if enabled else 0,
        }

    debian = [
        repo("http://deb.debian.org/debian", [suite, f"{suite}-updates"], ["main", "contrib"], True),
        repo("http://security.debian.org/debian-security", [f"{suite}-security"], ["main", "contrib"], True),
    ]
    proxmox = [
        repo(_REPO_URIS[r["handle"]][0], [suite], [_REPO_URIS[r["handle"]][1]], bool(r["status"]))
        for r in standard
        if r.get("handle") in _REPO_URIS and r.get("status") is not None
    ]
    return [
        {"path": "/etc/apt/sources.list.d/debian.sources", "file-type": "sources", "repositories": debian},
        {"path": "/etc/apt/sources.list.d/proxmox.sources", "file-type": "sources", "repositories": proxmox},
    ]
