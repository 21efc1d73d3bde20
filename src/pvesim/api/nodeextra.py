"""More node reads (pve-manager PVE/API2/Nodes.pm, Services.pm, Network.pm, APT.pm, Capabilities.pm,
Hardware/*.pm, VZDump.pm; qemu-server API2/Qemu/CPU.pm, CPUFlags.pm, NodeCapabilities) and the websocket
endpoints, which a client without a ticket from vncproxy/mtunnel only ever sees refuse it."""

from __future__ import annotations

import hashlib
from typing import Any

from pvesim.api import system
from pvesim.api.registry import ApiError, Call, route
from pvesim.scenario import major
from pvesim.state import Guest, Node


def _node(call: Call) -> Node:
    return call.cluster.nodes[call.params["node"]]


@route("GET", "/nodes/{node}/netstat")
def netstat(call: Call) -> list[dict[str, Any]]:
    """Nodes.pm netstat: /proc/net/dev's tap<vmid>i<n> and veth<vmid>i<n> devices, ``in`` being what the device
    transmitted (the guest received) and ``out`` what it received; the vmid is a string (a regex capture)."""
    c = call.cluster
    rows = []
    devices: list[tuple[str, Guest, int]] = []
    for g in c.guests.values():
        if g.node != call.params["node"] or g.status != "running":
            continue
        for key in sorted(k for k in g.config if k.startswith("net") and k[3:].isdecimal()):
            devices.append(((f"tap{g.vmid}i" if g.type == "qemu" else f"veth{g.vmid}i") + key[3:], g, int(key[3:])))
    for dev, g, netid in sorted(devices, key=lambda d: d[0]):
        seed = int(hashlib.md5(dev.encode(), usedforsecurity=False).hexdigest()[:6], 16)
        uptime = max(int(c.clock.now() - (g.started_at or c.clock.now())), 1)
        rows.append(
            {
                "vmid": str(g.vmid),
                "dev": f"net{netid}",
                "in": uptime * (900 + seed % 400),
                "out": uptime * (600 + seed % 300),
            }
        )
    return rows


@route("GET", "/nodes/{node}/report")
def report(call: Call) -> str:
    """Nodes.pm report (PVE::Report::generate): the system report, a text of titled command outputs."""
    c, n = call.cluster, _node(call)
    versions = system.installed(c, n)
    lines = [
        "==== general system info ====",
        "",
        "# hostname",
        n.name,
        "",
        "# pveversion --verbose",
        f"proxmox-ve: {versions.get('proxmox-ve', '')} (running kernel: {n.kernel})",
        f"pve-manager: {c.version} (running version: {c.version}/0fcd7879d9b3ec58)",
        *(
            f"{name}: {version}"
            for name, version in sorted(versions.items())
            if name not in ("proxmox-ve", "pve-manager")
        ),
        "",
        "# cat /etc/hosts",
        f"127.0.0.1 localhost.localdomain localhost\n{n.ip} {n.name}.lan {n.name}",
        "",
        "# pvecm status",
        f"Cluster information\n-------------------\nName:             {c.name}\nNodes:            {len(c.nodes)}",
        f"Quorate:          {'Yes' if c.quorate else 'No'}",
        "",
        "==== info about storage ====",
        "",
        "# pvesm status",
        "Name Type Status Total Used Available %",
        *(f"{s.storage} {s.type} {'active' if s.available_on(n.name) else 'disabled'}" for s in c.storages.values()),
        "",
    ]
    return "\n".join(lines) + "\n"


# pveam's appliance index (http://download.proxmox.com/images/aplinfo-pve-9.dat): a few of its entries
_APPLIANCES = (
    ("system", "debian-12-standard", "12.12-1", "debian-12", "Debian 12 Bookworm (standard)"),
    ("system", "debian-13-standard", "13.1-1", "debian-13", "Debian 13 Trixie (standard)"),
    ("system", "ubuntu-24.04-standard", "24.04-2", "ubuntu-24.04", "Ubuntu 24.04 Noble (standard)"),
    ("system", "alpine-3.22-default", "20250617", "alpine-3.22", "Alpine Linux 3.22"),
    ("system", "rockylinux-9-default", "20240912", "rockylinux-9", "Rocky Linux 9"),
)


