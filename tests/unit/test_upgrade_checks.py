"""The upgrade area (pve8to9's API-observable checks): one planted problem per finding, and a clean PVE 8.4
cluster that gives none. Payloads are shaped like PVE 8.4's answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pve_steward.analysis.catalog import checks_in
from pve_steward.analysis.ceph import CephData
from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.analysis.findings import Finding
from pve_steward.analysis.health import AREAS, diagnose
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import (
    GiB,
    cluster_status,
    data,
    guest_row,
    lxc_config,
    node_row,
    node_storage_row,
    qemu_config,
    storage_cfg,
)
from tests.unit.test_ceph import osd, tree

NODES = ("pve1", "pve2", "pve3")
SERVICES = ("chrony", "corosync", "pve-cluster", "pvedaemon", "pveproxy", "pvescheduler", "pvestatd")


def pkg(name: str, version: str, **extra: Any) -> dict[str, Any]:
    return {
        "Package": name,
        "Title": name,
        "Description": name,
        "Version": version,
        "OldVersion": version,
        "Priority": "optional",
        "Section": "admin",
        "Arch": "amd64",
        "Origin": "Proxmox",
        "CurrentState": "Installed",
        **extra,
    }


def service(name: str, active: str = "active", unit: str = "enabled") -> dict[str, Any]:
    state = {"active": "running", "failed": "failed"}.get(active, "dead")
    return {"name": name, "service": name, "desc": name, "state": state, "unit-state": unit, "active-state": active}


def clean() -> ClusterData:
    """Three PVE 8.4 nodes with nothing pve8to9 would warn about."""
    per_node: dict[str, dict[str, Any]] = {
        "apt_versions": {
            n: [
                pkg("proxmox-ve", "8.4.0", RunningKernel="6.8.12-9-pve"),
                pkg("pve-manager", "8.4.14"),
                pkg("proxmox-kernel-6.8", "6.8.12-9"),
                pkg("corosync", "3.1.9-pve1"),
                pkg("amd64-microcode", "3.20250311.1~deb12u1"),
            ]
            for n in NODES
        },
        "apt_updates": {n: [] for n in NODES},
        "apt_repositories": {
            n: {
                "files": [
                    {
                        "path": "/etc/apt/sources.list",
                        "file-type": "list",
                        "repositories": [
                            {
                                "Types": ["deb"],
                                "URIs": ["http://deb.debian.org/debian"],
                                "Suites": ["bookworm"],
                                "Components": ["main"],
                                "Enabled": 1,
                                "FileType": "list",
                            },
                            {
                                "Types": ["deb"],
                                "URIs": ["http://security.debian.org"],
                                "Suites": ["bookworm-security"],
                                "Components": ["main"],
                                "Enabled": 1,
                                "FileType": "list",
                            },
                            {
                                "Types": ["deb"],
                                "URIs": ["http://download.proxmox.com/debian/pve"],
                                "Suites": ["bookworm"],
                                "Components": ["pve-no-subscription"],
                                "Enabled": 1,
                                "FileType": "list",
                            },
                        ],
                    }
                ],
                "errors": [],
                "infos": [],
                "standard-repos": [],
            }
            for n in NODES
        },
        "node_services": {
            n: [service(s) for s in SERVICES] + [service("systemd-timesyncd", "inactive", "not-found")] for n in NODES
        },
        "node_status": {
            n: {
                "pveversion": "pve-manager/8.4.14/abc",
                "rootfs": {"avail": 60 * GiB, "total": 100 * GiB},
                "cpuinfo": {"model": "AMD EPYC 7302P 16-Core Processor", "cpus": 32, "sockets": 1},
            }
            for n in NODES
        },
        "node_config": {n: {"description": "rack 4", "digest": "x"} for n in NODES},
        "node_network": {
            n: [{"iface": "vmbr0", "type": "bridge"}, {"iface": "vmbr9", "type": "bridge", "mtu": 9000}] for n in NODES
        },
        "node_storage_status": {
            n: [
                node_storage_row("local", "dir", 100 * GiB, 10 * GiB),
                node_storage_row("off", "nfs", 0, 0, active=0, enabled=0),
            ]
            for n in NODES
        },
        "node_certificates": {
            n: [{"filename": "pve-ssl.pem", "public-key-type": "rsaEncryption", "public-key-bits": 2048}] for n in NODES
        },
    }
    reads: dict[str, dict[str, Any]] = {k: dict(v) for k, v in per_node.items()}
    reads["corosync_nodes"] = {
        "": [
            {"node": n, "name": n, "nodeid": str(i), "quorum_votes": "1", "ring0_addr": f"10.0.0.{i}"}
            for i, n in enumerate(NODES, start=1)
        ]
    }
    reads["corosync_totem"] = {"": {"cluster_name": "lab", "secauth": "on", "link_mode": "passive", "version": "2"}}
    reads["corosync_qdevice"] = {"": {}}
    reads["access_roles"] = {
        "": [
            {"roleid": "PVEAuditor", "privs": "Sys.Audit,VM.Audit,VM.Monitor", "special": 1},
            {"roleid": "Watcher", "privs": "VM.Audit,Sys.Audit", "special": 0},
        ]
    }
    reads["ceph_config"] = {"": "[global]\n\t fsid = x\n\t mon_host = 10.0.0.1 10.0.0.2\n[client]\n\t keyring = /k\n"}
    reads["backup_job_config"] = {
        "": [{"id": "nightly", "type": "vzdump", "storage": "pbs", "prune-backups": {"keep-daily": 7}}]
    }
    return data(
        cluster_status=cluster_status(dict.fromkeys(NODES, True)),
        resources=[node_row(n) for n in NODES]
        + [guest_row(100, "pve1", status="stopped"), guest_row(200, "pve2", "lxc", status="stopped")],
        version={"version": "8.4.14", "release": "8.4"},
        storage_config=[
            storage_cfg("local", "dir", "iso,vztmpl,backup", path="/var/lib/vz"),
            storage_cfg("ceph-vm", "rbd", "images,rootdir"),
            storage_cfg("san", "iscsi", "none", portal="10.0.0.9", target="iqn.x"),
        ],
        configs={
            100: qemu_config("web", machine="pc-q35-8.1", net0="virtio=BC:24:11:00:00:01,bridge=vmbr9,mtu=1500"),
            200: lxc_config("ct", ostype="debian"),
        },
        reads=reads,
        ceph=CephData(
            status={"health": {"status": "HEALTH_OK", "checks": {}}},
            flags=[{"name": "noout", "value": 1}],
            metadata={
                "mon": {"a": {"ceph_version": "ceph version 19.2.3 (abc) squid (stable)"}},
                "osd": [{"ceph_version": "ceph version 19.2.3 (abc) squid (stable)"}],
                "node": {n: {"version": {"str": "19.2.3"}} for n in NODES},
            },
        ),
    )


def run(d: ClusterData) -> list[Finding]:
    return diagnose(d, Thresholds(), ["upgrade"], None, "upgrade").findings


def plant_read(key: str, node: str, value: Any) -> Callable[[ClusterData], None]:
    def plant(d: ClusterData) -> None:
        d.reads[key][node] = value

    return plant


def edit_read(key: str, node: str, change: Callable[[Any], None]) -> Callable[[ClusterData], None]:
    def plant(d: ClusterData) -> None:
        change(d.reads[key][node])

    return plant


def _set_pkg(name: str, **fields: Any) -> Callable[[Any], None]:
    def change(rows: list[dict[str, Any]]) -> None:
        row = next((r for r in rows if r["Package"] == name), None)
        if row is None:
            rows.append(pkg(name, fields.get("OldVersion", "1")))
            row = rows[-1]
        row.update(fields)

    return change


def _service(name: str, active: str, unit: str = "enabled") -> Callable[[Any], None]:
    def change(rows: list[dict[str, Any]]) -> None:
        rows[:] = [r for r in rows if r["name"] != name] + [service(name, active, unit)]

    return change


def _add_repo(suite: str, component: str = "main") -> Callable[[Any], None]:
    def change(answer: dict[str, Any]) -> None:
        answer["files"][0]["repositories"].append(
            {"Types": ["deb"], "URIs": ["http://x"], "Suites": [suite], "Components": [component], "Enabled": 1}
        )

    return change


def _config(vmid: int, **values: Any) -> Callable[[ClusterData], None]:
    def plant(d: ClusterData) -> None:
        d.configs[vmid].update(values)
        for key in [k for k, v in values.items() if v is None]:
            d.configs[vmid].pop(key)

    return plant


def _snapshot(vmid: int, name: str, **values: Any) -> Callable[[ClusterData], None]:
    """A snapshot of the guest: its config names it as parent, its section is the current config plus ``values``."""

    def plant(d: ClusterData) -> None:
        section = {k: v for k, v in {**d.configs[vmid], **values}.items() if v is not None}
        section.pop("digest", None)
        d.configs[vmid]["parent"] = name
        d.snapshot_configs.setdefault(vmid, {})[name] = {**section, "snaptime": 1764000000}

    return plant


def _storage(row: dict[str, Any]) -> Callable[[ClusterData], None]:
    def plant(d: ClusterData) -> None:
        d.storage_config.append(row)

    return plant


def _status(node: str, online: bool = True, quorate: bool = True) -> Callable[[ClusterData], None]:
    def plant(d: ClusterData) -> None:
        d.cluster_status = cluster_status({n: (online if n == node else True) for n in NODES}, quorate=quorate)

    return plant


def _two_nodes(d: ClusterData) -> None:
    """corosync.conf and pmxcfs both know only pve1 and pve2."""
    d.reads["corosync_nodes"][""].pop()
    d.cluster_status = [r for r in d.cluster_status if r.get("name") != "pve3"]


def _ceph(change: Callable[[CephData], None]) -> Callable[[ClusterData], None]:
    def plant(d: ClusterData) -> None:
        assert d.ceph is not None
        change(d.ceph)

    return plant


def _upgrade_all(d: ClusterData, nodes: tuple[str, ...] = NODES) -> None:
    """The nodes run PVE 9 (proxmox-ve 9.1, its kernel, pve-manager up to date)."""
    for n in nodes:
        _set_pkg("proxmox-ve", OldVersion="9.1.0", RunningKernel="6.17.2-1-pve")(d.reads["apt_versions"][n])
        d.reads["apt_updates"][n] = [pkg("pve-manager", "9.1.3")]


def _resource(node: str, **fields: Any) -> Callable[[ClusterData], None]:
    def plant(d: ClusterData) -> None:
        for row in d.resources:
            if row.get("type") == "node" and row["node"] == node:
                row.update(fields)
        d.resources.append(guest_row(300, node, status="running"))

    return plant


# (name, plant, code, pve8to9 grade, subject id)
PLANTS: list[tuple[str, Callable[[ClusterData], None], str, str, str]] = [
    (
        "updates",
        plant_read("apt_updates", "pve2", [pkg("pve-manager", "8.4.15")]),
        "UPGRADE_UPDATES_PENDING",
        "WARN",
        "pve2",
    ),
    (
        "pve too old",
        edit_read("apt_versions", "pve1", _set_pkg("proxmox-ve", OldVersion="8.3.0")),
        "UPGRADE_PVE_TOO_OLD",
        "FAIL",
        "pve1",
    ),
    (
        "kernel not rebooted",
        edit_read(
            "apt_versions",
            "pve1",
            lambda rows: (
                _set_pkg("proxmox-ve", RunningKernel="5.15.158-2-pve")(rows),
                _set_pkg("pve-kernel-6.8", OldVersion="8.4.0")(rows),
            ),
        ),
        "UPGRADE_KERNEL_NOT_SUITABLE",
        "WARN",
        "pve1",
    ),
    (
        "kernel unexpected",
        edit_read("apt_versions", "pve3", _set_pkg("proxmox-ve", RunningKernel="6.1.0-x")),
        "UPGRADE_KERNEL_NOT_SUITABLE",
        "WARN",
        "pve3",
    ),
    (
        "corosync 2",
        edit_read("apt_versions", "pve2", _set_pkg("corosync", OldVersion="2.4.4-pve1")),
        "UPGRADE_COROSYNC_VERSION",
        "FAIL",
        "pve2",
    ),
    (
        "daemon failed",
        edit_read("node_services", "pve2", _service("pvestatd", "failed")),
        "UPGRADE_DAEMON_NOT_ACTIVE",
        "FAIL",
        "pve2",
    ),
    (
        "daemon inactive",
        edit_read("node_services", "pve1", _service("pvescheduler", "inactive")),
        "UPGRADE_DAEMON_NOT_ACTIVE",
        "FAIL",
        "pve1",
    ),
    (
        "daemon activating",
        edit_read("node_services", "pve1", _service("corosync", "activating")),
        "UPGRADE_DAEMON_NOT_ACTIVE",
        "WARN",
        "pve1",
    ),
    (
        "daemon not installed",
        edit_read("node_services", "pve3", _service("pveproxy", "inactive", "not-found")),
        "UPGRADE_DAEMON_NOT_ACTIVE",
        "WARN",
        "pve3",
    ),
    (
        "timesyncd",
        edit_read(
            "node_services",
            "pve1",
            lambda rows: (
                _service("chrony", "inactive", "not-found")(rows),
                _service("systemd-timesyncd", "active")(rows),
            ),
        ),
        "UPGRADE_TIME_SYNC",
        "WARN",
        "pve1",
    ),
    (
        "no time daemon",
        edit_read("node_services", "pve2", _service("chrony", "failed")),
        "UPGRADE_TIME_SYNC",
        "WARN",
        "pve2",
    ),
    (
        "rootfs < 5 GB",
        plant_read("node_status", "pve2", {"rootfs": {"avail": 4 * 10**9}}),
        "UPGRADE_ROOTFS_LOW",
        "WARN",
        "pve2",
    ),
    (
        "rootfs < 10 GB",
        plant_read("node_status", "pve2", {"rootfs": {"avail": 8 * 10**9}}),
        "UPGRADE_ROOTFS_LOW",
        "NOTICE",
        "pve2",
    ),
    (
        "rsa 1024",
        plant_read(
            "node_certificates",
            "pve1",
            [{"filename": "pveproxy-ssl.pem", "public-key-type": "rsaEncryption", "public-key-bits": 1024}],
        ),
        "UPGRADE_CERT_KEY_WEAK",
        "FAIL",
        "pve1/pveproxy-ssl.pem",
    ),
    (
        "ec 192",
        plant_read(
            "node_certificates",
            "pve1",
            [{"filename": "ec.pem", "public-key-type": "id-ecPublicKey", "public-key-bits": 192}],
        ),
        "UPGRADE_CERT_KEY_WEAK",
        "FAIL",
        "pve1/ec.pem",
    ),
    (
        "key type unknown",
        plant_read(
            "node_certificates", "pve1", [{"filename": "odd.pem", "public-key-type": "ED25519", "public-key-bits": 256}]
        ),
        "UPGRADE_CERT_KEY_WEAK",
        "WARN",
        "pve1/odd.pem",
    ),
    (
        "rsa without size",
        plant_read("node_certificates", "pve2", [{"filename": "x.pem", "public-key-type": "rsaEncryption"}]),
        "UPGRADE_CERT_KEY_WEAK",
        "FAIL",
        "pve2/x.pem",
    ),
    (
        "microcode missing",
        edit_read("apt_versions", "pve3", lambda rows: rows.pop()),
        "UPGRADE_MICROCODE_MISSING",
        "WARN",
        "pve3",
    ),
    (
        "intel microcode missing",
        edit_read("node_status", "pve1", lambda s: s["cpuinfo"].update(model="Intel(R) Xeon(R) Gold 6338 CPU")),
        "UPGRADE_MICROCODE_MISSING",
        "WARN",
        "pve1",
    ),
    ("running guests", _resource("pve3"), "UPGRADE_GUESTS_RUNNING", "WARN", "pve3"),
    ("legacy cgroup", _resource("pve2", **{"cgroup-mode": 1}), "UPGRADE_CGROUP_LEGACY", "FAIL", "pve2"),
    ("not quorate", _status("pve1", quorate=False), "UPGRADE_NOT_QUORATE", "FAIL", "cluster"),
    ("node offline", _status("pve3", online=False), "UPGRADE_NODES_OFFLINE", "FAIL", "cluster"),
    (
        "quorum votes",
        edit_read("corosync_nodes", "", lambda rows: rows[0].update(quorum_votes="2")),
        "UPGRADE_QUORUM_VOTES",
        "WARN",
        "cluster",
    ),
    ("two nodes", _two_nodes, "UPGRADE_FEW_VOTERS", "WARN", "cluster"),
    (
        "nodelist no ring",
        edit_read("corosync_nodes", "", lambda rows: rows[1].pop("ring0_addr")),
        "UPGRADE_NODELIST_INCOMPLETE",
        "FAIL",
        "pve2",
    ),
    (
        "nodelist larger than pmxcfs",
        edit_read("corosync_nodes", "", lambda rows: rows.append({**rows[0], "node": "pve4", "name": "pve4"})),
        "UPGRADE_COROSYNC_NODELIST_MISMATCH",
        "FAIL",
        "cluster",
    ),
    (
        "nodelist no nodeid",
        edit_read("corosync_nodes", "", lambda rows: rows[2].pop("nodeid")),
        "UPGRADE_NODELIST_INCOMPLETE",
        "FAIL",
        "pve3",
    ),
    (
        "totem udpu",
        edit_read("corosync_totem", "", lambda t: t.update(transport="udpu")),
        "UPGRADE_COROSYNC_TOTEM",
        "FAIL",
        "cluster",
    ),
    (
        "totem no secauth",
        edit_read("corosync_totem", "", lambda t: t.pop("secauth")),
        "UPGRADE_COROSYNC_TOTEM",
        "FAIL",
        "cluster",
    ),
    (
        "totem 3des",
        edit_read("corosync_totem", "", lambda t: t.update(crypto_cipher="3des")),
        "UPGRADE_COROSYNC_TOTEM",
        "FAIL",
        "cluster",
    ),
    (
        "role VM.Monitor",
        edit_read("access_roles", "", lambda rows: rows.append({"roleid": "Mon", "privs": "VM.Monitor", "special": 0})),
        "UPGRADE_ROLE_VM_MONITOR",
        "FAIL",
        "role/Mon",
    ),
    (
        "node notes",
        plant_read("node_config", "pve2", {"description": "x" * (64 * 1024 + 1)}),
        "UPGRADE_NODE_DESCRIPTION_LONG",
        "WARN",
        "pve2",
    ),
    ("mixed suites", edit_read("apt_repositories", "pve1", _add_repo("trixie")), "UPGRADE_APT_SUITES", "FAIL", "pve1"),
    (
        "strange suite",
        edit_read("apt_repositories", "pve1", _add_repo("jammy")),
        "UPGRADE_APT_SUITES",
        "NOTICE",
        "pve1",
    ),
    (
        "pvetest bookworm",
        edit_read("apt_repositories", "pve1", _add_repo("bookworm", "pvetest")),
        "UPGRADE_APT_SUITES",
        "WARN",
        "pve1",
    ),
    (
        "pve-test bookworm",
        edit_read("apt_repositories", "pve1", _add_repo("bookworm", "pve-test")),
        "UPGRADE_APT_SUITES",
        "FAIL",
        "pve1",
    ),
    (
        "storage inactive",
        plant_read("node_storage_status", "pve3", [node_storage_row("nfs1", "nfs", 0, 0, active=0)]),
        "UPGRADE_STORAGE_INACTIVE",
        "WARN",
        "nfs1",
    ),
    ("content none", _storage(storage_cfg("old", "lvm", "", vgname="vg")), "UPGRADE_CONTENT_NONE", "FAIL", "old"),
    (
        "content missing",
        _config(100, scsi1="local:100/vm-100-disk-1.qcow2,size=8G"),
        "UPGRADE_VOLUME_CONTENT_MISMATCH",
        "WARN",
        "100",
    ),
    (
        "storage missing",
        _config(200, mp0="gone:subvol-200-disk-1,mp=/srv,size=8G"),
        "UPGRADE_VOLUME_CONTENT_MISMATCH",
        "WARN",
        "200",
    ),
    (
        "content dirs",
        _storage(storage_cfg("m", "dir", "iso,backup", path="/srv", **{"content-dirs": "iso=x,backup=x/"})),
        "UPGRADE_CONTENT_DIRS_SHARED",
        "FAIL",
        "m",
    ),
    (
        "glusterfs",
        _storage(storage_cfg("g", "glusterfs", "images", server="1.2.3.4", volume="v")),
        "UPGRADE_GLUSTERFS",
        "FAIL",
        "g",
    ),
    ("maxfiles storage", _storage(storage_cfg("nfs", "nfs", "backup", maxfiles=3)), "UPGRADE_MAXFILES", "FAIL", "nfs"),
    (
        "maxfiles cron job",
        edit_read("backup_job_config", "", lambda jobs: jobs.append({"id": "ab12:1", "type": "vzdump", "maxfiles": 2})),
        "UPGRADE_MAXFILES",
        "FAIL",
        "vzdump.cron",
    ),
    (
        "notification policy",
        edit_read("backup_job_config", "", lambda jobs: jobs[0].update({"notification-policy": "always"})),
        "UPGRADE_BACKUP_JOB_NOTIFICATION",
        "FAIL",
        "nightly",
    ),
    ("guest notes", _config(100, description="y" * (8 * 1024 + 1)), "UPGRADE_GUEST_DESCRIPTION_LONG", "WARN", "100"),
    (
        "lxc.cgroup",
        _config(200, lxc=[["lxc.cgroup.devices.allow", "c 10:200 rwm"]]),
        "UPGRADE_LXC_CGROUP_KEYS",
        "WARN",
        "200",
    ),
    ("ct ostype", _config(200, ostype=None), "UPGRADE_CT_NO_OSTYPE", "WARN", "200"),
    ("machine 5.2", _config(100, machine="pc-i440fx-5.2"), "UPGRADE_MACHINE_VERSION_OLD", "WARN", "100"),
    (
        "machine type=",
        _config(100, machine="type=pc-q35-4.2,viommu=virtio"),
        "UPGRADE_MACHINE_VERSION_OLD",
        "WARN",
        "100",
    ),
    (
        "hibernated 4.2",
        _config(100, vmstate="local-lvm:vm-100-state-x", runningmachine="pc-q35-4.2+pve0"),
        "UPGRADE_MACHINE_VERSION_OLD",
        "WARN",
        "100",
    ),
    (
        "windows unpinned",
        _config(100, machine=None, ostype="win10"),
        "UPGRADE_MACHINE_VERSION_OLD",
        "WARN",
        "100",
    ),
    (
        "old snapshot",
        _snapshot(100, "pre-update", machine="pc-i440fx-5.1"),
        "UPGRADE_MACHINE_VERSION_OLD",
        "WARN",
        "100",
    ),
    (
        "old live snapshot",
        _snapshot(100, "live", runningmachine="pc-i440fx-4.2+pve0", vmstate="ceph-vm:vm-100-state-live", machine=None),
        "UPGRADE_MACHINE_VERSION_OLD",
        "WARN",
        "100",
    ),
    ("bridge mtu", _config(100, net0="virtio=BC:24:11:00:00:01,bridge=vmbr9"), "UPGRADE_BRIDGE_MTU", "NOTICE", "100"),
    (
        "bridge mtu model=",
        _config(100, net0="model=virtio,macaddr=BC:24:11:00:00:01,bridge=vmbr9"),
        "UPGRADE_BRIDGE_MTU",
        "NOTICE",
        "100",
    ),
    (
        "ceph health",
        _ceph(lambda c: c.status.update(health={"status": "HEALTH_WARN", "checks": {"A": {}, "B": {}}})),
        "UPGRADE_CEPH_HEALTH",
        "WARN",
        "health",
    ),  # type: ignore[union-attr]
    (
        "noout",
        _ceph(lambda c: setattr(c, "flags", [{"name": "noout", "value": 0}])),
        "UPGRADE_CEPH_NOOUT",
        "WARN",
        "flags",
    ),
    (
        "ceph 18",
        _ceph(lambda c: c.metadata["node"]["pve2"].update(version={"str": "18.2.4"})),
        "UPGRADE_CEPH_VERSION",
        "FAIL",
        "version/pve2",
    ),
    (
        "ceph 20",
        _ceph(lambda c: c.metadata["node"]["pve2"].update(version={"str": "20.1.0"})),
        "UPGRADE_CEPH_VERSION",
        "WARN",
        "version/pve2",
    ),
    (
        "ceph keyring in global",
        plant_read("ceph_config", "", "[global]\n mon host = a\n keyring = /k\n"),
        "UPGRADE_CEPH_CONFIG",
        "WARN",
        "config",
    ),
    (
        "ceph no mon_host",
        plant_read("ceph_config", "", "[global]\n fsid = x\n"),
        "UPGRADE_CEPH_CONFIG",
        "WARN",
        "config",
    ),
    (
        "ceph ipv6 only half",
        plant_read("ceph_config", "", "[global]\n mon_host = a\n ms_bind_ipv6 = true\n"),
        "UPGRADE_CEPH_CONFIG",
        "WARN",
        "config",
    ),
    ("ceph empty config", plant_read("ceph_config", "", ""), "UPGRADE_CEPH_CONFIG", "WARN", "config"),
    (
        "ceph mixed",
        _ceph(lambda c: c.metadata["osd"].append({"ceph_version": "ceph version 18.2.4 (def) reef (stable)"})),
        "UPGRADE_CEPH_MIXED_VERSIONS",
        "WARN",
        "daemons/osd",
    ),
    (
        "ceph overall",  # each type uniform, monitors on 18, OSDs on 19
        _ceph(lambda c: c.metadata["mon"]["a"].update(ceph_version="ceph version 18.2.4 (def) reef (stable)")),
        "UPGRADE_CEPH_OVERALL_VERSIONS",
        "WARN",
        "daemons/overall",
    ),
    ("noout after the upgrade", _upgrade_all, "UPGRADE_CEPH_NOOUT_STILL_SET", "WARN", "flags"),
]
ALSO = {  # codes a plant brings besides its own
    "legacy cgroup": {"UPGRADE_GUESTS_RUNNING"},
    "ceph mixed": {"UPGRADE_CEPH_OVERALL_VERSIONS"},  # one type mixed: all types together are too
    "noout after the upgrade": {"UPGRADE_NODE_UPGRADED"},
}


def test_a_clean_pve8_cluster_gives_no_upgrade_finding() -> None:
    assert run(clean()) == []


@pytest.mark.parametrize(("name", "plant", "code", "grade", "subject"), PLANTS, ids=[p[0] for p in PLANTS])
def test_each_planted_problem_gives_its_finding(
    name: str, plant: Callable[[ClusterData], None], code: str, grade: str, subject: str
) -> None:
    d = clean()
    plant(d)
    found = [f for f in run(d) if f.code == code]
    assert [f.subject.id for f in found] == [subject], [f.message for f in run(d)]
    f = found[0]
    assert f.evidence["pve8to9"] == grade
    assert f.severity.value == {"FAIL": "critical", "WARN": "warning", "NOTICE": "info"}[grade]
    assert {f.code for f in run(d)} == {code} | ALSO.get(name, set())


def test_every_upgrade_check_is_exercised_and_anchored() -> None:
    planted = {p[2] for p in PLANTS} | {"UPGRADE_NODE_UPGRADED"}
    declared = {c.code for chk in checks_in(["upgrade"]) for c in chk.codes}
    assert declared == planted
    for chk in checks_in(["upgrade"]):
        assert chk.pve.startswith("pve-manager PVE/CLI/pve8to9.pm ")
        assert all(a.startswith("pve8to9:") for a in chk.anchors)


def test_the_upgrade_area_is_not_part_of_the_health_check() -> None:
    assert "upgrade" not in AREAS
    d = clean()
    PLANTS[0][1](d)
    assert not [f for f in diagnose(d, Thresholds(), None, None).findings if f.code.startswith("UPGRADE_")]


def test_nodes_already_on_9_are_said_so_and_not_checked() -> None:
    d = clean()
    assert d.ceph is not None
    d.ceph.flags = [{"name": "noout", "value": 0}]  # noout set after the upgrade is its own check (below)
    _upgrade_all(d)
    for n in NODES:
        d.reads["node_status"][n]["rootfs"] = {"avail": 1}
    d.storage_config.append(storage_cfg("g", "glusterfs", "images"))
    found = run(d)
    assert sorted((f.code, f.subject.id) for f in found) == [("UPGRADE_NODE_UPGRADED", n) for n in NODES]


def test_mixed_versions_count_up_osds_only() -> None:
    """pve8to9 reads `ceph versions` (up OSDs, OSDMonitor count_metadata); `osd metadata` lists down ones too."""
    d = clean()
    assert d.ceph is not None
    new, old = "ceph version 19.2.3 (abc) squid (stable)", "ceph version 18.2.4 (def) reef (stable)"
    d.ceph.metadata["osd"] = [{"id": 0, "ceph_version": new}, {"id": 7, "ceph_version": old}]
    d.ceph.osd_tree = tree(osd(0, "pve1"), osd(7, "pve2", up=False))
    assert [f for f in run(d) if f.code == "UPGRADE_CEPH_MIXED_VERSIONS"] == []
    d.ceph.osd_tree = tree(osd(0, "pve1"), osd(7, "pve2"))
    assert [f.subject.id for f in run(d) if f.code == "UPGRADE_CEPH_MIXED_VERSIONS"] == ["daemons/osd"]


def test_a_mixed_cluster_checks_only_its_pve8_nodes() -> None:
    d = clean()
    _set_pkg("proxmox-ve", OldVersion="9.1.0", RunningKernel="6.17.2-1-pve")(d.reads["apt_versions"]["pve1"])
    for n in NODES:
        d.reads["node_status"][n]["rootfs"] = {"avail": 1}
    found = run(d)
    assert sorted((f.code, f.subject.id) for f in found) == [
        ("UPGRADE_CEPH_NOOUT_STILL_SET", "flags"),  # pve8to9 on pve1: one Ceph version, noout set
        ("UPGRADE_NODE_UPGRADED", "pve1"),
        ("UPGRADE_ROOTFS_LOW", "pve2"),
        ("UPGRADE_ROOTFS_LOW", "pve3"),
    ]
    (noout,) = [f for f in found if f.code == "UPGRADE_CEPH_NOOUT_STILL_SET"]
    assert "keep it until pve2, pve3 are upgraded too" in noout.message


@pytest.mark.parametrize(
    ("noout", "mixed", "expected"),
    [
        (1, False, ["UPGRADE_CEPH_NOOUT_STILL_SET"]),  # pve8to9: 'noout' flag set, upgrade seems finished
        (0, False, []),
        (0, True, ["UPGRADE_CEPH_NOOUT"]),  # Ceph versions still mixed: noout still wanted
        (1, True, []),
    ],
)
def test_noout_expectation_after_the_upgrade(noout: int, mixed: bool, expected: list[str]) -> None:
    """pve8to9 check_ceph: $noout_wanted = !$upgraded only when one overall Ceph version runs."""
    d = clean()
    assert d.ceph is not None
    d.ceph.flags = [{"name": "noout", "value": noout}]
    if mixed:  # a build of another version: `ceph versions` overall has two entries
        d.ceph.metadata["osd"].append({"ceph_version": "ceph version 19.2.2 (fff) squid (stable)"})
    _upgrade_all(d)
    assert [f.code for f in run(d) if f.code.startswith("UPGRADE_CEPH_")] == expected


def test_an_unread_answer_is_a_gap_not_a_clean_bill() -> None:
    d = clean()
    del d.reads["node_services"]["pve2"]
    d.missing.append(Missing("node services of pve2", "/nodes/pve2/services", "timeout", "pve2", affects=("upgrade",)))
    report = diagnose(d, Thresholds(), ["upgrade"], None, "upgrade")
    assert not report.complete
    assert [f.code for f in report.findings] == ["DATA_INCOMPLETE"]


def test_content_none_counts_none_as_a_content_key() -> None:
    """pve8to9 check_storage_content FAILs only for an empty content hash (keys == 0) on a type whose plugin does
    not accept 'none'; a configured 'none' is the key 'none' (Plugin.pm decode_value). btrfs and pbs accept it."""
    d = clean()
    d.storage_config += [
        storage_cfg("b", "btrfs", "none", path="/mnt/b"),
        storage_cfg("p", "pbs", "none", server="10.0.0.5", datastore="x"),
        storage_cfg("p2", "pbs", "", server="10.0.0.5", datastore="y"),  # pbs is shared (and accepts none)
        storage_cfg("l", "lvm", "none", vgname="vg"),
        storage_cfg("e", "lvmthin", "", vgname="vg", thinpool="data"),
        storage_cfg("s", "lvm", "", vgname="vg", shared=1),  # an LVM on a SAN LUN: shared, skipped
    ]
    assert [f.subject.id for f in run(d) if f.code == "UPGRADE_CONTENT_NONE"] == ["e"]


def _dirs(*rows: dict[str, Any], upgraded: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    return [
        (f.subject.id, f.message)
        for f in _storage_run(*rows, upgraded=upgraded)
        if f.code == "UPGRADE_CONTENT_DIRS_SHARED"
    ]


def _storage_run(*rows: dict[str, Any], upgraded: tuple[str, ...] = ()) -> list[Finding]:
    d = clean()
    d.storage_config += list(rows)
    for n in upgraded:  # already on PVE 9: pve8to9 does not run there
        _set_pkg("proxmox-ve", OldVersion="9.1.0", RunningKernel="6.17.2-1-pve")(d.reads["apt_versions"][n])
    return run(d)


def test_content_dirs_join_the_override_below_the_path() -> None:
    """Plugin.pm get_subdir returns "$path/$subdir": an override '/dump' is /srv//dump = /srv/dump, which the
    backup directory also is. /storage gives content-dirs as the hash decode_value built; a string is read too."""
    for dirs in ("iso=/dump", {"iso": "/dump"}, {"iso": "dump"}):
        found = _dirs(storage_cfg("m", "dir", "iso,backup", path="/srv", **{"content-dirs": dirs}))
        assert found == [("m", "storage 'm' uses directory /srv/dump for multiple content types (backup, iso)")]
    assert _dirs(storage_cfg("r", "dir", "iso,backup", path="/", **{"content-dirs": {"iso": "dump"}})) == [
        ("r", "storage 'r' uses directory /dump for multiple content types (backup, iso)")
    ]


def test_content_dirs_fail_once_at_a_directory_storage_with_content_none() -> None:
    """get_subdir dies "unknown vtype 'none'"; check_storage_health catches it once and the loop (sorted storage
    ids) checks nothing after it on that node."""
    none = storage_cfg("a-empty", "dir", "none", path="/srv/empty")
    clash = storage_cfg("m", "dir", "iso,backup", path="/srv", **{"content-dirs": "iso=dump"})
    assert _dirs(none, clash) == [
        ("a-empty", "failed to check storage content directories - unknown vtype 'none' (storage 'a-empty')")
    ]


def test_content_checks_skip_storages_not_on_a_node_to_upgrade() -> None:
    """pve8to9 skips what storage_check_enabled refuses on the node it runs on (the nodes list): a storage only on
    pve3, already on PVE 9, is checked by no node still to upgrade; on pve2 it is."""
    clash = storage_cfg("m", "dir", "iso,backup", path="/srv", nodes="pve3", **{"content-dirs": "iso=dump"})
    empty = storage_cfg("e", "lvmthin", "", vgname="vg", thinpool="data", nodes="pve3")
    codes = {"UPGRADE_CONTENT_DIRS_SHARED", "UPGRADE_CONTENT_NONE"}
    assert {f.code for f in _storage_run(clash, empty) if f.code in codes} == codes
    assert [f for f in _storage_run(clash, empty, upgraded=("pve3",)) if f.code in codes] == []
    clash["nodes"] = empty["nodes"] = "pve2,pve3"
    assert {f.code for f in _storage_run(clash, empty, upgraded=("pve3",)) if f.code in codes} == codes


def test_maxfiles_of_jobs_cfg_jobs_is_not_pve8to9s() -> None:
    """pve8to9 check_backup_retention_settings reads /etc/pve/vzdump.cron only, and FAILs once for it however many
    of its jobs (ids '<digest>:<n>') set maxfiles; a jobs.cfg job's maxfiles gets no FAIL."""
    d = clean()
    d.reads["backup_job_config"][""] += [
        {"id": "backup-1a2b", "type": "vzdump", "maxfiles": 3},
        {"id": "ab12:1", "type": "vzdump", "maxfiles": 2},
        {"id": "ab12:2", "type": "vzdump", "maxfiles": 1},
        {"id": "ab12:3", "type": "vzdump"},
    ]
    found = [f for f in run(d) if f.code == "UPGRADE_MAXFILES"]
    assert [(f.subject.id, f.evidence["jobs"]) for f in found] == [("vzdump.cron", ["ab12:1", "ab12:2"])]
    assert found[0].message == (
        "/etc/pve/vzdump.cron - parameter 'maxfiles' was deprecated with PVE 7.x and is getting dropped with PVE 9."
    )


