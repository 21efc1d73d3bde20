"""Container configuration hygiene (cv4pve-diag's LXC checks), on the configs the collector already read.

pve-container's defaults decide: ``unprivileged`` unset is a privileged container, ``swap`` unset is
512 MiB, ``keyctl`` only matters for unprivileged containers (privileged ones get the host's seccomp
default, which allows it). Raw ``lxc.*`` entries arrive as ``lxc: [[key, value], ...]``.
"""

from __future__ import annotations

from pve_steward.analysis.catalog import Code, check
from pve_steward.analysis.checks.guests_common import flag, guests_with_config, label
from pve_steward.analysis.data import ClusterData, Row, guest_subject
from pve_steward.analysis.findings import Finding, finding
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve.guestconfig import parse_property_string

_PC = "pve-container src/PVE/LXC/Config.pm"


def raw_lxc(raw: Row) -> list[tuple[str, str]]:
    """The raw lxc.* entries of a config answer: the API's ``lxc`` array of pairs (flat keys tolerated)."""
    out: list[tuple[str, str]] = []
    pairs = raw.get("lxc")
    if isinstance(pairs, list):
        out += [(str(p[0]), str(p[1])) for p in pairs if isinstance(p, list | tuple) and len(p) == 2]
    out += [(k, str(v)) for k, v in raw.items() if k.startswith("lxc.")]
    return out


def _ct(data: ClusterData, code: str, vmid: int, g: Row, text: str, evidence: dict[str, object]) -> Finding:
    return finding(code, guest_subject(data, vmid), f"{label(vmid, g)} {text}", evidence)


@check(
    "guests",
    codes=[
        Code(
            "CT_PRIVILEGED",
            "warning",
            "Privileged container",
            "unprivileged is unset or 0 (pve-container's default is privileged): root in the container is "
            "root on the host, kept in only by AppArmor and seccomp.",
            "Prefer unprivileged containers: back up and restore as unprivileged (GUI Backup > Restore > "
            "Unprivileged container, or pct restore <vmid> <archive> --unprivileged 1); file ownership is "
            "shifted on restore.",
        ),
        Code(
            "CT_APPARMOR_UNCONFINED",
            "critical",
            "Privileged container without AppArmor",
            "A privileged container sets lxc.apparmor.profile (or the old lxc.aa_profile) to unconfined: "
            "nothing confines root in the container, which is root on the host.",
            "Remove the raw entry from /etc/pve/lxc/<vmid>.conf (it cannot be set over the API), or convert the "
            "container to unprivileged; restart the container.",
        ),
    ],
    anchors=["cv4pve-diag:WG0039", "cv4pve-diag:CG0006"],
    pve=f"{_PC} confdesc unprivileged + pve-container src/PVE/LXC.pm update_lxc_config (lxc.apparmor.profile)",
)
def privileged(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "lxc"):
        if flag(raw, "unprivileged"):
            continue
        out.append(
            _ct(data, "CT_PRIVILEGED", vmid, g, "is a privileged container", {"unprivileged": raw.get("unprivileged")})
        )
        profile = [v for k, v in raw_lxc(raw) if k in ("lxc.apparmor.profile", "lxc.aa_profile")]
        if any(v.strip().lower() == "unconfined" for v in profile):
            out.append(
                _ct(
                    data,
                    "CT_APPARMOR_UNCONFINED",
                    vmid,
                    g,
                    "is privileged and runs without AppArmor (profile unconfined)",
                    {"unprivileged": raw.get("unprivileged"), "lxc.apparmor.profile": profile[-1]},
                )
            )
    return out


def _own_seccomp_profile(raw: Row) -> bool:
    """An explicit lxc.seccomp.profile: make_seccomp_config then writes none of PVE's rules (keyctl's either)."""
    return any(k == "lxc.seccomp.profile" for k, _ in raw_lxc(raw))


