"""Two-phase writes through a real MCP client session, proxmoxer and HTTPS against pvesim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import ElicitResult
from proxmoxer import ResourceException

from pve_steward.security.audit import verify
from pve_steward.server import build_server
from pvesim.server import SimServer
from tests.conftest import wait_task
from tests.integration.pve import api, control
from tests.untrusted import is_marked, plain

pytestmark = pytest.mark.anyio

OPERATOR_WRITES = {
    "guest_start",
    "guest_shutdown",
    "guest_reboot",
    "guest_suspend",
    "guest_resume",
    "snapshot_create",
    "backup_now",
    "guest_migrate",
    "ha_migrate",
    "ha_relocate",
}
ADMIN_WRITES = {"guest_stop", "guest_reset", "snapshot_delete", "snapshot_rollback"}


def audit_records(path: Path) -> list[dict[str, Any]]:
    assert verify(path).ok
    return [json.loads(line) for line in path.read_text().splitlines()]


def guest(sim: SimServer, vmid: int) -> Any:
    return sim.cluster.guests[vmid]


async def preview(c: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await c.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    body: dict[str, Any] = result.structured_content  # type: ignore[assignment]
    assert body["status"] == "preview" and body["confirm_token"]
    return body


async def confirm(c: Client, tool: str, token: str, **args: Any) -> Any:
    return await c.call_tool(tool, {**args, "confirm_token": token})


async def test_tiers_decide_which_writes_exist(demo_sim: SimServer, server_for: Any) -> None:
    async def names(**settings: Any) -> set[str]:
        async with Client(server_for(demo_sim, "operator@pve!mcp", **settings)) as c:
            return {t.name for t in (await c.list_tools()).tools}

    default = await names()
    assert not default & (OPERATOR_WRITES | ADMIN_WRITES)
    operator = await names(tier="operator")
    assert operator >= OPERATOR_WRITES and not operator & ADMIN_WRITES
    assert await names(tier="admin") >= (OPERATOR_WRITES | ADMIN_WRITES)
    assert not (await names(tier="admin", read_only=True)) & (OPERATOR_WRITES | ADMIN_WRITES)

    async with Client(server_for(demo_sim, "operator@pve!mcp")) as c:
        result = await c.call_tool("guest_stop", {"vmid": 100})
    assert result.is_error and "guest_stop is not available: it needs tier admin" in result.content[0].text


async def test_write_annotations_are_honest(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim, "operator@pve!mcp", tier="admin")) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    for name in OPERATOR_WRITES | ADMIN_WRITES:
        a = tools[name].annotations
        assert a is not None and a.read_only_hint is False, name
        assert tools[name].output_schema is not None
        props = tools[name].input_schema["properties"]
        assert "confirm_token" in props and "human" not in props, name
    assert tools["guest_stop"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["snapshot_rollback"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["guest_start"].annotations.destructive_hint is False  # type: ignore[union-attr]
    assert tools["snapshot_create"].annotations.idempotent_hint is False  # type: ignore[union-attr]


async def test_preview_then_confirm_runs_the_task_and_reports_progress(
    start_sim: Any, server_for: Any, tmp_path: Path
) -> None:
    sim = start_sim("demo", speed=50)
    mcp = server_for(sim, "operator@pve!mcp", tier="operator")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(mcp) as c:
        body = await preview(c, "guest_shutdown", vmid=100)
        assert plain(body["target"]) == {
            "vmid": 100,
            "name": "web01",
            "type": "qemu",
            "node": "pve1",
            "sid": None,
            "id": None,
        }
        assert plain(body["target"])["name"] == "web01" and is_marked(body["target"], "name")
        assert all(check["ok"] for check in body["checks"]) and body["effects"] and body["risks"]
        assert guest(sim, 100).status == "running"  # a preview changes nothing
        done = await c.call_tool(
            "guest_shutdown", {"vmid": 100, "confirm_token": body["confirm_token"]}, progress_callback=on_progress
        )
        replay = await confirm(c, "guest_shutdown", body["confirm_token"], vmid=100)
    assert not done.is_error, done.content[0].text
    result = done.structured_content
    assert result["status"] == "completed" and result["task"]["state"] == "ok"
    assert result["task"]["upid"].startswith("UPID:pve1:") and ":qmshutdown:100:" in result["task"]["upid"]
    assert result["task"]["log_tail"] and result["confirm_token"] is None
    assert guest(sim, 100).status == "stopped"
    assert progress and any("qmshutdown" in (m or "") for _, _, m in progress)
    assert replay.is_error and "already used" in replay.content[0].text

    records = audit_records(tmp_path / "audit.jsonl")
    writes = [r for r in records if r.get("tool") == "guest_shutdown"]
    assert [(r["phase"], r["outcome"]) for r in writes] == [
        ("preview", "ok"),
        ("execute", "ok"),
        ("execute", "refused"),
    ]
    executed = writes[1]
    assert executed["upid"] == result["task"]["upid"] and executed["task_state"] == "ok"
    assert executed["target"]["node"] == "pve1" and executed["pve_token"] == "operator@pve!mcp"
    assert "already used" in writes[2]["reason"]


async def test_failed_task_is_reported_as_failed(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    control(sim, "task-failures", {"rules": [{"type": "qmstart", "id": "113", "error": "start failed: OOM"}]})
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = await preview(c, "guest_start", vmid=113)
        done = await confirm(c, "guest_start", body["confirm_token"], vmid=113)
    result = done.structured_content
    assert result["status"] == "failed" and result["task"]["state"] == "failed"
    assert "OOM" in plain(result["task"]["exitstatus"]) and "FAILED" in result["next_step"]
    assert guest(sim, 113).status == "stopped"
    last = audit_records(tmp_path / "audit.jsonl")[-1]
    assert last["outcome"] == "task_failed" and last["task_state"] == "failed"


async def test_a_changed_guest_invalidates_the_preview(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = await preview(c, "snapshot_create", vmid=104, name="pre_upgrade")
        control(sim, "guests/104", {"set": {"memory": 16384}})  # another admin edits the VM meanwhile
        done = await confirm(c, "snapshot_create", body["confirm_token"], vmid=104, name="pre_upgrade")
    assert done.is_error and "state changed since the preview" in done.content[0].text
    assert "pre_upgrade" not in guest(sim, 104).snapshots
    last = audit_records(tmp_path / "audit.jsonl")[-1]
    assert last["outcome"] == "refused" and last["phase"] == "execute"


async def test_a_token_only_confirms_its_own_parameters(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = await preview(c, "snapshot_create", vmid=104, name="snap_a")
        other_guest = await confirm(c, "snapshot_create", body["confirm_token"], vmid=100, name="snap_a")
        other_name = await confirm(c, "snapshot_create", body["confirm_token"], vmid=104, name="snap_b")
        other_op = await confirm(c, "guest_shutdown", body["confirm_token"], vmid=104)
        forged = await confirm(c, "snapshot_create", body["confirm_token"][:-4] + "AAAA", vmid=104, name="snap_a")
        fine = await confirm(c, "snapshot_create", body["confirm_token"], vmid=104, name="snap_a")
    assert "parameters differ from the preview (vmid)" in other_guest.content[0].text
    assert "parameters differ from the preview (name)" in other_name.content[0].text
    assert "issued for 'snapshot_create', not 'guest_shutdown'" in other_op.content[0].text
    assert "altered" in forged.content[0].text
    assert fine.structured_content["status"] == "completed"
    assert set(guest(sim, 104).snapshots) >= {"snap_a"} and "snap_b" not in guest(sim, 104).snapshots


async def test_expiry_follows_the_injected_clock(start_sim: Any, settings_for: Any) -> None:
    sim = start_sim("demo")
    now = [1_900_000_000.0]
    mcp = build_server(settings_for(sim, "operator@pve!mcp", tier="operator", confirm_ttl=60), clock=lambda: now[0])
    async with Client(mcp) as c:
        body = await preview(c, "guest_reboot", vmid=100)
        now[0] += 61
        late = await confirm(c, "guest_reboot", body["confirm_token"], vmid=100)
    assert late.is_error and "expired (60s lifetime)" in late.content[0].text


async def test_tokens_from_another_server_key_are_refused_but_replicas_share_one(
    start_sim: Any, settings_for: Any, tmp_path: Path
) -> None:
    sim = start_sim("demo")
    key = tmp_path / "confirm.key"
    key.write_bytes(b"0123456789abcdef0123456789abcdef")
    key.chmod(0o600)  # a key file others can read is refused
    replica_a = build_server(settings_for(sim, "operator@pve!mcp", tier="operator", confirm_key_file=key))
    replica_b = build_server(settings_for(sim, "operator@pve!mcp", tier="operator", confirm_key_file=key))
    stranger = build_server(settings_for(sim, "operator@pve!mcp", tier="operator"))
    async with Client(replica_a) as a:
        body = await preview(a, "guest_suspend", vmid=100)
    async with Client(stranger) as s:
        refused = await confirm(s, "guest_suspend", body["confirm_token"], vmid=100)
    async with Client(replica_b) as b:
        done = await confirm(b, "guest_suspend", body["confirm_token"], vmid=100)
    assert refused.is_error and "another server key" in refused.content[0].text
    assert done.structured_content["status"] == "completed"


async def test_tier_is_enforced_behind_registration(start_sim: Any, settings_for: Any, tmp_path: Path) -> None:
    """An admin-tier token presented to an operator server: the tool does not exist, and the handler refuses."""
    from pve_steward.security.audit import AuditLog
    from pve_steward.security.guard import Refused
    from pve_steward.security.tokens import TokenSigner
    from pve_steward.surface.registry import load_registry
    from pve_steward.testing import FakeClient
    from pve_steward.tools.context import AppContext, ToolContext

    sim = start_sim("demo")
    key = tmp_path / "confirm.key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)
    admin = build_server(settings_for(sim, "operator@pve!mcp", tier="admin", confirm_key_file=key))
    operator = build_server(settings_for(sim, "operator@pve!mcp", tier="operator", confirm_key_file=key))
    async with Client(admin) as c:
        body = await preview(c, "guest_stop", vmid=100)
    async with Client(operator) as c:
        result = await confirm(c, "guest_stop", body["confirm_token"], vmid=100)
    assert result.is_error and "guest_stop is not available: it needs tier admin" in result.content[0].text

    registry = load_registry()
    settings = settings_for(sim, "operator@pve!mcp", tier="operator")
    audit = AuditLog(tmp_path / "direct.jsonl")
    app = AppContext(settings=settings, client=FakeClient({}), audit=audit, signer=TokenSigner(b"k" * 32))
    with pytest.raises(Refused, match="needs tier admin"):
        await registry.handlers["guest_stop"](
            ToolContext(app=app, op=registry.operations["guest_stop"]), vmid=100, confirm_token=body["confirm_token"]
        )
    assert audit_records(tmp_path / "direct.jsonl")[-1]["outcome"] == "denied"
    assert guest(sim, 100).status == "running"


async def test_preconditions_refuse_in_the_preview(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim, "operator@pve!mcp", tier="admin")) as c:
        running = await c.call_tool("guest_start", {"vmid": 100})
        ha_guest = await c.call_tool("guest_migrate", {"vmid": 101})
        not_ha = await c.call_tool("ha_migrate", {"vmid": 100, "node": "pve2"})
        no_snap = await c.call_tool("snapshot_rollback", {"vmid": 100, "name": "nope"})
        wrong_store = await c.call_tool("backup_now", {"vmid": 100, "storage": "ceph-vm"})
        missing = await c.call_tool("guest_start", {"vmid": 999})
        bad = await c.call_tool("guest_start", {"vmid": 5})
        passthrough = await c.call_tool("guest_migrate", {"vmid": 105, "target": "pve2"})
    assert "guest is stopped: no, it is running" in running.content[0].text
    assert "HA-managed" in ha_guest.content[0].text and "ha_migrate" in ha_guest.content[0].text
    assert "not HA-managed" in not_ha.content[0].text or "no HA resource" in not_ha.content[0].text
    assert "no snapshot 'nope'" in no_snap.content[0].text
    assert "content is" in wrong_store.content[0].text
    assert missing.is_error and "999" in missing.content[0].text
    assert bad.is_error and "vmid" in bad.content[0].text
    assert passthrough.is_error and "MIGRATE_PASSTHROUGH" in passthrough.content[0].text


async def test_missing_privileges_refuse_in_the_preview(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim, "auditor@pve!mcp", tier="operator")) as c:
        result = await c.call_tool("guest_shutdown", {"vmid": 100})
        ha = await c.call_tool("ha_migrate", {"vmid": 101, "node": "pve2"})
    assert result.is_error and "lacks VM.PowerMgmt on /vms/100" in result.content[0].text
    assert ha.is_error and "lacks Sys.Console on /" in ha.content[0].text


async def test_more_writes_change_the_cluster(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo", speed=2000)
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:

        async def run(tool: str, **args: Any) -> dict[str, Any]:
            body = await preview(c, tool, **args)
            done = await confirm(c, tool, body["confirm_token"], **args)
            assert not done.is_error, (tool, done.content[0].text)
            result: dict[str, Any] = done.structured_content  # type: ignore[assignment]
            assert result["status"] == "completed", (tool, result)
            return result

        backups_before = sum(1 for v in sim.cluster.volumes if v.vmid == 100 and v.content == "backup")
        await run("backup_now", vmid=100, storage="pbs-main")
        assert sum(1 for v in sim.cluster.volumes if v.vmid == 100 and v.content == "backup") == backups_before + 1
        await run("snapshot_create", vmid=100, name="before_change")
        assert "before_change" in guest(sim, 100).snapshots
        await run("snapshot_rollback", vmid=100, name="before_change")
        await run("snapshot_delete", vmid=100, name="before_change")
        assert "before_change" not in guest(sim, 100).snapshots
        moved = await run("guest_migrate", vmid=108)
        assert guest(sim, 108).node == moved["summary"].split(" to ")[1].split()[0] != "pve2"
        await run("ha_migrate", vmid=101, node="pve2")
        assert guest(sim, 101).node == "pve2"
        await run("guest_stop", vmid=103)
        assert guest(sim, 103).status == "stopped"
        submitted = await c.call_tool("guest_start", {"vmid": 103, "wait": False})
        body = submitted.structured_content
        started = await c.call_tool("guest_start", {"vmid": 103, "wait": False, "confirm_token": body["confirm_token"]})
    assert started.structured_content["status"] == "submitted"
    assert started.structured_content["task"]["upid"].startswith("UPID:pve1:")


async def accept(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


async def say_no(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": False})


async def decline(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="decline")


@pytest.mark.parametrize(
    ("callback", "executed", "message", "mode"),
    [
        (accept, True, "", "auto"),
        (accept, True, "", "legacy"),
        (say_no, False, "did not confirm", "auto"),
        (decline, False, "decline", "auto"),
        (decline, False, "decline", "legacy"),
    ],
)
async def test_elicitation_asks_the_human_when_the_client_can(
    start_sim: Any, server_for: Any, tmp_path: Path, callback: Any, executed: bool, message: str, mode: str
) -> None:
    sim = start_sim("demo")
    questions: list[str] = []

    async def recording(context: Any, params: Any) -> ElicitResult:
        questions.append(params.message)
        return await callback(context, params)  # type: ignore[no-any-return]

    mcp = server_for(sim, "operator@pve!mcp", tier="operator")
    async with Client(mcp, mode=mode, elicitation_callback=recording) as c:
        body = await preview(c, "guest_reboot", vmid=104)
        assert questions == []  # the preview never asks
        done = await confirm(c, "guest_reboot", body["confirm_token"], vmid=104)
    assert len(questions) == 1 and "VM 104" in questions[0] and "reboot" in questions[0].lower()
    if executed:
        assert done.structured_content["status"] == "completed"
        assert audit_records(tmp_path / "audit.jsonl")[-1]["human"] == "confirmed"
    else:
        assert done.is_error and message in done.content[0].text and "nothing was changed" in done.content[0].text
        assert audit_records(tmp_path / "audit.jsonl")[-1]["outcome"] == "refused"


async def test_instructions_in_cluster_data_change_nothing(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    """Guest 113's description orders an assistant to delete snapshots and stop VM 102. It is only data."""
    sim = start_sim("demo")
    before = {g.vmid: (g.status, g.node, sorted(g.snapshots)) for g in sim.cluster.guests.values()}
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:
        shown = (await c.call_tool("get_guest", {"vmid": 113})).structured_content
        # An assistant that obeyed would call these; without a confirmation token they only preview.
        stop = await c.call_tool("guest_stop", {"vmid": 102})
        delete = await c.call_tool("snapshot_delete", {"vmid": 113, "name": "before_migration"})
        invented = await c.call_tool("guest_stop", {"vmid": 102, "confirm_token": "a" * 32 + "." + "A" * 43})
    description = shown["description"]
    assert is_marked(shown, "description") and "ignore all previous instructions" in plain(description)
    assert stop.structured_content["status"] == "preview" and delete.structured_content["status"] == "preview"
    assert invented.is_error and "altered" in invented.content[0].text
    after = {g.vmid: (g.status, g.node, sorted(g.snapshots)) for g in sim.cluster.guests.values()}
    assert after == before
    records = audit_records(tmp_path / "audit.jsonl")
    assert not [r for r in records if r.get("phase") == "execute" and r["outcome"] == "ok"]


