"""One guest's verdict, step by step as PVE takes it: lock, devices, volumes, targets, PVE cross-check, mode.

The verdict is derived from the guest config, the storage config and the cluster resources the
way ``migrate_vm_precondition`` + ``QemuMigrate::prepare`` (or LXC ``Migrate::prepare``) would,
so a token without VM.Migrate still gets an answer; PVE's precondition, where readable, is a
cross-check (basis ``config+pve``). Guests alike in everything a verdict reads share one answer.
"""

from __future__ import annotations

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.migration.devices import Devices, clipboard_vnc, local_resources, mapped_live
from pve_steward.analysis.migration.ha_rules import ha_allowed_nodes, ha_blocked_nodes
from pve_steward.analysis.migration.model import NOT_VISIBLE, RANK, Migratability, Reason, TargetVerdict, reason
from pve_steward.analysis.migration.pvecheck import compare
from pve_steward.analysis.migration.sdn import guest_vnets
from pve_steward.analysis.migration.storage import parse_volname, shared_flags, storage_type
from pve_steward.analysis.migration.target_rules import target_groups
from pve_steward.analysis.migration.targets import eligible_targets
from pve_steward.analysis.migration.volumes import has_snapshots, scan_volumes
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.sdnstate import guest_bridges
from pve_steward.pve.guestconfig import GuestConfig
from pve_steward.pve.visibility import SDN_VNETS


def pve_major(data: ClusterData, node: str) -> int | None:
    """The source node's pve-manager major version (node status, else /version); None when unknown."""
    text = str((data.node_status.get(node) or {}).get("pveversion") or "")
    version = text.split("/")[1] if "/" in text else str((data.version or {}).get("version") or "")
    head = version.split(".", 1)[0]
    return int(head) if head.isdecimal() else None


@pve_rule(
    "migrate.lock",
    rule="A guest whose config has a lock (backup, snapshot, suspended, migrate, ...) cannot be migrated.",
    pve="qemu-server src/PVE/API2/Qemu.pm migrate_vm_precondition / migrate_vm (check_lock); pve-container "
    "src/PVE/LXC/Migrate.pm prepare",
    codes=("MIGRATE_LOCKED",),
)
def lock_reasons(cfg: GuestConfig) -> list[Reason]:
    return [reason("MIGRATE_LOCKED", True, f"config lock '{cfg.lock}'")] if cfg.lock else []


@pve_rule(
    "migrate.container-devices",
    rule="Not checked by PVE ('todo: test if VM uses local resources'): container devN passthrough and raw lxc.* "
    "keys name host resources the target may lack (ours, conservative).",
    pve="pve-container src/PVE/LXC/Migrate.pm prepare",
    codes=("MIGRATE_CT_DEVICE",),
)
def ct_device_reasons(cfg: GuestConfig) -> list[Reason]:
    if not (cfg.ct_devices or cfg.raw_lxc_keys):
        return []
    keys = [*cfg.ct_devices, *cfg.raw_lxc_keys]
    return [
        reason(
            "MIGRATE_CT_DEVICE", True, f"host devices or raw lxc keys {', '.join(keys)} (PVE does not check them)", keys
        )
    ]


def guest_reasons(data: ClusterData, cfg: GuestConfig, raw: Row, running: bool) -> tuple[list[Reason], int, Devices]:
    """Guest-wide reasons from config + storage config, in the order PVE checks them."""
    reasons = lock_reasons(cfg)
    if cfg.template:
        reasons.append(reason("MIGRATE_TEMPLATE", False, "template: offline move"))
    dev = Devices()
    if cfg.type == "qemu":
        dev, found = local_resources(cfg, raw, running, forced=data.ha_managed(cfg.vmid) is not None)
        reasons += found
        reasons += mapped_live(data, dev, running)
        reasons += clipboard_vnc(raw, running, pve_major(data, str((data.guests.get(cfg.vmid) or {}).get("node", ""))))
    else:
        reasons += ct_device_reasons(cfg)
    scan = scan_volumes(data, cfg, running)
    reasons += scan.reasons
    if scan.copied:
        how = " with with-local-disks" if running and cfg.type == "qemu" else ""
        reasons.append(
            reason(
                "MIGRATE_LOCAL_DISK",
                False,
                f"local disks {', '.join(scan.copied)} are copied{how}: {scan.copy_bytes / 1024**3:.0f} GiB",
                [k.split()[0] for k in scan.copied],
            )
        )
    return reasons, scan.copy_bytes, dev


