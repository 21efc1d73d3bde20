"""VM configuration hygiene (cv4pve-diag's VM checks), judged on the configs the collector already read.

Each rule follows qemu-server's own reading of the key (defaults included): an unset ``cpu`` is
kvm64, an unset ``scsihw`` is lsi, an unset ``balloon`` keeps the balloon device, ``hotplug: 1``
means network,disk,usb. Non-template VMs only, except the template check.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.checks.guests_common import (
    SERIAL_KEYS,
    cluster_wide,
    flag,
    guests_with_config,
    keys_in,
    label,
)
from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import Finding, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.guestconfig import NET_KEYS, QEMU_DRIVES, parse_property_string

# a machine type that names its version (qemu-server QemuServer/Machine.pm $machine_fmt type pattern)
_PINNED = re.compile(r"^(?P<family>pc-q35|pc-i440fx|pc|virt)-(?P<ver>\d+(?:\.\d+)+)(?:\+pve\d+)?(?:\.pxe)?$")
_QS = "qemu-server src/PVE/QemuServer.pm"


_DRIVE_KEYS = frozenset(QEMU_DRIVES)  # qemu-server Drive.pm valid_drive_names, without efidisk0 and tpmstate0
_EMULATED_BUSES = ("ide", "sata")


def _vm(data: ClusterData, code: str, vmid: int, g: Row, text: str, evidence: dict[str, object]) -> Finding:
    return finding(code, guest_subject(data, vmid), f"{label(vmid, g)} {text}", evidence)


# ---------------------------------------------------------------- OS type


# qemu-server confdesc ostype: the values whose vendor support has ended (win10 also stands for Server
# 2016/2019, still supported; l24 is Linux 2.4)
_OS_EOL = {"win8", "win7", "wvista", "w2k8", "w2k3", "wxp", "w2k", "l24"}


@check(
    "guests",
    codes=[
        Code(
            "GUEST_OSTYPE_UNSET",
            "warning",
            "VM OS type not set",
            "ostype is unset (PVE treats it as 'other'): the OS-specific defaults PVE derives from it (Windows "
            "RTC in local time and Hyper-V enlightenments, the Linux defaults) are not applied.",
            "Set the guest's OS: GUI the VM > Options > OS Type, or qm set <vmid> --ostype l26 (win11, win10, ...); "
            "takes effect at the next start.",
        ),
        Code(
            "GUEST_OS_EOL",
            "warning",
            "Guest OS past vendor support",
            "ostype names an OS whose vendor support has ended (wxp, w2k, w2k3, w2k8, wvista, win7, win8 - "
            "Windows 8/2012/2012 R2 -, l24): no security updates.",
            "Plan an upgrade or migration of the guest OS; until then isolate it (guest firewall, separate VLAN).",
        ),
    ],
    anchors=["cv4pve-diag:WG0001", "cv4pve-diag:WG0002"],
    pve=f"{_QS} confdesc ostype (windows_version, get_rtc_clock)",
)
def os_type(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "qemu"):
        ostype = raw.get("ostype")
        if not ostype:
            out.append(_vm(data, "GUEST_OSTYPE_UNSET", vmid, g, "has no OS type set", {"ostype": None}))
        elif str(ostype) in _OS_EOL:
            out.append(
                _vm(data, "GUEST_OS_EOL", vmid, g, f"runs an OS past vendor support ({ostype})", {"ostype": ostype})
            )
    return out


# ---------------------------------------------------------------- guest agent


@check(
    "guests",
    codes=[
        Code(
            "GUEST_AGENT_NOT_CONFIGURED",
            "warning",
            "Guest agent not enabled",
            "A non-template VM has the QEMU guest agent option off: backups cannot freeze its filesystems, PVE "
            "shows no guest IPs and shutdown falls back to ACPI.",
            "Install qemu-guest-agent in the guest, then enable it: GUI the VM > Options > QEMU Guest Agent, or "
            "qm set <vmid> --agent enabled=1 (takes effect at the next start).",
        ),
        Code(
            "GUEST_TEMPLATE_AGENT",
            "warning",
            "Template has the guest agent enabled",
            "A template has agent enabled; it never runs, and every clone inherits the option (cv4pve-diag "
            "flags it as noise for clones without the agent installed).",
            "If the template's image has no qemu-guest-agent installed, disable it: qm set <vmid> --agent 0; "
            "otherwise keep it and ignore this (suppress the finding for the template).",
        ),
    ],
    anchors=["cv4pve-diag:WG0003", "cv4pve-diag:WG0014"],
    pve=f"{_QS} confdesc agent + src/PVE/QemuServer/Agent.pm get_qga_key",
)
def agent_config(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, _raw, cfg in guests_with_config(data, "qemu", templates=True):
        if cfg.template and cfg.agent_enabled:
            out.append(_vm(data, "GUEST_TEMPLATE_AGENT", vmid, g, "is a template with the guest agent enabled", {}))
        elif not cfg.template and not cfg.agent_enabled:
            out.append(
                _vm(data, "GUEST_AGENT_NOT_CONFIGURED", vmid, g, "has the QEMU guest agent disabled", {"agent": False})
            )
    return out


# ---------------------------------------------------------------- VirtIO


@check(
    "guests",
    codes=[
        Code(
            "GUEST_SCSI_CONTROLLER_NOT_VIRTIO",
            "info",
            "SCSI controller is not VirtIO",
            "A VM with SCSI drives uses an emulated controller (scsihw unset means lsi; megasas, pvscsi): "
            "lower throughput and more host CPU than virtio-scsi. VMs without scsiN drives are not judged.",
            "Switch to VirtIO SCSI (the guest needs the virtio driver first, Windows: virtio-win): GUI the VM > "
            "Hardware > SCSI Controller, or qm set <vmid> --scsihw virtio-scsi-single; takes effect at the next "
            "start.",
        ),
        Code(
            "GUEST_DISK_BUS_SLOW",
            "info",
            "Disk on an emulated bus",
            "A disk (not a CD-ROM) sits on the IDE or SATA bus, or on SCSI behind a non-VirtIO controller: "
            "emulated, slower than virtio-blk or virtio-scsi.",
            "Once the guest has virtio drivers, detach the disk and re-attach it as scsiN (with virtio-scsi) or "
            "virtioN: GUI the VM > Hardware > Disk Action > Detach, then edit the unused disk; or qm set.",
        ),
        Code(
            "GUEST_NIC_NOT_VIRTIO",
            "info",
            "Network device is not VirtIO",
            "A netN device uses an emulated model (e1000, e1000e, rtl8139, vmxnet3, ...) instead of virtio: "
            "more host CPU per packet, less throughput.",
            "With virtio drivers in the guest, change the model (keep the MAC): GUI the VM > Hardware > Network "
            "Device > Model VirtIO, or qm set <vmid> --netN virtio=<MAC>,bridge=<bridge>.",
        ),
    ],
    anchors=["cv4pve-diag:IG0001", "cv4pve-diag:IG0002", "cv4pve-diag:IG0003"],
    pve=f"{_QS} confdesc scsihw (default lsi) + src/PVE/QemuServer/Network.pm parse_net",
)
def virtio(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, cfg in guests_with_config(data, "qemu"):
        scsihw = str(raw.get("scsihw") or "lsi")
        virtio_scsi = scsihw.startswith("virtio")
        scsi = False
        slow: dict[str, str] = {}
        for v in cfg.volumes:  # the attached drives (ide, sata, scsi; virtio is neither), in one pass
            key = v.key
            if key.startswith(_EMULATED_BUSES):
                if not v.cdrom:
                    slow[key] = v.volid
            elif key.startswith("scsi"):
                scsi = True
                if not virtio_scsi and not v.cdrom:
                    slow[key] = v.volid
        if scsi and not virtio_scsi:
            out.append(
                _vm(
                    data,
                    "GUEST_SCSI_CONTROLLER_NOT_VIRTIO",
                    vmid,
                    g,
                    f"uses the {scsihw} SCSI controller",
                    {"scsihw": raw.get("scsihw")},
                )
            )
        if slow:
            out.append(
                _vm(
                    data,
                    "GUEST_DISK_BUS_SLOW",
                    vmid,
                    g,
                    f"has disk(s) on an emulated bus: {', '.join(slow)}",
                    {"disks": slow, "scsihw": raw.get("scsihw")},
                )
            )
        emulated = {k: m for k, m, _mac in cfg.nets if m and m != "virtio"}
        if emulated:
            out.append(
                _vm(
                    data,
                    "GUEST_NIC_NOT_VIRTIO",
                    vmid,
                    g,
                    "has emulated network device(s): " + ", ".join(f"{k}={m}" for k, m in emulated.items()),
                    {"models": emulated},
                )
            )
    return out


# ---------------------------------------------------------------- CD-ROM


@check(
    "guests",
    codes=[
        Code(
            "GUEST_CDROM_MOUNTED",
            "warning",
            "CD-ROM has an image inserted",
            "A CD-ROM drive holds an ISO image or the host's drive (not 'none'; cloud-init drives are left out): "
            "a local ISO blocks migration, and a forgotten installer can boot on the next restart.",
            "Eject it when no longer needed: GUI the VM > Hardware > CD/DVD Drive > Do not use any media, or "
            "qm set <vmid> --ide2 none,media=cdrom.",
        )
    ],
    anchors=["cv4pve-diag:WG0005"],
    pve="qemu-server src/PVE/QemuServer/Drive.pm drive_is_cdrom + drive_is_cloudinit",
)
def cdrom_mounted(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, _raw, cfg in guests_with_config(data, "qemu"):
        media = {v.key: v.volid for v in cfg.volumes if v.cdrom and not v.cloudinit and v.volid != "none"}
        if media:
            out.append(
                _vm(
                    data,
                    "GUEST_CDROM_MOUNTED",
                    vmid,
                    g,
                    "has media in its CD-ROM drive(s): " + ", ".join(f"{k}={v}" for k, v in media.items()),
                    {"cdrom": media},
                )
            )
    return out


# ---------------------------------------------------------------- CPU


@check(
    "guests",
    codes=[
        Code(
            "GUEST_CPU_KVM64",
            "info",
            "CPU type kvm64",
            "The VM's CPU type is kvm64, set or by default (qemu-server's default for an x86_64 VM with KVM): a "
            "2003-era baseline without SSE4, AVX or AES-NI; current guests run slower or refuse to boot "
            "(RHEL 9 needs x86-64-v2).",
            "Choose a newer model all nodes support (x86-64-v2-AES is PVE's default for new VMs; x86-64-v3 when "
            "every node has AVX2): GUI the VM > Hardware > Processors > Type, or qm set <vmid> --cpu "
            "x86-64-v2-AES; takes effect at the next start.",
        ),
        Code(
            "GUEST_CPU_HOTPLUG_WINDOWS",
            "warning",
            "CPU hotplug on a Windows guest",
            "ostype is Windows and hotplug lists cpu: Windows does not take hot-added vCPUs, PVE still plugs "
            "vCPUs as separate devices.",
            "Remove cpu from the hotplug list: GUI the VM > Options > Hotplug, or qm set <vmid> --hotplug "
            "network,disk,usb.",
        ),
    ],
    anchors=["cv4pve-diag:IG0004", "cv4pve-diag:WG0007"],
    pve=f"qemu-server src/PVE/QemuServer/CPUConfig.pm get_cpu_options (default kvm64) + {_QS} parse_hotplug_features",
)
def cpu_type(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, cfg in guests_with_config(data, "qemu"):
        kind = (cfg.cpu_type or _default_cpu(raw)).lower()
        if kind == "kvm64":
            how = "set" if cfg.cpu_type else "unset, qemu-server's default"
            out.append(
                _vm(
                    data,
                    "GUEST_CPU_KVM64",
                    vmid,
                    g,
                    f"uses CPU type kvm64 ({how})",
                    {"cpu": raw.get("cpu"), "effective": "kvm64"},
                )
            )
        if str(raw.get("ostype", "")).startswith("w") and "cpu" in _hotplug(raw.get("hotplug")):
            out.append(
                _vm(
                    data,
                    "GUEST_CPU_HOTPLUG_WINDOWS",
                    vmid,
                    g,
                    f"is a Windows guest ({raw.get('ostype')}) with CPU hotplug enabled",
                    {"ostype": raw.get("ostype"), "hotplug": raw.get("hotplug")},
                )
            )
    return out


@pve_rule(
    "guests.cpu_default",
    rule="An unset cpu is kvm64 for an x86_64 VM with KVM, qemu64 with kvm 0, and on aarch64 cortex-a57 "
    "(PVE 8) or host (PVE 9).",
    pve="qemu-server src/PVE/QemuServer/CPUConfig.pm get_default_cpu_type (arch from Helpers.pm get_vm_arch)",
    codes=("GUEST_CPU_KVM64",),
)
def _default_cpu(raw: Row) -> str:
    if raw.get("arch") not in (None, "x86_64"):  # PVE runs on x86_64: an unset arch is the host's
        return "aarch64 default"
    return "qemu64" if "kvm" in raw and not flag(raw, "kvm") else "kvm64"


def _hotplug(value: object) -> set[str]:
    """qemu-server parse_hotplug_features: '0' none, '1' (and unset) network,disk,usb."""
    text = "network,disk,usb" if value is None or str(value) == "1" else str(value)
    return set() if text == "0" else {p.strip() for p in text.split(",")}


# ---------------------------------------------------------------- memory balloon


@check(
    "guests",
    codes=[
        Code(
            "GUEST_BALLOON_DISABLED",
            "info",
            "Memory balloon disabled",
            "balloon is 0: qemu-server adds no balloon device, so the host can never reclaim the VM's memory and "
            "PVE shows no guest-side memory use. VMs with hugepages are left out (no ballooning there).",
            "If the workload allows it, enable ballooning: GUI the VM > Hardware > Memory > Ballooning Device, or "
            "qm set <vmid> --delete balloon (or a minimum: --balloon <MiB>); takes effect at the next start.",
        ),
        Code(
            "GUEST_BALLOON_NO_ROOM",
            "info",
            "Balloon minimum leaves no room",
            "The balloon minimum is above balloon_room_pct (95) % of memory: auto-ballooning can take back "
            "almost nothing.",
            "Lower the minimum (GUI the VM > Hardware > Memory > Minimum memory, or qm set <vmid> --balloon "
            "<MiB>), or leave ballooning off on purpose (--balloon 0).",
        ),
    ],
    thresholds=[
        Threshold("balloon_room_pct", 95, "balloon minimum above this % of memory leaves no room", maximum=100)
    ],
    anchors=["cv4pve-diag:IG0005", "cv4pve-diag:IG0006"],
    pve=f"{_QS} config_to_command (balloon device unless balloon=0) + vmstatus balloon_min",
)
def balloon(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    room = t.get("balloon_room_pct")
    for vmid, g, raw, cfg in guests_with_config(data, "qemu"):
        if cfg.balloon_mib == 0 and not raw.get("hugepages"):
            out.append(_vm(data, "GUEST_BALLOON_DISABLED", vmid, g, "has the memory balloon disabled", {"balloon": 0}))
        elif cfg.balloon_mib and cfg.memory_mib > 0 and cfg.balloon_mib * 100 > room * cfg.memory_mib:
            pct = round(cfg.balloon_mib * 100 / cfg.memory_mib, 1)
            out.append(
                _vm(
                    data,
                    "GUEST_BALLOON_NO_ROOM",
                    vmid,
                    g,
                    f"has a balloon minimum of {cfg.balloon_mib} MiB, {pct} % of its {cfg.memory_mib} MiB",
                    {"balloon_mib": cfg.balloon_mib, "memory_mib": cfg.memory_mib, "pct": pct, "threshold_pct": room},
                )
            )
    return out


# ---------------------------------------------------------------- disk cache


@check(
    "guests",
    codes=[
        Code(
            "GUEST_DISK_CACHE_UNSAFE",
            "warning",
            "Disk cache mode unsafe",
            "A disk uses cache=unsafe: QEMU ignores the guest's flushes, so a host crash or power loss loses "
            "writes the guest believes are on disk.",
            "Use the default (no cache) or writeback: GUI the VM > Hardware > Hard Disk > Cache, or "
            "qm set <vmid> --<disk> <volume>,cache=none (re-state the drive's other options).",
        ),
        Code(
            "GUEST_DISK_WRITEBACK_NO_BACKUP",
            "warning",
            "Writeback disk excluded from backup",
            "A disk uses cache=writeback and has backup=0: writes in the host's page cache can be lost on a "
            "crash, and no backup holds the disk.",
            "Include the disk in backups (GUI the VM > Hardware > Hard Disk > Backup) or use cache=none for it.",
        ),
    ],
    anchors=["cv4pve-diag:WG0008", "cv4pve-diag:WG0009"],
    pve="qemu-server src/PVE/QemuServer/Drive.pm drivedesc cache + backup",
)
def disk_cache(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "qemu"):
        disks = _cached_disks(raw)
        if not disks:  # nearly every VM
            continue
        unsafe = {k: o.get("file") for k, o in disks.items() if o["cache"] == "unsafe"}
        if unsafe:
            out.append(
                _vm(
                    data,
                    "GUEST_DISK_CACHE_UNSAFE",
                    vmid,
                    g,
                    f"uses cache=unsafe on {', '.join(unsafe)}",
                    {"disks": unsafe, "cache": "unsafe"},
                )
            )
        exposed = {k: o.get("file") for k, o in disks.items() if o["cache"] == "writeback" and o.get("backup") == "0"}
        if exposed:
            out.append(
                _vm(
                    data,
                    "GUEST_DISK_WRITEBACK_NO_BACKUP",
                    vmid,
                    g,
                    f"uses cache=writeback with backup=0 on {', '.join(exposed)}",
                    {"disks": exposed, "cache": "writeback", "backup": 0},
                )
            )
    return out


# ---------------------------------------------------------------- Windows 11


def _cached_disks(raw: Row) -> dict[str, dict[str, str]]:
    """Drives (not CD-ROMs) that set a cache mode -> their options; only those values are parsed."""
    for key in _DRIVE_KEYS.intersection(raw):
        value = raw[key]
        if "cache=" in (value if type(value) is str else str(value)):
            break
    else:  # nearly every VM: no drive sets a cache mode
        return {}
    out: dict[str, dict[str, str]] = {}
    for key in keys_in(raw, _DRIVE_KEYS):
        value = str(raw[key])
        if "cache=" not in value:
            continue
        opts = parse_property_string(value, "file")
        if opts.get("cache") and opts.get("media") != "cdrom" and opts.get("file") != "cdrom":
            out[key] = opts
    return out


@check(
    "guests",
    codes=[
        Code(
            "GUEST_WIN11_NO_UEFI",
            "warning",
            "Windows 11 VM without UEFI",
            "ostype is win11 (Windows 11/2022/2025) but bios is not ovmf: Windows 11 needs UEFI with Secure Boot.",
            "Add an EFI disk and switch the firmware (the guest's boot partition must be GPT): GUI the VM > "
            "Hardware > BIOS OVMF (UEFI) and Add > EFI Disk, or qm set <vmid> --bios ovmf --efidisk0 "
            "<storage>:1,efitype=4m,pre-enrolled-keys=1.",
        ),
        Code(
            "GUEST_WIN11_NO_TPM",
            "warning",
            "Windows 11 VM without TPM",
            "ostype is win11 but the VM has no tpmstate0: Windows 11 needs TPM 2.0.",
            "Add a TPM: GUI the VM > Hardware > Add > TPM State (v2.0), or qm set <vmid> --tpmstate0 "
            "<storage>:1,version=v2.0.",
        ),
    ],
    anchors=["cv4pve-diag:WG0010", "cv4pve-diag:WG0011"],
    pve=f"{_QS} confdesc bios + tpmstate0 (src/PVE/QemuServer/Drive.pm tpmstate0)",
)
def windows11(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "qemu"):
        if raw.get("ostype") != "win11":
            continue
        if raw.get("bios") != "ovmf":
            out.append(
                _vm(
                    data,
                    "GUEST_WIN11_NO_UEFI",
                    vmid,
                    g,
                    "runs Windows 11 without UEFI",
                    {"ostype": "win11", "bios": raw.get("bios")},
                )
            )
        if not raw.get("tpmstate0"):
            out.append(
                _vm(
                    data,
                    "GUEST_WIN11_NO_TPM",
                    vmid,
                    g,
                    "runs Windows 11 without a TPM",
                    {"ostype": "win11", "tpmstate0": None},
                )
            )
    return out


# ---------------------------------------------------------------- devices and machine


@check(
    "guests",
    codes=[
        Code(
            "GUEST_RNG_DEVICE",
            "info",
            "VirtIO RNG device present",
            "The VM has rng0 (a VirtIO RNG fed from the host): rarely needed with modern kernels; verify it is "
            "intended (a /dev/random source can stall the host's entropy).",
            "Keep it if intended (suppress the finding), else remove it: qm set <vmid> --delete rng0.",
        ),
        Code(
            "GUEST_SERIAL_CONSOLE",
            "info",
            "Serial port configured",
            "The VM has serialN devices: a console anyone with VM.Console can reach, or a host device passed "
            "through; verify it is intended.",
            "Keep it if intended (suppress the finding), else remove it: qm set <vmid> --delete serial0.",
        ),
        Code(
            "GUEST_MACHINE_UNPINNED",
            "info",
            "Machine type not pinned",
            "machine is unset (or names no version, e.g. q35): QEMU uses the newest machine version at each "
            "start, so a PVE upgrade can change the virtual hardware under the guest. Windows VMs are left out: "
            "qemu-server pins theirs at each start (5.1, or the QEMU version they were created with). One "
            "finding for the cluster lists the VMs (most keep PVE's default).",
            "Pin the version the guest runs well on: GUI the VM > Hardware > Machine > Version, or qm set <vmid> "
            "--machine pc-q35-<version> (or pc-i440fx-<version>).",
        ),
        Code(
            "GUEST_NO_NETWORK",
            "warning",
            "VM without a network device",
            "The VM has no netN device: it is cut off from every network.",
            "Add one if it needs a network: GUI the VM > Hardware > Add > Network Device, or qm set <vmid> --net0 "
            "virtio,bridge=vmbr0.",
        ),
    ],
    anchors=["cv4pve-diag:IG0007", "cv4pve-diag:IG0008", "cv4pve-diag:IG0012", "cv4pve-diag:WG0034"],
    pve=f"{_QS} confdesc rng0, serialN, machine (src/PVE/QemuServer/Machine.pm get_vm_machine)",
)
def devices(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "qemu"):
        if raw.get("rng0"):
            out.append(_vm(data, "GUEST_RNG_DEVICE", vmid, g, "has a VirtIO RNG device", {"rng0": raw.get("rng0")}))
        serial = {} if SERIAL_KEYS.isdisjoint(raw) else {k: raw[k] for k in keys_in(raw, SERIAL_KEYS)}
        if serial:
            out.append(
                _vm(
                    data, "GUEST_SERIAL_CONSOLE", vmid, g, f"has serial port(s) {', '.join(serial)}", {"serial": serial}
                )
            )
        if NET_KEYS.isdisjoint(raw):
            out.append(_vm(data, "GUEST_NO_NETWORK", vmid, g, "has no network device", {"net": None}))
    vms = guests_with_config(data, "qemu")
    unpinned = [vmid for vmid, _g, raw, _cfg in vms if _runs_newest_machine(raw)]
    return out + cluster_wide("GUEST_MACHINE_UNPINNED", unpinned, len(vms), "have no pinned machine version")


# qemu-server QemuServer/Helpers.pm windows_version: the ostypes it gives a Windows version
_WINDOWS = frozenset({"wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11"})


@pve_rule(
    "guests.machine_unpinned",
    rule="A machine without a version runs the newest the node's QEMU offers, except on Windows VMs: those are "
    "pinned at each start, to 5.1 or the QEMU version recorded at creation (meta creation-qemu >= 9.1).",
    pve="qemu-server src/PVE/QemuServer/Machine.pm get_vm_machine + windows_get_pinned_machine_version",
    codes=("GUEST_MACHINE_UNPINNED",),
)
def _runs_newest_machine(raw: Row) -> bool:
    if raw.get("machine") and _pinned(_machine(raw)):
        return False
    return raw.get("ostype") not in _WINDOWS


def _machine(raw: Row) -> str:
    """The machine type without its options (``q35,viommu=virtio`` -> ``q35``)."""
    machine = raw.get("machine")
    return _machine_type(str(machine)) if machine else ""


@lru_cache(maxsize=256)
def _machine_type(value: str) -> str:  # a few distinct values across a cluster
    return parse_property_string(value, "type").get("type", "")


# ---------------------------------------------------------------- machine version


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _family(name: str) -> str:
    return "pc-i440fx" if name == "pc" else name  # pc-X.Y is the i440fx machine


Pinned = tuple[str, str, tuple[int, ...]]  # family, X.Y, X.Y as numbers


@lru_cache(maxsize=4096)
def _pinned(machine: str) -> Pinned | None:
    """A pinned machine type's family and version, None for any other: few distinct values across a
    cluster and its nodes' lists, each read once."""
    found = _PINNED.match(machine)
    return (_family(found["family"]), found["ver"], _version(found["ver"])) if found else None


