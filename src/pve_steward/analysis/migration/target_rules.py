"""Per-target rules: what a particular node must offer the guest (storages, mappings, replication, CPU).

Targets alike for a guest (same storages available, same CPU model, same mapping entries) are
evaluated once as a group; guests with the same needs share the grouping (memoised), so a large
cluster costs one evaluation per distinct situation, not one per guest and node.
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.migration.devices import mapping_nodes
from pve_steward.analysis.migration.model import Reason, TargetVerdict, reason
from pve_steward.analysis.migration.sdn import guest_vnets, sdn_reasons
from pve_steward.analysis.migration.storage import storage_on
from pve_steward.analysis.migration.targets import cpu_model, replication_jobs_of
from pve_steward.analysis.migration.volumes import snapshot_only
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import GuestConfig


def _available_storages(data: ClusterData, node: str) -> frozenset[str]:
    memo = data.memo["avail"]
    if node not in memo:
        memo[node] = frozenset(s for s in data.storage_defs if storage_on(data, s, node))
    return frozenset(memo[node])


def _node_classes(data: ClusterData, nodes: list[str]) -> list[tuple[str | None, frozenset[str], list[str]]]:
    """Targets grouped by what decides a verdict: CPU model and the storages available there."""
    memo = data.memo["classes"]
    key = tuple(nodes)
    if key not in memo:
        groups: dict[tuple[str | None, frozenset[str]], list[str]] = {}
        for n in nodes:
            groups.setdefault((cpu_model(data, n), _available_storages(data, n)), []).append(n)
        memo[key] = [(cpu, avail, members) for (cpu, avail), members in groups.items()]
    return list(memo[key])


def target_needs(data: ClusterData, cfg: GuestConfig, running: bool) -> tuple[tuple[str, ...], bool]:
    """What a guest needs from a target: its storages (its snapshots' too: QemuMigrate checks every volume
    foreach_volid finds), and the source's CPU model (running cpu: host)."""
    used = {v.storage for v in cfg.volumes if v.storage and not v.empty_drive}
    used.update(v.storage for v, _names in snapshot_only(data, cfg) if v.storage and not v.empty_drive)
    return tuple(sorted(used)), cfg.type == "qemu" and running and cfg.cpu_host


@pve_rule(
    "migrate.storage-on-target",
    rule="Every storage the guest's volumes use must be enabled for the target node (not disabled, and the node "
    "in its nodes list).",
    pve="qemu-server src/PVE/QemuServer.pm check_local_storage_availability, check_storage_availability; "
    "pve-storage src/PVE/Storage.pm storage_check_enabled",
    codes=("MIGRATE_STORAGE_UNAVAILABLE",),
)
def storage_reason(storages: tuple[str, ...], present: tuple[bool, ...], nodes: list[str]) -> Reason | None:
    missing = [s for s, ok in zip(storages, present, strict=True) if not ok]
    if not missing:
        return None
    return reason(
        "MIGRATE_STORAGE_UNAVAILABLE", True, f"storage {', '.join(missing)} not available on {', '.join(nodes)}"
    )


@pve_rule(
    "migrate.cpu-host",
    rule="Not checked by PVE: a running VM with cpu: host keeps the source CPU model, so a live move is only "
    "provable between nodes with the same CPU model (ours, conservative).",
    pve="qemu-server src/PVE/QemuMigrate.pm prepare (forcecpu kept); pve-docs qm.adoc CPU Type",
    codes=("MIGRATE_CPU_HOST",),
)
def cpu_reason(src_cpu: str | None, cpu: str | None, source: str, nodes: list[str]) -> Reason | None:
    if src_cpu is not None and cpu is not None and src_cpu == cpu:
        return None
    return reason(
        "MIGRATE_CPU_HOST",
        True,
        f"cpu: host, CPU model {src_cpu or 'unknown'} on {source} vs {cpu or 'unknown'} on {', '.join(nodes)}",
    )