@pve_rule(
    "migrate.running-mode",
    rule="A running container moves only in restart mode (stop, move, start); a running VM moves live, and when a "
    "live move is refused it can only move after being stopped (offline).",
    pve="pve-container src/PVE/LXC/Migrate.pm prepare ('lxc live migration is currently not implemented'); "
    "qemu-server src/PVE/API2/Qemu.pm migrate_vm ('can't migrate running VM without --online')",
    codes=("MIGRATE_RESTART_REQUIRED",),
)
def downtime_reasons(cfg: GuestConfig, reasons: list[Reason], running: bool, allow_downtime: bool) -> bool:
    """Turn live-only obstacles into a downtime requirement; True when the move is offline though running."""
    if not running:
        return False
    if cfg.type == "lxc":
        reasons.append(
            reason("MIGRATE_RESTART_REQUIRED", not allow_downtime, "running container: restart migration (downtime)")
        )
        return False
    live_only = [r for r in reasons if r.blocking and r.live_only]
    if not live_only:
        return False
    hard = [r for r in reasons if r.blocking and not r.live_only]
    for r in live_only:
        r.blocking = False
    if not hard:
        why = "; ".join(r.detail for r in live_only)
        reasons.append(
            reason(
                "MIGRATE_RESTART_REQUIRED",
                not allow_downtime,
                f"running VM cannot move live ({why}): shut it down, migrate offline, start it (downtime)",
            )
        )
    return True


@pve_rule(
    "migrate.ha-managed",
    rule="A migrate request for an HA-managed guest (state not ignored) is handed to the HA manager as a "
    "'ha-manager migrate' (task hamigrate); the CRM moves it, or not.",
    pve="qemu-server src/PVE/API2/Qemu.pm migrate_vm (vm_is_ha_managed); pve-container src/PVE/API2/LXC.pm migrate_vm",
    codes=("MIGRATE_HA_MANAGED",),
)
def ha_reason() -> Reason:
    return reason(
        "MIGRATE_HA_MANAGED",
        False,
        "HA-managed: a migrate request becomes an HA request (hamigrate) and the HA manager moves the guest",
    )


# an HA resource's rules as a migrate request meets them: nodes a strict rule allows (None: any), and nodes a
# negative resource-affinity partner holds
HaRuleNodes = tuple[list[str] | None, dict[str, list[str]]]


def ha_rule_nodes(data: ClusterData, sid: str) -> HaRuleNodes | None:
    """The sid's HA rules that decide per node; None when none do (its verdict can then be shared)."""
    allowed, blocked = ha_allowed_nodes(data, sid), ha_blocked_nodes(data, sid)
    return (allowed, blocked) if allowed is not None or blocked else None


def ha_rule_reasons(rules: HaRuleNodes, targets: list[TargetVerdict], precondition: bool) -> None:
    """Per target (one node each): outside a strict rule, or held by a negative partner. PVE's precondition
    already lists the partners as blocking-ha-resources (pvecheck), so they are added only without it."""
    allowed, blocked = rules
    for tv in targets:
        node = tv.nodes[0]
        if allowed is not None and node not in allowed:
            tv.reasons.append(
                reason("MIGRATE_HA_AFFINITY", True, f"strict node affinity allows only {', '.join(allowed)}")
            )
        if node in blocked and not precondition:
            tv.reasons.append(
                reason("MIGRATE_HA_AFFINITY", True, f"HA resources block {node}: {', '.join(blocked[node])}")
            )


