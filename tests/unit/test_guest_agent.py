"""In-guest filesystem-full check and the guest-agent answer parsing, on fixtures shaped like QGA's answers."""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.checks.guest_agent import filesystem_full
from pve_steward.analysis.thresholds import Thresholds, thresholds_from
from pve_steward.errors import PveApiError, PveError, PvePermissionError
from pve_steward.testing import FakeClient
from pve_steward.tools.agent import agent_state, filesystems_of, interfaces_of, os_of
from pve_steward.tools.collect import collect
from tests.unit.pve_fixtures import NOW, cluster_status, data, guest_row, node_row, qemu_config

GiB = 1024**3


def fs(mount: str, used: float, total: float = 100, kind: str = "ext4", dev: str = "/dev/sda1") -> dict[str, Any]:
    """One guest-get-fsinfo entry (qga/qapi-schema.json GuestFilesystemInfo)."""
    return {
        "name": dev.rsplit("/", 1)[-1],
        "mountpoint": mount,
        "type": kind,
        "used-bytes": int(used * GiB),
        "total-bytes": int(total * GiB),
        "disk": [{"bus-type": "scsi", "bus": 0, "target": 0, "unit": 0, "dev": dev}],
    }


def _data(fsinfo: dict[int, Any]):  # type: ignore[no-untyped-def]
    d = data(
        cluster_status=cluster_status({"pve1": True}),
        resources=[node_row("pve1")] + [guest_row(v, "pve1") for v in fsinfo],
    )
    d.agent_fsinfo = fsinfo
    return d


def test_full_filesystem_warns_and_a_nearly_exhausted_one_is_critical() -> None:
    found = filesystem_full(
        _data({104: [fs("/", 30), fs("/var", 92)], 105: [fs("C:\\", 98, kind="NTFS")]}), Thresholds()
    )
    got = {(f.subject.id, f.evidence["mountpoint"], f.severity.value) for f in found}
    assert got == {("104", "/var", "warning"), ("105", "C:\\", "critical")}
    assert {f.code for f in found} == {"GUEST_FS_FULL"}


def test_no_finding_below_the_threshold_for_media_or_without_sizes() -> None:
    fsinfo = {
        104: [fs("/", 89.9), fs("/media/cdrom", 100, kind="iso9660")],
        106: [{"name": "sda1", "mountpoint": "/", "type": "ext4", "disk": []}],  # an agent without sizes
        107: None,
    }
    assert filesystem_full(_data(fsinfo), Thresholds()) == []


def test_the_threshold_is_configurable() -> None:
    d = _data({104: [fs("/", 80)]})
    assert filesystem_full(d, Thresholds()) == []
    assert len(filesystem_full(d, thresholds_from({"guest_fs_warning_pct": 75}))) == 1


def test_a_filesystem_mounted_twice_is_reported_once() -> None:
    assert len(filesystem_full(_data({104: [fs("/var", 95), fs("/var", 95)]}), Thresholds())) == 1


def test_agent_answers_parse_for_linux_windows_and_containers() -> None:
    qga = [
        {"name": "lo", "hardware-address": "00:00:00:00:00:00",
         "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}]},
        {"name": "eth0", "hardware-address": "bc:24:11:3a:10:04",
         "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "10.0.1.4", "prefix": 24},
                          {"ip-address-type": "ipv6", "ip-address": "fe80::1", "prefix": 64}]},
        {"name": "Loopback Pseudo-Interface 1"},  # Windows: no MAC, no addresses listed
    ]  # fmt: skip
    rows = interfaces_of(qga)
    assert [(r.name, r.mac, r.addresses) for r in rows] == [
        ("lo", "00:00:00:00:00:00", ["127.0.0.1/8"]),
        ("eth0", "bc:24:11:3a:10:04", ["10.0.1.4/24", "fe80::1/64"]),
        ("Loopback Pseudo-Interface 1", None, []),
    ]
    lxc = [{"name": "eth0", "hwaddr": "bc:24:11:3a:20:00", "inet": "10.0.1.53/24",
            "ip-addresses": [{"ip-address-type": "inet", "ip-address": "10.0.1.53", "prefix": 24}]}]  # fmt: skip
    assert interfaces_of(lxc)[0].addresses == ["10.0.1.53/24"] and interfaces_of(lxc)[0].mac == "bc:24:11:3a:20:00"
    assert interfaces_of(None) == []
    osinfo = os_of({"id": "debian", "pretty-name": "Debian GNU/Linux 13 (trixie)", "kernel-release": "6.12"})
    assert (osinfo.id, osinfo.pretty_name, osinfo.kernel_release) == ("debian", "Debian GNU/Linux 13 (trixie)", "6.12")
    [root] = filesystems_of([fs("/", 25)])
    assert (root.mountpoint, root.used_percent, root.devices) == ("/", 25.0, ["/dev/sda1"])


def test_agent_state_from_pve_messages() -> None:
    assert agent_state(PveError("No QEMU guest agent configured", status=500), 100) == "not_configured"
    assert agent_state(PveError("VM 100 is not running", status=500), 100) == "guest_stopped"
    assert agent_state(PveError("QEMU guest agent is not running", status=500), 100) == "not_running"
    assert agent_state(PveError("got timeout", status=500), 100) is None


# ---------------------------------------------------------------- the collector's fsinfo reads

AGENT_OK = {"result": {"version": "9.2.0", "supported_commands": []}}


def _fake(fsinfo: Any) -> Any:
    fake = FakeClient()
    fake.on("GET", "/version", {"version": "9.1.2", "release": "9.1"})
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True}))
    fake.on("GET", "/cluster/resources", [node_row("pve1"), guest_row(104, "pve1"), guest_row(105, "pve1")])
    fake.on("GET", "/storage", [])
    fake.on("GET", "/nodes/pve1/qemu/{vmid}/config", qemu_config("vm", agent="1"))
    fake.on("GET", "/nodes/pve1/qemu/{vmid}/agent/info", AGENT_OK)
    fake.on("GET", "/nodes/pve1/qemu/{vmid}/agent/get-fsinfo", fsinfo)
    return fake


async def _collect(fake: Any, limit: int = 10) -> Any:
    return await collect(fake, NOW, ["guests"], agent_probe_limit=limit)


@pytest.mark.anyio
async def test_collector_reads_fsinfo_of_answering_agents_only_within_the_limit() -> None:
    fake = _fake({"result": [fs("/", 95)]})
    d = await _collect(fake, limit=1)
    assert set(d.agent_fsinfo) == {104}
    assert [c[1] for c in fake.calls if c[1].endswith("get-fsinfo")] == ["/nodes/pve1/qemu/104/agent/get-fsinfo"]
    assert any(m.optional and "beyond the first 1" in m.what for m in d.missing)


@pytest.mark.anyio
async def test_collector_fsinfo_denied_or_failing_is_a_skipped_check() -> None:
    d = await _collect(_fake(PvePermissionError("Permission check failed", status=403)))
    assert d.agent_fsinfo == {}
    [gap] = [m for m in d.missing if "filesystems" in m.what]
    assert gap.optional and gap.status == 403 and "VM.GuestAgent.Audit" in gap.what
    d = await _collect(_fake(PveApiError("guest-get-fsinfo has been disabled", status=500)))
    [gap] = [m for m in d.missing if "filesystems" in m.what]
    assert gap.optional and "2 VM(s)" in gap.what and "disabled" in gap.error
    d = await _collect(_fake(PveApiError("QEMU guest agent is not running", status=500)))
    assert d.agent_fsinfo == {} and not [m for m in d.missing if "filesystems" in m.what]
