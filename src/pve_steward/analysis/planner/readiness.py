"""What else a maintenance window touches: what starts by itself afterwards, and whether that clashes with a
running guest; what HA's shutdown policy does at the reboot; backups of the node's guests older than their
policy (the backup rules' own verdict, analysis/backups.py)."""

from __future__ import annotations

from pve_steward.analysis.backups import analyze_backups
from pve_steward.analysis.checks.guests_common import starts_at_boot
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.guestaddr import addresses, same_network, segment
from pve_steward.analysis.hastate import Disarm
from pve_steward.analysis.planner.models import (
    AddressClash,
    MaintenanceReadiness,
    OnbootStart,
    StaleBackup,
    Step,
    StopCandidate,
)
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds


def onboot_starts(data: ClusterData, node: str, steps: list[Step], stops: list[StopCandidate]) -> list[OnbootStart]:
    """Stopped guests that stay on the node (and those stopped for the window) start when it boots; stopped guests
    moved offline start when their target next boots."""
    moved = {s.vmid: s for s in steps}
    stopped_here = {s.vmid for s in stops if s.node == node}
    out: list[OnbootStart] = []
    for vmid, g in sorted(data.guests.items()):
        if g.get("node") != node or not starts_at_boot(data, vmid):
            continue
        name = str(g.get("name") or vmid)
        step = moved.get(vmid)
        if step is not None:
            if g.get("status") != "running":
                out.append(OnbootStart(vmid=vmid, name=name, node=step.target, when="target_boots"))
        elif g.get("status") != "running" or vmid in stopped_here:
            out.append(OnbootStart(vmid=vmid, name=name, node=node, when="node_returns"))
    return out


def address_clashes(
    data: ClusterData, starting: list[OnbootStart], running_configs: dict[int, Row]
) -> list[AddressClash]:
    """Each starting guest's configured IP or MAC that a running guest (other than itself) uses on its network."""
    wanted = {(a.kind, a.value) for start in starting for a in addresses(data, start.vmid)}
    used: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for vmid, raw in running_configs.items():
        if (data.guests.get(vmid) or {}).get("status") != "running":
            continue
        for a in addresses(data, vmid, raw):
            if (a.kind, a.value) in wanted:
                used.setdefault((a.kind, a.value), []).append((vmid, a.device))
    out: list[AddressClash] = []
    for start in starting:
        own = data.configs.get(start.vmid) or {}
        for a in addresses(data, start.vmid):
            for other, device in used.get((a.kind, a.value), []):
                if other == start.vmid or not same_network(
                    segment(own, a.device), segment(running_configs[other], device)
                ):
                    continue
                node = (data.guests.get(other) or {}).get("node")
                out.append(
                    AddressClash(
                        kind="ip" if a.kind == "ip" else "mac",
                        address=a.value,
                        vmid=start.vmid,
                        other_vmid=other,
                        other_node=str(node) if node else None,
                    )
                )
    return out


@pve_rule(
    "ha.shutdown-policy",
    rule="At a node's shutdown the LRM applies datacenter.cfg's ha shutdown_policy to the HA guests still on it: "
    "conditional (default) freezes them in place for a reboot and stops them for a poweroff (HA then recovers them "
    "elsewhere), freeze always freezes them, failover stops them for recovery elsewhere, migrate moves them as "
    "maintenance does; with manual maintenance on, the policy is ignored. While disarmed, the LRM leaves at once.",
    pve="pve-ha-manager src/PVE/HA/LRM.pm shutdown_request, work (wait_for_agent_lock: 'return 0 if shutdown_request')",
)
def policy_note(policy: str | None, moved: int, left: int, disarm: Disarm | None) -> str | None:
    """What the shutdown policy does with the node's HA guests at the reboot of the maintenance."""
    if disarm is not None and disarm.ignore:
        return (
            "HA is disarmed (ignore): its resources are ordinary guests until it is re-armed, so the node's shutdown "
            "stops them (pve-guests) and its boot starts those with onboot=1; the shutdown policy does not apply"
        )
    if disarm is not None:
        return (
            "HA is disarmed (freeze): at the shutdown the LRM applies no policy and stops no HA guest, and nothing "
            "starts them again until HA is re-armed: shut the node's HA guests down yourself before the reboot"
        )
    if not moved and not left:
        return None
    shown = policy or "unknown (not readable)"
    if not left:
        return (
            f"With the node in HA maintenance the LRM ignores the shutdown policy ({shown}) at the reboot: HA has "
            "moved its guests by then"
        )
    effect = {
        "conditional": "a reboot stops and freezes them on the node and starts them there again afterwards; a poweroff "
        "stops them and HA recovers them on other nodes",
        "freeze": "a reboot or poweroff stops and freezes them on the node; they start again when it is back",
        "failover": "a reboot or poweroff stops them and HA recovers them on other nodes once the node is offline",
        "migrate": "the shutdown waits while HA moves them, as maintenance does; one HA cannot move holds it up",
    }.get(policy or "", "what happens to them cannot be said")
    return f"{left} HA guest(s) stay on the node (see ha_guests); with the shutdown policy {shown}, {effect}"


