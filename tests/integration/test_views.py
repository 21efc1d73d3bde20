"""The typed read views against the demo cluster: each returns what the scenario planted."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


async def read(mcp: Any, tool: str, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    body: dict[str, Any] = plain(result.structured_content)  # marked cluster text as plain strings
    return body


async def test_node_views(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim, "root@pam!pvesim")
    disks = await read(mcp, "node_disks", node="pve3")
    assert disks["failing"] == ["/dev/sdb"]
    zfs = await read(mcp, "node_zfs_pools", node="pve3")
    assert zfs["degraded"] == ["tank"] and 0 < zfs["pools"][0]["used_fraction"] < 1
    certs = await read(mcp, "node_certificates", node="pve1")
    assert certs["expiring_within_30_days"] == ["pveproxy-ssl.pem"]
    assert all("pem" not in c for c in certs["items"])
    repos = await read(mcp, "node_repositories", node="pve2")
    assert repos["enterprise_without_subscription"] is True and repos["test_enabled"] is False
    updates = await read(mcp, "node_updates", node="pve2")
    assert updates["count"] == len(updates["items"]) > 0 and updates["kernel_update"] is True
    nodes = await read(mcp, "list_nodes")
    assert [n["name"] for n in nodes["items"]] == ["pve1", "pve2", "pve3"] and nodes["offline"] == []
    members = await read(mcp, "cluster_membership")
    assert members["quorate"] is True and [m["nodeid"] for m in members["members"]] == [1, 2, 3]
    options = await read(mcp, "cluster_options")
    assert options["migration_type"] == "secure" and options["ha_shutdown_policy"] == "conditional"


async def test_subscription_key_is_masked(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    with sim.sim.mutate() as cluster:
        cluster.nodes["pve1"].subscription = {
            "status": "active",
            "level": "c",
            "key": "pve2c-0123456789",
            "productname": "Proxmox VE Community",
            "nextduedate": "2027-06-01",
        }
    sub = await read(server_for(sim, "root@pam!pvesim"), "node_subscription", node="pve1")
    assert sub["status"] == "active" and sub["key_suffix"] == "6789"
    assert "0123456789" not in str(sub)


async def test_backup_views(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim, "root@pam!pvesim")
    jobs = await read(mcp, "list_backup_jobs")
    nightly = next(j for j in jobs["items"] if j["id"] == "backup-nightly")
    assert nightly["selection"] == "all except 114,9000" and nightly["interval_hours"] == 24.0
    job = await read(mcp, "get_backup_job", id="backup-nightly")
    covered = {g["vmid"] for g in job["covers"]}
    assert 114 not in covered and 9000 not in covered and 100 in covered
    uncovered = await read(mcp, "guests_without_backup_job")
    assert [g["vmid"] for g in uncovered["items"]] == [114, 9000]  # BackupInfo.pm lists templates too
    backups = await read(mcp, "list_backups", limit=5)
    ages = [b["age_hours"] for b in backups["items"]]
    assert ages == sorted(ages) and backups["page"]["next_offset"] == 5 and not backups["incomplete"]
    one = await read(mcp, "list_backups", vmid=100)
    assert one["items"] and {b["vmid"] for b in one["items"]} == {100}
    async with Client(mcp) as c:
        missing = await c.call_tool("get_backup_job", {"id": "nope"})
    assert missing.is_error and "no backup job 'nope'" in missing.content[0].text


async def test_storage_ha_guest_and_task_views(demo_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(demo_sim, "root@pam!pvesim")
    storage = await read(mcp, "list_storage", content="backup")
    assert {s["storage"] for s in storage["items"]} == {"local", "pbs-main"}
    shared = next(s for s in storage["items"] if s["storage"] == "pbs-main")
    assert shared["shared"] is True and len(shared["usage"]) == 1
    # /nodes/{n}/storage lists every storage on every node, enabled 0 where it is not configured: no usage row
    every = {s["storage"]: s for s in (await read(mcp, "list_storage"))["items"]}
    assert [u["node"] for u in every["local-zfs"]["usage"]] == ["pve1", "pve3"]
    assert every["nfs-archive"]["enabled"] is False and every["nfs-archive"]["usage"] == []
    content = await read(mcp, "storage_content", node="pve1", storage="pbs-main", limit=2)
    assert content["page"]["returned"] == 2 and content["items"][0]["notes"]
    replication = await read(mcp, "list_replication_jobs")
    assert replication["failing"] == ["112-0"] and "zfs snapshot" in replication["items"][0]["error"]
    ha = await read(mcp, "ha_status")
    assert (
        ha["master"] == "pve2"
        and ha["quorate"] is True
        and {s["sid"] for s in ha["services"]}
        == {
            "vm:101",
            "vm:102",
            "ct:122",
        }
    )
    rules = await read(mcp, "list_ha_rules")
    strict = next(r for r in rules["items"] if r["name"] == "ha-db")
    assert strict["strict"] is True and strict["resources"] == ["vm:102"]
    resources = await read(mcp, "list_ha_resources")
    assert next(r for r in resources["items"] if r["sid"] == "vm:102")["max_restart"] == 2
    snaps = await read(mcp, "list_snapshots", vmid=113)
    assert snaps["items"][0]["name"] == "before_migration" and snaps["items"][0]["age_days"] >= 119
    tasks = await read(mcp, "list_tasks", limit=1)
    upid = tasks["items"][0]["upid"]
    log = await read(mcp, "task_log", upid=upid, start=0, limit=1)
    assert len(log["lines"]) == 1 and log["total"] >= 1


async def test_ha_groups_on_pve8(start_sim: Any, server_for: Any) -> None:
    """PVE 8 has HA groups and no rules endpoint: the view says what it read."""
    import pvesim

    data = pvesim.load_scenario("demo")
    data["ha"]["rules"] = {}
    data["ha"]["groups"] = {"prefer-pve1": {"nodes": "pve1:2,pve2", "restricted": 1}}
    sim = start_sim(data, version="8.4.1")
    rules = await read(server_for(sim, "root@pam!pvesim"), "list_ha_rules")
    assert rules["source"] == ["groups"] and rules["incomplete"] == []
    assert rules["items"] == [
        {
            "name": "prefer-pve1",
            "kind": "group",
            "resources": [],
            "nodes": ["pve1:2", "pve2"],
            "strict": True,
            "affinity": None,
            "enabled": True,
            "comment": None,
        }
    ]
