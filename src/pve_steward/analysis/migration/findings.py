"""Migratability as findings (the health check's view) and what would stall HA for an HA guest."""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, check, register_codes
from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.migration.model import NOT_VISIBLE, Migratability
from pve_steward.analysis.migration.storage import storage_shared, storage_type
from pve_steward.analysis.migration.target_rules import target_groups, target_needs
from pve_steward.analysis.migration.targets import eligible_targets, replication_jobs_of
from pve_steward.analysis.migration.verdict import assess_in, situation
from pve_steward.analysis.migration.volumes import replicate_on
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.guestconfig import GuestConfig

# not what HA_GUEST_NOT_MIGRATABLE is about: no target, downtime (HA moves by restart or offline), and the error
# state (HA_RESOURCE_ERROR reports it; maintenance leaves such a guest behind rather than stalling on it)
# not what HA_GUEST_NOT_MIGRATABLE is about: no target, downtime (HA moves by restart or offline), the error
# state (HA_RESOURCE_ERROR reports it; maintenance leaves such a guest behind rather than stalling on it), and
# resource affinity as a migrate command sees it (HA's own placement judges it: planner/ha_placement.py)
_NOT_HA_BLOCKERS = {
    "MIGRATE_NO_TARGET",
    "MIGRATE_RESTART_REQUIRED",
    "MIGRATE_DOWNTIME_NOT_ALLOWED",
    "MIGRATE_HA_ERROR",
    "MIGRATE_HA_AFFINITY",
}


register_codes(
    "ha",
    __name__,
    Code(
        "HA_GUEST_NOT_MIGRATABLE",
        "critical",
        "HA guest cannot be moved",
        "An HA-managed guest has a migration blocker (passthrough, local disk without replication, bind mount): "
        "failover and node maintenance will stall on it.",
        "Remove the blocker or take the guest out of HA.",
    ),
)


@pve_rule(
    "ha.stalls-maintenance",
    rule="The HA manager migrates a service off a node in maintenance (VMs online with local disks, containers by "
    "relocation) and retries a failed move; a guest that cannot move, or whose local disks have no replica for "
    "recovery, stalls maintenance or failover.",
    pve="pve-ha-manager src/PVE/HA/Manager.pm next_state_started, src/PVE/HA/Resources/PVEVM.pm migrate "
    "(online, with-local-disks, force)",
    codes=("HA_GUEST_NOT_MIGRATABLE",),
)
def ha_problems(data: ClusterData, m: Migratability, failover: bool = True) -> list[str]:
    """What would stall node maintenance (and, with ``failover``, HA recovery) for an HA-managed guest.

    The LRM migrates VMs with with-local-disks, so local disks only matter for failover: a node that
    recovers the guest after a failure has no copy of them unless they are replicated.
    """
    problems = [r.detail for r in m.blocking if r.code not in _NOT_HA_BLOCKERS and r.rule != NOT_VISIBLE]
    if m.type == "qemu" and m.status == "running":  # the LRM migrates running VMs online only
        problems += [f"cannot move live, as HA migrates it: {r.detail}" for r in m.reasons if r.live_only]
    if failover and m.local_disk_bytes:
        uncovered = unreplicated_disks(data, m.vmid)
        if uncovered is None:
            problems.append("local disk without replication: a failover node would have no data")
        elif uncovered:
            problems.append(
                f"local disk without replication ({', '.join(uncovered)}: not on zfspool, replicate=0 or no enabled "
                "job): a failover node would have no data for it"
            )
    if failover:  # HA forces the move, but a node that recovers the VM must have the devices to start it
        forced = [r for r in m.reasons if r.code == "MIGRATE_PASSTHROUGH" and not r.blocking]
        problems += [f"recovery starts it on another node, which needs the same {', '.join(r.keys)}" for r in forced]
    return problems


def not_visible(m: Migratability) -> list[str]:
    """The blocking reasons of a verdict that stand only on what this token cannot see (pve/visibility.py): the
    move is not provable, not impossible, so they are no HA problem (an answer says them as not provable)."""
    return [r.detail for r in m.blocking if r.rule == NOT_VISIBLE]