@check(
    "guests",
    codes=[
        Code(
            "CT_NESTING_WITHOUT_KEYCTL",
            "info",
            "Nesting without keyctl",
            "An unprivileged container has features nesting=1 but not keyctl=1 (and no seccomp profile of "
            "its own): pve-container's seccomp profile then answers keyctl() with ENOSYS, so Docker or other "
            "nested runtimes inside fail to set up keyrings. (keyctl=1 allows the call; it does not add isolation.)",
            "If the container runs Docker or nested containers, enable keyctl: GUI the CT > Options > Features "
            "> keyctl, or pct set <vmid> --features nesting=1,keyctl=1; restart the container.",
        )
    ],
    anchors=["cv4pve-diag:WG0038"],
    pve="pve-container src/PVE/LXC.pm make_seccomp_config (keyctl errno 38 unless features keyctl or an "
    "explicit lxc.seccomp.profile)",
)
def nesting_keyctl(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "lxc"):
        features = parse_property_string(str(raw.get("features", "")))
        if (
            flag(raw, "unprivileged")
            and flag(features, "nesting")
            and not flag(features, "keyctl")
            and not _own_seccomp_profile(raw)
        ):
            out.append(
                _ct(
                    data,
                    "CT_NESTING_WITHOUT_KEYCTL",
                    vmid,
                    g,
                    "allows nesting but not keyctl()",
                    {"features": raw.get("features"), "unprivileged": 1},
                )
            )
    return out


@check(
    "guests",
    codes=[
        Code(
            "CT_RAW_LXC_CONFIG",
            "warning",
            "Raw LXC config entries",
            "The container config holds raw lxc.* entries: they bypass PVE's checks (device access, mounts, "
            "AppArmor, cgroup limits), only root can set them, and PVE does not migrate or restore what they "
            "point to.",
            "Replace them with PVE options where one exists (devN passthrough, mpN mount points, features); "
            "review the rest in /etc/pve/lxc/<vmid>.conf.",
        )
    ],
    anchors=["cv4pve-diag:WG0041"],
    pve=f"{_PC} parse_pct_config (lxc.* lines) + valid_lxc_conf_keys",
)
def raw_config(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, cfg in guests_with_config(data, "lxc"):
        if not cfg.raw_lxc_keys:  # parsing found neither ``lxc`` nor an ``lxc.*`` key: nothing to list
            continue
        entries = raw_lxc(raw)
        if entries:
            keys = list(dict.fromkeys(k for k, _ in entries))
            out.append(
                _ct(data, "CT_RAW_LXC_CONFIG", vmid, g, f"has raw LXC entries: {', '.join(keys)}", {"lxc": entries})
            )
    return out


@check(
    "guests",
    codes=[
        Code(
            "CT_SWAP_DISABLED",
            "info",
            "Container swap set to 0",
            "swap is 0 (pve-container's default is 512 MiB): under memory pressure the kernel's OOM killer ends "
            "processes in the container instead of swapping.",
            "If the workload can tolerate swap, give it some: GUI the CT > Resources > Swap, or pct set <vmid> "
            "--swap 512 (applies live).",
        ),
        Code(
            "CT_NO_HOSTNAME",
            "info",
            "Container without hostname",
            "hostname is unset: the container calls itself CT<vmid>, which says nothing in logs and monitoring.",
            "Set one: GUI the CT > DNS > Hostname, or pct set <vmid> --hostname <name>.",
        ),
    ],
    anchors=["cv4pve-diag:IG0013", "cv4pve-diag:IG0014"],
    pve=f"{_PC} confdesc swap (default 512) + hostname",
)
def resources(data: ClusterData, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for vmid, g, raw, _cfg in guests_with_config(data, "lxc"):
        if "swap" in raw and str(raw["swap"]).strip() == "0":
            out.append(_ct(data, "CT_SWAP_DISABLED", vmid, g, "has no swap (swap=0)", {"swap": 0}))
        if not str(raw.get("hostname") or "").strip():
            out.append(_ct(data, "CT_NO_HOSTNAME", vmid, g, "has no hostname", {"hostname": None}))
    return out
