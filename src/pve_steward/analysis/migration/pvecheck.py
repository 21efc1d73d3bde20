"""The cross-check: PVE's own precondition answer (``GET .../qemu/{vmid}/migrate``) against our reading.

It is read only where the token has VM.Migrate; our verdict never depends on it. Where PVE
answers what the config cannot show (which volumes a snapshot references, mapping entries per
node, live capability of mapped devices, the running machine version), its answer replaces our
"not provable"; where it reports an obstacle we did not see, the stricter answer wins and the
difference is reported as MIGRATE_PVE_DISAGREES.
"""

from __future__ import annotations

from pve_steward.analysis.data import Row
from pve_steward.analysis.migration.devices import Devices
from pve_steward.analysis.migration.model import Reason, TargetVerdict, reason
from pve_steward.analysis.migration.storage import is_generated_cloudinit
from pve_steward.analysis.migration.volumes import UNSEEN_SNAPSHOT_REFS
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import GuestConfig

_RUNTIME = {"amd-sev", "intel-tdx", "virtiofs", "clipboard=vnc"}


def _list(value: object) -> list[object]:
    """A list field of PVE's answer; anything else (absent, malformed) reads as empty."""
    return list(value) if isinstance(value, list) else []


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _drop(reasons: list[Reason], rule: str, keys: set[str] | None = None) -> None:
    """Remove our 'not provable' reasons of a rule (for some keys) that PVE's answer settles."""
    reasons[:] = [
        r
        for r in reasons
        if not (r.code == "MIGRATE_NOT_PROVABLE" and r.rule == rule and (keys is None or set(r.keys) <= keys))
    ]


def compare(pre: Row, cfg: GuestConfig, dev: Devices, reasons: list[Reason], targets: list[TargetVerdict]) -> None:
    """Fold PVE's precondition into our reasons (guest-wide and per target)."""
    _local_resources(pre, dev, reasons)
    _local_disks(pre, cfg, reasons)
    _mapped_live(pre, dev, reasons)
    for tv in targets:  # one node per group when PVE's answer is compared
        _not_allowed(pre, tv)


def _local_resources(pre: Row, dev: Devices, reasons: list[Reason]) -> None:
    listed = {str(k) for k in _list(pre.get("local_resources"))}
    mapped = {str(k) for k in _list(pre.get("mapped-resources"))} | {
        str(k) for k in _dict(pre.get("mapped-resource-info"))
    }
    _drop(reasons, "migrate.clipboard-vnc")
    if "clipboard=vnc" in listed:
        reasons.append(
            reason("MIGRATE_LIVE_UNSUPPORTED", True, "clipboard=vnc: PVE refuses a live move", ["vga"], True)
        )
    theirs = listed - mapped - {"clipboard=vnc"}
    ours = set(dev.blocking)
    if theirs - ours:
        extra = sorted(theirs - ours)
        reasons.append(
            reason(
                "MIGRATE_PVE_DISAGREES",
                True,
                f"PVE reports local resources {', '.join(extra)} that the config reading did not flag",
                extra,
                live_only=set(extra) <= _RUNTIME,
            )
        )
    elif ours - theirs:
        reasons.append(
            reason(
                "MIGRATE_PVE_DISAGREES",
                False,
                f"we flag {', '.join(sorted(ours - theirs))}, PVE does not",
                sorted(ours - theirs),
            )
        )


