"""Which nodes a guest may be sent to at all, before any per-guest rule: the operator's first step."""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.hastate import LRM_TROUBLE, lrm_trouble
from pve_steward.analysis.pverules import pve_rule


def maintenance_nodes(data: ClusterData) -> set[str]:
    """Nodes whose HA LRM reports maintenance mode (the HA status text, as the GUI shows it)."""
    memo = data.memo.get("maintenance")
    if memo is None:
        memo = {
            str(r.get("node"))
            for r in data.ha_status
            if r.get("type") == "lrm" and "maintenance mode" in str(r.get("status", ""))
        }
        data.memo["maintenance"] = memo
    return set(memo)


def cpu_model(data: ClusterData, node: str) -> str | None:
    model = ((data.node_status.get(node) or {}).get("cpuinfo") or {}).get("model")
    return str(model) if model else None


def replication_jobs_of(data: ClusterData, vmid: int) -> list[Row]:
    return list(data.replication_by_guest.get(vmid, []))


@pve_rule(
    "migrate.target-node",
    rule="A migration target must be a cluster node other than the source and online; the migrate API does not "
    "check HA maintenance, so a careful planner excludes nodes the HA manager is emptying, and (our policy) nodes "
    "whose HA LRM is dead, unreadable or time-drifted: a node whose health is in doubt takes no guests.",
    pve="qemu-server src/PVE/API2/Qemu.pm migrate_vm (check_node_exists, 'target is local node'); "
    "pve-ha-manager src/PVE/HA/Manager.pm next_state_started (maintenance), src/PVE/API2/HA/Status.pm status",
    codes=("MIGRATE_NO_TARGET", "HA_LRM_DEAD", "HA_LRM_TIME_DRIFT"),
)
def eligible_targets(
    data: ClusterData, source: str, allowed: list[str] | None = None, denied: list[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """Nodes a guest may be sent to, and why the others are excluded (shared results: do not mutate)."""
    memo = data.memo["eligible"]
    key = (source, tuple(allowed) if allowed is not None else None, tuple(denied or ()))
    if key in memo:
        return memo[key]  # type: ignore[no-any-return]  # shared, read-only
    excluded: dict[str, str] = {}
    in_maintenance = maintenance_nodes(data)
    troubled = lrm_trouble(data)
    ok = []
    for node in sorted(data.nodes):
        if node == source:
            continue
        if allowed is not None and node not in allowed:
            excluded[node] = "not in the allowed targets"
        elif denied and node in denied:
            excluded[node] = "denied by the request"
        elif not data.nodes[node].get("online"):
            excluded[node] = "offline"
        elif node in in_maintenance:
            excluded[node] = "in HA maintenance mode"
        elif node in troubled:
            excluded[node] = (
                f"{LRM_TROUBLE[troubled[node]]} ('{troubled[node]}' in the HA status): a node whose health is in doubt "
                "takes no guests (our policy; HA_LRM_DEAD / HA_LRM_TIME_DRIFT)"
            )
        else:
            ok.append(node)
    memo[key] = (ok, excluded)
    return ok, excluded