def stale_backups(data: ClusterData, node: str, t: Thresholds) -> list[StaleBackup]:
    """The node's guests whose newest backup is older than their jobs allow, or missing (the backup rules'
    BACKUP_STALE and BACKUP_NONE, not judged again here)."""
    out = []
    for f in analyze_backups(data, t):
        if f.code not in ("BACKUP_STALE", "BACKUP_NONE") or f.subject.kind != "guest":
            continue
        vmid = int(str(f.subject.id))
        g = data.guests.get(vmid) or {}
        if g.get("node") != node:
            continue
        ev = f.evidence
        out.append(
            StaleBackup(
                vmid=vmid,
                name=str(g.get("name") or vmid),
                age_hours=ev.get("age_hours") if f.code == "BACKUP_STALE" else None,
                policy_hours=float(ev.get("threshold_hours") or 0),
            )
        )
    return sorted(out, key=lambda b: b.vmid)


def backup_gap(data: ClusterData) -> list[str]:
    """Why the stale-backup list may not be whole: a backup on a storage whose content could not be read, or
    that PVE hides from this token, is unseen, so the list may name guests that have one. What is hidden is
    said as hidden (the skipped checks name the privilege), never as a failed read."""
    gaps = [m for m in data.missing if "backups" in m.affects and m.leaves_plan_incomplete]
    hidden = sum(1 for m in gaps if m.hidden)
    parts = [
        f"{len(gaps) - hidden} read(s) of backup jobs or contents failed" if len(gaps) > hidden else "",
        f"{hidden} backup list(s) not visible to this token (see the skipped checks)" if hidden else "",
    ]
    return [f"backup age: {' and '.join(p for p in parts if p)}, so the list is not whole"] if gaps else []


def readiness(
    data: ClusterData,
    node: str,
    steps: list[Step],
    stops: list[StopCandidate],
    *,
    options: dict[str, object] | None,
    disarm: Disarm | None,
    ha_moved: int,
    ha_left: int,
    running_configs: dict[int, Row] | None,
    backups_read: bool,
    t: Thresholds | None = None,
) -> MaintenanceReadiness:
    starting = onboot_starts(data, node, steps, stops)
    gaps: list[str] = []
    clashes: list[AddressClash] = []
    if running_configs is None:
        if starting:
            gaps.append("address clashes: the running guests' configs were not read")
    else:
        clashes = address_clashes(data, starting, running_configs)
    ha = options.get("ha") if options is not None else None
    if isinstance(ha, str):
        ha = dict(kv.split("=", 1) for kv in ha.split(",") if "=" in kv)
    policy = str(ha.get("shutdown_policy")) if isinstance(ha, dict) and ha.get("shutdown_policy") else None
    if options is None:
        gaps.append("HA shutdown policy: /cluster/options was not read (needs Sys.Audit on /)")
    elif policy is None:
        policy = "conditional"
    backups: list[StaleBackup] = []
    if backups_read:
        backups = stale_backups(data, node, t or Thresholds())
        gaps += backup_gap(data)
    else:
        gaps.append("backup age: the backup jobs and storages were not read")
    return MaintenanceReadiness(
        onboot_on_return=starting,
        address_clashes=clashes,
        ha_shutdown_policy=policy,
        ha_policy_note=policy_note(policy, ha_moved, ha_left, disarm),
        stale_backups=backups,
        not_provable=gaps,
    )
