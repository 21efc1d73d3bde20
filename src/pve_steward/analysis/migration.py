"""Migratability: can this guest move to that node, how (live / offline / restart), and if not, why.

The rules follow qemu-server and pve-container (see ``../shared/reference/pve-domain.md`` section b):
locks, local devices, CD-ROMs holding local ISOs, local disks (copied, or impossible on some
storage types or with snapshots), storage availability per target, container bind mounts and
devices, replication constraints. Two rules are ours, because a careful operator cannot prove
them safe: ``cpu: host`` across different CPU models, and container device passthrough.
When PVE's own precondition answer (``GET .../migrate``) is available, it is compared with our
reading; where they differ, the stricter answer wins and the difference is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import Finding, Severity, finding
from pve_steward.pve.guestconfig import GuestConfig

Mode = Literal["live", "offline", "restart"]
Verdict = Literal["live", "offline", "restart", "blocked"]
_MIGRATABLE_LOCAL = {"dir", "btrfs", "zfspool", "lvmthin", "lvm"}
_SNAPSHOT_SAFE = {"zfspool", "btrfs"}
_SHARED_TYPES = {"nfs", "cifs", "rbd", "pbs", "cephfs", "glusterfs", "iscsi", "iscsidirect", "zfs"}
_RANK: dict[str | None, int] = {"live": 3, "offline": 2, "restart": 2, None: 0}


@dataclass(slots=True)
class Reason:
    code: Annotated[str, Field(description="MIGRATE_* finding code")]
    blocking: bool
    detail: str
    keys: Annotated[list[str], Field(description="config keys involved")] = field(default_factory=list)


@dataclass(slots=True)
class TargetVerdict:
    """One or more target nodes on which the guest fares identically."""

    nodes: list[str]
    mode: Annotated[Mode | None, Field(description="how it would move there; null when it cannot")] = None
    reasons: list[Reason] = field(default_factory=list)


@dataclass(slots=True)
class Migratability:
    vmid: int
    name: str
    type: Literal["qemu", "lxc"]
    node: str
    status: str
    verdict: Verdict
    ha_managed: bool = False
    memory_bytes: Annotated[int, Field(description="configured memory (what a target must reserve)")] = 0
    local_disk_bytes: Annotated[int, Field(description="bytes a move would copy")] = 0
    reasons: Annotated[list[Reason], Field(description="guest-wide reasons")] = field(default_factory=list)
    targets: list[TargetVerdict] = field(default_factory=list)

    @property
    def blocking(self) -> list[Reason]:
        out = [r for r in self.reasons if r.blocking]
        if self.verdict == "blocked" and not out:
            codes: dict[str, Reason] = {}
            for t in self.targets:
                for r in t.reasons:
                    if r.blocking:
                        codes.setdefault(r.code, r)
            out = list(codes.values())
        return out

    def target(self, node: str) -> TargetVerdict | None:
        return next((t for t in self.targets if node in t.nodes), None)

    def movable_to(self) -> list[str]:
        return sorted(n for t in self.targets if t.mode for n in t.nodes)


def _reason(code: str, blocking: bool, detail: str, keys: list[str] | None = None) -> Reason:
    return Reason(code=code, blocking=blocking, detail=detail, keys=keys or [])


def storage_shared(data: ClusterData, storage: str) -> bool:
    memo = data.memo["shared"]
    if storage not in memo:
        cfg = data.storage_defs.get(storage)
        memo[storage] = cfg is not None and (bool(int(cfg.get("shared", 0) or 0)) or cfg.get("type") in _SHARED_TYPES)
    return bool(memo[storage])


def storage_on(data: ClusterData, storage: str, node: str) -> bool:
    memo = data.memo["storage_on"]
    key = (storage, node)
    if key not in memo:
        cfg = data.storage_defs.get(storage)
        nodes = cfg.get("nodes") if cfg else None
        memo[key] = (
            cfg is not None and not int(cfg.get("disable", 0) or 0) and (not nodes or node in str(nodes).split(","))
        )
    return bool(memo[key])


def maintenance_nodes(data: ClusterData) -> set[str]:
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
        else:
            ok.append(node)
    memo[key] = (ok, excluded)
    return ok, excluded


def _guest_reasons(data: ClusterData, cfg: GuestConfig, running: bool) -> tuple[list[Reason], int]:
    reasons: list[Reason] = []
    local_bytes = 0
    local_keys: list[str] = []
    if cfg.lock:
        reasons.append(_reason("MIGRATE_LOCKED", True, detail=f"config lock '{cfg.lock}'"))
    if cfg.template:
        reasons.append(_reason("MIGRATE_TEMPLATE", False, detail="template: offline move"))
    if cfg.type == "qemu" and cfg.local_devices:
        reasons.append(
            _reason(
                "MIGRATE_PASSTHROUGH",
                True,
                keys=list(cfg.local_devices),
                detail=f"local devices {', '.join(cfg.local_devices)}",
            )
        )
    if cfg.type == "qemu" and cfg.mapped_devices:
        keys = sorted(cfg.mapped_devices)
        reasons.append(
            _reason(
                "MIGRATE_MAPPED_DEVICE",
                True,
                keys=keys,
                detail=f"mapped devices {', '.join(keys)}: availability on the target and live "
                "capability are not provable without PVE's precondition",
            )
        )
    for vol in cfg.volumes:
        if vol.empty_drive or vol.cloudinit:
            continue
        if vol.cdrom:
            if vol.volid == "cdrom" or vol.host_path or (vol.storage and not storage_shared(data, vol.storage)):
                reasons.append(
                    _reason("MIGRATE_LOCAL_CDROM", True, keys=[vol.key], detail=f"{vol.key} holds {vol.volid}")
                )
            continue
        if vol.host_path:
            if cfg.type == "lxc" and vol.key.startswith("mp"):
                if not vol.shared_flag:
                    reasons.append(
                        _reason(
                            "MIGRATE_BIND_MOUNT", True, keys=[vol.key], detail=f"{vol.key} binds host path {vol.volid}"
                        )
                    )
            elif not vol.shared_flag:
                reasons.append(
                    _reason(
                        "MIGRATE_LOCAL_DISK_UNSUPPORTED",
                        True,
                        keys=[vol.key],
                        detail=f"{vol.key} is host path {vol.volid}",
                    )
                )
            continue
        if vol.storage is None or storage_shared(data, vol.storage):
            continue
        stype = (data.storage_defs.get(vol.storage) or {}).get("type")
        if stype not in _MIGRATABLE_LOCAL:
            reasons.append(
                _reason(
                    "MIGRATE_LOCAL_DISK_UNSUPPORTED",
                    True,
                    keys=[vol.key],
                    detail=f"{vol.key} on {vol.storage} (type {stype or 'unknown'}) cannot be migrated",
                )
            )
            continue
        if cfg.parent_snapshot and stype not in _SNAPSHOT_SAFE and not vol.volid.endswith(".qcow2"):
            reasons.append(
                _reason(
                    "MIGRATE_LOCAL_DISK_UNSUPPORTED",
                    True,
                    keys=[vol.key],
                    detail=f"{vol.key} on {vol.storage} has snapshots: non-migratable snapshot",
                )
            )
            continue
        local_bytes += vol.size_bytes or 0
        local_keys.append(f"{vol.key} ({vol.storage})")
    if local_keys:
        how = " with with-local-disks" if running and cfg.type == "qemu" else ""
        reasons.append(
            _reason(
                "MIGRATE_LOCAL_DISK",
                False,
                keys=[k.split()[0] for k in local_keys],
                detail=f"local disks {', '.join(local_keys)} are copied{how}: {local_bytes / 1024**3:.0f} GiB",
            )
        )
    if cfg.type == "lxc" and (cfg.ct_devices or cfg.raw_lxc_keys):
        keys = [*cfg.ct_devices, *cfg.raw_lxc_keys]
        reasons.append(
            _reason(
                "MIGRATE_CT_DEVICE",
                True,
                keys=keys,
                detail=f"host devices or raw lxc keys {', '.join(keys)} (PVE does not check them)",
            )
        )
    for job in replication_jobs_of(data, cfg.vmid):
        if job.get("remove_job"):
            reasons.append(
                _reason("MIGRATE_REPLICATION", True, detail=f"replication job {job.get('id')} is marked for removal")
            )
    return reasons, local_bytes


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


def _target_needs(cfg: GuestConfig, running: bool) -> tuple[tuple[str, ...], bool]:
    """What a guest needs from a target: its storages, and the source's CPU model (running cpu: host)."""
    storages = tuple(sorted({v.storage for v in cfg.volumes if v.storage and not v.empty_drive}))
    return storages, cfg.type == "qemu" and running and cfg.cpu_host