async def test_no_secret_reaches_the_audit_log(start_sim: Any, server_for: Any, tmp_path: Path) -> None:
    sim = start_sim("demo")
    _, secret = sim.token("operator@pve!mcp")
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = await preview(c, "guest_reboot", vmid=100)
        await confirm(c, "guest_reboot", body["confirm_token"], vmid=100)
        await c.call_tool("get_guest", {"vmid": 110})  # has a cloud-init password in the demo
    text = (tmp_path / "audit.jsonl").read_text()
    assert secret not in text and body["confirm_token"] not in text
    assert body["confirm_token"].split(".")[1] not in text


async def test_a_snapshot_pve_would_refuse_is_refused_in_the_preview(start_sim: Any, server_for: Any) -> None:
    """pve-guest-common AbstractConfig.pm __snapshot_prepare refuses a template and a guest with a volume
    without the snapshot feature (CT 123's bind mount, pve-container LXC/Config.pm has_feature): the preview
    says so instead of issuing a token whose task fails."""
    sim = start_sim("demo")
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        template = await c.call_tool("snapshot_create", {"vmid": 9000, "name": "s1"})
        bind = await c.call_tool("snapshot_create", {"vmid": 123, "name": "s1"})
        fine = await preview(c, "snapshot_create", vmid=104, name="s1")
    assert template.is_error and "it is a template" in template.content[0].text
    assert bind.is_error and "mp0 (a host path)" in bind.content[0].text
    assert any(ch["check"] == "PVE can snapshot it" and ch["ok"] for ch in fine["checks"])


