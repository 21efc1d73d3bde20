"""What the upgrade checks (``analysis/checks/upgrade*.py``) share: the reads, the scope, the grades.

pve8to9 runs on one node and grades each line PASS/NOTICE/WARN/FAIL; we run its API-observable checks
over every online node and map FAIL to critical, WARN to warning and NOTICE to info, keeping the
pve8to9 grade in the evidence (``pve8to9``). The checks apply to PVE 8 nodes only: a node whose
``proxmox-ve`` package is already 9 is reported once as upgraded (design record 261203-18).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pve_steward.analysis.catalog import Need
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Severity, Subject, finding

SOURCE = "pve-manager PVE/CLI/pve8to9.pm"
FROM_MAJOR, TARGET_MAJOR = 8, 9
OLD_SUITE, NEW_SUITE = "bookworm", "trixie"
OLDER_SUITES = frozenset({"bullseye", "buster", "stretch", "jessie"})
Grade = Literal["FAIL", "WARN", "NOTICE"]
GRADE_SEVERITY: dict[str, Severity] = {"FAIL": Severity.CRITICAL, "WARN": Severity.WARNING, "NOTICE": Severity.INFO}

# the reads the upgrade checks stand on (each made once, however many checks name it)
APT_VERSIONS = Need("apt_versions", "/nodes/{node}/apt/versions", per="node")
APT_UPDATES = Need("apt_updates", "/nodes/{node}/apt/update", per="node", privilege="Sys.Modify on /nodes/{node}")
APT_REPOSITORIES = Need("apt_repositories", "/nodes/{node}/apt/repositories", per="node")
NODE_SERVICES = Need("node_services", "/nodes/{node}/services", per="node")
NODE_STATUS = Need("node_status", "/nodes/{node}/status", per="node")
NODE_CONFIG = Need("node_config", "/nodes/{node}/config", per="node", privilege="Sys.Audit on /")
NODE_NETWORK = Need("node_network", "/nodes/{node}/network", per="node", privilege="any user")
NODE_STORAGE = Need("node_storage_status", "/nodes/{node}/storage", per="node", privilege="Datastore.Audit on /storage")
NODE_CERTIFICATES = Need("node_certificates", "/nodes/{node}/certificates/info", per="node", privilege="any user")
COROSYNC_NODES = Need("corosync_nodes", "/cluster/config/nodes", privilege="Sys.Audit on /")
COROSYNC_TOTEM = Need("corosync_totem", "/cluster/config/totem", privilege="Sys.Audit on /")
COROSYNC_QDEVICE = Need("corosync_qdevice", "/cluster/config/qdevice", privilege="Sys.Audit on /", absent_ok=True)
ACCESS_ROLES = Need("access_roles", "/access/roles", privilege="any authenticated user")
BACKUP_JOBS = Need("backup_job_config", "/cluster/backup", privilege="Sys.Audit on /")


def graded(
    code: str,
    grade: Grade,
    subject: Subject,
    message: str,
    check: str,
    evidence: dict[str, Any] | None = None,
) -> Finding:
    """A finding with pve8to9's grade mapped to our severity and kept in the evidence."""
    return finding(
        code,
        subject,
        message,
        {"pve8to9": grade, "pve8to9_check": check, **(evidence or {})},
        severity=GRADE_SEVERITY[grade],
    )


def package(data: ClusterData, node: str, name: str) -> dict[str, Any] | None:
    """The first ``apt/versions`` row of ``name`` on ``node`` (pve8to9 ``$get_pkg``), None if absent."""
    rows = data.read("apt_versions", node)
    if not isinstance(rows, list):
        return None
    for row in rows:
        if isinstance(row, dict) and row.get("Package") == name:
            return row
    return None


_VERSION = re.compile(r"^(\d+)\.(\d+)[.-](\d+)")