def _target_groups(
    data: ClusterData,
    cfg: GuestConfig,
    source: str,
    targets: list[str],
    running: bool,
    per_node: bool,
    targets_key: tuple[object, ...],
) -> list[TargetVerdict]:
    """Target-specific reasons, computed once per group of nodes that are alike for this guest.

    Guests with the same storages and CPU constraint share the grouping (memoised), so a large
    cluster costs one evaluation per distinct situation, not one per guest and node.
    """
    storages, check_cpu = _target_needs(cfg, running)
    jobs = (
        [j for j in replication_jobs_of(data, cfg.vmid) if not j.get("disable")]
        if cfg.type == "qemu" and running
        else []
    )
    memo = data.memo["groups"]
    memo_key = (storages, check_cpu, targets_key)
    if not jobs and not per_node and memo_key in memo:
        # node lists are shared between guests and never mutated; reasons are copied (PVE comparison appends)
        return [TargetVerdict(nodes=nodes, mode=None, reasons=list(reasons)) for nodes, reasons in memo[memo_key]]
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
    for (present, cpu, repl, _), members in grouped.items():
        nodes = sorted(members)
        reasons = []
        missing = [s for s, ok in zip(storages, present, strict=True) if not ok]
        if missing:
            reasons.append(
                _reason(
                    "MIGRATE_STORAGE_UNAVAILABLE",
                    True,
                    f"storage {', '.join(missing)} not available on {', '.join(nodes)}",
                )
            )
        if check_cpu and (src_cpu is None or cpu is None or src_cpu != cpu):
            reasons.append(
                _reason(
                    "MIGRATE_CPU_HOST",
                    True,
                    f"cpu: host, CPU model {src_cpu or 'unknown'} on {source} vs {cpu or 'unknown'} on "
                    f"{', '.join(nodes)}",
                )
            )
        for job, same in zip(jobs, repl, strict=True):
            if not same:
                reasons.append(
                    _reason("MIGRATE_REPLICATION", True, f"replication job {job.get('id')} targets {job.get('target')}")
                )
        out.append(TargetVerdict(nodes=nodes, mode=None, reasons=reasons))
    out.sort(key=lambda t: t.nodes)
    if not jobs and not per_node:
        memo[memo_key] = [(t.nodes, list(t.reasons)) for t in out]
    return out