@route("GET", "/nodes/{node}/aplinfo")
def aplinfo(_call: Call) -> list[dict[str, Any]]:
    """Nodes.pm aplinfo (PVE::APLInfo load_data): every appliance of the downloaded index but pve-web-news."""
    rows = []
    for section, package, version, os_, headline in _APPLIANCES:
        template = f"{package}_{version}_amd64.tar.zst"
        rows.append(
            {
                "package": package,
                "version": version,
                "type": "lxc",
                "os": os_,
                "section": section,
                "headline": headline,
                "description": headline,
                "maintainer": "Proxmox Support Team <support@proxmox.com>",
                "infopage": "https://pve.proxmox.com/wiki/Linux_Container#pct_supported_distributions",
                "architecture": "amd64",
                "template": template,
                "location": f"http://download.proxmox.com/images/system/{template}",
                "sha512sum": hashlib.sha512(template.encode()).hexdigest(),
                "source": "http://download.proxmox.com/images",
            }
        )
    return rows


@route("GET", "/nodes/{node}/apt/changelog")
def apt_changelog(call: Call) -> str:
    """APT.pm changelog: ``apt-get changelog -qq <name>[=<version>]``'s output; its exit code after it when it
    fails (an unknown package: 'E: ...' then 'RC: 100')."""
    c, n = call.cluster, _node(call)
    name = str(call.params["name"])
    known = {u["Package"]: u for u in n.apt_updates} | {p: {"Version": v} for p, v in system.installed(c, n).items()}
    if name not in known:
        return f"E: Unable to find a source package for {name}\nRC: 100"
    version = str(call.params.get("version") or known[name].get("Version", ""))
    date = "Mon, 01 Dec 2026 12:00:00 +0100"
    return (
        f"{name} ({version}) {'trixie' if major(c.version) >= 9 else 'bookworm'}; urgency=medium\n\n"
        "  * update to the current upstream release\n\n"
        f" -- Proxmox Support Team <support@proxmox.com>  {date}\n"
    )


# qemu-server src/PVE/QemuServer/CPUConfig.pm $cpu_vendor_list (and the built-in x86-64-v* models)
_CPU_MODELS = {
    "GenuineIntel": (
        "486 pentium pentium2 pentium3 coreduo core2duo Conroe Penryn Nehalem Nehalem-IBRS Westmere Westmere-IBRS "
        "SandyBridge SandyBridge-IBRS IvyBridge IvyBridge-IBRS Haswell Haswell-IBRS Haswell-noTSX "
        "Haswell-noTSX-IBRS Broadwell Broadwell-IBRS Broadwell-noTSX Broadwell-noTSX-IBRS Skylake-Client "
        "Skylake-Client-IBRS Skylake-Client-noTSX-IBRS Skylake-Client-v4 Skylake-Server Skylake-Server-IBRS "
        "Skylake-Server-noTSX-IBRS Skylake-Server-v4 Skylake-Server-v5 Cascadelake-Server Cascadelake-Server-v2 "
        "Cascadelake-Server-noTSX Cascadelake-Server-v4 Cascadelake-Server-v5 Cooperlake Cooperlake-v2 KnightsMill "
        "Icelake-Client Icelake-Client-noTSX Icelake-Server Icelake-Server-noTSX Icelake-Server-v3 "
        "Icelake-Server-v4 Icelake-Server-v5 Icelake-Server-v6 SapphireRapids SapphireRapids-v2 GraniteRapids"
    ),
    "AuthenticAMD": (
        "athlon phenom Opteron_G1 Opteron_G2 Opteron_G3 Opteron_G4 Opteron_G5 EPYC EPYC-IBPB EPYC-v3 EPYC-v4 "
        "EPYC-Rome EPYC-Rome-v2 EPYC-Rome-v3 EPYC-Rome-v4 EPYC-Milan EPYC-Milan-v2 EPYC-Genoa"
    ),
    "default": "host kvm32 kvm64 qemu32 qemu64 max x86-64-v2 x86-64-v2-AES x86-64-v3 x86-64-v4",
}


@route("GET", "/nodes/{node}/capabilities/qemu/cpu")
def qemu_cpu(call: Call) -> list[dict[str, Any]]:
    """API2/Qemu/CPU.pm index: get_cpu_models (PVE's order is a hash's; here by name); none on aarch64 but the
    defaults there."""
    if call.params.get("arch") == "aarch64":
        return [{"name": m, "vendor": "ARM", "custom": 0} for m in ("cortex-a57", "cortex-a72", "host", "max")]
    models = [{"name": m, "vendor": v, "custom": 0} for v, names in _CPU_MODELS.items() for m in names.split()]
    return sorted(models, key=lambda m: m["name"])


