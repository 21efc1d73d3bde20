"""Upgrade readiness, PVE 8 to 9: pve8to9's package, kernel, node and daemon checks, per PVE 8 node.

Not part of the health check (a planned upgrade is its own question): ``check_upgrade_readiness`` and
``pve-steward check --upgrade 9`` run the ``upgrade`` area. Cluster, storage, guest and Ceph checks are in
the sibling ``upgrade_*`` modules; the shared reads and grades in ``analysis/upgradeinfo.py``.
"""

from __future__ import annotations

import re

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Subject, finding
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.upgradeinfo import (
    APT_UPDATES,
    APT_VERSIONS,
    FROM_MAJOR,
    NODE_CERTIFICATES,
    NODE_SERVICES,
    NODE_STATUS,
    SOURCE,
    Grade,
    clustered,
    graded,
    node_major,
    node_subject,
    nodes_to_upgrade,
    package,
    pve_version,
)

MIN_VERSION = (8, 4, 0)


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_NODE_UPGRADED",
            "info",
            "Node already runs PVE 9",
            "The node's proxmox-ve package is newer than 8 (pve8to9: 'already upgraded'); the pre-upgrade checks "
            "do not apply to it.",
            "Nothing to do for this node; run pve8to9 on it to see its post-upgrade checks.",
        )
    ],
    needs=[APT_VERSIONS, NODE_STATUS],
    anchors=[],
    pve=f"{SOURCE} check_pve_packages",
)
def upgraded_nodes(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Nodes already on 9: said once each, so a cluster already on 9 says so instead of staying silent."""
    out = []
    for node in data.online_nodes:
        major = node_major(data, node)
        if major is not None and major > FROM_MAJOR:
            version = package(data, node, "proxmox-ve") or {}
            out.append(
                finding(
                    "UPGRADE_NODE_UPGRADED",
                    node_subject(node),
                    f"node {node} already runs Proxmox VE {major}",
                    {"major": major, "proxmox_ve": version.get("OldVersion")},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_UPDATES_PENDING",
            "warning",
            "Package updates pending before the upgrade",
            "pve8to9 WARNs when /nodes/{node}/apt/update lists updates: install them first.",
            "apt update && apt full-upgrade on the node (or Node > Updates in the GUI), then run the check again.",
        )
    ],
    needs=[APT_UPDATES, APT_VERSIONS],
    anchors=["pve8to9:pkg-updates"],
    pve=f"{SOURCE} check_pve_packages",
)
def updates_pending(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        rows = data.read("apt_updates", node)
        if isinstance(rows, list) and rows:
            names = sorted(str(r.get("Package")) for r in rows if isinstance(r, dict))
            out.append(
                graded(
                    "UPGRADE_UPDATES_PENDING",
                    "WARN",
                    node_subject(node),
                    f"updates for {len(names)} package(s) are available on {node}",
                    "pkg-updates",
                    {"packages": names[:50], "count": len(names)},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_PVE_TOO_OLD",
            "critical",
            "proxmox-ve older than 8.4",
            "pve8to9 FAILs when the installed proxmox-ve is older than 8.4-0 (or not installed): upgrade within 8 "
            "first.",
            "apt update && apt full-upgrade on the node to the latest 8.4, then run the check again.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:pkg-min-version"],
    pve=f"{SOURCE} check_pve_packages",
)
def pve_min_version(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        if data.read("apt_versions", node) is None:
            continue  # unread: the collector's gap says so
        version = pve_version(data, node)
        if version is not None and version[0] == FROM_MAJOR and version[1:] >= MIN_VERSION[1:]:
            continue
        if version is not None and version[0] > FROM_MAJOR:
            continue
        installed = (package(data, node, "proxmox-ve") or {}).get("OldVersion")
        text = "proxmox-ve package not found" if installed is None else f"proxmox-ve {installed} is too old"
        out.append(
            graded(
                "UPGRADE_PVE_TOO_OLD",
                "FAIL",
                node_subject(node),
                f"{text} on {node}; upgrade to >= 8.4-0 first",
                "pkg-min-version",
                {"installed": installed, "minimum": "8.4-0"},
            )
        )
    return out


_SUITABLE_KERNEL = re.compile(r"^6\.(?:2|5|8|11|14)")


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_KERNEL_NOT_SUITABLE",
            "warning",
            "Running kernel not suitable for the upgrade",
            "pve8to9 WARNs when the running kernel (apt/versions RunningKernel) is not a 6.2/6.5/6.8/6.11/6.14 "
            "series kernel: a suitable kernel installed but not booted (missing reboot), or an unexpected one.",
            "Reboot the node into the installed 6.8 (or newer) Proxmox kernel before the upgrade.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:kernel-booted"],
    pve=f"{SOURCE} check_pve_packages",
)
def running_kernel(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        row = package(data, node, "proxmox-ve")
        if row is None:
            continue
        kernel = row.get("RunningKernel")
        if kernel is not None and _SUITABLE_KERNEL.match(str(kernel)):
            continue
        installed = package(data, node, "pve-kernel-6.8") is not None
        message = (
            f"a suitable kernel (pve-kernel-6.8) is installed on {node}, but an unsuitable ({kernel}) is booted, "
            "missing reboot?"
            if installed
            else f"unexpected running and installed kernel '{kernel}' on {node}"
        )
        out.append(
            graded(
                "UPGRADE_KERNEL_NOT_SUITABLE",
                "WARN",
                node_subject(node),
                message,
                "kernel-booted",
                {"running_kernel": kernel, "suitable_installed": installed},
            )
        )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_COROSYNC_VERSION",
            "critical",
            "corosync is not 3.x",
            "In a cluster pve8to9 FAILs when the installed corosync is 2.x (cluster-wide upgrade to 3.x needed) "
            "or any version other than 3.x.",
            "Upgrade corosync to 3.x on every node (see the Proxmox wiki 'Upgrade from 6.x to 7.0').",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:corosync-2"],
    pve=f"{SOURCE} check_cluster_corosync",
)
def corosync_version(data: ClusterData, t: Thresholds) -> list[Finding]:
    if not clustered(data):
        return []
    out = []
    for node in nodes_to_upgrade(data):
        row = package(data, node, "corosync")
        if row is None:
            continue
        version = str(row.get("OldVersion") or "")
        if version.startswith("3."):
            continue
        text = (
            "corosync 2.x installed, cluster-wide upgrade to 3.x needed"
            if version.startswith("2.")
            else (f"unexpected corosync version installed: {version or 'none'}")
        )
        out.append(
            graded(
                "UPGRADE_COROSYNC_VERSION",
                "FAIL",
                node_subject(node),
                f"{node}: {text}",
                "corosync-2",
                {"corosync": version},
            )
        )
    return out


_DAEMONS = ("pveproxy", "pvedaemon", "pvescheduler", "pvestatd")


def _unit_grade(row: dict[str, object]) -> tuple[Grade | None, str]:
    """pve8to9 ``$log_systemd_unit_state``: active passes, inactive and failed FAIL, anything else WARNs;
    a unit systemd does not know is 'unknown' (``systemctl is-enabled`` prints nothing for it)."""
    if str(row.get("unit-state")) == "not-found":
        return "WARN", "unknown"
    state = str(row.get("active-state") or row.get("state") or "unknown")
    if state == "active":
        return None, state
    return ("FAIL" if state in ("inactive", "failed") else "WARN"), state


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_DAEMON_NOT_ACTIVE",
            "critical",
            "A PVE daemon is not active",
            "pve8to9 FAILs when pveproxy, pvedaemon, pvescheduler or pvestatd (and in a cluster pve-cluster and "
            "corosync) is inactive or failed, and WARNs for any other state than active (/nodes/{node}/services).",
            "systemctl status <unit> on the node (or Node > System in the GUI); start it and read its journal.",
        )
    ],
    needs=[NODE_SERVICES, APT_VERSIONS],
    anchors=["pve8to9:daemons"],
    pve=f"{SOURCE} check_misc, check_cluster_corosync",
)
def daemons(data: ClusterData, t: Thresholds) -> list[Finding]:
    units = (("pve-cluster", "corosync") if clustered(data) else ()) + _DAEMONS
    out = []
    for node in nodes_to_upgrade(data):
        rows = data.read("node_services", node)
        if not isinstance(rows, list):
            continue
        by_name = {str(r.get("name") or r.get("service")): r for r in rows if isinstance(r, dict)}
        for unit in units:
            row = by_name.get(unit)
            grade, state = _unit_grade(row) if row is not None else ("WARN", "unknown")
            if grade is None:
                continue
            out.append(
                graded(
                    "UPGRADE_DAEMON_NOT_ACTIVE",
                    grade,
                    Subject(kind="node", id=node, name=f"{unit}.service"),
                    f"systemd unit '{unit}.service' on {node} is in state '{state}'",
                    "daemons",
                    {"unit": f"{unit}.service", "state": state},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_TIME_SYNC",
            "warning",
            "No suitable time synchronisation",
            "pve8to9 WARNs when systemd-timesyncd is the active time daemon (updates only on boot) or when no time "
            "daemon is active; chrony passes. ntpsec and openntpd are not in PVE's service list, so a node that "
            "runs one of them is reported here too: check it on the node.",
            "apt install chrony on the node (the default of new installations).",
        )
    ],
    needs=[NODE_SERVICES, APT_VERSIONS],
    anchors=["pve8to9:time-sync"],
    pve=f"{SOURCE} check_time_sync",
)
def time_sync(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        rows = data.read("node_services", node)
        if not isinstance(rows, list):
            continue
        active = {
            str(r.get("name") or r.get("service"))
            for r in rows
            if isinstance(r, dict) and str(r.get("unit-state")) != "not-found" and r.get("active-state") == "active"
        }
        if "systemd-timesyncd" in active:
            message = f"systemd-timesyncd is the time daemon on {node}: not the best choice for servers"
        elif "chrony" in active:
            continue
        else:
            message = f"no active time synchronisation daemon (chrony, systemd-timesyncd) on {node}"
        out.append(
            graded(
                "UPGRADE_TIME_SYNC",
                "WARN",
                node_subject(node),
                message,
                "time-sync",
                {"active": sorted(active & {"chrony", "systemd-timesyncd"})},
            )
        )
    return out


# pve8to9 check_cpu_microcode_package: the vendor_id of /proc/cpuinfo picks the package. The API gives the
# first "model name" (ProcFSTools.pm read_cpuinfo, /nodes/{node}/status cpuinfo.model), which names the vendor
# on real CPUs; a generic model (a nested node's "QEMU Virtual CPU", "Common KVM processor") tells nothing.
_MICROCODE = (("Intel", "GenuineIntel", "intel-microcode"), ("AMD", "AuthenticAMD", "amd64-microcode"))


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_MICROCODE_MISSING",
            "warning",
            "CPU microcode package not installed",
            "pve8to9 WARNs when the microcode package of the node's CPU vendor (intel-microcode for GenuineIntel, "
            "amd64-microcode for AuthenticAMD) is not installed (/nodes/{node}/apt/versions lists either only "
            "when installed). The vendor is read from the CPU model name of /nodes/{node}/status; a model name "
            "that names neither Intel nor AMD (a nested node's virtual CPU) is not judged, where pve8to9 still "
            "reads the vendor.",
            "Enable the 'non-free-firmware' component in the Debian APT sources and apt install the package "
            "(intel-microcode or amd64-microcode); it takes effect at the next reboot.",
        )
    ],
    needs=[NODE_STATUS, APT_VERSIONS],
    anchors=["pve8to9:microcode"],
    pve=f"{SOURCE} check_cpu_microcode_package; pve-manager PVE/API2/APT.pm versions (@opt_pack, listed only "
    "when installed); pve-common src/PVE/ProcFSTools.pm read_cpuinfo",
)
def microcode(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        status = data.read("node_status", node)
        cpuinfo = status.get("cpuinfo") if isinstance(status, dict) else None
        model = str(cpuinfo.get("model") or "") if isinstance(cpuinfo, dict) else ""
        match = next((m for m in _MICROCODE if re.search(rf"\b{m[0]}\b", model)), None)
        if match is None or data.read("apt_versions", node) is None:  # unread: the collector's gap says so
            continue
        _word, vendor, pkg = match
        if package(data, node, pkg) is None:
            out.append(
                graded(
                    "UPGRADE_MICROCODE_MISSING",
                    "WARN",
                    node_subject(node),
                    f"the matching CPU microcode package '{pkg}' is not installed on {node}",
                    "microcode",
                    {"cpu_model": model, "vendor": vendor, "package": pkg},
                )
            )
    return out


GB = 1000**3


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_ROOTFS_LOW",
            "warning",
            "Little free space on the root file system",
            "pve8to9 WARNs below 5 GB available on / (the upgrade may fail) and gives a NOTICE below 10 GB "
            "(rootfs.avail of /nodes/{node}/status).",
            "Free space on / (apt clean, old kernels: apt autoremove, logs) before the upgrade.",
        )
    ],
    needs=[NODE_STATUS, APT_VERSIONS],
    anchors=["pve8to9:rootfs-free"],
    pve=f"{SOURCE} check_misc",
)
def rootfs_free(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        status = data.read("node_status", node)
        rootfs = status.get("rootfs") if isinstance(status, dict) else None
        if not isinstance(rootfs, dict) or rootfs.get("avail") is None:
            continue
        avail = int(rootfs["avail"])
        grade: Grade
        if avail < 5 * GB:
            grade, text = "WARN", "less than 5 GB free space on root file system, upgrade may fail"
        elif avail < 10 * GB:
            grade, text = "NOTICE", "less than 10 GB free space on root file system"
        else:
            continue
        out.append(
            graded(
                "UPGRADE_ROOTFS_LOW",
                grade,
                node_subject(node),
                f"{node}: {text}",
                "rootfs-free",
                {"avail_bytes": avail},
            )
        )
    return out


_KEY_MIN = {"rsaEncryption": (2048, "RSA"), "id-ecPublicKey": (224, "ECC")}


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CERT_KEY_WEAK",
            "critical",
            "Node certificate key too small",
            "pve8to9 FAILs for a node certificate with an RSA key under 2048 bits or an EC key under 224 bits (or "
            "of such a type without a size), and WARNs when the key type is neither RSA nor EC or cannot be told "
            "(/nodes/{node}/certificates/info).",
            "Renew the certificate with a stronger key: pvenode cert set (custom) or pvecm updatecerts --force.",
        )
    ],
    needs=[NODE_CERTIFICATES, APT_VERSIONS],
    anchors=["pve8to9:cert-key-size"],
    pve=f"{SOURCE} check_misc",
)
def cert_key_size(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        certs = data.read("node_certificates", node)
        for cert in certs if isinstance(certs, list) else []:
            kind, bits, name = cert.get("public-key-type"), cert.get("public-key-bits"), cert.get("filename")
            limit = _KEY_MIN.get(str(kind))
            grade: Grade
            if limit is None:
                grade, text = "WARN", f"'{name}': certificate's public key type '{kind}' unknown"
            elif bits is None:  # pve8to9 WARNs, then compares undef (0) with the minimum and FAILs
                grade, text = "FAIL", f"'{name}': cannot check certificate, failed to get its {limit[1]} key size"
            elif int(bits) < limit[0]:
                grade, text = "FAIL", f"'{name}': {limit[1]} public key is {bits} bits, less than {limit[0]}"
            else:
                continue
            out.append(
                graded(
                    "UPGRADE_CERT_KEY_WEAK",
                    grade,
                    Subject(kind="certificate", id=f"{node}/{name}", node=node),
                    f"{node}: {text}",
                    "cert-key-size",
                    {"type": kind, "bits": bits},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_GUESTS_RUNNING",
            "warning",
            "Guests still running on the node",
            "Before the upgrade pve8to9 WARNs when guests run on the node: migrate or stop them first.",
            "Move them with plan_node_evacuation (or Bulk Migrate in the GUI), or shut them down.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:running-guests"],
    pve=f"{SOURCE} check_virtual_guests",
)
def running_guests(data: ClusterData, t: Thresholds) -> list[Finding]:
    running: dict[str, list[int]] = {}
    for vmid in data.guest_ids:
        row = data.guests[vmid]
        if row.get("status") == "running":
            running.setdefault(str(row.get("node")), []).append(vmid)
    out = []
    for node in nodes_to_upgrade(data):
        vmids = running.get(node, [])
        if vmids:
            out.append(
                graded(
                    "UPGRADE_GUESTS_RUNNING",
                    "WARN",
                    node_subject(node),
                    f"{len(vmids)} running guest(s) on {node} - consider migrating or stopping them",
                    "running-guests",
                    {"vmids": vmids[:100], "count": len(vmids)},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CGROUP_LEGACY",
            "critical",
            "Node forced to the legacy cgroup hierarchy",
            "pve8to9 --full FAILs when the node boots with systemd.unified_cgroup_hierarchy=0 (cgroup-mode 1 in "
            "/cluster/resources): PVE 9 removed the hybrid hierarchy. pve8to9 without --full skips this check "
            "(it is part of the container cgroup v2 checks).",
            "Remove systemd.unified_cgroup_hierarchy=0 from the kernel command line and reboot.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:cgroup-legacy"],
    pve=f"{SOURCE} check_containers_cgroup_compat (run only with --full; $forced_legacy_cgroup from /proc/cmdline)",
)
def cgroup_legacy(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        mode = data.nodes.get(node, {}).get("cgroup-mode")
        if mode is not None and str(mode) == "1":
            out.append(
                graded(
                    "UPGRADE_CGROUP_LEGACY",
                    "FAIL",
                    node_subject(node),
                    f"{node} is explicitly configured for the legacy hybrid cgroup hierarchy",
                    "cgroup-legacy",
                    {"cgroup_mode": mode},
                )
            )
    return out