@pve_rule(
    "migrate.replication-target",
    rule="A running replicated VM moves live only to a target of its replication job (force aside); a move to the "
    "target of a job marked for removal is refused.",
    pve="qemu-server src/PVE/API2/Qemu.pm migrate_vm, src/PVE/QemuMigrate.pm prepare (find_local_replication_job)",
    codes=("MIGRATE_REPLICATION",),
)
def replication_reasons(jobs: list[Row], targets_of: tuple[bool, ...], running: bool) -> list[Reason]:
    out = []
    for job, is_target in zip(jobs, targets_of, strict=True):
        if is_target and job.get("remove_job"):
            out.append(reason("MIGRATE_REPLICATION", True, f"replication job {job.get('id')} is marked for removal"))
    if running and jobs and not any(targets_of):
        where = ", ".join(str(j.get("target")) for j in jobs)
        out.append(
            reason("MIGRATE_REPLICATION", True, f"replicated VM: a live move only to a replication target ({where})")
        )
    return out


def mapping_reasons(data: ClusterData, mapped: dict[str, str], node: str) -> list[Reason]:
    """Mapped devices on one target: missing there, or not provable without the mapping config."""
    missing, unknown = [], []
    for key, name in sorted(mapped.items()):
        nodes = mapping_nodes(data, key, name)
        if nodes is None:
            unknown.append(key)
        elif node not in nodes:
            missing.append(f"{key} ({name})")
    out = []
    if missing:
        out.append(
            reason(
                "MIGRATE_MAPPED_DEVICE",
                True,
                f"mapping of {', '.join(missing)} has no entry for {node}",
                rule="migrate.mapped-resources",
            )
        )
    if unknown:
        out.append(
            reason(
                "MIGRATE_NOT_PROVABLE",
                True,
                f"whether {node} has the mappings of {', '.join(unknown)} is in the resource mapping config, which "
                "could not be read, and PVE's precondition was not readable either",
                unknown,
                rule="migrate.mapped-resources",
            )
        )
    return out


def target_groups(
    data: ClusterData,
    cfg: GuestConfig,
    source: str,
    targets: list[str],
    running: bool,
    per_node: bool,
    targets_key: tuple[object, ...],
    mapped: dict[str, str],
) -> list[TargetVerdict]:
    """Target-specific reasons, computed once per group of nodes that are alike for this guest."""
    storages, check_cpu = target_needs(data, cfg, running)
    jobs = replication_jobs_of(data, cfg.vmid) if cfg.type == "qemu" else []
    vnets = guest_vnets(data, cfg.vmid)
    per_node = per_node or bool(mapped) or bool(vnets)
    memo = data.memo["groups"]
    memo_key = (storages, check_cpu, targets_key)
    if not jobs and not per_node and memo_key in memo:
        # node lists are shared between guests and never mutated; reasons are copied (PVE comparison appends)
        return [TargetVerdict(nodes=nodes, mode=None, reasons=list(rs)) for nodes, rs in memo[memo_key]]
    GroupKey = tuple[tuple[bool, ...], str | None, tuple[bool, ...], str]
    grouped: dict[GroupKey, list[str]] = {}
    for cpu, avail, members in _node_classes(data, targets):
        present = tuple(s in avail for s in storages)
        cpu_key = cpu if check_cpu else None
        if jobs or per_node:
            for n in members:
                key: GroupKey = (present, cpu_key, tuple(j.get("target") == n for j in jobs), n if per_node else "")
                grouped.setdefault(key, []).append(n)
        else:
            grouped.setdefault((present, cpu_key, (), ""), []).extend(members)
    out = []
    src_cpu = cpu_model(data, source)
    for (present, cpu, repl, one), members in grouped.items():
        nodes = sorted(members)
        found = [
            storage_reason(storages, present, nodes),
            cpu_reason(src_cpu, cpu, source, nodes) if check_cpu else None,
        ]
        reasons = [r for r in found if r is not None]
        reasons += replication_reasons(jobs, repl, running)
        if mapped and one:
            reasons += mapping_reasons(data, mapped, one)
        if vnets and one:
            reasons += sdn_reasons(data, vnets, one, cfg.vmid)
        out.append(TargetVerdict(nodes=nodes, mode=None, reasons=reasons))
    out.sort(key=lambda t: t.nodes)
    if not jobs and not per_node:
        memo[memo_key] = [(t.nodes, list(t.reasons)) for t in out]
    return out
