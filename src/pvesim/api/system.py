"""Node system and cluster configuration reads: package versions, services, node config, network,
corosync nodes/totem/qdevice, roles. What pve8to9's API-observable checks read, for PVE 8 and 9.

Scenario knobs (per node: ``packages``, ``services``, ``description``/``description_bytes``, ``network``,
``cgroup_mode``; cluster: ``corosync`` with ``nodes`` (an entry for a name that is no node is a corosync.conf
entry pmxcfs does not know), ``totem``, ``qdevice``; ``roles``) plant each problem. A node has its CPU vendor's
microcode package unless its ``packages`` set it to null.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pvesim import nodehealth
from pvesim.api.registry import ApiError, Call, route
from pvesim.scenario import major
from pvesim.state import Cluster, Node

# pve-manager PVE/API2/Services.pm $service_name_list
SERVICES = (
    "chrony",
    "corosync",
    "cron",
    "ksmtuned",
    "lxcfs",
    "postfix",
    "proxmox-firewall",
    "pve-cluster",
    "pve-firewall",
    "pve-ha-crm",
    "pve-ha-lrm",
    "pve-lxc-syscalld",
    "pvedaemon",
    "pvefw-logger",
    "pveproxy",
    "pvescheduler",
    "pvestatd",
    "qmeventd",
    "spiceproxy",
    "sshd",
    "syslog",
    "systemd-journald",
    "systemd-timesyncd",
)
# a fresh installation: chrony keeps time (no systemd-timesyncd), proxmox-firewall is installed but off
_DEFAULT_STATE = {"systemd-timesyncd": "not-found", "proxmox-firewall": "inactive"}
_SUBSTATE = {"active": "running", "inactive": "dead", "failed": "failed", "activating": "start"}

# installed versions of a few packages per PVE major (what apt/versions lists; overridden by a node's packages)
_PACKAGES = {
    8: {
        "proxmox-ve": "8.4.0",
        "corosync": "3.1.9-pve1",
        "libpve-storage-perl": "8.3.6",
        "lxc-pve": "6.0.0-1",
        "pve-cluster": "8.1.0",
        "pve-container": "5.2.7",
        "pve-ha-manager": "4.0.7",
        "pve-qemu-kvm": "9.2.0-5",
        "qemu-server": "8.3.12",
        "zfsutils-linux": "2.2.7-pve2",
    },
    9: {
        "proxmox-ve": "9.1.0",
        "corosync": "3.1.9-pve2",
        "libpve-storage-perl": "9.1.0",
        "lxc-pve": "6.0.5-1",
        "pve-cluster": "9.0.6",
        "pve-container": "6.0.13",
        "pve-ha-manager": "5.0.5",
        "pve-qemu-kvm": "10.1.2-1",
        "qemu-server": "9.1.0",
        "zfsutils-linux": "2.3.4-pve1",
    },
}


# the CPU vendor's microcode package (pve8to9 check_cpu_microcode_package), installed unless a node's packages
# knob removes it (``amd64-microcode: null``); APT.pm versions lists it only when installed
_MICROCODE = {
    8: {"Intel": ("intel-microcode", "3.20250512.1~deb12u1"), "AMD": ("amd64-microcode", "3.20250311.1~deb12u1")},
    9: {"Intel": ("intel-microcode", "3.20250812.1~deb13u1"), "AMD": ("amd64-microcode", "3.20250311.1")},
}


def _node(call: Call) -> Node:
    return call.cluster.nodes[call.params["node"]]


def _package_row(name: str, version: str) -> dict[str, Any]:
    return {
        "Package": name,
        "Title": f"{name} package",
        "Description": f"{name} package",
        "Version": version,
        "OldVersion": version,
        "Priority": "optional",
        "Section": "admin",
        "Arch": "all" if name in ("proxmox-ve", "pve-manager") else "amd64",
        "Origin": "Proxmox",
        "CurrentState": "Installed",
    }


def installed(c: Cluster, n: Node) -> dict[str, str]:
    """Package -> installed version on the node: the release's set, the running kernel's, the node's knobs."""
    kernel = n.kernel.removesuffix("-pve")
    series = ".".join(kernel.split(".")[:2])
    out = {**_PACKAGES[8 if major(c.version) < 9 else 9], "pve-manager": c.version}
    out["proxmox-ve"] = f"{c.release}.0"  # the meta-package follows the release (8.2 -> 8.2.0)
    out[f"proxmox-kernel-{series}"] = kernel
    for word, (pkg, pkg_version) in _MICROCODE[8 if major(c.version) < 9 else 9].items():
        if re.search(rf"\b{word}\b", n.cpu_model):
            out[pkg] = pkg_version
    for name, version in n.packages.items():
        if version is None:
            out.pop(name, None)
        else:
            out[name] = str(version)
    return out