async def test_a_rollback_zfs_cannot_make_is_refused_in_the_preview(start_sim: Any, server_for: Any) -> None:
    """ZFSPoolPlugin.pm volume_rollback_is_possible: only to a volume's most recent snapshot. VM 112's disk is on
    local-zfs: after two snapshots the preview refuses the first and offers the second; pvesim's task refuses
    the first as PVE does."""
    sim = start_sim("demo")
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:
        for name in ("first", "second"):
            body = await preview(c, "snapshot_create", vmid=112, name=name)
            assert (await confirm(c, "snapshot_create", body["confirm_token"], vmid=112, name=name)).is_error is False
        older = await c.call_tool("snapshot_rollback", {"vmid": 112, "name": "first"})
        newest = await preview(c, "snapshot_rollback", vmid=112, name="second")
    assert older.is_error and "delete the newer snapshot(s) second first" in older.content[0].text
    assert any(ch["check"] == "PVE can roll back to it" and ch["ok"] for ch in newest["checks"])
    pve = api(sim)
    upid = pve.nodes("pve3").qemu(112).snapshot("first").rollback.post()
    status = wait_task(pve.nodes("pve3").tasks(upid).status.get)
    assert status["exitstatus"] == "can't rollback, 'first' is not most recent snapshot on 'local-zfs:vm-112-disk-0'"