@pve_rule(
    "migrate.ha-error-state",
    rule="PVE refuses the HA migrate request of a service in error state ('must be disabled and fixed first'): the "
    "hamigrate task fails and the CRM leaves the guest where it is.",
    pve="pve-ha-manager src/PVE/API2/HA/Resources.pm migrate, check_service_state",
    codes=("MIGRATE_HA_ERROR",),
)
def ha_error_reason(data: ClusterData, vmid: int) -> Reason | None:
    res = data.ha_managed(vmid)
    sid = str(res.get("sid")) if res is not None else ""
    if data.ha_service_states.get(sid) != "error":
        return None
    return reason(
        "MIGRATE_HA_ERROR",
        True,
        f"HA service {sid} is in error state: PVE refuses to migrate it until it is disabled and fixed "
        f"(ha-manager set {sid} --state disabled)",
    )


@pve_rule(
    "migrate.ha-unseen",
    rule="Whether a guest is HA-managed decides how it moves (an HA request, placed by its HA rules); PVE lists HA "
    "resources only with Sys.Audit on /, so without that list no guest's move is provable.",
    pve="pve-ha-manager src/PVE/API2/HA/Resources.pm index (check perm / Sys.Audit); qemu-server "
    "src/PVE/API2/Qemu.pm migrate_vm (vm_is_ha_managed)",
    codes=("MIGRATE_NOT_PROVABLE",),
)
def ha_unseen_reason() -> Reason:
    return reason(
        "MIGRATE_NOT_PROVABLE",
        True,
        "whether it is HA-managed (and where its HA rules let it go) is not visible to this token: PVE lists HA "
        "resources only with Sys.Audit on / (/cluster/ha/resources)",
        rule=NOT_VISIBLE,
    )


def sdn_unseen(data: ClusterData, raw: Row) -> bool:
    """A guest with a NIC while PVE hides SDN vnets from the token: a bridge could be a vnet it cannot see. Only
    where the token provably lacks SDN.Audit somewhere under /sdn/zones: vnet names are unknown, so the single
    NoAccess entry the map alone cannot show (no ACL tree) cannot be asked about (design record 261206-55)."""
    return data.visibility.whole(SDN_VNETS) is False and bool(guest_bridges(raw))