def _copying_job(job: Row) -> bool:
    """An enabled job not marked for removal (a removal deletes the target's copies: Replication.pm replicate)."""
    try:
        disabled = bool(int(job.get("disable") or 0))
    except (TypeError, ValueError):
        disabled = True
    return not disabled and not job.get("remove_job")


@pve_rule(
    "ha.replicated-disks",
    rule="A replication job copies only the volumes get_replicatable_volumes selects: on a storage with the "
    "replicate feature (zfspool) and with a reference that leaves replicate on; a non-ZFS local disk with "
    "replicate on fails the whole job. Only an enabled job not marked for removal keeps a copy on its target.",
    pve="qemu-server src/PVE/QemuConfig.pm get_replicatable_volumes; pve-container src/PVE/LXC/Config.pm "
    "get_replicatable_volumes; pve-guest-common src/PVE/Replication.pm replicate",
    codes=("HA_GUEST_NOT_MIGRATABLE",),
)
def unreplicated_disks(data: ClusterData, vmid: int) -> list[str] | None:
    """The guest's local disks no enabled replication job copies; None when it has no such job at all."""
    if not any(_copying_job(j) for j in replication_jobs_of(data, vmid)):
        return None
    cfg = data.parsed.get(vmid)
    if cfg is None:
        return []
    out = []
    for vol in cfg.volumes:
        if vol.empty_drive or vol.storage is None or vol.host_path or vol.cdrom or vol.unused:
            continue  # an unused disk or a CD-ROM (the cloud-init drive is regenerated) does not stop a start
        if vol.storage not in data.storage_defs or storage_shared(data, vol.storage):
            continue
        if storage_type(data, vol.storage) != "zfspool" or not replicate_on(data, cfg, vol):
            out.append(vol.key)
    return out


# a finding of one guest, minus the guest: (code, message prefix, message suffix, evidence, severity,
# whether the guest's node is appended to the evidence)
Template = tuple[str, str, str, dict[str, object], Severity | None, bool]
Restarting = dict[str, list[int]]  # node -> its running containers that can move (by restart)
RESTART = "MIGRATE_RESTART_REQUIRED"


def analyze_migratability(
    data: ClusterData, *, vmids: list[int] | None = None, allow_downtime: bool = True, verdicts: bool = True
) -> tuple[list[Finding], list[Migratability]]:
    """Findings on how guests can move (capability view: downtime moves count as possible).

    Blocked guests get one finding per blocking reason; movable guests get findings for what
    limits them (targets excluded by cpu: host or storage, disk copies, restarts; a node's running
    containers share one restart finding). HA guests are reported as HA_GUEST_NOT_MIGRATABLE when
    something would stall failover or maintenance.
    Guests in the same situation share their findings' wording; ``verdicts=False`` (the health
    check) skips building the per-guest verdicts when only findings are wanted.
    """
    out: list[Finding] = []
    answers: list[Migratability] = []
    restarting: Restarting = {}
    templates: dict[tuple[object, ...], list[Template]] = data.memo["finding_templates"]
    ha_of = data.ha_by_vmid
    for vmid in vmids if vmids is not None else data.guest_ids:
        ha = vmid in ha_of
        downtime = allow_downtime or ha
        sit = situation(data, vmid, None, None, downtime)
        key = (sit, ha) if sit is not None else None
        found = templates.get(key) if key is not None else None
        if found is None and not verdicts and sit is not None and key is not None:
            found = _node_free_templates(data, vmid, sit, ha)
            if found is not None:
                templates[key] = found
        if found is None or verdicts:
            m = assess_in(data, vmid, None, None, downtime, sit)
            if verdicts:
                answers.append(m)
            if found is None:
                found = _templates(data, m, ha)
                if key is not None:
                    templates[key] = found
        if found:
            _guest_findings(data, vmid, found, out, restarting)
    return out + _restarts_by_node(restarting), answers