async def test_a_paused_vm_is_not_shut_down_or_rebooted(start_sim: Any, server_for: Any) -> None:
    """qemu-server API2/Qemu.pm vm_shutdown and vm_reboot die 'VM is paused - cannot shutdown' when QEMU is paused,
    prelaunch or suspended (vm_is_paused($vmid, 1)), before any task: the preview refuses, and so does pvesim."""
    sim = start_sim("demo")
    guest(sim, 104).qmpstatus = "paused"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        shutdown = await c.call_tool("guest_shutdown", {"vmid": 104})
        reboot = await c.call_tool("guest_reboot", {"vmid": 104})
        resume = await preview(c, "guest_resume", vmid=104)
    assert shutdown.is_error and "VM is paused - cannot shutdown" in shutdown.content[0].text
    assert reboot.is_error and "VM is paused - cannot shutdown" in reboot.content[0].text
    assert resume["status"] == "preview"
    for action in ("shutdown", "reboot"):
        with pytest.raises(ResourceException, match="VM is paused - cannot shutdown"):
            getattr(api(sim).nodes("pve1").qemu(104).status, action).post()
    assert guest(sim, 104).status == "running"


async def test_a_backup_vzdump_would_refuse_is_refused_in_the_preview(start_sim: Any, server_for: Any) -> None:
    """pve-manager PVE/VZDump.pm exec_backup_task fails a guest's backup in its task: with remove=0 (backup_now
    never prunes) once its unprotected backups reach the keep-* sum, with protected once max-protected-backups
    are there, and in stop mode for an HA resource requested 'started'. The preview says so; pvesim fails the
    task the same way."""
    sim = start_sim("demo", speed=2000)
    pbs = sim.cluster.storages["pbs-main"]
    pbs.options["prune-backups"] = "keep-last=2"  # VM 100 has 2 backups there, VM 104 one
    pbs.options["max-protected-backups"] = 0
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        full = await c.call_tool("backup_now", {"vmid": 100, "storage": "pbs-main"})
        protected = await c.call_tool("backup_now", {"vmid": 104, "storage": "pbs-main", "protected": True})
        ha_stop = await c.call_tool("backup_now", {"vmid": 101, "storage": "pbs-main", "mode": "stop"})
        body = await preview(c, "backup_now", vmid=104, storage="pbs-main")
        done = await confirm(c, "backup_now", body["confirm_token"], vmid=104, storage="pbs-main")
        now_full = await c.call_tool("backup_now", {"vmid": 104, "storage": "pbs-main"})
    assert full.is_error and "reach the limit of 2 (keep-last=2)" in full.content[0].text
    assert protected.is_error and "the storage allows 0 per guest" in protected.content[0].text
    assert ha_stop.is_error and "stop mode on an HA resource" in ha_stop.content[0].text
    assert any(ch["check"] == "vzdump will back it up" and ch["ok"] for ch in body["checks"])
    assert done.structured_content["status"] == "completed"
    assert now_full.is_error and "max backup limit" in now_full.content[0].text
    pve = api(sim)
    upid = pve.nodes("pve1").vzdump.post(vmid=100, storage="pbs-main", remove=0)
    status = wait_task(pve.nodes("pve1").tasks(upid).status.get)
    log = [line["t"] for line in pve.nodes("pve1").tasks(upid).log.get()]
    assert status["exitstatus"] == "job errors"
    assert any("Backup of VM 100 failed - There is a max backup limit of 2" in line for line in log)