@pve_rule(
    "migrate.sdn-unseen",
    rule="A NIC on an SDN vnet decides which nodes can take the guest (migrate.sdn-vnet-on-target); PVE lists a "
    "vnet (and a node's bridges) only with SDN.Audit on its zone, so without that no NIC's bridge is known not to "
    "be one, and no move is provable.",
    pve="pve-network src/PVE/API2/Network/SDN/Vnets.pm index; pve-manager src/PVE/API2/Network.pm index "
    "(check_sdn_bridge)",
    codes=("MIGRATE_NOT_PROVABLE",),
)
def sdn_unseen_reason() -> Reason:
    return reason(
        "MIGRATE_NOT_PROVABLE",
        True,
        "whether its NICs' bridges are SDN vnets (which decide where it can go) is not visible to this token: "
        f"PVE lists a vnet only with {SDN_VNETS.needs()} ({SDN_VNETS.listing})",
        rule=NOT_VISIBLE,
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
    return assess_in(
        data, vmid, allowed, denied, allow_downtime, situation(data, vmid, allowed, denied, allow_downtime)
    )


def situation(
    data: ClusterData, vmid: int, allowed: list[str] | None, denied: list[str] | None, allow_downtime: bool
) -> tuple[object, ...] | None:
    """What a verdict depends on, for guests whose verdict can be shared; None for the others.

    Not shared: unreadable configs or states, PVE precondition answers (per guest), guests with
    replication jobs (their targets are per job), guests with mapped devices (per node) and HA
    services in error state.
    """
    cfg = data.parsed.get(vmid)
    row = data.guests.get(vmid)
    if cfg is None or row is None:
        return None
    status = row.get("status", "unknown")
    gtype = row.get("type", "qemu")
    if status == "unknown" or (gtype == "qemu" and vmid in data.preconditions) or vmid in data.replication_by_guest:
        return None
    if vmid in data.snapshot_configs:
        return None
    if cfg.mapped_devices or (cfg.local_devices and any(k.startswith("virtiofs") for k in cfg.local_devices)):
        return None
    if guest_vnets(data, vmid) or sdn_unseen(data, data.configs.get(vmid) or {}):  # SDN zones decide per node
        return None
    ha = vmid in data.ha_by_vmid
    if ha and ha_error_reason(data, vmid) is not None:  # the service's state decides (rare)
        return None
    if ha and ha_rule_nodes(data, str(data.ha_by_vmid[vmid].get("sid"))) is not None:  # its own rules decide
        return None
    return (shape(data, cfg), gtype, str(status), allow_downtime, targets_key(row, allowed, denied), ha)


def targets_key(row: Row, allowed: list[str] | None, denied: list[str] | None) -> tuple[object, ...]:
    """Source and target restrictions: what decides a guest's eligible targets."""
    return (str(row.get("node", "")), tuple(allowed) if allowed is not None else None, tuple(denied or ()))


def assess_in(
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
            reasons=[reason("MIGRATE_NOT_PROVABLE", True, "the guest config could not be read")],
        )
    if status == "unknown":
        return Migratability(
            **base,
            verdict="blocked",
            memory_bytes=cfg.memory_bytes,
            reasons=[reason("MIGRATE_NOT_PROVABLE", True, "the guest's state is unknown (node unreachable)")],
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
    answer = _decide(data, cfg, row, allowed, denied, allow_downtime)
    if situation is not None:
        shared[situation] = (answer.verdict, answer.local_disk_bytes, answer.reasons, answer.targets)
    answer.vmid, answer.name, answer.ha_managed = vmid, base["name"], base["ha_managed"]
    return answer


def _decide(
    data: ClusterData, cfg: GuestConfig, row: Row, allowed: list[str] | None, denied: list[str] | None, downtime: bool
) -> Migratability:
    """The procedure: guest-wide rules, eligible targets, per-target rules, PVE cross-check, mode."""
    source, status = str(row.get("node", "")), str(row.get("status", "unknown"))
    running = status == "running"
    pre = data.preconditions.get(cfg.vmid) if cfg.type == "qemu" else None
    raw = data.configs.get(cfg.vmid) or {}
    reasons, local_bytes, dev = guest_reasons(data, cfg, raw, running)
    targets_ok, excluded = eligible_targets(data, source, allowed, denied)
    res = data.ha_managed(cfg.vmid)
    if res is None and "ha_resources" in data.unread:
        reasons.append(ha_unseen_reason())
    if sdn_unseen(data, raw):
        reasons.append(sdn_unseen_reason())
    rules = ha_rule_nodes(data, str(res.get("sid"))) if res is not None else None
    targets = target_groups(
        data,
        cfg,
        source,
        targets_ok,
        running,
        pre is not None or rules is not None,
        targets_key(row, allowed, denied),
        dev.mapped,
    )
    if pre is not None:
        compare(pre, cfg, dev, reasons, targets)
    if rules is not None:
        ha_rule_reasons(rules, targets, pre is not None)
    if res is not None:
        reasons.append(ha_reason())
        refused = ha_error_reason(data, cfg.vmid)
        if refused is not None:
            reasons.append(refused)
    stop_first = downtime_reasons(cfg, reasons, running, downtime)
    guest_blocked = any(r.blocking for r in reasons)
    for tv in targets:
        if guest_blocked or any(r.blocking for r in tv.reasons):
            continue
        if not running or cfg.template or stop_first:
            tv.mode = "offline"
        elif cfg.type == "lxc":
            tv.mode = "restart"
        else:
            tv.mode = "live"
    targets = merge_alike(targets)
    best = max((t.mode for t in targets), key=lambda m: RANK[m], default=None)
    if not targets:
        detail = "; ".join(f"{n}: {why}" for n, why in sorted(excluded.items())) or "no other node"
        reasons.append(reason("MIGRATE_NO_TARGET", True, f"no eligible target ({detail})"))
    return Migratability(
        vmid=cfg.vmid,
        name=str(row.get("name") or cfg.vmid),
        type=cfg.type,
        node=source,
        status=status,
        verdict=best or "blocked",
        basis="config+pve" if pre is not None else "config",
        memory_bytes=cfg.memory_bytes,
        local_disk_bytes=local_bytes,
        reasons=reasons,
        targets=targets,
    )


def merge_alike(verdicts: list[TargetVerdict]) -> list[TargetVerdict]:
    """Targets that end with the same mode and reasons are one group in the answer (bounded output)."""
    merged: dict[tuple[object, ...], TargetVerdict] = {}
    for v in verdicts:
        key = (v.mode, tuple((r.code, r.blocking, r.detail) for r in v.reasons))
        if key in merged:
            merged[key] = TargetVerdict(nodes=sorted(merged[key].nodes + v.nodes), mode=v.mode, reasons=v.reasons)
        else:
            merged[key] = v
    return sorted(merged.values(), key=lambda t: t.nodes)


# qemu-server src/PVE/QemuServer/Virtiofs.pm MAX_VIRTIOFS (10)
_VIRTIOFS_KEYS = frozenset(f"virtiofs{i}" for i in range(10))
_FEATURE_KEYS = ("amd-sev", "intel-tdx", "vga")
_NO_FEATURES = (None, None, None)
_RARE_SHAPE_KEYS = _VIRTIOFS_KEYS.union(_FEATURE_KEYS)  # most VM configs set none: one C-level test


def shape(data: ClusterData, cfg: GuestConfig) -> tuple[object, ...]:
    """Everything of a config that a verdict reads, except its identity (vmid, name, memory).

    Volume ids matter through their storage, their owner, linked-clone state and format, unless
    they are host paths or CD-ROM media (they appear in reasons); sizes only for disks a move would
    copy. Built for every guest, so plain loops.
    """
    volumes: list[tuple[object, ...]] = []
    shared = shared_flags(data)
    for v in cfg.volumes:
        storage = v.storage
        if storage is None or v.cdrom or v.host_path:
            volumes.append((v.key, storage, v.size_bytes, v.cdrom, v.host_path, v.shared_flag, v.cloudinit, v.volid))
            continue
        if shared.get(storage, False):
            volumes.append((v.key, storage, None, False, False, v.shared_flag, v.cloudinit, v.volid.endswith(".qcow2")))
            continue
        vn = parse_volname(storage_type(data, storage), v.volid.split(":", 1)[1])
        ident = (vn.owner == cfg.vmid, vn.base is not None, vn.is_base and v.volid, vn.format, vn.vtype)
        volumes.append((v.key, storage, v.size_bytes, False, False, v.shared_flag, v.cloudinit, ident))
    features: tuple[object, ...] = ()
    virtiofs: tuple[str, ...] = ()
    if cfg.type == "qemu":
        features = _NO_FEATURES
        raw = data.configs.get(cfg.vmid) or {}
        if not _RARE_SHAPE_KEYS.isdisjoint(raw):
            features = (raw.get("amd-sev"), raw.get("intel-tdx"), raw.get("vga"))
            if not _VIRTIOFS_KEYS.isdisjoint(raw):
                virtiofs = tuple(sorted(_VIRTIOFS_KEYS.intersection(raw)))
    return (
        cfg.type,
        cfg.lock,
        cfg.template,
        cfg.cpu_type,
        has_snapshots(data, cfg),
        cfg.local_devices,
        cfg.ct_devices,
        cfg.raw_lxc_keys,
        features,
        virtiofs,
        tuple(volumes),
    )