def _guest_findings(
    data: ClusterData, vmid: int, found: list[Template], out: list[Finding], restarting: Restarting
) -> None:
    """The guest's findings from its templates; a running container's restart goes to its node's list."""
    row = data.guests.get(vmid) or {}
    node = str(row.get("node", ""))
    container = row.get("type") == "lxc"
    who = f"{vmid} ({row.get('name') or vmid})"
    for code, prefix, suffix, evidence, severity, with_node in found:
        if container and code == RESTART:
            restarting.setdefault(node, []).append(vmid)
            continue
        facts = {**evidence, "node": node} if with_node else evidence
        out.append(finding(code, guest_subject(data, vmid), f"{prefix}{who}{suffix}", facts, severity=severity))


def _restarts_by_node(restarting: Restarting) -> list[Finding]:
    """One finding per node for its running containers that can move, not one per container.

    PVE moves every running container by restart (``migrate.running-mode``): a fact of the node's
    maintenance, not of any one guest, like the default-state checks that list their guests in one
    finding (design records 261203-17, 261204-42). The guests' verdicts still say it one by one.
    """
    out = []
    for node, vmids in sorted(restarting.items()):
        listed = ", ".join(map(str, vmids[:20])) + (f" and {len(vmids) - 20} more" if len(vmids) > 20 else "")
        out.append(
            finding(
                RESTART,
                Subject(kind="node", id=node),
                f"{len(vmids)} running container(s) on {node} move only by restart migration (stopped, moved, "
                f"started: downtime): {listed}",
                {"vmids": vmids, "count": len(vmids), "verdict": "restart"},
            )
        )
    return out