async def test_an_ha_managed_guests_power_request_goes_through_the_ha_manager(start_sim: Any, server_for: Any) -> None:
    """qemu-server API2/Qemu.pm vm_shutdown hands an HA-managed VM to the HA manager (crm-command stop <timeout>):
    its hastop task only queues the request, the CRM sets the resource's state to 'stopped' (Manager.pm), and the
    LRM shuts the VM down with forceStop (Resources/PVEVM.pm shutdown). The preview says so, and the write follows
    the LRM's qmshutdown task, not the hastop one."""
    sim = start_sim("demo", speed=2000)
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = await preview(c, "guest_shutdown", vmid=101, timeout=60)
        done = await confirm(c, "guest_shutdown", body["confirm_token"], vmid=101, timeout=60)
        start = await preview(c, "guest_start", vmid=101)
    said = " ".join(body["effects"] + body["risks"])
    assert "HA requested state becomes 'stopped'" in said and "forced off" in said
    assert "not forced off" not in said
    assert done.structured_content["status"] == "completed"
    assert ":qmshutdown:101:" in done.structured_content["task"]["upid"]
    assert guest(sim, 101).status == "stopped" and sim.cluster.ha_resources["vm:101"].state == "stopped"
    assert "HA requested state becomes 'started'" in " ".join(start["effects"])


