"""Upgrade readiness, PVE 8 to 9: pve8to9's hyper-converged Ceph checks (only where the cluster has Ceph)."""

from __future__ import annotations

import re

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.ceph import noout_set, running_daemons
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Subject
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.upgradeinfo import APT_VERSIONS, SOURCE, Grade, cluster_to_upgrade, graded, nodes_to_upgrade

SUPPORTED_RELEASE, SUPPORTED_NAME = 19, "Squid"  # pve8to9 $ceph_supported_release


def _ceph(ident: str, node: str | None = None) -> Subject:
    return Subject(kind="ceph", id=ident, node=node)


def _noout(data: ClusterData) -> bool:
    assert data.ceph is not None
    return noout_set(data.ceph.flags)


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CEPH_HEALTH",
            "warning",
            "Ceph not healthy before the upgrade",
            "pve8to9 WARNs when Ceph health is not HEALTH_OK, except HEALTH_WARN with a single check while the "
            "'noout' flag is set (/cluster/ceph/status).",
            "Resolve the Ceph health checks first (Ceph panel or 'ceph -s').",
        ),
        Code(
            "UPGRADE_CEPH_NOOUT",
            "warning",
            "Ceph 'noout' flag not set for the upgrade",
            "Before the upgrade pve8to9 WARNs when the 'noout' flag is not set: it keeps Ceph from rebalancing "
            "while nodes reboot (/cluster/ceph/flags).",
            "Set it for the cluster-wide upgrade (ceph osd set noout, or Ceph > OSD > Manage Global Flags) and "
            "unset it afterwards.",
        ),
    ],
    anchors=["pve8to9:ceph-health", "pve8to9:ceph-noout"],
    pve=f"{SOURCE} check_ceph",
)
def ceph_health(data: ClusterData, t: Thresholds) -> list[Finding]:
    if data.ceph is None or data.ceph.status is None or not cluster_to_upgrade(data):
        return []
    health = data.ceph.status.get("health") or {}
    status, checks = health.get("status"), health.get("checks") or {}
    out = []
    noout = _noout(data)
    if status != "HEALTH_OK" and not (status == "HEALTH_WARN" and noout and len(checks) == 1):
        out.append(
            graded(
                "UPGRADE_CEPH_HEALTH",
                "WARN",
                _ceph("health"),
                f"Ceph health reported as '{status}'",
                "ceph-health",
                {"status": status, "checks": sorted(checks)},
            )
        )
    if not noout:
        out.append(
            graded(
                "UPGRADE_CEPH_NOOUT",
                "WARN",
                _ceph("flags"),
                "'noout' flag not set - recommended to prevent rebalancing during upgrades",
                "ceph-noout",
            )
        )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CEPH_VERSION",
            "critical",
            "Ceph release not the one the upgrade expects",
            "pve8to9 FAILs when a node's Ceph is older than 19 (Squid): upgrade Ceph first; it WARNs when it is "
            "newer (third-party repositories?). The node's version is /cluster/ceph/metadata's node section.",
            "Upgrade Ceph to Squid first, following https://pve.proxmox.com/wiki/Category:Ceph_Upgrade.",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["pve8to9:ceph-version"],
    pve=f"{SOURCE} check_ceph",
)
def ceph_version(data: ClusterData, t: Thresholds) -> list[Finding]:
    if data.ceph is None or not data.ceph.metadata:
        return []
    nodes = data.ceph.metadata.get("node") or {}
    out = []
    for node in nodes_to_upgrade(data):
        info = nodes.get(node)
        text = str(((info or {}).get("version") or {}).get("str") or "")
        head = text.split(".", 1)[0]
        if not head.isdecimal():
            continue
        release = int(head)
        grade: Grade
        if release < SUPPORTED_RELEASE:
            grade, msg = "FAIL", f"hyper-converged Ceph {text} on {node} is too old for the upgrade"
        elif release > SUPPORTED_RELEASE:
            grade, msg = "WARN", f"found newer Ceph release {text} on {node} than the expected {SUPPORTED_NAME}"
        else:
            continue
        out.append(
            graded(
                "UPGRADE_CEPH_VERSION", grade, _ceph(f"version/{node}", node), msg, "ceph-version", {"version": text}
            )
        )
    return out