@check(
    "migration",
    codes=[
        Code(
            "MIGRATE_PASSTHROUGH",
            "warning",
            "Pinned by a local device",
            "hostpci/usb/serial/parallel/ivshmem/virtiofs without a mapping: PVE refuses to migrate.",
            "Use a resource mapping present on the target, or plan downtime.",
        ),
        Code(
            "MIGRATE_MAPPED_DEVICE",
            "warning",
            "Mapped device missing on target or not live-capable",
            "A mapped device has no mapping entry on the target, or (running VM) is not marked live-migration capable.",
            "Add the mapping on the target node or migrate offline.",
        ),
        Code(
            "MIGRATE_LOCAL_CDROM",
            "warning",
            "ISO or host drive in a CD-ROM",
            "A CD-ROM holds an ISO on local storage or the host drive: PVE cannot migrate it.",
            "Eject the CD-ROM.",
        ),
        Code(
            "MIGRATE_LOCAL_DISK",
            "info",
            "Local disk must be copied",
            "A disk is on non-shared storage: migration copies it (with-local-disks for a running VM).",
            "Expect network and time cost proportional to the disk size.",
        ),
        Code(
            "MIGRATE_LOCAL_DISK_UNSUPPORTED",
            "warning",
            "Local disk cannot be migrated",
            "A local disk is on a storage type PVE cannot migrate, or a host path, or has a non-migratable snapshot.",
            "Move the disk to shared storage or remove the snapshot.",
        ),
        Code(
            "MIGRATE_ALIASED_VOLUME",
            "warning",
            "Two volumes of the guest are one image (aliased storages)",
            "Two local storages point at the same directory, ZFS pool or volume group, and the guest's config "
            "(with its snapshots and unused disks) references one image through both: PVE refuses to migrate it "
            "('detected not supported aliased volumes'), offline as well as live.",
            "Remove the duplicate reference (usually an unusedN that qm rescan / pct rescan added through the alias "
            "storage: qm set <vmid> --delete unusedN), and give the two storages different paths or drop one.",
        ),
        Code(
            "MIGRATE_STORAGE_UNAVAILABLE",
            "warning",
            "Storage not available on target",
            "A volume's storage is restricted to other nodes or disabled on the target.",
            "Pick another target or make the storage available there.",
        ),
        Code(
            "MIGRATE_LOCKED",
            "warning",
            "Guest is locked",
            "The guest config has a lock; PVE refuses every migration until it is cleared.",
            "Wait for the locking task, or, if it is truly gone, clear the lock on the node: qm unlock / pct unlock.",
        ),
        Code(
            "MIGRATE_CPU_HOST",
            "warning",
            "cpu: host on heterogeneous nodes",
            "A running VM uses cpu type host and the target's CPU model differs: live migration can crash it. "
            "Treated as a blocker because it cannot be proven safe.",
            "Use a CPU model every node supports (e.g. x86-64-v2-AES), or migrate offline.",
        ),
        Code(
            "MIGRATE_BIND_MOUNT",
            "warning",
            "Container bind mount",
            "A container mount point is a host path not marked shared=1.",
            "Mark it shared if it exists on every node.",
        ),
        Code(
            "MIGRATE_CT_DEVICE",
            "warning",
            "Container device passthrough",
            "A container passes a host device (devN) or raw lxc.* keys: PVE does not check them, the target may "
            "lack them.",
            "Make sure the device exists on the target, then migrate deliberately.",
        ),
        Code(
            "MIGRATE_REPLICATION",
            "warning",
            "Replication conflict",
            "A replication job is marked for removal, or a running VM would move to a node that is not its "
            "replication target.",
            "Migrate to the replication target or fix the job.",
        ),
        Code(
            "MIGRATE_RESTART_REQUIRED",
            "info",
            "Moves only with downtime (restart or offline)",
            "Running containers cannot live-migrate: PVE stops, moves and starts them (downtime). One finding per "
            "node lists its running containers that can move; a running VM that cannot move live (it can once "
            "shut down) gets a finding of its own.",
            "Plan the downtime or migrate in a maintenance window.",
        ),
        Code(
            "MIGRATE_DOWNTIME_NOT_ALLOWED",
            "warning",
            "Only an offline move is possible",
            "The guest can only move with downtime (offline or restart) and that was not allowed.",
            "Allow offline moves, or deal with the guest separately.",
        ),
        Code(
            "MIGRATE_HA_MANAGED",
            "info",
            "HA-managed guest",
            "The HA manager moves this guest; direct migration is turned into an HA request.",
            "Use HA node maintenance (ha-manager crm-command node-maintenance enable <node>) or HA migrate.",
        ),
        Code(
            "MIGRATE_HA_ERROR",
            "critical",
            "HA service in error state",
            "The guest's HA service is in error state: PVE refuses its migrate request (the hamigrate task fails) "
            "and HA node maintenance leaves it where it is.",
            "Find the cause in the HA log (journalctl -u pve-ha-lrm -u pve-ha-crm), then ha-manager set <sid> "
            "--state disabled, fix it, and set the state back to started; after that it can move.",
        ),
        Code(
            "MIGRATE_NO_TARGET",
            "warning",
            "No eligible target node",
            "No online node outside HA maintenance (and allowed by the request) can take the guest.",
            "Bring nodes online or widen the allowed targets.",
        ),
        Code(
            "MIGRATE_PVE_DISAGREES",
            "warning",
            "PVE's precondition disagrees",
            "PVE's GET .../migrate answer and our reading of the config differ; the stricter answer wins.",
            "Look at the evidence; report it if our reading is wrong.",
        ),
        Code(
            "MIGRATE_NOT_PROVABLE",
            "warning",
            "Migratability could not be proven",
            "Data needed to prove the move is safe is missing (config unreadable, node status unknown) or not "
            "visible to this token (a storage, HA or node status PVE lists only with a privilege the token lacks).",
            "Plan again once the data can be read: where the message says it is not visible to this token, grant "
            "the privilege it names (or plan with a token that has it); otherwise the DATA_INCOMPLETE finding says "
            "which read failed.",
        ),
        Code(
            "MIGRATE_TEMPLATE",
            "info",
            "Template",
            "Templates are moved offline; they do not run.",
            "Nothing to fix; move it offline (no downtime, it does not run).",
        ),
        Code(
            "MIGRATE_STORAGE_CONTENT",
            "warning",
            "Storage lacks the volume's content type",
            "A volume lives on a storage whose content list lacks its type (images or iso for a VM, rootdir for a "
            "container); PVE refuses to migrate it (qemu-server check_storage_availability, LXC Migrate prepare).",
            "Add the content type to the storage (Datacenter > Storage) or move the volume to a storage that has it.",
        ),
        Code(
            "MIGRATE_LINKED_CLONE",
            "warning",
            "Linked clone on local storage",
            "A local volume is a linked clone of a base image, or a template's base image still used by linked "
            "clones; PVE refuses to migrate it (QemuMigrate scan_local_volumes, volume_is_base_and_used).",
            "Make the clone a full clone (move the disk), or migrate template and clones together by moving storage.",
        ),
        Code(
            "MIGRATE_LIVE_UNSUPPORTED",
            "warning",
            "Running VM cannot move live",
            "PVE refuses a live migration of this running VM (amd-sev, intel-tdx, virtiofs, mapped devices that "
            "are not live-migration capable, clipboard=vnc, a non-replicated local volume referenced by a "
            "snapshot); it can move once it is shut down.",
            "Plan downtime: shut it down, migrate offline, start it (allow_offline).",
        ),
        Code(
            "MIGRATE_HA_AFFINITY",
            "warning",
            "HA affinity rules forbid the target",
            "An HA rule keeps the guest off the target: a strict node-affinity rule (or restricted group), or a "
            "negative resource-affinity with a resource there (PVE's blocking-ha-resources).",
            "Pick an allowed node, or change the HA rule.",
        ),
    ],
    anchors=[
        "cv4pve-diag:WG0012=MIGRATE_PASSTHROUGH",
        "cv4pve-diag:WG0041=MIGRATE_CT_DEVICE",
    ],
    pve="qemu-server PVE/API2/Qemu.pm migrate_vm_precondition + PVE/QemuServer.pm check_local_resources; "
    "pve-container src/PVE/API2/LXC.pm migrate_vm_precondition",
)
def migratability(data: ClusterData, t: Thresholds | None = None) -> list[Finding]:
    """The health check's migration area: how each guest can move, as findings (no per-guest verdicts)."""
    return analyze_migratability(data, verdicts=False)[0]


