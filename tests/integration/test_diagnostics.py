"""Diagnostics through the MCP server against pvesim: the demo's planted problems are each found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

# (code, subject id) for every problem planted in src/pvesim/scenarios/demo.yaml
PLANTED = {
    ("BACKUP_NONE", "114"),
    ("BACKUP_NOT_SCHEDULED", "114"),
    ("BACKUP_STALE", "104"),
    ("BACKUP_STALE", "107"),
    ("BACKUP_VERIFY_FAILED", "106"),
    ("BACKUP_JOB_DISABLED", "backup-weekly-local"),
    ("BACKUP_ORPHANED", "130"),
    ("MIGRATE_PASSTHROUGH", "105"),
    ("MIGRATE_LOCAL_CDROM", "106"),
    ("MIGRATE_BIND_MOUNT", "123"),
    ("MIGRATE_CPU_HOST", "108"),
    ("MIGRATE_LOCKED", "111"),
    ("STORAGE_USAGE_HIGH", "local-lvm"),
    ("STORAGE_INACTIVE", "nfs-templates"),
    ("NODE_MEMORY_OVERCOMMIT", "pve3"),
    ("NODE_SWAP_USED", "pve3"),
    ("GUEST_LOCK_STUCK", "111"),
    ("REPLICATION_FAILING", "112-0"),
    ("REPLICATION_STALE", "112-0"),
    ("CERT_EXPIRING", "pve1/pveproxy-ssl.pem"),
    ("SNAPSHOT_OLD", "113"),
    ("GUEST_AGENT_NOT_RUNNING", "110"),
    ("REPO_ENTERPRISE_WITHOUT_SUBSCRIPTION", "pve2"),
    ("DISK_SMART_FAILED", "pve3:/dev/sdb"),
    ("ZFS_POOL_DEGRADED", "pve3:tank"),
    ("TASK_FAILED_RECENT", "pve2/vzdump"),
    ("TASK_FAILED_RECENT", "pve3/qmstart"),
}


async def _health(mcp: Any, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("check_cluster_health", {"detail": True, **args})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


async def test_demo_planted_problems_are_found(demo_sim: SimServer, server_for: Any) -> None:
    report = await _health(server_for(demo_sim))
    found = {(f["code"], f["subject"]["id"]) for f in report["findings"]}
    assert found >= PLANTED, PLANTED - found
    cert = next(f for f in report["findings"] if f["code"] == "CERT_EXPIRING")
    # an ACME certificate pveupdate renews at 30 days left: at 12 its renewal is failing (bin/pveupdate)
    assert cert["evidence"]["renewed_by_pve_at_days"] == 30 and "pve-daily-update failed" in cert["message"]
    failed_run = next(f for f in report["findings"] if f["code"] == "BACKUP_JOB_FAILED")
    assert failed_run["subject"]["node"] == "pve2" and failed_run["evidence"]["failed_vmids"] == [107]
    # shared nfs-templates is mounted on pve1 only: inactive on each of the other nodes (pve8to9 per node)
    inactive = sorted(f["subject"]["node"] for f in report["findings"] if f["code"] == "STORAGE_INACTIVE")
    assert inactive == ["pve2", "pve3"]
    assert report["status"] == "critical" and report["complete"] is True
    assert [f["severity"] for f in report["findings"]] == sorted(
        (f["severity"] for f in report["findings"]), key=["critical", "warning", "info"].index
    )


async def test_compact_by_default(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim)) as c:
        small = (await c.call_tool("check_cluster_health", {"limit": 5})).structured_content
    assert len(small["findings"]) == 5 and small["omitted"] > 0
    assert sum(small["by_code"].values()) == len(small["findings"]) + small["omitted"]


async def test_healthy_cluster_has_no_warning(start_sim: Any, server_for: Any) -> None:
    report = await _health(server_for(start_sim("healthy")))
    assert report["counts"]["critical"] == 0 and report["counts"]["warning"] == 0, report["findings"]
    assert report["complete"] is True


async def test_offline_node_yields_data_incomplete(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    with sim.sim.mutate() as cluster:
        cluster.nodes["pve3"].online = False
    report = await _health(server_for(sim))
    codes = {(f["code"], f["subject"]["id"]) for f in report["findings"]}
    assert ("NODE_OFFLINE", "pve3") in codes
    assert any(c == "DATA_INCOMPLETE" and "pve3" in s for c, s in codes)
    assert report["complete"] is False and "INCOMPLETE" in report["summary"]
    assert ("DISK_SMART_FAILED", "pve3:/dev/sdb") not in codes  # nothing is claimed about pve3 anymore


async def test_area_tools_and_explain(demo_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(demo_sim, "operator@pve!mcp")) as c:
        backups = plain((await c.call_tool("diagnose_backups", {})).structured_content)
        one = plain((await c.call_tool("diagnose_migratability", {"vmid": 106})).structured_content)
        node = plain((await c.call_tool("diagnose_migratability", {"node": "pve1"})).structured_content)
        explain = (await c.call_tool("explain_finding", {"code": "BACKUP_STALE"})).structured_content
        unknown = await c.call_tool("explain_finding", {"code": "NO_SUCH_CODE"})
        prompts = {p.name for p in (await c.list_prompts()).prompts}
        prompt = await c.get_prompt("maintenance_preparation", {"node": "pve1"})
    assert set(backups["by_code"]) <= {
        "BACKUP_NONE",
        "BACKUP_NOT_SCHEDULED",
        "BACKUP_STALE",
        "BACKUP_VERIFY_FAILED",
        "BACKUP_JOB_FAILED",
        "BACKUP_JOB_DISABLED",
        "BACKUP_ORPHANED",
    }
    guest = one["guests"][0]
    assert guest["vmid"] == 106 and guest["verdict"] == "blocked"
    assert {r["code"] for r in guest["reasons"]} >= {"MIGRATE_LOCAL_CDROM", "MIGRATE_LOCAL_DISK"}
    assert one["report"]["complete"] is True  # the operator token may read PVE's preconditions
    assert {g["node"] for g in node["guests"]} == {"pve1"} and node["verdicts"]["blocked"] >= 1
    assert explain["default_severity"] == "warning" and explain["thresholds"]["backup_stale_default_hours"] == 26
    assert unknown.is_error and "unknown finding code" in unknown.content[0].text
    assert prompts == {
        "health_review",
        "backup_audit",
        "maintenance_preparation",
        "guest_review",
        "snapshot_review",
        "backup_job_review",
        "storage_review",
    }
    assert "node-maintenance enable pve1" in prompt.messages[0].content.text  # type: ignore[union-attr]


def _check(
    sim: SimServer, tmp_path: Path, *extra: str, python: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    token_id, secret = sim.token("monitor@pve!mcp")  # the README's read-only token (backups listed)
    return subprocess.run(
        [
            sys.executable,
            *python,
            "-m",
            "pve_steward",
            "check",
            "--url",
            sim.address,
            "--token-id",
            token_id,
            "--token-secret",
            secret,
            "--fingerprint",
            sim.fingerprint,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_command_prints_groups_and_exits_by_severity(demo_sim: SimServer, start_sim: Any, tmp_path: Path) -> None:
    text = _check(demo_sim, tmp_path, "--color", "never")
    assert text.returncode == 2, text.stderr
    assert "= BACKUPS =" in text.stdout and "FAIL: [BACKUP_NONE]" in text.stdout and "= SUMMARY =" in text.stdout
    assert "= WHAT TO DO FIRST =\n\n1. " in text.stdout  # the demo has critical findings: led with, as over MCP
    as_json = _check(demo_sim, tmp_path, "--json", "--areas", "backups", python=("-X", "importtime"))
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and report["checked"] == ["backups"] and report["counts"]["critical"] >= 3
    imported = {line.rpartition("|")[2].strip() for line in as_json.stderr.splitlines() if "|" in line}
    assert "pve_steward.tools.runs" in imported and "mcp" not in imported  # a check runs without the MCP SDK
    healthy = _check(start_sim("healthy"), tmp_path)
    assert healthy.returncode == 0 and "WHAT TO DO FIRST" not in healthy.stdout, healthy.stdout
    unreachable = subprocess.run(
        [
            sys.executable,
            "-m",
            "pve_steward",
            "check",
            "--url",
            "127.0.0.1:1",
            "--token-id",
            "ops@pve!mcp",
            "--token-secret",
            "x",
            "--insecure",
            "--retries",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unreachable.returncode == 3 and "cannot reach" in unreachable.stderr


async def test_backups_pve_hides_from_an_auditor_are_a_skipped_check_never_missing(
    demo_sim: SimServer, server_for: Any
) -> None:
    """PVE lists backups only with Datastore.AllocateSpace + VM.Backup (pve-storage check_volume_access):
    with PVEAuditor alone no guest's backup age is judged, instead of every guest 'never backed up'."""
    hidden = await _health(server_for(demo_sim, "auditor@pve!mcp"), areas=["backups"])
    seen = await _health(server_for(demo_sim), areas=["backups"])  # monitor: PVEAuditor + BackupLister
    ages = {"BACKUP_NONE", "BACKUP_STALE", "BACKUP_ORPHANED", "BACKUP_VERIFY_FAILED"}
    assert not ages & set(hidden["by_code"]), hidden["by_code"]
    assert ages <= set(seen["by_code"])
    skipped = [f for f in hidden["findings"] if f["code"] == "CHECK_SKIPPED" and "backup contents" in f["message"]]
    assert skipped and all("VM.Backup" in str(f["evidence"]) for f in skipped), skipped
    assert "BACKUP_JOB_FAILED" in hidden["by_code"], "what the token may read is still judged"
    async with Client(server_for(demo_sim, "auditor@pve!mcp")) as c:
        listed = plain((await c.call_tool("list_backups", {})).structured_content)
    assert listed["items"] == [] and listed["incomplete"]
    assert all("partial list" in why and "VM.Backup" in why for why in listed["incomplete"])