def test_volume_content_walks_the_snapshots_as_pve8to9() -> None:
    """pve8to9 check_storage_content walks every snapshot too, with a VM snapshot's RAM state (extra_keys
    vmstate); the config's own vmstate is left out, and a volume is reported once per guest."""
    d = clean()
    d.configs[100].update(parent="pre", vmstate="gone:vm-100-state-now")
    d.snapshot_configs[100] = {
        "pre": {
            "scsi0": "ceph-vm:vm-100-disk-0,size=32G",
            "scsi1": "gone:vm-100-disk-9,size=8G",
            "vmstate": "local:100/vm-100-state-pre.raw",
        },
        "older": {"scsi1": "gone:vm-100-disk-9,size=8G"},
    }
    found = [f for f in run(d) if f.code == "UPGRADE_VOLUME_CONTENT_MISMATCH"]
    assert sorted(f.message for f in found) == [
        "VM 100 - volume 'gone:vm-100-disk-9' (scsi1 in snapshot 'older') - storage does not exist",
        "VM 100 - volume 'local:100/vm-100-state-pre.raw' (vmstate in snapshot 'pre') - storage does not have "
        "content type 'images' configured",
    ]
    assert {f.evidence["snapshot"] for f in found} == {"older", "pre"}


def _machine_findings(d: ClusterData) -> list[tuple[str, dict[str, str]]]:
    return [(f.message, f.evidence["effective"]) for f in run(d) if f.code == "UPGRADE_MACHINE_VERSION_OLD"]