def _node_free_templates(
    data: ClusterData, vmid: int, situation: tuple[object, ...], ha: bool
) -> list[Template] | None:
    """The findings' wording for guests alike but on different nodes, when the node cannot change it.

    That holds when every eligible target takes the guest alike and without a reason: then the
    source node only names itself in the evidence. One verdict per shape instead of one per shape
    and node. None when it does not hold (the caller words this guest's findings itself).
    """
    shape, gtype, status, downtime, targets_key, _ha = situation
    if not isinstance(downtime, bool) or not isinstance(targets_key, tuple) or targets_key[1:] != (None, ()):
        return None  # target restrictions: not the health check's question
    if not _targets_clean(data, data.parsed[vmid], str(targets_key[0]), status == "running"):
        return None
    memo: dict[tuple[object, ...], list[Template] | None] = data.memo["node_free_templates"]
    free_key = (shape, gtype, status, downtime, ha)
    if free_key not in memo:
        m = assess_in(data, vmid, None, None, downtime, situation)
        memo[free_key] = _without_node(_templates(data, m, ha), m.node)
    return memo[free_key]


def _targets_clean(data: ClusterData, cfg: GuestConfig, source: str, running: bool) -> bool:
    """Whether every eligible target takes this guest alike and without a reason (memoised per storages)."""
    memo: dict[tuple[object, ...], bool] = data.memo["clean_targets"]
    key = (*target_needs(data, cfg, running), source)
    clean = memo.get(key)
    if clean is None:
        targets_ok, _excluded = eligible_targets(data, source)
        groups = target_groups(data, cfg, source, targets_ok, running, False, (source, None, ()), {})
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
        # what this token cannot see makes the move not provable, not impossible (pve/visibility.py)
        hidden = not_visible(m)
        problems = ha_problems(data, m)
        found: list[Template] = []
        if problems:
            evidence: dict[str, object] = {"problems": problems, "node": m.node}
            found.append(("HA_GUEST_NOT_MIGRATABLE", "HA guest ", ": " + "; ".join(problems), evidence, None, False))
        if hidden:
            found.append(("MIGRATE_NOT_PROVABLE", "HA guest ", ": " + "; ".join(hidden), {"node": m.node}, None, False))
        return found
    out: list[Template] = []
    seen: set[str] = set()
    if m.verdict == "blocked":
        for r in m.blocking:
            if r.code not in seen:
                seen.add(r.code)
                how = "migration not provable" if r.code == "MIGRATE_NOT_PROVABLE" else "cannot migrate"
                out.append((r.code, "", f" {how}: {r.detail}", {"keys": r.keys, "node": m.node}, None, False))
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