def _newest_on(data: ClusterData, node: str, machines: list[Row], family: str) -> Pinned | None:
    """:func:`_newest` once per node and family: the node's list is long, and many VMs pin a version."""
    memo = data.memo["newest_machine"]
    key = (node, family)
    if key not in memo:
        memo[key] = _newest(machines, family)
    return memo[key]  # type: ignore[no-any-return]


def _newest(machines: list[Row], family: str) -> Pinned | None:
    """The newest X.Y the node's QEMU offers for ``family`` (its +pveN revisions do not change X.Y)."""
    best: Pinned | None = None
    for m in machines:
        found = _pinned(str(m.get("id", "")))
        if found and found[0] == family and (best is None or found[2] > best[2]):
            best = found
    return best


@check(
    "guests",
    codes=[
        Code(
            "GUEST_MACHINE_OUTDATED",
            "info",
            "Machine version behind the node's QEMU",
            "The VM pins a machine version (pc-q35-X.Y, pc-i440fx-X.Y) older than the newest its node's QEMU "
            "offers (GET /nodes/{node}/capabilities/qemu/machines): fine for stability, but old versions "
            "miss fixes and QEMU eventually drops them.",
            "In a maintenance window, after a backup, raise it: GUI the VM > Hardware > Machine > Version, or "
            "qm set <vmid> --machine pc-q35-<newest>; takes effect at the next start (Windows may re-detect "
            "devices).",
        )
    ],
    needs=[
        Need(
            "qemu_machines",
            "/nodes/{node}/capabilities/qemu/machines",
            per="node",
            privilege="any authenticated user",
            absent_ok=True,
        )
    ],
    anchors=["cv4pve-diag:IG0016"],
    pve="qemu-server src/PVE/API2/Qemu/Machine.pm types + src/PVE/QemuServer/Machine.pm machine_version_cmp",
)
def machine_outdated(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "qemu"):
        if not raw.get("machine"):  # most VMs: nothing pinned
            continue
        kind = _machine(raw)
        pinned = _pinned(kind)
        machines = data.read("qemu_machines", str(g.get("node")))
        if not pinned or not machines:
            continue
        family = pinned[0]
        offered = _newest_on(data, str(g.get("node")), machines, family)
        if offered and pinned[2] < offered[2]:
            newest = offered[1]
            out.append(
                _vm(
                    data,
                    "GUEST_MACHINE_OUTDATED",
                    vmid,
                    g,
                    f"pins machine {kind}; {g.get('node')} offers {family}-{newest}",
                    {"machine": kind, "newest_on_node": f"{family}-{newest}"},
                )
            )
    return out