def pve_version(data: ClusterData, node: str) -> tuple[int, int, int] | None:
    """The installed proxmox-ve version (major, minor, pkgrel) as pve8to9 parses ``OldVersion``."""
    row = package(data, node, "proxmox-ve")
    m = _VERSION.match(str((row or {}).get("OldVersion") or ""))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def node_major(data: ClusterData, node: str) -> int | None:
    """The node's PVE major: its proxmox-ve package, else its pve-manager status line, else /version."""
    version = pve_version(data, node)
    if version is not None:
        return version[0]
    status = data.read("node_status", node)
    text = str(status.get("pveversion") or "") if isinstance(status, dict) else ""
    m = re.match(r"pve-manager/(\d+)\.", text)
    if m:
        return int(m.group(1))
    head = str((data.version or {}).get("version") or "").split(".", 1)[0]
    return int(head) if head.isdecimal() else None


def nodes_to_upgrade(data: ClusterData) -> list[str]:
    """Online nodes still on PVE 8 (an unknown version counts: the checks say what they see)."""
    memo = data.memo["upgrade_nodes"]
    if "to_upgrade" not in memo:
        memo["to_upgrade"] = [n for n in data.online_nodes if (node_major(data, n) or FROM_MAJOR) <= FROM_MAJOR]
    return memo["to_upgrade"]  # type: ignore[no-any-return]


def cluster_to_upgrade(data: ClusterData) -> bool:
    """Cluster-wide checks apply while any node is still on PVE 8 (or no node could be asked)."""
    return bool(nodes_to_upgrade(data)) or not data.online_nodes


def guests_to_upgrade(data: ClusterData) -> list[int]:
    """Guests on a node that is still on PVE 8, in vmid order."""
    nodes = set(nodes_to_upgrade(data))
    return [v for v in data.guest_ids if data.guests[v].get("node") in nodes]


def node_subject(node: str) -> Subject:
    return Subject(kind="node", id=node)


def clustered(data: ClusterData) -> bool:
    return any(r.get("type") == "cluster" for r in data.cluster_status)


# pve8to9 checks the API cannot observe (they read files, run commands or look at /sys and /proc on the node):
# named so a report never suggests they were done. Anchor names as in anchor-checks.md.
SHELL_CHECKS: tuple[tuple[str, str], ...] = (
    ("rbd-keyring", "external RBD storages without a keyring in /etc/pve/priv/ceph"),
    ("maxfiles-vzdump-conf", "'maxfiles' in /etc/vzdump.conf (the API shows it turned into prune-backups)"),
    ("expected-votes", "corosync expected/total votes (corosync-quorumtool)"),
    ("ring-resolve", "corosync ring addresses that resolve (or fail to) like corosync resolves them"),
    ("cifs-credentials", "CIFS credentials at the old /etc/pve/priv/*.cred location"),
    ("ct-cgroupv2-os", "container distributions too old for cgroup v2 (pve8to9 --full)"),
    ("lxcfs-fuse3", "LXCFS still on FUSE 2 after the upgrade"),
    ("nvidia-vgpu", "NVIDIA vGPU manager service"),
    ("bootloader", "grub-efi-amd64 / systemd-boot meta-package and removable-ESP state"),
    ("dkms", "DKMS modules built for the running kernel"),
    ("notif-legacy", "legacy filter/group sections in /etc/pve/notifications.cfg"),
    ("lvm-autoactivation", "LVM guest volumes with autoactivation enabled"),
    ("thin-check-options", "lvm.conf thin_check_options without --clear-needs-check-flag"),
    ("rrd-migration", "RRD files in the old format / free space for the new format"),
    ("ipam-db", "legacy IPAM and MAC databases not migrated"),
    ("sysctl-conf", "settings left in /etc/sysctl.conf"),
    ("ssh-ciphers", "unsupported ciphers in /root/.ssh/config"),
    ("hostname-ip", "the node's hostname resolves to an IP configured on exactly one interface"),
    ("udev-nic-rules", "old /etc/udev/rules.d/70-persistent-net.rules"),
)
SHELL_ADVICE = "run pve8to9 on each node (pve8to9 --full) for the checks that need a shell on the node"