def _merge_alike(verdicts: list[TargetVerdict]) -> list[TargetVerdict]:
    """Targets that end with the same mode and reasons are one group in the answer (bounded output)."""
    merged: dict[tuple[object, ...], TargetVerdict] = {}
    for v in verdicts:
        key = (v.mode, tuple((r.code, r.blocking, r.detail) for r in v.reasons))
        if key in merged:
            merged[key] = TargetVerdict(nodes=sorted(merged[key].nodes + v.nodes), mode=v.mode, reasons=v.reasons)
        else:
            merged[key] = v
    return sorted(merged.values(), key=lambda t: t.nodes)


def _compare_with_pve(pre: Row, cfg: GuestConfig, reasons: list[Reason], targets: list[TargetVerdict]) -> None:
    """Stricter answer wins: PVE-reported obstacles we did not see become blocking reasons."""
    ours = set(cfg.local_devices)
    theirs = {str(k) for k in pre.get("local_resources") or []}
    if theirs - ours:
        reasons.append(
            _reason(
                "MIGRATE_PVE_DISAGREES",
                True,
                keys=sorted(theirs - ours),
                detail=f"PVE reports local resources {', '.join(sorted(theirs - ours))} "
                "that the config reading did not flag",
            )
        )
    elif ours - theirs:
        reasons.append(
            _reason(
                "MIGRATE_PVE_DISAGREES",
                False,
                keys=sorted(ours - theirs),
                detail=f"we flag {', '.join(sorted(ours - theirs))}, PVE does not",
            )
        )
    flagged = {k for r in reasons if r.code == "MIGRATE_LOCAL_CDROM" for k in r.keys}
    pve_cdroms = {str(d.get("drivename")) for d in pre.get("local_disks") or [] if d.get("cdrom")}
    if pve_cdroms - flagged:
        reasons.append(
            _reason(
                "MIGRATE_PVE_DISAGREES",
                True,
                keys=sorted(pve_cdroms - flagged),
                detail="PVE reports local CD-ROM media we did not flag",
            )
        )
    not_allowed = pre.get("not_allowed_nodes") or {}
    for tv in targets:  # one node per group when PVE's answer is compared
        entry = not_allowed.get(tv.nodes[0]) or {}
        pve_storages = sorted(entry.get("unavailable_storages") or [])
        ours_missing = any(r.code == "MIGRATE_STORAGE_UNAVAILABLE" for r in tv.reasons)
        if pve_storages and not ours_missing:
            tv.reasons.append(
                _reason(
                    "MIGRATE_PVE_DISAGREES",
                    True,
                    detail=f"PVE says storage {', '.join(pve_storages)} is unavailable on {tv.nodes[0]}",
                )
            )
        if entry.get("unavailable-resources"):
            tv.reasons.append(
                _reason(
                    "MIGRATE_MAPPED_DEVICE",
                    True,
                    detail=f"mapping {', '.join(entry['unavailable-resources'])} missing on {tv.nodes[0]}",
                )
            )
    info = pre.get("mapped-resource-info") or {}
    if cfg.mapped_devices and "mapped-resource-info" in pre:
        # PVE answered for the mapped devices: replace our 'not provable' with its verdict
        reasons[:] = [r for r in reasons if r.code != "MIGRATE_MAPPED_DEVICE"]
        if int(pre.get("running", 0) or 0):
            not_live = sorted(k for k in cfg.mapped_devices if not (info.get(k) or {}).get("live-migration"))
            if not_live:
                reasons.append(
                    _reason(
                        "MIGRATE_MAPPED_DEVICE",
                        True,
                        keys=not_live,
                        detail=f"mapped devices {', '.join(not_live)} are not live-migration capable",
                    )
                )


