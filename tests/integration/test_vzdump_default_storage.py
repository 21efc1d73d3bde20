"""A backup job without storage writes to each node's vzdump default (/etc/vzdump.conf's storage, else 'local';
pve-manager PVE/VZDump.pm new + get_storage_param): the checks judge that storage, through the MCP server and a
real proxmoxer over HTTPS against pvesim, on PVE 8 and 9; pvesim's vzdump runs there and fails the task, not
the call, on a storage it cannot use."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from proxmoxer import ResourceException

from pvesim.server import SimServer
from tests.conftest import wait_task
from tests.integration.pve import api
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


def _defaulting_sim(start_sim: Any, version: str) -> SimServer:
    """The demo with its nightly job stripped of its storage; pve3's vzdump.conf names the ISO share (content
    iso,vztmpl), pve2's the PBS storage, pve1 has none (so 'local')."""
    sim: SimServer = start_sim("demo", version=version)
    with sim.sim.mutate() as c:
        job = next(j for j in c.backup_jobs if j["id"] == "backup-nightly")
        job.pop("storage")
        c.nodes["pve3"].vzdump_conf["storage"] = "nfs-iso"
        c.nodes["pve2"].vzdump_conf["storage"] = "pbs-main"
    return sim


@pytest.mark.parametrize("version", ["9.1.2", "8.4.14"])
async def test_a_job_without_storage_is_judged_on_each_nodes_vzdump_default(
    start_sim: Any, server_for: Any, version: str
) -> None:
    sim = _defaulting_sim(start_sim, version)
    async with Client(server_for(sim)) as c:
        result = await c.call_tool(
            "check_cluster_health", {"detail": True, "areas": ["storage", "backups"], "limit": 200}
        )
    assert result.is_error is False, result.content[0].text
    report = plain(result.structured_content)
    wrong = [f for f in report["findings"] if f["code"] == "STORAGE_BACKUP_TARGET_WRONG_CONTENT"]
    assert [(f["subject"]["id"], f["severity"]) for f in wrong] == [("nfs-iso", "critical")]
    assert wrong[0]["evidence"]["from_vzdump_default"] == {"backup-nightly": ["pve3"]}
    # pve3's refusal hides the retention vzdump would use there: a gap for backups, not a clean bill
    gaps = [f for f in report["findings"] if f["code"] == "DATA_INCOMPLETE"]
    assert any("vzdump defaults of pve3" in f["message"] for f in gaps), gaps
    assert report["complete"] is False


async def test_pvesim_vzdump_takes_the_nodes_default_and_fails_the_task_on_a_storage_it_cannot_use(
    start_sim: Any,
) -> None:
    sim = _defaulting_sim(start_sim, "9.1.2")
    pve = api(sim)
    with pytest.raises(ResourceException, match="can't use storage 'nfs-iso' for backups - wrong content type"):
        pve.nodes("pve3").vzdump.defaults.get()  # PVE/API2/VZDump.pm defaults: storage_info refuses it
    assert pve.nodes("pve2").vzdump.defaults.get()["storage"] == "pbs-main"
    assert pve.nodes("pve1").vzdump.defaults.get()["storage"] == "local"
    vmid = next(g["vmid"] for g in pve.cluster.resources.get(type="vm") if g["node"] == "pve3" and not g.get("lock"))
    upid = pve.nodes("pve3").vzdump.post(vmid=vmid)  # the call succeeds: the worker fails
    status = wait_task(pve.nodes("pve3").tasks(upid).status.get)
    assert status["exitstatus"] == (
        "could not get storage information for 'nfs-iso': can't use storage 'nfs-iso' for backups - wrong content type"
    )
    log = [row["t"] for row in pve.nodes("pve3").tasks(upid).log.get()]
    assert log[0] == f"INFO: starting new backup job: vzdump {vmid} --mode snapshot"  # vzdump.conf's is not on it