# qemu-server src/PVE/QemuServer/CPUFlags.pm $supported_vm_specific_cpu_flags_by_arch (x86_64)
_CPU_FLAGS = (
    ("nested-virt", "Controls nested virtualization, namely 'svm' for AMD CPUs and 'vmx' for Intel CPUs. Live "
     "migration still only works if it's the same flag on both sides. Use a CPU model similar to the host, with "
     "the same vendor, not x86-64-vX!"),
    ("md-clear", "Required to let the guest OS know if MDS is mitigated correctly."),
    ("pcid", "Meltdown fix cost reduction on Westmere, Sandy-, and IvyBridge Intel CPUs."),
    ("spec-ctrl", "Allows improved Spectre mitigation with Intel CPUs."),
    ("ssbd", "Protection for 'Speculative Store Bypass' for Intel models."),
    ("ibpb", "Allows improved Spectre mitigation with AMD CPUs."),
    ("virt-ssbd", "Basis for 'Speculative Store Bypass' protection for AMD models."),
    ("amd-ssbd", "Improves Spectre mitigation performance with AMD CPUs, best used with 'virt-ssbd'."),
    ("amd-no-ssb", "Notifies guest OS that host is not vulnerable for Spectre on AMD CPUs."),
    ("pdpe1gb", "Allow guest OS to use 1GB size pages, if host HW supports it."),
    ("hv-tlbflush", "Improve performance in overcommitted Windows guests. May lead to guest bluescreens on old CPUs."),
    ("hv-evmcs", "Improve performance for nested virtualization. Only supported on Intel CPUs."),
    ("aes", "Activate AES instruction set for HW acceleration."),
)  # fmt: skip


@route("GET", "/nodes/{node}/capabilities/qemu/cpu-flags")
def qemu_cpu_flags(call: Call) -> list[dict[str, str]]:
    """API2/Qemu/CPUFlags.pm index: the flags a VM may set (none known for aarch64)."""
    if call.params.get("arch") == "aarch64":
        return []
    return [{"name": name, "description": text} for name, text in _CPU_FLAGS]


@route("GET", "/nodes/{node}/capabilities/qemu/migration")
def qemu_migration(_call: Call) -> dict[str, Any]:
    """API2/NodeCapabilities/Qemu/Migration.pm: the node can carry a VM's dbus-vmstate (PVE 9)."""
    return {"has-dbus-vmstate": 1}


@route("GET", "/nodes/{node}/hardware/usb")
def usbscan(_call: Call) -> list[dict[str, Any]]:
    """Hardware/USB.pm usbscan (SysFSTools scan_usb): the root hubs and a keyboard, as a server has them."""
    hub: dict[str, Any] = {"class": 9, "level": 0, "port": 0, "speed": "480", "vendid": "1d6b", "prodid": "0002"}
    return [
        {**hub, "busnum": 1, "devnum": 1, "manufacturer": "Linux xhci-hcd", "product": "xHCI Host Controller"},
        {**hub, "busnum": 2, "devnum": 1, "speed": "5000", "prodid": "0003", "product": "xHCI Host Controller"},
        {
            "busnum": 1, "devnum": 2, "class": 0, "level": 1, "port": 3, "speed": "12", "usbpath": "3",
            "vendid": "046d", "prodid": "c31c", "manufacturer": "Logitech", "product": "USB Keyboard",
        },
    ]  # fmt: skip


@route("GET", "/nodes/{node}/hardware/pci/{pci-id-or-mapping}/mdev")
def mdevscan(call: Call) -> list[dict[str, Any]]:
    """Hardware/PCI.pm mdevscan (QemuServer/PCI/Mdev.pm get_mdev_types): a device without mediated-device
    support has no mdev_supported_types directory, which the helper dies on."""
    ident = call.params["pci-id-or-mapping"]
    mdev = call.cluster.nodes[call.params["node"]].health.mdev.get(ident)
    if mdev is None:
        raise ApiError(500, f"The device '{ident}' is not a valid PCI device or does not support mediated devices")
    return [dict(t) for t in mdev]


@route("GET", "/nodes/{node}/services/{service}/state")
def service_state(call: Call) -> dict[str, Any]:
    """Services.pm service_state: the service's row of the index (service, name, desc, state, unit-state,
    active-state)."""
    rows = {r["service"]: r for r in system.services(call)}
    return dict(rows[call.params["service"]])


@route("GET", "/nodes/{node}/network/{iface}")
def network_iface(call: Call) -> dict[str, Any]:
    """Network.pm network_config: the interface as /etc/network/interfaces has it; 400 when it does not exist."""
    n = _node(call)
    merged = {iface: dict(r) for iface, r in n.health.network.items()}
    for row in n.network:
        merged[str(row["iface"])] = {**merged.get(str(row["iface"]), {}), **row}
    iface = call.params["iface"]
    if iface not in merged:
        raise ApiError(400, "Parameter verification failed.", {"iface": "interface does not exist"})
    return merged[iface]