def assess(
    data: ClusterData,
    vmid: int,
    *,
    allowed: list[str] | None = None,
    denied: list[str] | None = None,
    allow_downtime: bool = False,
) -> Migratability:
    """The full verdict for one guest over every eligible target."""
    return _assess(data, vmid, allowed, denied, allow_downtime, _situation(data, vmid, allowed, denied, allow_downtime))


def _situation(
    data: ClusterData, vmid: int, allowed: list[str] | None, denied: list[str] | None, allow_downtime: bool
) -> tuple[object, ...] | None:
    """What a verdict depends on, for guests whose verdict can be shared; None for the others.

    Not shared: unreadable configs or states, PVE precondition answers (per guest) and guests with
    replication jobs (their targets are per job).
    """
    cfg = data.parsed.get(vmid)
    row = data.guests.get(vmid)
    if cfg is None or row is None:
        return None
    status = row.get("status", "unknown")
    gtype = row.get("type", "qemu")
    if status == "unknown" or (gtype == "qemu" and vmid in data.preconditions) or vmid in data.replication_by_guest:
        return None
    return (_shape(data, cfg), gtype, str(status), allow_downtime, _targets_key(row, allowed, denied))


def _targets_key(row: Row, allowed: list[str] | None, denied: list[str] | None) -> tuple[object, ...]:
    """Source and target restrictions: what decides a guest's eligible targets."""
    return (str(row.get("node", "")), tuple(allowed) if allowed is not None else None, tuple(denied or ()))


