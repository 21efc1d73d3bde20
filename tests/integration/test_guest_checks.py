"""VM and container hygiene through the MCP server against pvesim: the demo's planted guest problems are
found with their evidence; pending changes are read per running guest up to pending_probe_limit, and pvesim
answers them as PVE does."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.conftest import wait_task
from tests.integration.pve import api
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

# planted in src/pvesim/scenarios/demo.yaml
PLANTED = {
    ("GUEST_CONFIG_PENDING", "103"),
    ("GUEST_DISK_UNUSED", "109"),
    ("GUEST_OSTYPE_UNSET", "113"),
    ("GUEST_NIC_NOT_VIRTIO", "114"),
    ("GUEST_MAC_DUPLICATE", "114"),
    ("GUEST_MAC_DUPLICATE", "115"),
    ("GUEST_DISK_CACHE_UNSAFE", "115"),
    ("GUEST_CDROM_MOUNTED", "106"),
    ("GUEST_WIN11_NO_UEFI", "110"),
    ("GUEST_WIN11_NO_TPM", "110"),
    ("GUEST_AGENT_NOT_CONFIGURED", "105"),
    ("CT_PRIVILEGED", "123"),
    ("CT_NESTING_WITHOUT_KEYCTL", "124"),
}


async def _guests(mcp: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("check_cluster_health", {"areas": ["guests"], "detail": True})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


async def test_demo_guest_problems_are_found_with_their_evidence(demo_sim: SimServer, server_for: Any) -> None:
    report = await _guests(server_for(demo_sim))
    found = {(f["code"], f["subject"]["id"]): f for f in report["findings"]}
    assert set(found) >= PLANTED, PLANTED - set(found)
    pending = found[("GUEST_CONFIG_PENDING", "103")]["evidence"]["pending"]
    assert pending == {"memory": {"current": "8192", "pending": "12288", "delete": None}}
    assert found[("GUEST_MAC_DUPLICATE", "115")]["evidence"] == {
        "mac": "BC:24:11:3A:10:14",
        "device": "net1",
        "also_used_by": [114],
    }
    # well-kept guests stay quiet: a GUI-made VM on virtio with an agent, an unprivileged container
    assert not [c for c, s in found if s in ("100", "120") and c.startswith(("GUEST_OS", "GUEST_NIC", "CT_"))]
    assert report["complete"] is True


async def test_pending_changes_once_applied_are_no_longer_reported(start_sim: Any, server_for: Any) -> None:
    demo_sim = start_sim("demo")  # its own copy: this test changes the cluster
    with demo_sim.sim.mutate() as cluster:
        g = cluster.guests[103]
        g.apply_pending()  # what a start or an API reboot does (qemu-server vmconfig_apply_pending)
    report = await _guests(server_for(demo_sim))
    assert "103" not in {f["subject"]["id"] for f in report["findings"] if f["code"] == "GUEST_CONFIG_PENDING"}


async def test_pending_reads_are_capped_and_the_rest_is_said(demo_sim: SimServer, server_for: Any) -> None:
    report = await _guests(server_for(demo_sim, thresholds={"pending_probe_limit": 2}))
    skipped = [f for f in report["findings"] if f["code"] == "CHECK_SKIPPED" and "pending" in f["message"]]
    assert len(skipped) == 1 and "first 2 of" in skipped[0]["message"]
    # 103 is the third running guest by vmid (100, 101, 102, 103 ...): not read, so not judged
    assert ("GUEST_CONFIG_PENDING", "103") not in {(f["code"], f["subject"]["id"]) for f in report["findings"]}


def test_pvesim_answers_pending_as_pve_does(start_sim: Any) -> None:
    """config merges pending values unless current=1; /pending lists current and pending per key
    (qemu-server API2/Qemu.pm vm_config / vm_pending); an API reboot applies them."""
    pve = api(start_sim("demo"), "root@pam!pvesim")
    vm = pve.nodes("pve1").qemu(103)
    assert str(vm.config.get()["memory"]) == "12288" and str(vm.config.get(current=1)["memory"]) == "8192"
    rows = {r["key"]: r for r in vm.pending.get()}
    assert rows["memory"] == {"key": "memory", "value": "8192", "pending": "12288"}
    assert "pending" not in rows["cores"] and rows["digest"]["value"] == vm.config.get()["digest"]
    upid = vm.status.reboot.post()
    wait_task(pve.nodes("pve1").tasks(upid).status.get)
    assert str(vm.config.get(current=1)["memory"]) == "12288"
    assert not [r for r in vm.pending.get() if "pending" in r or "delete" in r]
