"""PBS through the real MCP client and proxmoxer's PBS service, against pvesim and the PBS simulator over HTTPS:
configured, not configured, PBS down, and a PBS token without Datastore.Audit."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pvesim.pbs import PbsServer, attach, start_pbs
from tests.integration.test_cli import STEWARD, clean_env, endpoint, started
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

# (code, subject id) for every PBS problem planted in src/pvesim/pbs/scenarios/demo.yaml
PLANTED = {
    ("PBS_DATASTORE_FULL_SOON", "datastore/main"),
    ("PBS_DATASTORE_ERROR", "datastore/archive"),
    ("PBS_DATASTORE_MAINTENANCE", "datastore/offsite"),
    ("PBS_GC_STALE", "datastore/offsite"),
    ("PBS_BAD_CHUNKS", "datastore/main"),
    ("PBS_JOB_FAILED", "job/verify/v-main"),
    ("PBS_JOB_STALE", "job/sync/s-offsite"),
    ("PBS_GROUP_NOT_VERIFIED", "104"),
    ("PBS_GROUP_VERIFY_FAILED", "106"),
    ("PBS_GROUP_VERIFY_OUTDATED", "group/main/vm/130"),  # no guest 130 in the cluster any more
    ("PBS_SNAPSHOT_NO_MANIFEST", "120"),
    ("PBS_PRUNE_DROPS_LAST_VERIFIED", "108"),
    ("PBS_TASK_FAILED", "tasks/verificationjob"),
    ("PBS_NO_SUBSCRIPTION", "subscription"),
    ("PBS_UPDATES_PENDING", "updates"),
}


@pytest.fixture
def pbs_sim() -> Iterator[PbsServer]:
    server = start_pbs("demo")
    yield server
    server.stop()


def pbs_settings(pbs: PbsServer, token: str = "steward@pbs!monitor", **extra: Any) -> dict[str, Any]:
    token_id, secret = pbs.token(token)
    return {
        "pbs_url": pbs.address,
        "pbs_token_id": token_id,
        "pbs_token_secret": secret,
        "pbs_fingerprint": pbs.fingerprint,
        **extra,
    }


async def _call(mcp: Any, tool: str, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool(tool, {"detail": True, **args})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


def _found(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["code"], f["subject"]["id"]) for f in report["findings"]}


def _requests(series: str) -> float:
    """Requests counted so far in this process's ``pve_steward_<series>_requests_total``, all labels.

    A process counts only once it serves ``/metrics`` (metrics.keep): this one does from the first call on,
    whichever test of this worker ran before."""
    from pve_steward.observe import metrics
    from pve_steward.observe.instruments import REGISTRY

    metrics.keep()

    name = f"pve_steward_{series}_requests_total"
    return sum(s.value for m in REGISTRY.collect() for s in m.samples if s.name == name)


async def test_pbs_findings_in_health_and_diagnose_pbs(
    start_sim: Any, pbs_sim: PbsServer, server_for: Any, tmp_path: Path
) -> None:
    sim = start_sim("demo")
    assert attach(sim.cluster, pbs_sim) == ["pbs-main"]
    mcp = server_for(sim, **pbs_settings(pbs_sim))
    counted = _requests("pbs"), _requests("pve"), pbs_sim.state.requests, sim.sim.requests
    health = await _call(mcp, "check_cluster_health", areas=["pbs", "backups"])
    # PBS's reads are counted in series of their own, not as the cluster's
    pbs_made, pve_made = pbs_sim.state.requests - counted[2], sim.sim.requests - counted[3]
    assert pbs_made > 0 and (_requests("pbs") - counted[0], _requests("pve") - counted[1]) == (pbs_made, pve_made)
    assert _found(health) >= PLANTED, PLANTED - _found(health)
    assert health["complete"] is True and "CHECK_SKIPPED" not in health["by_code"]
    # a job still running past its next slot is not "not running" (jobstate.rs compute_schedule_status)
    assert not {f for f in _found(health) if f[1] == "job/verify/v-offsite"}
    # the demo's nightly job prunes (prune-backups on the job): no retention finding on the PBS storage
    assert "BACKUP_JOB_NO_RETENTION" not in health["by_code"]
    pbs = await _call(mcp, "diagnose_pbs")
    assert _found(pbs) == _found(health) - {f for f in _found(health) if not f[0].startswith(("PBS_", "DATA_"))}
    prune = next(f for f in pbs["findings"] if f["code"] == "PBS_PRUNE_DROPS_LAST_VERIFIED")
    assert prune["subject"]["kind"] == "guest" and prune["evidence"]["pruned_by"] == ["PBS prune job main-daily"]
    # the PBS token secret is in neither the answers nor the audit log
    secret = pbs_settings(pbs_sim)["pbs_token_secret"]
    assert secret not in json.dumps(health) + json.dumps(pbs)
    assert secret not in (tmp_path / "audit.jsonl").read_text()


async def test_retention_on_a_pbs_storage_consults_pbs_prune_jobs(
    start_sim: Any, pbs_sim: PbsServer, server_for: Any
) -> None:
    sim = start_sim("demo")
    attach(sim.cluster, pbs_sim)
    for job in sim.cluster.backup_jobs:
        if job.get("storage") == "pbs-main":
            job.pop("prune-backups", None)
    sim.cluster.storages["pbs-main"].options.pop("prune-backups", None)
    pbs_sim.state.prune_jobs.clear()
    report = await _call(server_for(sim, **pbs_settings(pbs_sim)), "check_cluster_health", areas=["backups"])
    found = [f for f in report["findings"] if f["code"] == "BACKUP_JOB_NO_RETENTION"]
    keeps = found[0]["evidence"]["keeps_all"] if found else {}
    # per node, now that /etc/vzdump.conf is read for PBS storages too: none prunes, and neither does PBS
    assert set(keeps) == {"pve1", "pve2", "pve3"} and all("no PBS prune job" in why for why in keeps.values()), keeps


async def test_diagnose_pbs_reads_the_pve_jobs_that_prune_pbs(
    start_sim: Any, pbs_sim: PbsServer, server_for: Any
) -> None:
    """vzdump prunes a PBS storage after each backup (VZDump.pm exec_backup_task): diagnose_pbs alone reads the
    backup jobs to see it."""
    sim = start_sim("demo")
    attach(sim.cluster, pbs_sim)
    for job in sim.cluster.backup_jobs:
        if job.get("storage") == "pbs-main":
            job["prune-backups"] = "keep-last=1"
    report = await _call(server_for(sim, **pbs_settings(pbs_sim)), "diagnose_pbs")
    by_pve = [f for f in report["findings"] if f["code"] == "PBS_PRUNE_DROPS_LAST_VERIFIED"]
    assert any("PVE backup job backup-nightly" in f["evidence"]["pruned_by"] for f in by_pve), by_pve
    assert report["complete"] is True


async def test_every_failed_pbs_task_of_the_day_is_counted(start_sim: Any, pbs_sim: PbsServer, server_for: Any) -> None:
    """PBS lists 50 tasks unless asked for all (tasks.rs list_tasks, limit 0 = no limit): 60 newer failed backups
    must neither be cut to 50 nor hide the older failed verification."""
    from pvesim.pbs.state import _task

    sim = start_sim("demo")
    attach(sim.cluster, pbs_sim)
    now = pbs_sim.state.now()
    failed = {"type": "backup", "id": "main:vm/100", "age": "1h", "status": "connection error"}
    pbs_sim.state.tasks += [_task(failed, now) for _ in range(60)]
    report = await _call(server_for(sim, **pbs_settings(pbs_sim)), "diagnose_pbs")
    counts = {f["subject"]["id"]: f["evidence"]["count"] for f in report["findings"] if f["code"] == "PBS_TASK_FAILED"}
    assert counts == {"tasks/backup": 60, "tasks/verificationjob": 1}, counts


async def test_not_configured_is_said_never_clean(demo_sim: Any, server_for: Any) -> None:
    report = await _call(server_for(demo_sim), "check_cluster_health", areas=["pbs"])
    assert [f["code"] for f in report["findings"]] == ["CHECK_SKIPPED"]
    assert "PBS: not configured" in report["findings"][0]["message"]
    assert report["status"] != "ok" or report["counts"]["info"] == 1
    whole = await _call(server_for(demo_sim), "diagnose_pbs")
    assert [f["code"] for f in whole["findings"]] == ["CHECK_SKIPPED"]


async def test_pbs_down_is_data_incomplete(demo_sim: Any, pbs_sim: PbsServer, server_for: Any) -> None:
    settings = pbs_settings(pbs_sim)
    pbs_sim.stop()
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        settings["pbs_url"] = f"127.0.0.1:{s.getsockname()[1]}"
    report = await _call(server_for(demo_sim, **settings), "diagnose_pbs")
    assert report["complete"] is False
    gaps = [f for f in report["findings"] if f["code"] == "DATA_INCOMPLETE"]
    assert gaps and "connection refused" in gaps[0]["message"]
    # the fix names PBS's own setting and port, not the cluster's
    assert "Fix: check the host and port in --pbs-url (the PBS API listens on 8007)" in gaps[0]["message"]
    assert not any(f["code"].startswith("PBS_") for f in report["findings"])


async def test_token_without_datastore_audit_is_a_skipped_check(
    start_sim: Any, pbs_sim: PbsServer, server_for: Any
) -> None:
    sim = start_sim("demo")
    attach(sim.cluster, pbs_sim)
    report = await _call(server_for(sim, **pbs_settings(pbs_sim, "noaudit@pbs!monitor")), "diagnose_pbs")
    skipped = [f for f in report["findings"] if f["code"] == "CHECK_SKIPPED"]
    assert skipped and all("Datastore.Audit" in f["message"] or "Sys.Audit on /" in f["message"] for f in skipped)
    assert any("datastore main" in f["message"] for f in skipped)
    # PBS hid every datastore: nothing about them is claimed, and the missing datastore is not invented either
    assert not any(
        f["code"].startswith("PBS_DATASTORE") or f["code"].startswith("PBS_STORAGE") for f in report["findings"]
    )


async def test_demo_starts_pbs_and_shows_its_findings(tmp_path: Path) -> None:
    demo = [*STEWARD, "demo", "--http-port", "0", "--speed", "500"]
    with started(demo, clean_env(tmp_path)) as lines:
        async with Client(endpoint(lines)) as c:
            result = await c.call_tool("diagnostics", {"action": "diagnose_pbs", "detail": True})
    assert "PBS simulator at https://127.0.0.1:" in "\n".join(lines)
    assert result.is_error is False, result.content
    report = plain(result.structured_content)
    report = report.get("result", report)
    assert _found(report) >= PLANTED, PLANTED - _found(report)


def test_check_command_reads_pbs_and_pins_its_certificate(demo_sim: Any, pbs_sim: PbsServer, tmp_path: Path) -> None:
    from tests.integration.test_cli import check

    env = {f"PVE_STEWARD_{k.upper()}": str(v) for k, v in pbs_settings(pbs_sim).items()}
    done = check(demo_sim, tmp_path, "--areas", "pbs", "--json", **env)
    assert done.returncode == 2, done.stderr  # critical PBS findings
    assert "PBS_BAD_CHUNKS" in done.stdout and env["PVE_STEWARD_PBS_TOKEN_SECRET"] not in done.stdout + done.stderr
    wrong_pin = check(
        demo_sim, tmp_path, "--areas", "pbs", "--json", **{**env, "PVE_STEWARD_PBS_FINGERPRINT": "AB" * 32}
    )
    assert "DATA_INCOMPLETE" in wrong_pin.stdout and "fingerprint mismatch" in wrong_pin.stdout
    assert "proxmox-backup-manager cert info" in wrong_pin.stdout and "--pbs-fingerprint" in wrong_pin.stdout
    assert "PBS_" not in wrong_pin.stdout.replace("PBS datastore usage", "")


async def test_storage_naming_a_datastore_pbs_lacks(start_sim: Any, pbs_sim: PbsServer, server_for: Any) -> None:
    sim = start_sim("demo")
    attach(sim.cluster, pbs_sim)  # pins the simulator's certificate on pbs-main
    sim.cluster.storages["pbs-main"].options["datastore"] = "gone"
    report = await _call(server_for(sim, **pbs_settings(pbs_sim)), "diagnose_pbs")
    assert ("PBS_STORAGE_DATASTORE_MISSING", "pbs-main") in _found(report)
    assert report["complete"] is True  # PBS's 400 "no such datastore" is the finding, not a failed read