def _assess(
    data: ClusterData,
    vmid: int,
    allowed: list[str] | None,
    denied: list[str] | None,
    allow_downtime: bool,
    situation: tuple[object, ...] | None,
) -> Migratability:
    row = data.guests.get(vmid) or {}
    gtype = row.get("type", "qemu")
    source = str(row.get("node", ""))
    status = str(row.get("status", "unknown"))
    running = status == "running"
    base = {
        "vmid": vmid,
        "name": str(row.get("name") or vmid),
        "type": gtype,
        "node": source,
        "status": status,
        "ha_managed": data.ha_managed(vmid) is not None,
    }
    cfg = data.parsed.get(vmid)
    if cfg is None:
        return Migratability(
            **base,
            verdict="blocked",
            reasons=[_reason("MIGRATE_NOT_PROVABLE", True, detail="the guest config could not be read")],
        )
    if status == "unknown":
        return Migratability(
            **base,
            verdict="blocked",
            memory_bytes=cfg.memory_bytes,
            reasons=[_reason("MIGRATE_NOT_PROVABLE", True, detail="the guest's state is unknown (node unreachable)")],
        )
    shared = data.memo["verdicts"]
    if situation is not None and situation in shared:
        # a guest alike in every respect the verdict reads: share its (read-only) answer
        verdict, local_bytes, reasons, targets = shared[situation]
        return Migratability(
            **base,
            verdict=verdict,
            memory_bytes=cfg.memory_bytes,
            local_disk_bytes=local_bytes,
            reasons=reasons,
            targets=targets,
        )
    pre = data.preconditions.get(vmid) if gtype == "qemu" else None
    reasons, local_bytes = _guest_reasons(data, cfg, running)
    targets_ok, excluded = eligible_targets(data, source, allowed, denied)
    targets = _target_groups(
        data, cfg, source, targets_ok, running, per_node=pre is not None, targets_key=_targets_key(row, allowed, denied)
    )
    if pre is not None:
        _compare_with_pve(pre, cfg, reasons, targets)
    if running and gtype == "lxc":
        reasons.append(
            _reason(
                "MIGRATE_RESTART_REQUIRED", not allow_downtime, detail="running container: restart migration (downtime)"
            )
        )
    guest_blocked = any(r.blocking for r in reasons)
    for tv in targets:
        if guest_blocked or any(r.blocking for r in tv.reasons):
            continue
        if not running or cfg.template:
            tv.mode = "offline"
        elif gtype == "lxc":
            tv.mode = "restart"
        else:
            tv.mode = "live"
    targets = _merge_alike(targets)
    best = max((t.mode for t in targets), key=lambda m: _RANK[m], default=None)
    if not targets:
        detail = "; ".join(f"{n}: {why}" for n, why in sorted(excluded.items())) or "no other node"
        reasons.append(_reason("MIGRATE_NO_TARGET", True, detail=f"no eligible target ({detail})"))
    if situation is not None:
        shared[situation] = (best or "blocked", local_bytes, reasons, targets)
    return Migratability(
        **base,
        verdict=best or "blocked",
        memory_bytes=cfg.memory_bytes,
        local_disk_bytes=local_bytes,
        reasons=reasons,
        targets=targets,
    )


