"""A VM's devices as ``check_local_resources`` and ``QemuMigrate::prepare`` judge them.

Unmapped passthrough pins a VM to its node; mapped devices (``mapping=`` for PCI/USB, ``dirid``
for virtiofs) may move when the target has the mapping, and live only when PVE says the mapping
is live-migration capable (only PCI mappings can be); some features forbid a live move outright.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.migration.model import Reason, reason
from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.guestconfig import GuestConfig, parse_property_string

_LIVE_FORBIDDEN = ("amd-sev", "intel-tdx")


@dataclass(slots=True)
class Devices:
    """``check_local_resources``: local resources (``loc_res``) and mapped ones (``mapped_res``)."""

    local: list[str] = field(default_factory=list)
    mapped: dict[str, str] = field(default_factory=dict)  # key -> mapping id

    @property
    def blocking(self) -> list[str]:
        """What ``prepare`` refuses: local resources that are not mapped ones."""
        return [k for k in self.local if k not in self.mapped]


def mapped_of(cfg: GuestConfig, raw: Row) -> dict[str, str]:
    """Mapped devices: PCI/USB with ``mapping=`` and every virtiofs share (its ``dirid``)."""
    out = dict(cfg.mapped_devices)
    for key in raw:
        if key.startswith("virtiofs") and key[8:].isdigit():
            opts = parse_property_string(str(raw[key]), "dirid")
            out[key] = opts.get("dirid", "")
    return out


# devices QEMU itself will not migrate live: VFIO without migration support, ivshmem without master=on
# (QEMU hw/vfio/migration.c, hw/misc/ivshmem.c register a migration blocker; qemu-server adds neither option)
_QEMU_LIVE_BLOCKERS = ("hostpci", "ivshmem")


@pve_rule(
    "migrate.local-resources",
    rule="Unmapped hostpciN/usbN (not spice)/serialN (not socket)/parallelN, ivshmem and the legacy hostpci/hostusb "
    "pin a VM (only root may force a move); mapped USB and virtiofs count as local resources but are "
    "dropped from the blockers because they are mapped; a running VM with amd-sev, intel-tdx or virtiofs "
    "cannot move live. An HA-managed VM is moved by the LRM with force, which prepare lets through (its running "
    "flag is not set yet there): its local devices do not stop the move, but QEMU still refuses to move PCI "
    "passthrough or ivshmem live.",
    pve="qemu-server src/PVE/QemuMigrate/Helpers.pm check_local_resources, check_non_migratable_resources; "
    "src/PVE/QemuMigrate.pm prepare; pve-ha-manager src/PVE/HA/Resources/PVEVM.pm migrate (force, bug #2241); "
    "pve-guest-common src/PVE/AbstractMigrate.pm migrate",
    codes=("MIGRATE_PASSTHROUGH", "MIGRATE_LIVE_UNSUPPORTED"),
)
def local_resources(cfg: GuestConfig, raw: Row, running: bool, forced: bool = False) -> tuple[Devices, list[Reason]]:
    """``forced``: the move is made with force (an HA-managed VM: the HA manager moves it)."""
    mapped = mapped_of(cfg, raw)
    dev = Devices(mapped=mapped)
    reasons: list[Reason] = []
    live_forbidden = []
    if running:
        live_forbidden = [f for f in _LIVE_FORBIDDEN if raw.get(f)]
        if any(k.startswith("virtiofs") for k in mapped):
            live_forbidden.append("virtiofs")
        dev.local += live_forbidden
    pinned = [k for k in cfg.local_devices if not k.startswith("virtiofs")]
    dev.local += pinned
    dev.local += sorted(k for k in mapped if k.startswith(("usb", "virtiofs")) or (running and k.startswith("hostpci")))
    if pinned and not forced:
        reasons.append(reason("MIGRATE_PASSTHROUGH", True, f"local devices {', '.join(pinned)}", pinned))
    elif pinned:
        reasons.append(
            reason(
                "MIGRATE_PASSTHROUGH",
                False,
                f"local devices {', '.join(pinned)}: HA moves the VM with force, so the target must have the same "
                "devices or the VM fails to start there",
                pinned,
            )
        )
        unmovable = [k for k in pinned if k.startswith(_QEMU_LIVE_BLOCKERS)]
        if running and unmovable:
            reasons.append(
                reason(
                    "MIGRATE_LIVE_UNSUPPORTED",
                    True,
                    f"QEMU cannot move {', '.join(unmovable)} live (PCI passthrough, ivshmem)",
                    unmovable,
                    live_only=True,
                )
            )
    if live_forbidden:
        reasons.append(
            reason(
                "MIGRATE_LIVE_UNSUPPORTED",
                True,
                f"a running VM with {', '.join(live_forbidden)} cannot be live-migrated",
                live_forbidden,
                live_only=True,
            )
        )
    return dev, reasons


def mapping_nodes(data: ClusterData, key: str, name: str) -> set[str] | None:
    """Nodes on which a mapping has an entry, from /cluster/mapping/{pci,usb,dir}; None when unknown."""
    kind = "pci" if key.startswith("hostpci") else "usb" if key.startswith("usb") else "dir"
    rows = data.mappings.get(kind)
    if rows is None:
        return None
    entry = next((r for r in rows if r.get("id") == name), None)
    if entry is None:
        return None  # not visible: absent, or hidden by missing Mapping.Audit
    return {parse_property_string(str(m)).get("node", "") for m in entry.get("map") or []}


def mapping_live_capable(data: ClusterData, key: str, name: str) -> bool | None:
    """PCI mappings marked ``live-migration-capable``; USB and dir mappings never are; None when unknown."""
    if not key.startswith("hostpci"):
        return False
    entry = next((r for r in data.mappings.get("pci") or [] if r.get("id") == name), None)
    return None if entry is None else bool(int(entry.get("live-migration-capable", 0) or 0))


@pve_rule(
    "migrate.mapped-resources",
    rule="A mapped device moves only to a node where its mapping has an entry; a running VM moves live only if "
    "every mapped device is live-migration capable (a PCI mapping with live-migration-capable); otherwise the "
    "offline move is allowed.",
    pve="qemu-server src/PVE/QemuMigrate.pm prepare (missing mapped devices / can't live migrate ... mapped devices)",
    codes=("MIGRATE_LIVE_UNSUPPORTED", "MIGRATE_NOT_PROVABLE"),
)
def mapped_live(data: ClusterData, dev: Devices, running: bool) -> list[Reason]:
    """Guest-wide part of the mapped-device rule: live capability (target availability is per target)."""
    if not running or not dev.mapped:
        return []
    capable = {k: mapping_live_capable(data, k, n) for k, n in sorted(dev.mapped.items())}
    not_live = [k for k, c in capable.items() if c is False]
    unknown = [k for k, c in capable.items() if c is None]
    out = []
    if not_live:
        out.append(
            reason(
                "MIGRATE_LIVE_UNSUPPORTED",
                True,
                f"mapped devices {', '.join(not_live)} are not live-migration capable",
                not_live,
                live_only=True,
            )
        )
    if unknown:
        out.append(
            reason(
                "MIGRATE_NOT_PROVABLE",
                True,
                f"whether mapped devices {', '.join(unknown)} can move live is in the PCI mapping config, which "
                "could not be read (needs Mapping.Audit) and PVE's precondition was not readable either",
                unknown,
                live_only=True,
                rule="migrate.mapped-resources",
            )
        )
    return out


@pve_rule(
    "migrate.clipboard-vnc",
    rule="A running VM with vga clipboard=vnc cannot move live; PVE 9 allows it when the running machine version is "
    "at least 10.1 (known only from the running VM).",
    pve="qemu-server src/PVE/QemuMigrate.pm prepare (clipboard); src/PVE/API2/Qemu.pm migrate_vm_precondition",
    codes=("MIGRATE_LIVE_UNSUPPORTED", "MIGRATE_NOT_PROVABLE"),
)
def clipboard_vnc(raw: Row, running: bool, pve_major: int | None) -> list[Reason]:
    vga = parse_property_string(str(raw.get("vga") or ""), "type")
    if not running or vga.get("clipboard") != "vnc":
        return []
    if pve_major is not None and pve_major < 9:
        return [
            reason(
                "MIGRATE_LIVE_UNSUPPORTED",
                True,
                "clipboard=vnc: not live-migratable",
                ["vga"],
                True,
                "migrate.clipboard-vnc",
            )
        ]
    return [
        reason(
            "MIGRATE_NOT_PROVABLE",
            True,
            "clipboard=vnc moves live only with a running machine version of at least 10.1, which the config "
            "does not show (PVE's precondition would)",
            ["vga"],
            live_only=True,
            rule="migrate.clipboard-vnc",
        )
    ]
