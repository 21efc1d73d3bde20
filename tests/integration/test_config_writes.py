"""Configuration writes against pvesim: each changes exactly what it previewed, and is read back."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from proxmoxer import ResourceException

import pvesim
from pvesim.scenario import DEFAULT_TOKENS
from pvesim.state import ReplicationJob
from tests.integration.pve import api, control

pytestmark = pytest.mark.anyio


async def run(c: Client, tool: str, **args: Any) -> dict[str, Any]:
    """Preview, then confirm; return the final result."""
    first = await c.call_tool(tool, args)
    assert not first.is_error, (tool, first.content[0].text)
    preview: dict[str, Any] = first.structured_content  # type: ignore[assignment]
    assert preview["status"] == "preview"
    second = await c.call_tool(tool, {**args, "confirm_token": preview["confirm_token"]})
    assert not second.is_error, (tool, second.content[0].text)
    result: dict[str, Any] = second.structured_content  # type: ignore[assignment]
    return result


async def refused(c: Client, tool: str, **args: Any) -> str:
    result = await c.call_tool(tool, args)
    assert result.is_error, (tool, result.structured_content)
    return str(result.content[0].text)


async def test_guest_settings(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    was_on = sim.cluster.guests[103].config.get("onboot") == "1"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        tags = await run(c, "guest_set_tags", vmid=100, tags=["web", "prod"])
        notes = await run(c, "guest_set_notes", vmid=113, notes="Archive VM. Owner: CRM team.")
        onboot = await run(c, "guest_set_onboot", vmid=103, enabled=not was_on)
        same = await refused(c, "guest_set_onboot", vmid=103, enabled=not was_on)
        locked = await refused(c, "guest_set_onboot", vmid=111, enabled=False)
        bad_tag = await c.call_tool("guest_set_tags", {"vmid": 100, "tags": ["no spaces"]})
    assert tags["status"] == notes["status"] == onboot["status"] == "completed"
    assert "[prod, web]" in tags["summary"]
    config = sim.cluster.guests
    assert sorted(config[100].config["tags"].split(";")) == ["prod", "web"]
    assert config[113].config["description"] == "Archive VM. Owner: CRM team."
    assert config[103].config["onboot"] == ("0" if was_on else "1")
    assert "already" in same
    assert "locked ('backup')" in locked
    assert bad_tag.is_error and "tags" in bad_tag.content[0].text
    # the old notes (which try to instruct an assistant) were never echoed into the preview text
    assert "ignore all previous instructions" not in str(notes)


async def test_tags_are_stored_as_pve_stores_them_and_guarded_as_pve_guards_them(
    start_sim: Any, server_for: Any
) -> None:
    """pve-guest-common GuestHelpers.pm get_unique_tags lower-cases and sorts tags (datacenter.cfg tag-style may
    keep case and order); assert_tag_permissions refuses a registered tag, or any unlisted tag under
    user-tag-access 'list', to a token without Sys.Modify on /. The read-back expects what PVE stores."""
    sim = start_sim("demo")
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        upper = await run(c, "guest_set_tags", vmid=100, tags=["Web", "PROD"])
    sim.cluster.options["tag-style"] = {"case-sensitive": 1, "ordering": "config"}
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:  # a fresh read of the options
        kept = await run(c, "guest_set_tags", vmid=103, tags=["Web", "PROD"])
    sim.cluster.options["registered-tags"] = ["prod"]
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        sim.cluster.options["user-tag-access"] = {"user-allow": "list", "user-allow-list": ["web", "mail"]}
        # VM 104 has tags mail and prod: removing one is a change as adding one is
        registered = await refused(c, "guest_set_tags", vmid=104, tags=["mail"])
        unlisted = await refused(c, "guest_set_tags", vmid=104, tags=["db", "mail", "prod"])
        listed = await run(c, "guest_set_tags", vmid=104, tags=["mail", "prod", "web"])
    assert upper["status"] == "completed" and sim.cluster.guests[100].config["tags"] == "prod;web"
    assert "[prod, web]" in upper["summary"]
    assert kept["status"] == "completed" and sim.cluster.guests[103].config["tags"] == "PROD;Web"
    assert "changing tag 'prod' needs Sys.Modify on /" in registered
    assert "changing tag 'db' needs Sys.Modify on /" in unlisted
    assert listed["status"] == "completed"
    with pytest.raises(ResourceException, match=r"Sys\.Modify for modifying tag 'db'"):
        api(sim, "operator@pve!mcp").nodes(sim.cluster.guests[104].node).qemu(104).config.put(tags="db;mail;prod;web")


async def test_a_config_write_is_refused_when_the_guest_changed(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        first = (await c.call_tool("guest_set_tags", {"vmid": 104, "tags": ["mail"]})).structured_content
        control(sim, "guests/104", {"set": {"tags": "changed-elsewhere"}})
        second = await c.call_tool(
            "guest_set_tags", {"vmid": 104, "tags": ["mail"], "confirm_token": first["confirm_token"]}
        )
    assert second.is_error and "state changed since the preview" in second.content[0].text
    assert sim.cluster.guests[104].config["tags"] == "changed-elsewhere"


async def test_stop_a_task_then_clear_the_lock_it_left(start_sim: Any, server_for: Any) -> None:
    """A backup stopped half way leaves its 'backup' lock, exactly like PVE. Clearing it takes root@pam's own
    login: guest_unlock says so and gives the node's command, even with root@pam's token."""
    sim = start_sim("demo", speed=0.01)
    root = api(sim)
    upid = root.nodes("pve1").vzdump.post(vmid=104, storage="local", mode="snapshot")
    assert sim.cluster.guests[104].lock == "backup"
    async with Client(server_for(sim, "root@pam!pvesim", tier="admin")) as c:
        stopped = await run(c, "task_stop", upid=upid)
        again = await refused(c, "task_stop", upid=upid)
        unlock = await refused(c, "guest_unlock", vmid=104)
    assert stopped["status"] == "completed" and "half done" in " ".join(stopped["risks"])
    status = root.nodes("pve1").tasks(upid).status.get()
    assert status["status"] == "stopped" and status["exitstatus"] == "interrupted by signal"
    assert "already ended" in again
    assert "qm unlock 104" in unlock and "not even root@pam's" in unlock
    assert sim.cluster.guests[104].lock == "backup"


async def test_unlock_refuses_while_the_task_runs_and_for_non_root_tokens(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=0.01)
    api(sim).nodes("pve1").vzdump.post(vmid=104, storage="local")
    async with Client(server_for(sim, "root@pam!pvesim", tier="admin")) as c:
        busy = await refused(c, "guest_unlock", vmid=104)
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:
        not_root = await refused(c, "guest_unlock", vmid=111)
        not_locked = await refused(c, "guest_unlock", vmid=100)
    assert "still running" in busy and "holds the lock" in busy
    assert "only root@pam" in not_root and "qm unlock 111" in not_root and sim.cluster.guests[111].lock == "backup"
    assert "not locked" in not_locked


async def test_ha_state_change_is_carried_out_by_the_ha_manager(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=200)
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        stopped = await run(c, "ha_set_state", vmid=101, state="stopped")
        started = await run(c, "ha_set_state", vmid=101, state="started")
        same = await refused(c, "ha_set_state", vmid=101, state="started")
        not_ha = await refused(c, "ha_set_state", vmid=100, state="stopped")
    assert stopped["status"] == "completed" and ":qmshutdown:101:" in stopped["task"]["upid"]
    assert started["task"]["state"] == "ok" and sim.cluster.guests[101].status == "running"
    assert sim.cluster.ha_resources["vm:101"].state == "started"
    assert "started -> started" in same
    assert "not HA-managed" in not_ha


async def test_ha_state_of_a_service_in_error_takes_only_disabled(start_sim: Any, server_for: Any) -> None:
    """pve-ha-manager API2/HA/Resources.pm update dies in check_service_state for a service in the error state
    unless the request is 'disabled': the preview says so, and pvesim refuses the same way."""
    sim = start_sim("demo")
    sim.cluster.ha_resources["vm:101"].crm_state = "error"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        stopped = await refused(c, "ha_set_state", vmid=101, state="stopped")
        disabled = (await c.call_tool("ha_set_state", {"vmid": 101, "state": "disabled"})).structured_content
    assert "in the HA error state" in stopped and "must be disabled and fixed first" in stopped
    assert disabled is not None and disabled["status"] == "preview"
    with pytest.raises(ResourceException, match="in error state, must be disabled and fixed first"):
        api(sim).cluster.ha.resources("vm:101").put(state="stopped")
    api(sim).cluster.ha.resources("vm:101").put(state="disabled")
    assert sim.cluster.ha_resources["vm:101"].state == "disabled"


async def test_backup_and_replication_jobs(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:
        no_priv = await refused(c, "backup_job_set_enabled", id="backup-nightly", enabled=False)
        replication = await run(c, "replication_set_enabled", job="112-0", enabled=False)
    async with Client(server_for(sim, "root@pam!pvesim", tier="admin")) as c:
        preview = (
            await c.call_tool("backup_job_set_enabled", {"id": "backup-nightly", "enabled": False})
        ).structured_content
        disabled = await run(c, "backup_job_set_enabled", id="backup-nightly", enabled=False)
    assert "lacks Sys.Modify on /" in no_priv
    assert "no enabled backup job" in " ".join(preview["risks"])
    assert disabled["status"] == "completed"
    job = next(j for j in sim.cluster.backup_jobs if j["id"] == "backup-nightly")
    assert int(job["enabled"]) == 0
    assert replication["status"] == "completed" and sim.cluster.replication["112-0"].disable is True


STORAGE_ADMIN = [{"path": "/", "role": "PVEAuditor"}, {"path": "/storage", "role": "PVEDatastoreAdmin"}]


@pytest.mark.parametrize("version", ["8.4.14", "9.1.2"])
async def test_replication_set_enabled_checks_the_privilege_of_the_release(
    start_sim: Any, server_for: Any, version: str
) -> None:
    """PUT /cluster/replication/{id} needs Datastore.Allocate on /storage on PVE 8 (the 8.4 schema) and
    VM.Replicate on /vms/<vmid> on PVE 9 (pve-manager c81fe5cc): the tool checks the one its cluster asks."""
    data = pvesim.load_scenario("demo")
    data["tokens"] = [*DEFAULT_TOKENS, {"id": "storage@pve!mcp", "user_acl": STORAGE_ADMIN, "acl": STORAGE_ADMIN}]
    sim = start_sim(data, version=version)
    pve8 = version.startswith("8")
    async with Client(server_for(sim, "storage@pve!mcp", tier="admin")) as c:
        storage = await (run if pve8 else refused)(c, "replication_set_enabled", job="112-0", enabled=False)
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:
        operator = await (refused if pve8 else run)(c, "replication_set_enabled", job="112-0", enabled=pve8)
    if pve8:
        assert storage["status"] == "completed" and "lacks Datastore.Allocate on /storage" in operator
    else:
        assert "lacks VM.Replicate on /vms/112" in storage and operator["status"] == "completed"
    assert sim.cluster.replication["112-0"].disable is True
    denied = "Datastore.Allocate" if pve8 else "VM.Replicate"
    with pytest.raises(ResourceException, match=f"Permission check failed.*{denied}"):  # the sim enforces it too
        api(sim, "auditor@pve!mcp").cluster.replication("112-0").put(disable=0)


async def test_replication_set_enabled_binds_the_digest_of_the_jobs_own_read(start_sim: Any, server_for: Any) -> None:
    """ReplicationConfig.pm: the list's rows carry no digest (SectionConfig keeps it at the top level), the
    job's own GET does; the confirmation is bound to it, so a change to replication.cfg since the preview
    (another job here) is refused instead of written over."""
    sim = start_sim("demo")
    pve = api(sim)
    assert all("digest" not in row for row in pve.cluster.replication.get())
    assert len(pve.cluster.replication("112-0").get()["digest"]) == 40
    args = {"job": "112-0", "enabled": False}
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:
        preview = (await c.call_tool("replication_set_enabled", args)).structured_content
        with sim.sim.mutate() as cl:
            cl.replication["100-0"] = ReplicationJob("100-0", 100, "pve3")
        changed = await refused(c, "replication_set_enabled", **args, confirm_token=preview["confirm_token"])
    assert "changed" in changed and sim.cluster.replication["112-0"].disable is False


async def test_pve_refuses_skiplock_for_other_users(start_sim: Any) -> None:
    """The simulator keeps PVE's rule that only root@pam itself may skip a lock: no API token, not even root@pam's
    (the caller is 'root@pam!name' there: pve-access-control verify_token; proxmox/qemu-server issue 10)."""
    from proxmoxer.core import ResourceException

    sim = start_sim("demo")
    operator = api(sim, "operator@pve!mcp")
    with pytest.raises(ResourceException, match="Only root may use this option"):
        operator.nodes("pve3").qemu(111).config.put(delete="lock", skiplock=1)
    with pytest.raises(ResourceException, match="Only root may use this option"):
        api(sim).nodes("pve3").qemu(111).config.put(delete="lock", skiplock=1)
    with pytest.raises(ResourceException, match="Only root may use this option"):
        api(sim).nodes("pve3").qemu(111).status.start.post(skiplock=1)
    assert sim.cluster.guests[111].lock == "backup"