def _shape(data: ClusterData, cfg: GuestConfig) -> tuple[object, ...]:
    """Everything of a config that a verdict reads, except its identity (vmid, name, memory).

    Volume ids only matter through their storage, unless they are host paths, CD-ROM media or
    storage-less (they appear in reasons); snapshots matter through the qcow2 suffix; sizes only
    for disks a move would copy (not on shared storage). The CPU type stands in for "is it
    host": a finer key only shares less. Built for every guest, so plain loops, no generators.
    """
    volumes: list[tuple[object, ...]] = []
    for v in cfg.volumes:
        storage = v.storage
        if storage is None:
            volumes.append((v.key, None, v.size_bytes, v.cdrom, v.host_path, v.shared_flag, v.cloudinit, v.volid))
            continue
        on_shared = storage_shared(data, storage)
        volumes.append(
            (
                v.key,
                storage,
                None if on_shared else v.size_bytes,
                v.cdrom,
                v.host_path,
                v.shared_flag,
                v.cloudinit,
                v.volid if v.cdrom or v.host_path else v.volid.endswith(".qcow2"),
            )
        )
    mapped = cfg.mapped_devices
    return (
        cfg.type,
        cfg.lock,
        cfg.template,
        cfg.cpu_type,
        cfg.parent_snapshot is not None,
        cfg.local_devices,
        tuple(sorted(mapped)) if mapped else (),
        cfg.ct_devices,
        cfg.raw_lxc_keys,
        tuple(volumes),
    )


_NOT_HA_BLOCKERS = {"MIGRATE_NO_TARGET", "MIGRATE_RESTART_REQUIRED", "MIGRATE_DOWNTIME_NOT_ALLOWED"}


def ha_problems(data: ClusterData, m: Migratability) -> list[str]:
    """What would stall HA failover or node maintenance for an HA-managed guest."""
    problems = [r.detail for r in m.blocking if r.code not in _NOT_HA_BLOCKERS]
    replicated = any(not j.get("disable") for j in replication_jobs_of(data, m.vmid))
    if m.local_disk_bytes and not replicated:
        problems.append("local disk without replication: a failover node would have no data")
    return problems


# a finding of one guest, minus the guest: (code, message prefix, message suffix, evidence, severity,
# whether the guest's node is appended to the evidence)
Template = tuple[str, str, str, dict[str, object], Severity | None, bool]


def analyze_migratability(
    data: ClusterData, *, vmids: list[int] | None = None, allow_downtime: bool = True, verdicts: bool = True
) -> tuple[list[Finding], list[Migratability]]:
    """Findings on how guests can move (capability view: downtime moves count as possible).

    Blocked guests get one finding per blocking reason; movable guests get findings for what
    limits them (targets excluded by cpu: host or storage, disk copies, restarts). HA guests are
    reported as HA_GUEST_NOT_MIGRATABLE when something would stall failover or maintenance.
    Guests in the same situation share their findings' wording; ``verdicts=False`` (the health
    check) skips building the per-guest verdicts when only findings are wanted.
    """
    out: list[Finding] = []
    answers: list[Migratability] = []
    templates: dict[tuple[object, ...], list[Template]] = data.memo["finding_templates"]
    ha_of = data.ha_by_vmid
    for vmid in vmids if vmids is not None else data.guest_ids:
        ha = vmid in ha_of
        downtime = allow_downtime or ha
        situation = _situation(data, vmid, None, None, downtime)
        key = (situation, ha) if situation is not None else None
        found = templates.get(key) if key is not None else None
        if found is None and not verdicts and situation is not None and key is not None:
            found = _node_free_templates(data, vmid, situation, ha)
            if found is not None:
                templates[key] = found
        if found is None or verdicts:
            m = _assess(data, vmid, None, None, downtime, situation)
            if verdicts:
                answers.append(m)
            if found is None:
                found = _templates(data, m, ha)
                if key is not None:
                    templates[key] = found
        if found:
            row = data.guests.get(vmid) or {}
            who = f"{vmid} ({row.get('name') or vmid})"
            subject = guest_subject(data, vmid)
            node = str(row.get("node", ""))
            for code, prefix, suffix, evidence, severity, with_node in found:
                facts = {**evidence, "node": node} if with_node else evidence
                out.append(finding(code, subject, f"{prefix}{who}{suffix}", facts, severity=severity))
    return out, answers


