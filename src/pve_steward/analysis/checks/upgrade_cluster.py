"""Upgrade readiness, PVE 8 to 9: pve8to9's cluster, corosync, permission, description and APT suite checks."""

from __future__ import annotations

import re
from typing import Any

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import CLUSTER, Finding, Subject
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.upgradeinfo import (
    ACCESS_ROLES,
    APT_REPOSITORIES,
    APT_VERSIONS,
    COROSYNC_NODES,
    COROSYNC_QDEVICE,
    COROSYNC_TOTEM,
    NEW_SUITE,
    NODE_CONFIG,
    OLD_SUITE,
    OLDER_SUITES,
    SOURCE,
    Grade,
    cluster_to_upgrade,
    clustered,
    graded,
    node_subject,
    nodes_to_upgrade,
)


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_NOT_QUORATE",
            "critical",
            "Cluster filesystem not quorate",
            "pve8to9 FAILs when the cluster filesystem is read-only (lost quorum): /cluster/status quorate=0.",
            "Restore quorum first (pvecm status); never upgrade a cluster without quorum.",
        ),
        Code(
            "UPGRADE_NODES_OFFLINE",
            "critical",
            "Cluster nodes offline",
            "pve8to9 FAILs when any node of the cluster is offline (/cluster/status online=0).",
            "Bring every node back online (or remove it with pvecm delnode) before the upgrade.",
        ),
    ],
    anchors=["pve8to9:quorate", "pve8to9:nodes-offline"],
    pve=f"{SOURCE} check_cluster_corosync",
)
def quorum_and_members(data: ClusterData, t: Thresholds) -> list[Finding]:
    if not clustered(data) or not cluster_to_upgrade(data):
        return []
    out = []
    row = next(r for r in data.cluster_status if r.get("type") == "cluster")
    if str(row.get("quorate")) != "1":
        out.append(
            graded(
                "UPGRADE_NOT_QUORATE",
                "FAIL",
                CLUSTER,
                "cluster filesystem read-only, lost quorum",
                "quorate",
                {"quorate": row.get("quorate")},
            )
        )
    offline = sorted(
        str(r.get("name")) for r in data.cluster_status if r.get("type") == "node" and str(r.get("online")) != "1"
    )
    if offline:
        out.append(
            graded(
                "UPGRADE_NODES_OFFLINE",
                "FAIL",
                CLUSTER,
                f"{len(offline)} node(s) offline: {', '.join(offline)}",
                "nodes-offline",
                {"offline": offline},
            )
        )
    return out