async def test_a_hibernated_vm_can_be_started(start_sim: Any, server_for: Any) -> None:
    """qemu-server QemuServer.pm vm_start skips check_lock for the 'suspended' lock of a VM hibernated to disk and
    resumes it from its saved state: the preview does not call that lock a refusal."""
    sim = start_sim("demo", speed=2000)
    pve = api(sim)
    wait_task(pve.nodes("pve1").tasks(pve.nodes("pve1").qemu(104).status.suspend.post(todisk=1)).status.get)
    assert guest(sim, 104).config.get("lock") == "suspended" and guest(sim, 104).status == "stopped"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = await preview(c, "guest_start", vmid=104)
        done = await confirm(c, "guest_start", body["confirm_token"], vmid=104)
    assert "from its hibernated state" in body["summary"]
    assert done.structured_content["status"] == "completed"
    assert guest(sim, 104).status == "running" and "lock" not in guest(sim, 104).config


async def test_an_ha_guest_in_the_error_state_is_neither_started_nor_stopped(start_sim: Any, server_for: Any) -> None:
    """PVE hands an HA guest's start to 'ha-manager set --state started' and its stop or shutdown to 'crm-command
    stop'; both die in check_service_state for a service in the error state (pve-ha-manager API2/HA/Resources.pm,
    CLI/ha_manager.pm): the previews refuse, and pvesim's hastart task fails as PVE's does."""
    sim = start_sim("demo")
    sim.cluster.ha_resources["vm:101"].crm_state = "error"
    async with Client(server_for(sim, "operator@pve!mcp", tier="admin")) as c:
        shutdown = await c.call_tool("guest_shutdown", {"vmid": 101})
        stop = await c.call_tool("guest_stop", {"vmid": 101})
    assert shutdown.is_error and "must be disabled and fixed first" in shutdown.content[0].text
    assert stop.is_error and "in the HA error state" in stop.content[0].text
    pve = api(sim)
    node = guest(sim, 101).node
    status = wait_task(pve.nodes(node).tasks(pve.nodes(node).qemu(101).status.stop.post()).status.get)
    assert status["exitstatus"] == "service 'vm:101' in error state, must be disabled and fixed first"
    assert guest(sim, 101).status == "running"


async def test_an_ha_move_of_a_stopped_guest_is_announced_as_offline(start_sim: Any, server_for: Any) -> None:
    """pve-ha-manager's LRM migrates a stopped VM with online=1, which qemu-server's migrate_vm turns into an
    offline migration ("VM isn't running. Doing offline migration instead"): no live migration, no downtime."""
    sim = start_sim("demo")
    with sim.sim.mutate() as c:
        c.guests[101].status = "stopped"
    async with Client(server_for(sim, "operator@pve!mcp", tier="operator")) as c:
        body = await preview(c, "ha_migrate", vmid=101, node="pve3")
    assert "move (offline: it is not running)" in body["effects"][0]
    assert not any("downtime" in r for r in body["risks"])
