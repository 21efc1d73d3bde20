"""Node network: interfaces down, bonds without redundancy, MTU that differs between nodes.

One read per node: GET /nodes/{node}/network (pve-manager PVE/API2/Network.pm index, which reads
/etc/network/interfaces through PVE::INotify and marks ``active`` the interfaces of /proc/net/dev whose IFF_UP
flag is set: administratively up, whatever the carrier; PVE's data does not show a pulled cable).
"""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, Need, check
from pve_steward.analysis.checks.node import node_subject
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import Finding, Severity, finding
from pve_steward.analysis.thresholds import Thresholds

NETWORK = Need("node_network", "/nodes/{node}/network", per="node", privilege="any user")


def _rows(data: ClusterData) -> dict[str, list[Row]]:
    return {n: [r for r in rows or [] if isinstance(r, dict)] for n, rows in data.read_nodes(NETWORK.key).items()}


def _active(row: Row) -> bool:
    return str(row.get("active", 0)) in ("1", "True", "true")


def _slaves(row: Row) -> list[str]:
    return str(row.get("slaves") or "").split()


def _in_use(row: Row, used: set[str]) -> bool:
    """A NIC nothing uses (no autostart, no bridge or bond on it) may be down on purpose: a spare port."""
    return row.get("type") != "eth" or bool(row.get("autostart")) or str(row.get("iface")) in used


@check(
    "node",
    codes=[
        Code(
            "NODE_NIC_DOWN",
            "warning",
            "A network interface is down",
            "An interface of GET /nodes/{node}/network is not active (not up, or missing from the kernel, e.g. a "
            "renamed NIC; PVE's active is the IFF_UP flag, not the carrier): a physical NIC (type eth) in use "
            "(autostart, bridge port or bond member) is a warning (cv4pve-diag WN0010); "
            "a bridge, VLAN, or a bond with no active member, is critical (check_pve network-status).",
            "`ip link show <iface>`: if the name is missing, fix the interface name in /etc/network/interfaces; "
            "else bring it up with `ifup <iface>` or GUI Node > System > Network > Apply Configuration.",
        ),
        Code(
            "NODE_BOND_DEGRADED",
            "warning",
            "A bond runs on fewer members than configured",
            "A bond of GET /nodes/{node}/network has members (slaves) that are not active, i.e. not up or missing "
            "from the kernel (check_pve network-status): it has lost redundancy or bandwidth.",
            "`cat /proc/net/bonding/<bond>` shows each member; check that the member exists (`ip link`) under the "
            "name /etc/network/interfaces gives it.",
        ),
        Code(
            "NODE_BOND_NO_REDUNDANCY",
            "warning",
            "A bond has fewer than two members",
            "A bond of GET /nodes/{node}/network lists fewer than two slaves: one NIC or cable failure takes it "
            "down (cv4pve-diag WN0034).",
            "Add a second member: GUI Node > System > Network > edit the bond > Slaves, then Apply Configuration.",
        ),
    ],
    needs=[NETWORK],
    anchors=["cv4pve-diag:WN0010", "cv4pve-diag:WN0034", "check_pve:network-status"],
    pve="pve-manager PVE/API2/Network.pm index (active: pve-common ProcFSTools.pm get_active_network_interfaces, "
    "IFF_UP)",
)
def interfaces(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Interfaces down and bonds degraded or without a second member."""
    out = []
    for node, rows in sorted(_rows(data).items()):
        by_name = {str(r.get("iface")): r for r in rows}
        used = {p for r in rows for p in [*_slaves(r), *str(r.get("bridge_ports") or "").split()]}
        for row in rows:
            name, kind = str(row.get("iface")), row.get("type")
            if kind == "bond":
                out += _bond(node, row, by_name)
            elif kind in ("eth", "bridge", "vlan") and not _active(row) and _in_use(row, used):
                critical = kind != "eth"
                out.append(
                    finding(
                        "NODE_NIC_DOWN",
                        node_subject(node),
                        f"{kind} interface {name} on {node} is down",
                        {"iface": name, "type": kind, "active": row.get("active", 0)},
                        severity=Severity.CRITICAL if critical else None,
                    )
                )
    return out


def _bond(node: str, row: Row, by_name: dict[str, Row]) -> list[Finding]:
    name, slaves = str(row.get("iface")), _slaves(row)
    active = [s for s in slaves if s in by_name and _active(by_name[s])]
    evidence = {"iface": name, "bond_mode": row.get("bond_mode"), "slaves": slaves, "active_slaves": active}
    out = []
    if slaves and not active:
        out.append(
            finding(
                "NODE_NIC_DOWN",
                node_subject(node),
                f"bond {name} on {node} has no active member",
                evidence,
                severity=Severity.CRITICAL,
            )
        )
    elif len(active) < len(slaves):
        out.append(
            finding(
                "NODE_BOND_DEGRADED",
                node_subject(node),
                f"bond {name} on {node} runs on {len(active)} of {len(slaves)} members",
                evidence,
            )
        )
    if len(slaves) < 2:
        out.append(
            finding(
                "NODE_BOND_NO_REDUNDANCY",
                node_subject(node),
                f"bond {name} on {node} has {len(slaves)} member(s): no link redundancy",
                evidence,
            )
        )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_MTU_MISMATCH",
            "warning",
            "A physical NIC's MTU differs between nodes",
            "The same physical interface (type eth, same name) has a different mtu on two online nodes "
            "(GET /nodes/{node}/network): fragmentation, corosync instability and failed migrations follow.",
            "Set the same MTU on every node: GUI Node > System > Network > edit the interface > MTU, and the "
            "switch ports to match.",
        )
    ],
    needs=[NETWORK],
    anchors=["cv4pve-diag:WN0009"],
    pve="pve-manager PVE/API2/Network.pm index (mtu from /etc/network/interfaces)",
)
def mtu_mismatch(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Per NIC name, the nodes whose MTU differs from the most common one."""
    mtus: dict[str, dict[str, int]] = {}
    for node, rows in _rows(data).items():
        for row in rows:
            if row.get("type") == "eth" and row.get("mtu") is not None:
                mtus.setdefault(str(row.get("iface")), {})[node] = int(row["mtu"])
    out = []
    for iface, by_node in sorted(mtus.items()):
        values = sorted(set(by_node.values()))
        if len(values) < 2:
            continue
        common = max(values, key=lambda v: (list(by_node.values()).count(v), v))
        for node, mtu in sorted(by_node.items()):
            if mtu != common:
                out.append(
                    finding(
                        "NODE_MTU_MISMATCH",
                        node_subject(node),
                        f"{iface} on {node} has MTU {mtu}, other nodes {common}",
                        {"iface": iface, "mtu": mtu, "mtu_by_node": dict(sorted(by_node.items()))},
                    )
                )
    return out