@route("GET", "/nodes/{node}/query-url-metadata")
def query_url_metadata(call: Call) -> dict[str, Any]:
    """Nodes.pm query_url_metadata: a HEAD request; the file name from the URL's last segment, its size and
    type from the answer (a ``.iso`` is application/x-iso9660-image); a URL that is not http(s) fails."""
    url = str(call.params["url"])
    if not url.startswith(("http://", "https://")):
        raise ApiError(500, "invalid server response: '400 URL must be absolute'")
    name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    types = {".iso": "application/x-iso9660-image", ".zst": "application/zstd", ".gz": "application/gzip"}
    out: dict[str, Any] = {"filename": name} if name else {}
    out["size"] = 512 * 1024**2 + int(hashlib.md5(url.encode(), usedforsecurity=False).hexdigest()[:6], 16)
    out["mimetype"] = next((t for ext, t in types.items() if name.endswith(ext)), "application/octet-stream")
    return out


@route("GET", "/nodes/{node}/query-oci-repo-tags")
def query_oci_repo_tags(call: Call) -> list[str]:
    """Nodes.pm query_oci_repo_tags (PVE 9.1): the repository's tags as the registry lists them."""
    ref = str(call.params["reference"])
    name = ref.rsplit("/", 1)[-1].split(":", 1)[0]
    known = {"debian": ["bookworm", "latest", "trixie"], "alpine": ["3.21", "3.22", "latest"]}
    if name not in known:
        raise ApiError(500, f"failed to list tags of '{ref}': repository not found")
    return known[name]


@route("GET", "/nodes/{node}/vzdump/extractconfig")
def extractconfig(call: Call) -> str:
    """VZDump.pm extractconfig (pve-storage extract_vzdump_config): the guest's config as it was backed up,
    for a backup volume the caller may read (its guest's VM.Backup)."""
    c = call.cluster
    volid = str(call.params["volume"])
    vol = next((v for v in c.volumes if v.volid == volid and v.content == "backup"), None)
    if vol is None:
        raise ApiError(500, f"volume '{volid}' does not exist")
    if vol.vmid is not None and not call.can(f"/vms/{vol.vmid}", "VM.Backup"):
        raise ApiError(403, f"Permission check failed (/vms/{vol.vmid}, VM.Backup)")
    g = c.guests.get(vol.vmid or 0)
    config = g.config if g else {"name": f"vm{vol.vmid}", "memory": "2048"}
    return "".join(f"{k}: {v}\n" for k, v in config.items() if k not in ("lock",)) + "#qmdump#map:scsi0:drive-scsi0::\n"


# ---------------------------------------------------------------- websockets: a ticket from a proxy call first


@route("GET", "/nodes/{node}/vncwebsocket")
def node_vncwebsocket(_call: Call) -> None:
    """Nodes.pm vncwebsocket: verify_vnc_ticket; an API token gets no vncticket here, so the ticket fails
    (pve-common PVE/Ticket.pm verify_rsa_ticket: 401)."""
    raise ApiError(401, "permission denied - invalid PVEVNC ticket")


@route("GET", "/nodes/{node}/qemu/{vmid}/vncwebsocket")
def qemu_vncwebsocket(_call: Call) -> None:
    raise ApiError(401, "permission denied - invalid PVEVNC ticket")


@route("GET", "/nodes/{node}/lxc/{vmid}/vncwebsocket")
def lxc_vncwebsocket(_call: Call) -> None:
    raise ApiError(401, "permission denied - invalid PVEVNC ticket")


def _mtunnel(call: Call, gtype: str) -> None:
    """Qemu.pm/LXC.pm mtunnelwebsocket: the node must be this one, the guest must exist, then the tunnel
    ticket (from mtunnel) is checked."""
    call.guest(gtype)
    raise ApiError(401, "permission denied - invalid PVETUNNEL ticket")


@route("GET", "/nodes/{node}/qemu/{vmid}/mtunnelwebsocket")
def qemu_mtunnelwebsocket(call: Call) -> None:
    _mtunnel(call, "qemu")


@route("GET", "/nodes/{node}/lxc/{vmid}/mtunnelwebsocket")
def lxc_mtunnelwebsocket(call: Call) -> None:
    _mtunnel(call, "lxc")