@route("GET", "/nodes/{node}/apt/versions")
def apt_versions(call: Call) -> list[dict[str, Any]]:
    """PVE/API2/APT.pm versions: proxmox-ve, pve-manager and the kernels first, then the rest by name."""
    c, n = call.cluster, _node(call)
    pkgs = installed(c, n)
    for row in nodehealth.installed_kernel_packages(n.health, n.kernel):  # a newer kernel installed, not booted
        pkgs.setdefault(str(row["Package"]), str(row["Version"]))
    pkgs.update(n.health.packages)  # a partial upgrade planted in the node-health model
    kernels = sorted((p for p in pkgs if p.startswith(("pve-kernel-", "proxmox-kernel-"))), reverse=True)
    order = [p for p in ("proxmox-ve", "pve-manager") if p in pkgs] + kernels
    order += sorted(p for p in pkgs if p not in order)
    rows = []
    for name in order:
        row = _package_row(name, pkgs[name])
        if name == "pve-manager":
            row["ManagerVersion"] = c.version
        elif name == "proxmox-ve":
            row["RunningKernel"] = n.kernel
        rows.append(row)
    return rows


def _service_row(name: str, active: str) -> dict[str, Any]:
    if active == "not-found":
        return {
            "name": name,
            "service": name,
            "desc": name,
            "state": "dead",
            "unit-state": "not-found",
            "active-state": "inactive",
        }
    return {
        "name": name,
        "service": name,
        "desc": f"{name} service",
        "state": _SUBSTATE.get(active, "unknown"),
        "unit-state": "disabled" if active == "inactive" else "enabled",
        "active-state": active,
    }


@route("GET", "/nodes/{node}/services")
def services(call: Call) -> list[dict[str, Any]]:
    """pve-manager PVE/API2/Services.pm index: the node-health model's services (its planted failures),
    with the upgrade knob's states over them; corosync is inactive on a standalone node."""
    n = _node(call)
    rows = {str(r["service"]): r for r in nodehealth.services(n.health)}
    for name in SERVICES:
        if name in n.services:
            rows[name] = _service_row(name, n.services[name])
        elif name not in rows:
            rows[name] = _service_row(name, _DEFAULT_STATE.get(name, "active"))
    corosync_planted = n.health.services.get("corosync") != nodehealth.DEFAULT_SERVICES["corosync"]
    if len(call.cluster.nodes) == 1 and "corosync" not in n.services and not corosync_planted:
        rows["corosync"] = _service_row("corosync", "inactive")
    return [rows[k] for k in sorted(rows)]


@route("GET", "/nodes/{node}/config")
def node_config(call: Call) -> dict[str, Any]:
    """PVE/API2/NodeConfig.pm get_config: the node's notes and the digest of the file."""
    n = _node(call)
    conf: dict[str, Any] = {}
    if n.description is not None:
        conf["description"] = n.description
    if n.acme is not None:  # NodeConfig.pm: acme: [account=<name>,]domains=<d1;d2>
        conf["acme"] = n.acme
    conf.update(n.node_config)
    conf["digest"] = hashlib.sha1(repr(sorted(conf.items())).encode()).hexdigest()
    wanted = call.params.get("property")
    return {k: v for k, v in conf.items() if k == wanted} if wanted else conf


def _knobs(c: Cluster, key: str) -> dict[str, Any]:
    value = c.corosync.get(key)
    return dict(value) if isinstance(value, dict) else {}