async def test_backups_of_guests_the_token_cannot_see_are_not_called_orphaned(start_sim: Any, server_for: Any) -> None:
    """/cluster/resources lists a guest only with VM.Audit on it (pve-manager Cluster.pm resources), while
    Datastore.Allocate on a storage shows every backup there: a hidden guest's backups are not a deleted guest's.
    The full permission map leaves a NoAccess path out, so each such vmid is asked for (?path=/vms/N)."""
    from pvesim.access import AclEntry

    sim = start_sim("demo")
    extra = [AclEntry("/storage", "PVEDatastoreAdmin"), AclEntry("/vms/101", "NoAccess")]
    with sim.sim.mutate() as c:
        token = c.tokens["monitor@pve!mcp"]
        token.user.acl = [*token.user.acl, *extra]
        token.set_acl([*token.acl, *extra])

    async def orphans(token: str) -> set[str]:
        report = await _health(server_for(sim, token), areas=["backups"])
        return {f["subject"]["id"] for f in report["findings"] if f["code"] == "BACKUP_ORPHANED"}

    assert await orphans("monitor@pve!mcp") == {"130"}  # 101 is hidden from this token, not deleted
    assert "101" not in await orphans("root@pam!pvesim") and "130" in await orphans("root@pam!pvesim")


async def test_storage_content_says_when_pve_shortened_the_list(demo_sim: SimServer, server_for: Any) -> None:
    where = {"node": "pve1", "storage": "local", "content": "backup"}
    async with Client(server_for(demo_sim, "auditor@pve!mcp")) as c:
        hidden = plain((await c.call_tool("storage_content", where)).structured_content)
    async with Client(server_for(demo_sim, "root@pam!pvesim")) as c:
        whole = plain((await c.call_tool("storage_content", where)).structured_content)
    assert hidden["items"] == [] and "VM.Backup" in hidden["partial"]  # cluster text (the storage id): marked
    assert whole["items"] and whole["partial"] is None