def _nodelist(data: ClusterData) -> list[dict[str, Any]] | None:
    rows = data.read("corosync_nodes")
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else None


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_QUORUM_VOTES",
            "warning",
            "Non-default quorum votes",
            "pve8to9 WARNs when any corosync node entry has quorum_votes other than 1 (/cluster/config/nodes).",
            "Set quorum_votes: 1 for every node in /etc/pve/corosync.conf (increase config_version).",
        ),
        Code(
            "UPGRADE_FEW_VOTERS",
            "warning",
            "Fewer than three quorum-providing nodes",
            "pve8to9 WARNs when corosync has fewer than three nodes and, counting a QDevice's votes, fewer than "
            "three votes (/cluster/config/nodes, /cluster/config/qdevice).",
            "Add a node or a QDevice (pvecm qdevice setup) so one node's reboot keeps quorum.",
        ),
    ],
    needs=[COROSYNC_NODES, COROSYNC_QDEVICE],
    anchors=["pve8to9:quorum-votes", "pve8to9:few-voters"],
    pve=f"{SOURCE} check_cluster_corosync",
)
def quorum_votes(data: ClusterData, t: Thresholds) -> list[Finding]:
    nodes = _nodelist(data)
    if nodes is None or not clustered(data) or not cluster_to_upgrade(data):
        return []
    out = []
    odd = {
        str(r.get("name") or r.get("node")): r.get("quorum_votes") for r in nodes if str(r.get("quorum_votes")) != "1"
    }
    if odd:
        out.append(
            graded(
                "UPGRADE_QUORUM_VOTES",
                "WARN",
                CLUSTER,
                "non-default quorum_votes distribution detected",
                "quorum-votes",
                {"nodes": odd},
            )
        )
    qdevice = data.read("corosync_qdevice")
    qdevice_votes = 1 if isinstance(qdevice, dict) and qdevice else 0
    if len(nodes) < 3 and len(nodes) + qdevice_votes < 3:
        out.append(
            graded(
                "UPGRADE_FEW_VOTERS",
                "WARN",
                CLUSTER,
                "cluster consists of less than three quorum-providing nodes",
                "few-voters",
                {"nodes": len(nodes), "qdevice_votes": qdevice_votes},
            )
        )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_NODELIST_INCOMPLETE",
            "critical",
            "corosync node entry incomplete",
            "pve8to9 FAILs for a corosync.conf node entry without name, without nodeid or without any "
            "ring0_addr..ring7_addr (/cluster/config/nodes).",
            "Complete the entry in /etc/pve/corosync.conf (increase config_version) following 'pvecm' docs.",
        )
    ],
    needs=[COROSYNC_NODES],
    anchors=["pve8to9:nodelist-fields"],
    pve=f"{SOURCE} check_cluster_corosync",
)
def nodelist_fields(data: ClusterData, t: Thresholds) -> list[Finding]:
    nodes = _nodelist(data)
    if nodes is None or not clustered(data) or not cluster_to_upgrade(data):
        return []
    out = []
    for row in nodes:
        key = str(row.get("node") or row.get("name"))
        lacks = [f for f in ("name", "nodeid") if row.get(f) is None]
        if not any(row.get(f"ring{i}_addr") is not None for i in range(8)):
            lacks.append("ringX_addr")
        if lacks:
            out.append(
                graded(
                    "UPGRADE_NODELIST_INCOMPLETE",
                    "FAIL",
                    node_subject(key),
                    f"{key}: no {', no '.join(lacks)} in corosync.conf",
                    "nodelist-fields",
                    {"missing": lacks},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_COROSYNC_NODELIST_MISMATCH",
            "critical",
            "corosync.conf and pmxcfs disagree about the node count",
            "pve8to9 FAILs in a cluster when corosync.conf's nodelist (/cluster/config/nodes) and the cluster file "
            "system's member list (the node rows of /cluster/status, pmxcfs get_clinfo) have different sizes: "
            "corosync.conf was edited but not applied, or a node was added or removed half-way.",
            "Compare /etc/pve/corosync.conf with /etc/corosync/corosync.conf and 'pvecm nodes' on each node; "
            "finish the pending node addition or removal (pvecm delnode), bump config_version, then check again.",
        )
    ],
    needs=[COROSYNC_NODES],
    anchors=["pve8to9:corosync-conf-mismatch"],
    pve=f"{SOURCE} check_cluster_corosync ($conf_nodelist_count != $cfs_nodelist_count); pve-manager "
    "PVE/API2/Cluster.pm get_status (node rows from get_members, the clinfo nodelist); pve-cluster "
    "src/PVE/API2/ClusterConfig.pm nodes",
)
def nodelist_size(data: ClusterData, t: Thresholds) -> list[Finding]:
    nodes = _nodelist(data)
    if nodes is None or not clustered(data) or not cluster_to_upgrade(data):
        return []
    members = sorted(str(r.get("name")) for r in data.cluster_status if r.get("type") == "node")
    if len(nodes) == len(members):
        return []
    conf = sorted(str(r.get("node") or r.get("name")) for r in nodes)
    return [
        graded(
            "UPGRADE_COROSYNC_NODELIST_MISMATCH",
            "FAIL",
            CLUSTER,
            f"corosync.conf ({len(conf)}) and pmxcfs ({len(members)}) don't agree about size of nodelist",
            "corosync-conf-mismatch",
            {
                "corosync_conf": conf,
                "pmxcfs": members,
                "only_in_corosync_conf": sorted(set(conf) - set(members)),
                "only_in_pmxcfs": sorted(set(members) - set(conf)),
            },
        )
    ]


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_COROSYNC_TOTEM",
            "critical",
            "corosync totem settings unsupported",
            "pve8to9 FAILs when the totem transport is set to anything but knet, when neither secauth: on nor a "
            "crypto_cipher is set, or when crypto_cipher is 3des (/cluster/config/totem).",
            "Fix the totem section of /etc/pve/corosync.conf (increase config_version); see the pvecm docs.",
        )
    ],
    needs=[COROSYNC_TOTEM],
    anchors=["pve8to9:totem"],
    pve=f"{SOURCE} check_cluster_corosync",
)
def totem(data: ClusterData, t: Thresholds) -> list[Finding]:
    totem = data.read("corosync_totem")
    if not isinstance(totem, dict) or not clustered(data) or not cluster_to_upgrade(data):
        return []
    problems = []
    transport, cipher = totem.get("transport"), totem.get("crypto_cipher")
    if transport is not None and transport != "knet":
        problems.append(f"corosync transport explicitly set to '{transport}' instead of implicit default")
    if totem.get("secauth") != "on" and (cipher is None or cipher == "none"):
        problems.append("corosync authentication/encryption is not explicitly enabled (secauth / crypto_cipher)")
    elif cipher == "3des":
        problems.append("corosync encryption cipher set to '3des', no longer supported in corosync 3.x")
    return [
        graded(
            "UPGRADE_COROSYNC_TOTEM",
            "FAIL",
            CLUSTER,
            text,
            "totem",
            {"transport": transport, "secauth": totem.get("secauth"), "crypto_cipher": cipher},
        )
        for text in problems
    ]


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_ROLE_VM_MONITOR",
            "critical",
            "Custom role uses VM.Monitor",
            "pve8to9 FAILs (with a NOTICE explaining the change) when custom roles use VM.Monitor, which PVE 9 "
            "drops: HMP monitor access moves to Sys.Audit, guest-agent access to VM.GuestAgent.* (/access/roles).",
            "After the upgrade, replace VM.Monitor in the role (Datacenter > Permissions > Roles) with "
            "Sys.Audit and/or VM.GuestAgent.Audit/FileRead/FileWrite/FileSystemMgmt/Unrestricted.",
        )
    ],
    needs=[ACCESS_ROLES],
    anchors=["pve8to9:custom-roles-privs"],
    pve=f"{SOURCE} check_custom_pool_roles",
)
def custom_roles(data: ClusterData, t: Thresholds) -> list[Finding]:
    roles = data.read("access_roles")
    if not isinstance(roles, list) or not cluster_to_upgrade(data):
        return []
    out = []
    for role in roles:
        if not isinstance(role, dict) or str(role.get("special", 0)) == "1":
            continue
        privs = {p.strip() for p in re.split(r"[,;\s]+", str(role.get("privs") or "")) if p.strip()}
        if "VM.Monitor" in privs:
            rid = str(role.get("roleid"))
            out.append(
                graded(
                    "UPGRADE_ROLE_VM_MONITOR",
                    "FAIL",
                    Subject(kind="cluster", id=f"role/{rid}", name=rid),
                    f"custom role {rid} uses the to-be-dropped 'VM.Monitor' privilege and needs to be adapted after "
                    "the upgrade",
                    "custom-roles-privs",
                    {"role": rid, "privs": sorted(privs)},
                )
            )
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_NODE_DESCRIPTION_LONG",
            "warning",
            "Node description over 64 KiB",
            "A node config description longer than 64 KiB (65536 characters of /nodes/{node}/config "
            "description, the schema's maxLength). pve8to9 means to WARN for it but reads the parsed config's "
            "'desc' key, which PVE's parser never sets (it keeps the notes under 'description'), so pve8to9 never "
            "prints it; we keep pve8to9's intended check and grade.",
            "Shorten the node's notes (Node > Summary > Notes) below 64 KiB.",
        )
    ],
    needs=[NODE_CONFIG, APT_VERSIONS],
    anchors=["pve8to9:node-description"],
    pve=f"{SOURCE} check_node_and_guest_configurations (load_config(...)->{{desc}}); pve-manager PVE/NodeConfig.pm "
    "parse_node_config (comment key 'description'); pve-common src/PVE/JSONSchema.pm parse_config",
)
def node_description(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        config = data.read("node_config", node)
        desc = config.get("description") if isinstance(config, dict) else None
        size = len(str(desc)) if desc is not None else 0  # characters: parse_config decode_text's utf8 text
        if size > 64 * 1024:
            out.append(
                graded(
                    "UPGRADE_NODE_DESCRIPTION_LONG",
                    "WARN",
                    node_subject(node),
                    f"node config description of {node} too long for the new limit of 64 KiB",
                    "node-description",
                    {"characters": size, "pve8to9_reports": False},
                )
            )
    return out


_SUITE_SUFFIX = re.compile(r"-(?:(?:proposed-)?updates|backports|debug|security)(?:-debug)?$")


def _repos(answer: Any) -> list[tuple[str, str, list[str]]]:
    """(where, suite, components) of every enabled ``deb`` repository in an apt/repositories answer."""
    out = []
    for f in answer.get("files", []) if isinstance(answer, dict) else []:
        for i, repo in enumerate(f.get("repositories") or [], start=1):
            if (
                not isinstance(repo, dict)
                or str(repo.get("Enabled", 1)) == "0"
                or "deb" not in (repo.get("Types") or [])
            ):
                continue
            for suite in repo.get("Suites") or []:
                out.append((f"{f.get('path')}:{i}", str(suite), [str(c) for c in repo.get("Components") or []]))
    return out


@check(
    "upgrade",
    codes=[
        Code(
            "UPGRADE_APT_SUITES",
            "critical",
            "APT repository suites not ready for the upgrade",
            "pve8to9 FAILs on mixed Debian base suites among the enabled repositories, gives a NOTICE for suites "
            "that are neither bookworm nor trixie (nor older), FAILs on the legacy 'pvetest' spelling with trixie "
            "(WARNs with bookworm) and on 'pve-test' with any suite but trixie (/nodes/{node}/apt/repositories).",
            "Use one base suite for all Proxmox and Debian repositories (Node > Repositories); spell the test "
            "repository 'pve-test' when switching to trixie.",
        )
    ],
    needs=[APT_REPOSITORIES, APT_VERSIONS],
    anchors=["pve8to9:apt-suites"],
    pve=f"{SOURCE} check_apt_repos",
)
def apt_suites(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node in nodes_to_upgrade(data):
        answer = data.read("apt_repositories", node)
        if answer is None:
            continue
        out += [
            graded(
                "UPGRADE_APT_SUITES",
                grade,
                Subject(kind="repository", id=node, node=node),
                f"{node}: {text}",
                "apt-suites",
                ev,
            )
            for grade, text, ev in _suite_problems(_repos(answer))
        ]
    return out


def _suite_problems(repos: list[tuple[str, str, list[str]]]) -> list[tuple[Grade, str, dict[str, Any]]]:
    problems: list[tuple[Grade, str, dict[str, Any]]] = []
    strange, seen = [], []
    test_suite, legacy = None, False
    for where, suite, components in repos:
        for comp in components:
            if re.search(r"pve-?test", comp):
                test_suite, legacy = suite, legacy or comp == "pvetest"
        base = _SUITE_SUFFIX.sub("", suite)
        if base not in (OLD_SUITE, NEW_SUITE) and base not in OLDER_SUITES:
            strange.append(f"{base} at {where}")
        else:
            seen.append((base, where))
    if strange:
        problems.append(
            ("NOTICE", f"unusual suites that are neither '{OLD_SUITE}' nor '{NEW_SUITE}'", {"suites": strange})
        )
    if len({s for s, _ in seen}) > 1:
        problems.append(
            ("FAIL", "mixed old and new package repository suites", {"suites": [f"{s} at {w}" for s, w in seen]})
        )
    if test_suite is not None:
        if legacy:
            grade: Grade = "FAIL" if test_suite == NEW_SUITE else "WARN"
            problems.append((grade, "legacy spelling 'pvetest' of the pve-test repository", {"suite": test_suite}))
        elif test_suite != NEW_SUITE:
            problems.append(("FAIL", f"'pve-test' repository with suite '{test_suite}'", {"suite": test_suite}))
    return problems