def _local_disks(pre: Row, cfg: GuestConfig, reasons: list[Reason]) -> None:
    disks = [d for d in _list(pre.get("local_disks")) if isinstance(d, dict)]
    flagged = {k for r in reasons if r.code == "MIGRATE_LOCAL_CDROM" for k in r.keys}
    media = {
        str(d.get("drivename") or d.get("volid"))
        for d in disks
        if d.get("cdrom")
        and str(d.get("volid")) != "none"
        and not (d.get("is_cloudinit") or is_generated_cloudinit(str(d.get("volid"))))
    }
    if media - flagged:
        reasons.append(
            reason(
                "MIGRATE_PVE_DISAGREES",
                True,
                f"PVE reports local CD-ROM media on {', '.join(sorted(media - flagged))} we did not flag",
                sorted(media - flagged),
            )
        )
    in_snapshot = {str(d.get("volid")) for d in disks if d.get("referenced_in_snapshot")}
    key_of = {v.volid: v.key for v in cfg.volumes}
    settled = {key_of[v] for v in key_of if v not in in_snapshot}
    if settled:
        _drop(reasons, "migrate.local-snapshots", settled)
    for r in [r for r in reasons if r.code == "MIGRATE_NOT_PROVABLE" and r.rule == "migrate.local-snapshots"]:
        r.code = "MIGRATE_LIVE_UNSUPPORTED" if r.live_only else "MIGRATE_LOCAL_DISK_UNSUPPORTED"
        r.detail = r.detail.replace(UNSEEN_SNAPSHOT_REFS, "PVE reports the volume referenced by a snapshot")


def _mapped_live(pre: Row, dev: Devices, reasons: list[Reason]) -> None:
    if "mapped-resource-info" not in pre:
        return
    _drop(reasons, "migrate.mapped-resources")
    if not int(pre.get("running", 0) or 0):
        return
    info = _dict(pre.get("mapped-resource-info"))
    not_live = sorted(str(k) for k, v in info.items() if not _dict(v).get("live-migration"))
    ours = {k for r in reasons if r.code == "MIGRATE_LIVE_UNSUPPORTED" for k in r.keys}
    if set(not_live) - ours:
        reasons.append(
            reason(
                "MIGRATE_LIVE_UNSUPPORTED",
                True,
                f"mapped devices {', '.join(not_live)} are not live-migration capable (PVE's precondition)",
                not_live,
                live_only=True,
            )
        )


@pve_rule(
    "migrate.precondition-nodes",
    rule="PVE's precondition lists, per node it does not allow, the storages unavailable there, the mapped "
    "resources without an entry there and the HA resources whose negative resource-affinity blocks that node.",
    pve="qemu-server src/PVE/API2/Qemu.pm migrate_vm_precondition; pve-ha-manager src/PVE/HA/Config.pm "
    "get_resource_motion_info",
    codes=("MIGRATE_PVE_DISAGREES", "MIGRATE_MAPPED_DEVICE", "MIGRATE_HA_AFFINITY"),
)
def _not_allowed(pre: Row, tv: TargetVerdict) -> None:
    node = tv.nodes[0]
    entry = _dict(_dict(pre.get("not_allowed_nodes")).get(node))
    pve_storages = sorted(str(s) for s in _list(entry.get("unavailable_storages")))
    if pve_storages and not any(r.code == "MIGRATE_STORAGE_UNAVAILABLE" for r in tv.reasons):
        tv.reasons.append(
            reason(
                "MIGRATE_PVE_DISAGREES", True, f"PVE says storage {', '.join(pve_storages)} is unavailable on {node}"
            )
        )
    if "mapped-resource-info" in pre or "unavailable-resources" in entry:
        _drop(tv.reasons, "migrate.mapped-resources")
        tv.reasons[:] = [r for r in tv.reasons if r.code != "MIGRATE_MAPPED_DEVICE"]
        if entry.get("unavailable-resources"):
            missing = [str(k) for k in _list(entry["unavailable-resources"])]
            tv.reasons.append(
                reason("MIGRATE_MAPPED_DEVICE", True, f"mapping of {', '.join(missing)} missing on {node}", missing)
            )
    blocking = _list(entry.get("blocking-ha-resources"))
    if blocking:
        sids = ", ".join(f"{b.get('sid')} ({b.get('cause')})" for b in blocking if isinstance(b, dict))
        tv.reasons.append(reason("MIGRATE_HA_AFFINITY", True, f"HA resources block {node}: {sids}"))