@route("GET", "/cluster/config/nodes")
def corosync_nodes(call: Call) -> list[dict[str, Any]]:
    """pve-cluster API2/ClusterConfig.pm nodes: corosync.conf's nodelist, one row per node."""
    c = call.cluster
    overrides = _knobs(c, "nodes")
    rows = []
    for n in c.nodes.values():
        row: dict[str, Any] = {
            "node": n.name,
            "name": n.name,
            "nodeid": str(n.nodeid),
            "quorum_votes": "1",
            "ring0_addr": n.ip,
        }
        for key, value in (overrides.get(n.name) or {}).items():
            if value is None:
                row.pop(key, None)
            else:
                row[key] = str(value)
        rows.append(row)
    for name, fields in overrides.items():  # an entry pmxcfs does not know (corosync.conf edited, not applied)
        if name not in c.nodes and fields:
            rows.append({"node": name, "name": name, "quorum_votes": "1", **{k: str(v) for k, v in fields.items()}})
    return rows


@route("GET", "/cluster/config/totem")
def corosync_totem(call: Call) -> dict[str, Any]:
    """corosync.conf's totem section as ``pvecm create`` writes it, with the scenario's changes."""
    c = call.cluster
    totem: dict[str, Any] = {
        "cluster_name": c.name,
        "config_version": str(len(c.nodes) + 1),
        "interface": {"0": {"linknumber": "0"}},
        "ip_version": "ipv4-6",
        "link_mode": "passive",
        "secauth": "on",
        "version": "2",
    }
    for key, value in _knobs(c, "totem").items():
        if value is None:
            totem.pop(key, None)
        else:
            totem[key] = str(value)
    return totem


@route("GET", "/cluster/config/qdevice")
def corosync_qdevice(call: Call) -> dict[str, Any]:
    """``corosync-qdevice-tool -sv`` parsed; empty without a QDevice."""
    if not call.cluster.corosync.get("qdevice"):
        return {}
    return {
        "Algorithm": "Fifty-Fifty split",
        "Model": "Net",
        "State": "Connected",
        "Tie-breaker": "Node with lowest node ID",
    }


@route("GET", "/nodes/{node}/ceph/cfg/raw")
def ceph_config(call: Call) -> str:
    """PVE/API2/Ceph.pm raw config: /etc/pve/ceph.conf as ``pveceph init`` writes it, with the scenario's
    ``ceph.config`` changes (a key set to null is removed); without Ceph PVE dies in check_ceph_inited."""
    c = call.cluster
    if c.ceph is None:
        raise ApiError(500, "binary not installed: /usr/bin/ceph-mon")
    lines: list[str] = []
    for name, values in ceph_conf_sections(c).items():
        lines.append(f"[{name}]")
        lines += [f"\t {key} = {value}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)


def ceph_conf_sections(c: Cluster) -> dict[str, dict[str, Any]]:
    """/etc/pve/ceph.conf's sections, parsed."""
    assert c.ceph is not None
    mons = list(c.ceph.mons.values())
    sections: dict[str, dict[str, Any]] = {
        "global": {
            "auth_client_required": "cephx",
            "auth_cluster_required": "cephx",
            "auth_service_required": "cephx",
            "cluster_network": "10.0.0.0/24",
            "fsid": c.ceph.fsid,
            "mon_allow_pool_delete": "true",
            "mon_host": " ".join(c.nodes[m.host].ip for m in mons if m.host in c.nodes),
            "ms_bind_ipv4": "true",
            "ms_bind_ipv6": "false",
            "osd_pool_default_min_size": "2",
            "osd_pool_default_size": "3",
            "public_network": "10.0.0.0/24",
        },
        "client": {"keyring": "/etc/pve/priv/$cluster.$name.keyring"},
    }
    for m in [*mons, *c.ceph.stale_mons.values()]:  # a monitor removed by hand may leave its section behind
        if m.host in c.nodes:
            sections[f"mon.{m.name}"] = {"public_addr": c.nodes[m.host].ip}
    for name, changes in c.ceph.config.items():
        section = sections.setdefault(name, {})
        for key, value in changes.items():
            if value is None:
                section.pop(key, None)
            else:
                section[key] = str(value)
    return sections