@pytest.mark.parametrize(
    ("values", "effective"),
    [
        ({"ostype": "win11"}, {"config": "pc-i440fx-5.1"}),  # get_vm_machine: Windows without a version, 5.1
        ({"ostype": "w2k8", "machine": "q35"}, {"config": "pc-q35-5.1"}),
        ({"ostype": "win10", "machine": "type=q35,viommu=virtio"}, {"config": "pc-q35-5.1"}),
        ({"ostype": "win10", "meta": "creation-qemu=9.0.2,ctime=1700000000"}, {"config": "pc-i440fx-5.1"}),
        ({"ostype": "win10", "meta": "creation-qemu=9.1.2,ctime=1730000000"}, {}),  # pinned to 9.1 at start
        ({"ostype": "win10", "machine": "pc-q35-8.1"}, {}),
        ({"ostype": "l26"}, {}),  # unversioned: the latest
        ({"ostype": "other", "machine": "virt"}, {}),
    ],
)
def test_a_windows_vm_without_a_machine_version_counts_as_pinned(
    values: dict[str, Any], effective: dict[str, str]
) -> None:
    """qemu-server Machine.pm get_vm_machine pins an unversioned Windows VM to 5.1 (or its creation QEMU from
    9.1 on), so pve8to9's extract_version finds 5.1 < 6.0 and WARNs."""
    d = clean()
    _config(100, **{"machine": None, **values})(d)
    assert [e for _m, e in _machine_findings(d)] == ([effective] if effective else [])