_SIMPLE = re.compile(r"^(.*) \((.*)\).*\(.*\)$")


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CEPH_MIXED_VERSIONS",
            "warning",
            "Ceph daemons of one type run different versions",
            "pve8to9 WARNs when the running monitors, managers, MDS or OSDs report more than one version "
            "(`ceph versions`: /cluster/ceph/metadata ceph_version of the up OSDs, the build hash aside).",
            "Finish the Ceph upgrade: restart the daemons still on the old version.",
        )
    ],
    anchors=["pve8to9:ceph-mixed"],
    pve=f"{SOURCE} check_ceph",
)
def ceph_mixed(data: ClusterData, t: Thresholds) -> list[Finding]:
    if data.ceph is None or not data.ceph.metadata or not cluster_to_upgrade(data):
        return []
    out = []
    for key, name in (("mon", "monitor"), ("mgr", "manager"), ("mds", "MDS"), ("osd", "OSD")):
        rows = running_daemons(data.ceph.metadata, key, data.ceph.osd_tree)  # `ceph versions`: up OSDs only
        versions = set()
        for row in rows:
            m = _SIMPLE.match(str(row.get("ceph_version") or ""))
            if m:
                versions.add(m.group(1))
        if len(versions) > 1:
            out.append(
                graded(
                    "UPGRADE_CEPH_MIXED_VERSIONS",
                    "WARN",
                    _ceph(f"daemons/{key}"),
                    f"multiple running versions detected for daemon type {name}",
                    "ceph-mixed",
                    {"versions": sorted(versions)},
                )
            )
    return out


def ceph_conf(text: str) -> dict[str, dict[str, str]]:
    """ceph.conf sections as PVE's parser reads them (pve-cluster CephConfig.pm parse_ceph_config): keys
    with spaces, dashes or underscores are one key (we fold them to underscores), ';' and '#' comment."""
    out: dict[str, dict[str, str]] = {}
    section = None
    for raw in text.splitlines():
        line = re.split(r"\s[;#]|^[;#]", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"\[(.+)\]", line)
        if m:
            section = out.setdefault(m.group(1).strip(), {})
        elif "=" in line and section is not None:
            key, value = line.split("=", 1)
            section[re.sub(r"[\s-]+", "_", key.strip())] = value.strip()
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_CEPH_CONFIG",
            "warning",
            "ceph.conf needs attention before the upgrade",
            "pve8to9 WARNs when ceph.conf's [global] section has no mon_host, enables ms_bind_ipv6 without "
            "disabling ms_bind_ipv4, or holds a 'keyring' option (which keeps services from starting), and when "
            "the file is empty (/nodes/{node}/ceph/cfg/raw).",
            "Edit /etc/pve/ceph.conf: add mon_host with the monitor addresses, set ms_bind_ipv4 = false for "
            "IPv6-only clusters, move 'keyring' to the [client] section.",
        )
    ],
    anchors=["pve8to9:ceph-config"],
    pve=f"{SOURCE} check_ceph",
)
def ceph_config(data: ClusterData, t: Thresholds) -> list[Finding]:
    text = data.read("ceph_config")
    if data.ceph is None or not isinstance(text, str) or not cluster_to_upgrade(data):
        return []
    conf = ceph_conf(text)
    glob = conf.get("global", {})
    problems = []
    if not conf:
        problems.append("empty ceph config found")
    elif "mon_host" not in glob:
        problems.append("no 'mon_host' entry found in the [global] section of the ceph config")
    if glob.get("ms_bind_ipv6") == "true" and glob.get("ms_bind_ipv4") != "false":
        problems.append("'ms_bind_ipv6' is enabled but 'ms_bind_ipv4' is not disabled")
    if "keyring" in glob:
        problems.append("[global] config section contains 'keyring' option, which will prevent services from starting")
    return [graded("UPGRADE_CEPH_CONFIG", "WARN", _ceph("config"), text, "ceph-config") for text in problems]