def _node_free_templates(
    data: ClusterData, vmid: int, situation: tuple[object, ...], ha: bool
) -> list[Template] | None:
    """The findings' wording for guests alike but on different nodes, when the node cannot change it.

    That holds when every eligible target takes the guest alike and without a reason: then the
    source node only names itself in the evidence. One verdict per shape instead of one per shape
    and node. None when it does not hold (the caller words this guest's findings itself).
    """
    shape, gtype, status, downtime, targets_key = situation
    if not isinstance(downtime, bool) or not isinstance(targets_key, tuple) or targets_key[1:] != (None, ()):
        return None  # target restrictions: not the health check's question
    if not _targets_clean(data, data.parsed[vmid], str(targets_key[0]), status == "running"):
        return None
    memo: dict[tuple[object, ...], list[Template] | None] = data.memo["node_free_templates"]
    free_key = (shape, gtype, status, downtime, ha)
    if free_key not in memo:
        m = _assess(data, vmid, None, None, downtime, situation)
        memo[free_key] = _without_node(_templates(data, m, ha), m.node)
    return memo[free_key]


def _targets_clean(data: ClusterData, cfg: GuestConfig, source: str, running: bool) -> bool:
    """Whether every eligible target takes this guest alike and without a reason (memoised per storages)."""
    memo: dict[tuple[object, ...], bool] = data.memo["clean_targets"]
    key = (*_target_needs(cfg, running), source)
    clean = memo.get(key)
    if clean is None:
        targets_ok, _excluded = eligible_targets(data, source)
        groups = _target_groups(data, cfg, source, targets_ok, running, False, (source, None, ()))
        clean = memo[key] = bool(groups) and not any(g.reasons for g in groups)
    return clean


def _without_node(found: list[Template], node: str) -> list[Template] | None:
    """Templates with the source node taken out of the evidence; None if the node shows anywhere else."""
    out: list[Template] = []
    for code, prefix, suffix, evidence, severity, with_node in found:
        keys = list(evidence)
        named = "node" in evidence
        if with_node or (named and (keys[-1] != "node" or evidence["node"] != node)):
            return None
        rest = {k: v for k, v in evidence.items() if k != "node"}
        if node in prefix or node in suffix or node in repr(rest):
            return None
        out.append((code, prefix, suffix, rest, severity, named))
    return out


def _templates(data: ClusterData, m: Migratability, ha: bool) -> list[Template]:
    if ha:
        problems = ha_problems(data, m)
        if not problems:
            return []
        return [
            (
                "HA_GUEST_NOT_MIGRATABLE",
                "HA guest ",
                ": " + "; ".join(problems),
                {"problems": problems, "node": m.node},
                None,
                False,
            )
        ]
    out: list[Template] = []
    seen: set[str] = set()
    if m.verdict == "blocked":
        for r in m.blocking:
            if r.code not in seen:
                seen.add(r.code)
                out.append((r.code, "", f" cannot migrate: {r.detail}", {"keys": r.keys, "node": m.node}, None, False))
        return out
    for tv in m.targets:
        for r in tv.reasons:
            if r.blocking and r.code not in seen:
                seen.add(r.code)
                movable = m.movable_to()
                out.append(
                    (
                        r.code,
                        "",
                        f" can only move to {', '.join(movable)}: {r.detail}",
                        {"movable_to": movable, "node": m.node},
                        Severity.WARNING if r.code == "MIGRATE_CPU_HOST" else Severity.INFO,
                        False,
                    )
                )
    for r in m.reasons:
        if r.code in seen or r.code not in ("MIGRATE_LOCAL_DISK", "MIGRATE_RESTART_REQUIRED", "MIGRATE_PVE_DISAGREES"):
            continue
        seen.add(r.code)
        out.append(
            (
                r.code,
                "",
                f": {r.detail}",
                {"keys": r.keys, "verdict": m.verdict, "copy_bytes": m.local_disk_bytes},
                Severity.INFO if not r.blocking else None,
                False,
            )
        )
    return out
