"""Node consistency: what should be the same on every node of a cluster (DNS, time zone, /etc/hosts,
package versions) and is not.

cv4pve-diag compares each node with every other one, so one odd node flags all of them; here the
nodes are grouped by value and only the nodes outside the largest group are reported (the odd ones),
with every node's value in the evidence. A single node has nothing to compare with.
"""

from __future__ import annotations

import re
from typing import Any

from pve_steward.analysis.catalog import Code, Need, check
from pve_steward.analysis.checks.node import APT_VERSIONS, TIME, node_subject
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

DNS = Need("node_dns", "/nodes/{node}/dns", per="node")
HOSTS = Need("node_hosts", "/nodes/{node}/hosts", per="node", privilege="Sys.Audit on /")


def _odd_ones(values: dict[str, Any], unread: int = 0) -> tuple[list[str], Any]:
    """Nodes whose value differs from the largest group's (ties: the group of the first node by name).

    ``unread``: online nodes whose value was not read (failed, or hidden from the token): a node is odd only if
    the largest group would stay larger than its own even were every unread node to join it.
    """
    groups: dict[str, list[str]] = {}
    for node, value in sorted(values.items()):
        groups.setdefault(repr(value), []).append(node)
    if len(groups) < 2:
        return [], None
    majority = max(groups.values(), key=len)
    odd = [n for group in groups.values() if group is not majority for n in group]
    if unread:
        odd = [n for n in odd if len(majority) > len(groups[repr(values[n])]) + unread]
    return sorted(odd), values[majority[0]]


def _unread(data: ClusterData, key: str) -> int:
    """Online nodes a per-node read has no answer from."""
    return len(set(data.online_nodes) - set(data.read_nodes(key)))


def _differs(code: str, what: str, values: dict[str, Any], unread: int = 0) -> list[Finding]:
    if len(values) < 2:
        return []
    odd, common = _odd_ones(values, unread)
    return [
        finding(
            code,
            node_subject(node),
            f"{what} on {node} differs from the other nodes",
            {"value": values[node], "most_nodes": common, "by_node": dict(sorted(values.items()))},
        )
        for node in odd
    ]


@check(
    "node",
    codes=[
        Code(
            "NODE_DNS_DIFFERS",
            "warning",
            "DNS settings differ between nodes",
            "dns1/dns2/dns3/search of GET /nodes/{node}/dns differ from those of most other nodes (cv4pve-diag "
            "WN0006): name resolution, ACME and updates behave differently per node.",
            "Set the same resolvers on every node: GUI Node > System > DNS, or /etc/resolv.conf.",
        ),
        Code(
            "NODE_TIMEZONE_DIFFERS",
            "warning",
            "Time zone differs between nodes",
            "The timezone of GET /nodes/{node}/time differs from that of most other nodes (cv4pve-diag WN0007): "
            "schedules (backup jobs, replication) run at different wall-clock times per node.",
            "Set one time zone everywhere: GUI Node > System > Time > Edit, or `timedatectl set-timezone <zone>`.",
        ),
    ],
    needs=[DNS, TIME],
    anchors=["cv4pve-diag:WN0006", "cv4pve-diag:WN0007"],
    pve="pve-manager PVE/API2/Nodes.pm dns (INotify resolvconf), time (timezone from /etc/timezone)",
)
def dns_and_timezone(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Resolvers and time zone, node against node."""
    dns = {
        n: {k: str(v) for k, v in sorted((row or {}).items()) if k in ("dns1", "dns2", "dns3", "search")}
        for n, row in data.read_nodes(DNS.key).items()
    }
    zones = {n: str((row or {}).get("timezone")) for n, row in data.read_nodes(TIME.key).items()}
    return _differs("NODE_DNS_DIFFERS", "DNS", dns, _unread(data, DNS.key)) + _differs(
        "NODE_TIMEZONE_DIFFERS", "time zone", zones, _unread(data, TIME.key)
    )


def _host_names(text: Any) -> dict[str, frozenset[str]]:
    """Each name /etc/hosts lists (lower case) and the addresses it gives it; comments and spacing ignored."""
    names: dict[str, set[str]] = {}
    for line in str(text or "").splitlines():
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            names.setdefault(name.lower(), set()).add(fields[0])
    return {name: frozenset(addresses) for name, addresses in names.items()}


@pve_rule(
    "node.hosts",
    rule="The installer writes a node's /etc/hosts with localhost and its own name alone, and joining a cluster adds "
    "none: nodes' files differ by design. Only a name two nodes resolve to different addresses is a conflict; "
    "a node's own entry is the reference for its name.",
    pve="pve-installer Proxmox/Install.pm extract_data (configure hosts); pve-cluster adds no hosts entries; "
    "pve-manager PVE/API2/Nodes.pm get_etc_hosts",
    codes=("NODE_HOSTS_DIFFERS",),
)
def _conflicts(
    names: dict[str, dict[str, frozenset[str]]], unread: int = 0
) -> dict[str, dict[str, dict[str, list[str]]]]:
    """node -> name -> its addresses here and the reference's, for each name some nodes resolve differently."""
    out: dict[str, dict[str, dict[str, list[str]]]] = {}
    for name in sorted({n for per_node in names.values() for n in per_node}):
        have = {node: per_node[name] for node, per_node in names.items() if name in per_node}
        if len(set(have.values())) < 2:
            continue
        owner = name.split(".", 1)[0]  # a node's own entry is the reference for its name
        if owner in have:
            odd, reference = [n for n in have if have[n] != have[owner]], have[owner]
        else:
            odd, reference = _odd_ones(have, unread)
        for node in odd:
            out.setdefault(node, {})[name] = {"here": sorted(have[node]), "elsewhere": sorted(reference)}
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_HOSTS_DIFFERS",
            "warning",
            "/etc/hosts resolves a name differently than other nodes",
            "A name that several nodes' /etc/hosts list (GET /nodes/{node}/hosts) maps to other addresses here "
            "than on the node it names (its own entry), or than on most nodes (cv4pve-diag WN0005): this node "
            "reaches that host at a stale or wrong address. Lines only one node has, such as the own entry the "
            "installer writes, are no difference: nodes' files differ by design.",
            "Correct or remove the stale entry named in the evidence: GUI Node > System > Hosts.",
        )
    ],
    needs=[HOSTS],
    anchors=["cv4pve-diag:WN0005"],
    pve="pve-manager PVE/API2/Nodes.pm get_etc_hosts (INotify etchosts)",
)
def hosts_differ(data: ClusterData, t: Thresholds) -> list[Finding]:
    """/etc/hosts, name against name; the evidence names each conflicting name's addresses here and elsewhere."""
    names = {n: _host_names((row or {}).get("data")) for n, row in data.read_nodes(HOSTS.key).items()}
    if len(names) < 2:
        return []
    return [
        finding(
            "NODE_HOSTS_DIFFERS",
            node_subject(node),
            f"/etc/hosts on {node} resolves {', '.join(conflicts)} to other addresses than the other nodes do",
            {"names": conflicts},
        )
        for node, conflicts in sorted(_conflicts(names, _unread(data, HOSTS.key)).items())
    ]