def test_a_hibernated_windows_vm_without_runningmachine_is_old_twice() -> None:
    d = clean()
    _config(100, machine=None, ostype="win10", vmstate="ceph-vm:vm-100-state-suspend")(d)
    assert _machine_findings(d) == [
        (
            "VM 100 has an old machine version configured; it may need an update to start in PVE 9",
            {"config": "pc-i440fx-5.1"},
        ),
        ("VM 100 is hibernated with an old machine version; it may not resume in PVE 9", {"vmstate": "pc-i440fx-5.1"}),
    ]


def test_snapshots_with_old_machine_versions_are_listed_per_vm() -> None:
    """pve8to9 lists, per VM, the live snapshots (vmstate; their runningmachine) and the others apart."""
    d = clean()
    _snapshot(100, "a-old", machine="pc-i440fx-5.2")(d)
    _snapshot(100, "b-live", machine="pc-q35-8.1", runningmachine="pc-q35-5.2+pve0", vmstate="ceph-vm:vm-100-state-b")(
        d
    )
    _snapshot(100, "c-new", machine="pc-i440fx-5.2", runningmachine="pc-i440fx-8.1+pve0", vmstate="ceph-vm:s")(d)
    _snapshot(100, "d-old", machine="pc-i440fx-4.0")(d)
    found = [f for f in run(d) if f.code == "UPGRADE_MACHINE_VERSION_OLD"]
    assert [(f.evidence["snapshots"], f.evidence["versions"]) for f in found] == [
        (["b-live"], ["5.2"]),
        (["a-old", "d-old"], ["4.0", "5.2"]),
    ]
    assert found[0].message.startswith("VM 100 has live snapshots with an old machine version")


