"""Upgrade readiness, PVE 8 to 9: pve8to9's hyper-converged Ceph checks (only where the cluster has Ceph)."""

from __future__ import annotations

import re

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.ceph import installed_versions, noout_set, running_daemons
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
            "pve8to9 WARNs when the 'noout' flag is not set while it is wanted: on a node still on PVE 8, and on "
            "an upgraded node while the Ceph daemons still run different versions; it keeps Ceph from "
            "rebalancing while nodes reboot (/cluster/ceph/flags).",
            "Set it for the cluster-wide upgrade (ceph osd set noout, or Ceph > OSD > Manage Global Flags) and "
            "unset it afterwards.",
        ),
        Code(
            "UPGRADE_CEPH_NOOUT_STILL_SET",
            "warning",
            "Ceph 'noout' flag still set after the upgrade",
            "On a node already on PVE 9 pve8to9 WARNs \"'noout' flag set, Ceph cluster upgrade seems finished\" "
            "when noout is set and every running Ceph daemon reports one version (`ceph versions` overall).",
            "Once every node is upgraded and Ceph is healthy, unset it (ceph osd unset noout, or the "
            "ceph_unset_flag operation): while set, a failed OSD is never marked out.",
        ),
    ],
    anchors=["pve8to9:ceph-health", "pve8to9:ceph-noout"],
    pve=f"{SOURCE} check_ceph",
)
def ceph_health(data: ClusterData, t: Thresholds) -> list[Finding]:
    if data.ceph is None or data.ceph.status is None:
        return []
    out = _health(data) if cluster_to_upgrade(data) else []
    return out + _noout_expectation(data)


def _health(data: ClusterData) -> list[Finding]:
    assert data.ceph is not None and data.ceph.status is not None
    health = data.ceph.status.get("health") or {}
    status, checks = health.get("status"), health.get("checks") or {}
    if status == "HEALTH_OK" or (status == "HEALTH_WARN" and _noout(data) and len(checks) == 1):
        return []
    return [
        graded(
            "UPGRADE_CEPH_HEALTH",
            "WARN",
            _ceph("health"),
            f"Ceph health reported as '{status}'",
            "ceph-health",
            {"status": status, "checks": sorted(checks)},
        )
    ]


def _noout_expectation(data: ClusterData) -> list[Finding]:
    """pve8to9's $noout_wanted: 1, unless one overall daemon version runs, then 'not yet upgraded'."""
    # pve-manager PVE/CLI/pve8to9.pm check_ceph: $noout_wanted = !$upgraded; # off post-upgrade, on pre-upgrade
    on8 = nodes_to_upgrade(data)
    upgraded = [n for n in data.online_nodes if n not in on8]
    full, _simple = overall_versions(data)
    single = len(full) == 1
    if _noout(data):
        if not (upgraded and single):
            return []
        pending = f" (pve8to9 on {', '.join(upgraded)}; keep it until {', '.join(on8)} are upgraded too)" if on8 else ""
        return [
            graded(
                "UPGRADE_CEPH_NOOUT_STILL_SET",
                "WARN",
                _ceph("flags"),
                "'noout' flag set, Ceph cluster upgrade seems finished" + pending,
                "ceph-noout",
                {"upgraded_nodes": upgraded, "nodes_on_pve8": on8, "versions": sorted(full)},
            )
        ]
    if not (cluster_to_upgrade(data) or (upgraded and full and not single)):
        return []
    return [
        graded(
            "UPGRADE_CEPH_NOOUT",
            "WARN",
            _ceph("flags"),
            "'noout' flag not set - recommended to prevent rebalancing during upgrades",
            "ceph-noout",
            {"nodes_on_pve8": on8, "versions": sorted(full)},
        )
    ]


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
    installed = installed_versions(data.ceph.metadata)
    out = []
    for node in nodes_to_upgrade(data):
        text = installed.get(node, "")
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
DAEMON_TYPES = (("mon", "monitor"), ("mgr", "manager"), ("mds", "MDS"), ("osd", "OSD"))


def _versions(data: ClusterData, key: str) -> tuple[set[str], set[str]]:
    """The running daemons' full ceph_version strings and their regex-simplified form (build hash aside)."""
    assert data.ceph is not None
    full, simple = set(), set()
    for row in running_daemons(data.ceph.metadata, key, data.ceph.osd_tree):  # `ceph versions`: up OSDs only
        text = str(row.get("ceph_version") or "")
        m = _SIMPLE.match(text)
        if m:  # pve8to9 keeps only the strings its regex matches
            full.add(text)
            simple.add(m.group(1))
    return full, simple


def overall_versions(data: ClusterData) -> tuple[set[str], set[str]]:
    """`ceph versions` overall: every daemon type together (empty without Ceph metadata)."""
    if data.ceph is None or not data.ceph.metadata:
        return set(), set()
    full: set[str] = set()
    simple: set[str] = set()
    for key, _name in DAEMON_TYPES:
        f, s = _versions(data, key)
        full |= f
        simple |= s
    return full, simple


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
        ),
        Code(
            "UPGRADE_CEPH_OVERALL_VERSIONS",
            "warning",
            "Ceph daemon types run different versions",
            "pve8to9 WARNs 'overall version mismatch' when the running Ceph daemons of all types together report "
            "more than one version (the build hash aside), even when each type on its own is uniform.",
            "Finish the Ceph upgrade on every daemon type (compare 'ceph versions'): upgrade and restart the "
            "monitors, managers, MDS and OSDs still on the old version.",
        ),
    ],
    anchors=["pve8to9:ceph-mixed"],
    pve=f"{SOURCE} check_ceph",
)
def ceph_mixed(data: ClusterData, t: Thresholds) -> list[Finding]:
    if data.ceph is None or not data.ceph.metadata or not cluster_to_upgrade(data):
        return []
    out = []
    for key, name in DAEMON_TYPES:
        _full, versions = _versions(data, key)
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
    _full, overall = overall_versions(data)
    if len(overall) > 1:  # pve8to9: elsif (keys $ceph_versions_simple->{overall}->%* != 1)
        out.append(
            graded(
                "UPGRADE_CEPH_OVERALL_VERSIONS",
                "WARN",
                _ceph("daemons/overall"),
                "overall version mismatch detected, check 'ceph versions' output for details!",
                "ceph-mixed",
                {"versions": sorted(overall)},
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