# a kernel package names its release: nodes keep different old kernels, that is not drift
_KERNEL_RELEASE_PKG = re.compile(r"^(?:pve|proxmox)-kernel-\d")


@check(
    "node",
    codes=[
        Code(
            "NODE_PACKAGES_DIFFER",
            "warning",
            "Proxmox package versions differ between nodes",
            "A package of GET /nodes/{node}/apt/versions (proxmox-ve, pve-manager, qemu-server, ...; versioned "
            "kernel packages excluded) has a different version than on most other nodes (cv4pve-diag CN0002): "
            "a partial upgrade; migrations and cluster features may break.",
            "Finish the upgrade on every node: `apt update && apt full-upgrade` (GUI Node > Updates), one node at "
            "a time after moving its guests away (plan_node_evacuation).",
        )
    ],
    needs=[APT_VERSIONS],
    anchors=["cv4pve-diag:CN0002"],
    pve="pve-manager PVE/API2/APT.pm versions",
)
def packages_differ(data: ClusterData, t: Thresholds) -> list[Finding]:
    """One finding per odd node, naming the packages in which it differs."""
    versions = {
        n: {
            str(p.get("Package")): str(p.get("Version"))
            for p in rows or []
            if p.get("CurrentState", "Installed") == "Installed"
            and not _KERNEL_RELEASE_PKG.match(str(p.get("Package")))
        }
        for n, rows in data.read_nodes(APT_VERSIONS.key).items()
    }
    if len(versions) < 2:
        return []
    odd: dict[str, dict[str, dict[str, str]]] = {}
    for pkg in sorted({p for v in versions.values() for p in v}):
        have = {n: v[pkg] for n, v in versions.items() if pkg in v}
        nodes, common = _odd_ones(have, _unread(data, APT_VERSIONS.key))
        for node in nodes:
            odd.setdefault(node, {})[pkg] = {"version": have[node], "most_nodes": common}
    return [
        finding(
            "NODE_PACKAGES_DIFFER",
            node_subject(node),
            f"{len(pkgs)} package version(s) on {node} differ from the other nodes",
            {"packages": pkgs},
        )
        for node, pkgs in sorted(odd.items())
    ]


APT_REPOSITORIES = Need("apt_repositories", "/nodes/{node}/apt/repositories", per="node")


def _sources(answer: Any) -> list[str]:
    """Enabled repositories as 'URI suite components' lines, sorted (order does not matter)."""
    out = set()
    for f in (answer or {}).get("files") or []:
        for r in f.get("repositories") or [] if isinstance(f, dict) else []:
            if isinstance(r, dict) and str(r.get("Enabled", 1)) in ("1", "True", "true"):
                for uri in r.get("URIs") or []:
                    for suite in r.get("Suites") or []:
                        out.add(" ".join([str(uri), str(suite), *map(str, r.get("Components") or [])]))
    return sorted(out)


@check(
    "node",
    codes=[
        Code(
            "NODE_APT_SOURCES_DIFFER",
            "warning",
            "APT repositories differ between nodes",
            "The enabled repositories (URI, suite, components) of GET /nodes/{node}/apt/repositories differ from "
            "those of most other nodes (cv4pve-diag WN0008): nodes upgrade to different package versions.",
            "Use the same repositories everywhere: GUI Node > Updates > Repositories (enable/disable, Add).",
        )
    ],
    needs=[APT_REPOSITORIES],
    anchors=["cv4pve-diag:WN0008"],
    pve="pve-manager PVE/API2/APT.pm repositories (proxmox-apt repositories: files, standard-repos)",
)
def apt_sources_differ(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Enabled APT sources, node against node; the evidence names what only this node has or lacks."""
    sources = {n: _sources(answer) for n, answer in data.read_nodes(APT_REPOSITORIES.key).items()}
    if len(sources) < 2:
        return []
    odd, common = _odd_ones(sources, _unread(data, APT_REPOSITORIES.key))
    return [
        finding(
            "NODE_APT_SOURCES_DIFFER",
            node_subject(node),
            f"APT repositories on {node} differ from the other nodes",
            {
                "only_here": sorted(set(sources[node]) - set(common)),
                "missing_here": sorted(set(common) - set(sources[node])),
            },
        )
        for node in odd
    ]