def test_descriptions_are_measured_in_characters() -> None:
    """PVE decodes the notes as UTF-8 (decode_text) and its limits count characters: 3000 three-byte characters
    (9000 bytes) fit the 8 KiB guest limit; 8193 characters do not."""
    d = clean()
    _config(100, description="€" * 3000)(d)
    d.reads["node_config"]["pve1"]["description"] = "€" * 30000
    assert not [f for f in run(d) if "DESCRIPTION" in f.code]
    _config(100, description="€" * (8 * 1024 + 1))(d)
    d.reads["node_config"]["pve1"]["description"] = "é" * (64 * 1024 + 1)
    found = {f.code: f.evidence for f in run(d) if "DESCRIPTION" in f.code}
    assert found["UPGRADE_GUEST_DESCRIPTION_LONG"]["characters"] == 8 * 1024 + 1
    assert found["UPGRADE_NODE_DESCRIPTION_LONG"]["pve8to9_reports"] is False


@pytest.mark.parametrize(
    "model", ["QEMU Virtual CPU version 2.5+", "Common KVM processor", "unknown", "Hygon C86 7285 32-core Processor"]
)
def test_microcode_is_not_judged_without_a_vendor_in_the_model_name(model: str) -> None:
    d = clean()
    for n in NODES:
        d.reads["node_status"][n]["cpuinfo"]["model"] = model
        d.reads["apt_versions"][n] = [r for r in d.reads["apt_versions"][n] if r["Package"] != "amd64-microcode"]
    assert run(d) == []


def test_the_nodelist_mismatch_names_both_sides() -> None:
    d = clean()
    d.cluster_status = [r for r in d.cluster_status if r.get("name") != "pve2"]  # pmxcfs lost pve2
    (f,) = [f for f in run(d) if f.code == "UPGRADE_COROSYNC_NODELIST_MISMATCH"]
    assert f.message == "corosync.conf (3) and pmxcfs (2) don't agree about size of nodelist"
    assert f.evidence["only_in_corosync_conf"] == ["pve2"] and f.evidence["only_in_pmxcfs"] == []
    standalone = clean()
    standalone.cluster_status = [r for r in standalone.cluster_status if r.get("type") != "cluster"]
    assert not [f for f in run(standalone) if f.code == "UPGRADE_COROSYNC_NODELIST_MISMATCH"]
