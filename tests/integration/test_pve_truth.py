"""Verdicts that must agree with Proxmox VE's own code, through MCP against pvesim in PVE 8 and PVE 9 mode.

Each test names the PVE behaviour it reproduces; pvesim answers as that PVE release does (HA groups 500 after
the migration to rules on 9, agent privileges per release, PBS rows without verification, task status without
an end time, vzdump defaults per node, pools in /cluster/resources, replication state before its first sync).
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from proxmoxer import ResourceException

import pvesim
from pvesim.scenario import DEFAULT_TOKENS
from pvesim.server import SimServer
from pvesim.state import ReplicationJob
from tests.integration.pve import api, control
from tests.integration.test_diagnostics import PLANTED
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

VERSIONS = ["8.4.14", "9.1.2"]


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _call(mcp: Any, tool: str, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool(tool, args)
    assert result.is_error is False, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


def _codes(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["code"], plain(f["subject"]["id"])) for f in report["findings"]}


def _failed_paths(sim: SimServer) -> list[str]:
    return [path for _status, _method, path in sim.sim.failure_log]


async def test_key_diagnostics_are_complete_on_pve8_and_pve9(start_sim: Any, server_for: Any, version: str) -> None:
    """The demo's planted problems are found on both releases, and no read fails on a healthy PVE 9 HA setup."""
    sim = start_sim("demo", version=version)
    mcp = server_for(sim)
    health = await _call(mcp, "check_cluster_health", detail=True)
    ha = await _call(mcp, "diagnose_ha", detail=True)
    backups = await _call(mcp, "diagnose_backups", detail=True)
    for report in (health, ha, backups):
        assert report["complete"] is True, [f for f in report["findings"] if f["code"] == "DATA_INCOMPLETE"]
    found = _codes(health)
    if version.startswith("8"):
        # PVE 8's agent endpoints need VM.Monitor, which PVEAuditor lacks: "could not check", not "not running"
        expected = PLANTED - {("GUEST_AGENT_NOT_RUNNING", "110")}
        assert ("GUEST_AGENT_NOT_RUNNING", "110") not in found
        assert any(c == "CHECK_SKIPPED" and "agent" in s for c, s in found)
    else:
        expected = PLANTED
    assert found >= expected, expected - found
    assert not [p for p in _failed_paths(sim) if p.startswith("/cluster/ha/")]
    rules = await _call(mcp, "list_ha_rules")
    named = {r["name"]: r["resources"] for r in plain(rules)["items"]}  # rule names are cluster text, marked
    assert named == {"ha-web": ["ct:122", "vm:101"], "ha-db": ["vm:102"]}
    assert rules["source"] == (["groups"] if version.startswith("8") else ["rules"])


@pytest.mark.parametrize("version", VERSIONS)
def test_ha_groups_index_per_release(start_sim: Any, version: str) -> None:
    """pve-ha-manager API2/HA/Groups.pm index dies once groups are migrated (PVE 9); PVE 8 has no rules."""
    sim = start_sim("truth", version=version)
    root = api(sim)
    if version.startswith("9"):
        with pytest.raises(ResourceException) as err:
            root.cluster.ha.groups.get()
        assert err.value.status_code == 500 and "migrated to rules" in str(err.value)
        rules = {r["rule"]: r for r in root.cluster.ha.rules.get()}
        assert rules["ha-group-prod-db"]["strict"] == 1 and rules["ha-group-prod-db"]["resources"] == "vm:201"
        assert "group" not in next(r for r in root.cluster.ha.resources.get() if r["sid"] == "vm:201")
    else:
        assert [g["group"] for g in root.cluster.ha.groups.get()] == ["prod-db"]
        with pytest.raises(ResourceException) as err:
            root.cluster.ha.rules.get()
        assert err.value.status_code == 501


async def test_unmigrated_groups_on_pve9_are_read_as_rules(start_sim: Any, server_for: Any) -> None:
    """Rules.pm index shows groups not yet migrated as ha-group-<name>: one read, nothing counted twice."""
    data = pvesim.load_scenario("truth")
    data["ha"]["groups_migrated"] = False
    sim = start_sim(data)
    assert [g["group"] for g in api(sim).cluster.ha.groups.get()] == ["prod-db"]
    rules = await _call(server_for(sim), "list_ha_rules")
    assert [r["name"] for r in plain(rules)["items"]] == ["ha-group-prod-db"] and rules["items"][0]["strict"] is True
    ha = await _call(server_for(sim), "diagnose_ha", detail=True)
    assert ha["complete"] is True


async def test_backup_verdicts_follow_vzdump(start_sim: Any, server_for: Any, version: str) -> None:
    """Pools (get_included_guests), templates, PBS verification (PBSPlugin), retention chain (VZDump.pm)."""
    sim = start_sim("truth", version=version)
    report = await _call(server_for(sim), "diagnose_backups", detail=True)
    assert report["complete"] is True
    found = _codes(report)
    by_code = {f["code"]: f for f in report["findings"]}
    # pool job: 200/201 covered, their 3-day-old weekly backup is fresh; the template is covered and fresh
    assert not {s for c, s in found if c in ("BACKUP_STALE", "BACKUP_NOT_SCHEDULED", "BACKUP_NONE")}
    # 201's newest PBS backup was never verified: info, not a failed verification
    assert ("BACKUP_NOT_VERIFIED", "201") in found and not any(c == "BACKUP_VERIFY_FAILED" for c, _ in found)
    assert by_code["BACKUP_NOT_VERIFIED"]["severity"] == "info"
    # local-copy keeps all on pve1/pve3 (no prune anywhere); pve2's vzdump.conf prunes; the PBS job is not judged
    assert {s for c, s in found if c == "BACKUP_JOB_NO_RETENTION"} == {"local-copy"}
    assert sorted(by_code["BACKUP_JOB_NO_RETENTION"]["evidence"]["keeps_all"]) == ["pve1", "pve3"]
    job = await _call(server_for(sim), "get_backup_job", id="weekly-prod")
    assert [g["vmid"] for g in job["covers"]] == [200, 201] and job["unknown"] == []
    nightly = await _call(server_for(sim), "get_backup_job", id="nightly-rest")
    assert 9001 in [g["vmid"] for g in nightly["covers"]]


async def test_pool_membership_the_token_cannot_see_is_not_guessed(start_sim: Any, server_for: Any) -> None:
    data = pvesim.load_scenario("truth")
    acl = [{"path": "/", "role": "PVEAuditor"}, {"path": "/pool", "role": "NoAccess"}]  # no Pool.Audit
    data["tokens"] = [{"id": "nopool@pve!mcp", "user_acl": acl, "acl": acl}]
    sim = start_sim(data)
    job = await _call(server_for(sim, "nopool@pve!mcp"), "get_backup_job", id="weekly-prod")
    assert job["covers"] == [] and 202 in job["unknown"]  # no Pool.Audit: rows carry no pool


async def test_guest_verdicts_follow_pve(start_sim: Any, server_for: Any, version: str) -> None:
    """Start-all skips HA resources (Nodes.pm); only 'QEMU guest agent is not running' means not running."""
    sim = start_sim("truth", version=version)
    report = await _call(server_for(sim, "operator@pve!mcp"), "diagnose_guests", detail=True)
    found = _codes(report)
    assert {s for c, s in found if c == "GUEST_NO_ONBOOT"} == {"202"}  # 201 and ct 203 are HA resources
    assert {s for c, s in found if c == "GUEST_AGENT_NOT_RUNNING"} == {"204"}


async def test_agent_probe_that_cannot_be_made_is_not_a_verdict(start_sim: Any, server_for: Any) -> None:
    """A 403 (PVE 9: VM.GuestAgent.Audit) or 595 is 'could not check', never GUEST_AGENT_NOT_RUNNING."""
    data = pvesim.load_scenario("truth")
    data["roles"] = {"NoAgent": ["VM.Audit", "Sys.Audit", "Datastore.Audit", "Pool.Audit"]}
    acl = [{"path": "/", "role": "NoAgent"}]
    data["tokens"] = [*DEFAULT_TOKENS, {"id": "noagent@pve!mcp", "user_acl": acl, "acl": acl}]
    sim = start_sim(data)
    denied = _codes(await _call(server_for(sim, "noagent@pve!mcp"), "diagnose_guests", detail=True))
    assert not any(c == "GUEST_AGENT_NOT_RUNNING" for c, _ in denied)
    assert ("CHECK_SKIPPED", "/nodes/{node}/qemu/{vmid}/agent/info") in denied
    control(sim, "faults", {"errors": [{"pattern": "/qemu/204/agent/", "status": 595, "message": "no route"}]})
    unreachable = await _call(server_for(sim), "diagnose_guests", detail=True)
    assert not any(c == "GUEST_AGENT_NOT_RUNNING" for c, _ in _codes(unreachable))
    assert unreachable["complete"] is False
    assert any(f["code"] == "DATA_INCOMPLETE" and "204" in plain(f["message"]) for f in unreachable["findings"])


async def test_replication_first_sync_pending_is_not_stale(start_sim: Any, server_for: Any, version: str) -> None:
    """ReplicationState.pm: a new job has last_sync=0 and fail_count=0 until its first run."""
    sim = start_sim("truth", version=version)
    state = api(sim).nodes("pve2").replication.get()
    assert state[0]["last_sync"] == 0 and state[0]["fail_count"] == 0
    report = await _call(server_for(sim), "diagnose_replication", detail=True)
    assert not any(f["code"] == "REPLICATION_STALE" for f in report["findings"]) and report["complete"] is True


async def test_replication_next_sync_follows_the_schedule_and_pauses_for_a_missing_target(
    start_sim: Any, server_for: Any, version: str
) -> None:
    """ReplicationState.pm job_status: next_sync is the schedule's next event after last_try; after a failure
    it is a retry only while the target is an online member, else 0 (the job is paused, fail_count frozen)."""
    sim = start_sim("truth", version=version)
    hour = int(sim.sim.cluster.clock.now()) // 3600 * 3600 - 3600
    with sim.sim.mutate() as c:
        job = c.replication["201-0"]
        job.schedule, job.last_try, job.last_sync = "*/20", hour + 21 * 60, hour + 21 * 60
    assert api(sim).nodes("pve2").replication.get()[0]["next_sync"] == hour + 40 * 60
    with sim.sim.mutate() as c:
        c.replication["201-0"].schedule = "*/15"
        c.replication["201-0"].last_try = hour + 46 * 60
    assert api(sim).nodes("pve2").replication.get()[0]["next_sync"] == hour + 3600
    with sim.sim.mutate() as c:
        job = c.replication["201-0"]
        job.fail_count, job.error, job.last_sync = 1, "ssh: No route to host", hour - 86400
        c.nodes["pve3"].online = False
    assert api(sim).nodes("pve2").replication.get()[0]["next_sync"] == 0
    paused = [
        f
        for f in (await _call(server_for(sim), "diagnose_replication", detail=True))["findings"]
        if f["code"] in ("REPLICATION_PAUSED", "REPLICATION_FAILING")
    ]
    assert [(f["code"], f["severity"]) for f in paused] == [("REPLICATION_PAUSED", "warning")]
    with sim.sim.mutate() as c:  # the target left the cluster (pvecm delnode): the job never runs again
        c.replication["201-0"].target = "pve9"
    assert api(sim).nodes("pve2").replication.get()[0]["next_sync"] == 0
    report = await _call(server_for(sim), "diagnose_replication", detail=True)
    gone = next(f for f in report["findings"] if f["code"] == "REPLICATION_PAUSED")
    assert gone["severity"] == "critical" and "not a cluster member" in plain(gone["message"])


async def test_a_failing_job_removal_is_retried_every_minute_and_reported(
    start_sim: Any, server_for: Any, version: str
) -> None:
    """ReplicationState.pm job_status: next_sync 1 for a remove_job job, whatever its fail_count."""
    sim = start_sim("truth", version=version)
    with sim.sim.mutate() as c:
        job = c.replication["201-0"]
        job.remove_job, job.fail_count, job.error = "full", 7, "ssh: connect to host pve3: No route to host"
    assert api(sim).nodes("pve2").replication.get()[0]["next_sync"] == 1
    report = await _call(server_for(sim), "diagnose_replication", detail=True)
    stuck = next(f for f in report["findings"] if f["code"] == "REPLICATION_PENDING_REMOVAL")
    assert stuck["severity"] == "warning" and "No route to host" in plain(stuck["message"])


async def test_a_job_pve_never_schedules_is_in_no_status_and_reported(
    start_sim: Any, server_for: Any, version: str
) -> None:
    """ReplicationState.pm job_status (and so API2/Replication.pm status and job_status) leaves out a job whose
    target is the guest's node and one whose guest does not exist; $extract_job_status copies duration only once
    a run ended, and a job without a schedule has none in its rows."""
    sim = start_sim("truth", version=version)
    pve = api(sim)
    (fresh,) = pve.nodes("pve2").replication.get()
    assert "duration" not in fresh and fresh["schedule"] == "*/15"
    with pytest.raises(ResourceException, match="no such replication job '201-0'"):  # only pve2 has it
        pve.nodes("pve1").replication("201-0").status.get()
    with sim.sim.mutate() as c:
        c.replication["201-0"].schedule = None
        c.replication["201-0"].target = "pve2"  # the guest's own node (a legacy job without source)
        c.replication["299-0"] = ReplicationJob("299-0", 299, "pve3")  # its guest is gone
    assert "schedule" not in pve.cluster.replication("201-0").get()
    assert pve.nodes("pve2").replication.get() == []
    with pytest.raises(ResourceException, match="no such replication job '201-0'"):
        pve.nodes("pve2").replication("201-0").status.get()
    report = await _call(server_for(sim), "diagnose_replication", detail=True)
    never = {plain(f["subject"]["id"]) for f in report["findings"] if f["code"] == "REPLICATION_NOT_SCHEDULED"}
    assert never == {"201-0", "299-0"} and report["complete"] is True


async def test_replication_jobs_list_reads_the_state_where_the_guest_is(
    start_sim: Any, server_for: Any, version: str
) -> None:
    """ReplicationState.pm job_status runs on the guest's node and only then rewrites the job's source: after an
    HA recovery the stored source still names the old node, which has no state for the job."""
    sim = start_sim("truth", version=version)
    with sim.sim.mutate() as c:
        job = c.replication["201-0"]
        job.source, job.fail_count, job.error, job.last_try = "pve1", 2, "zfs error", int(c.clock.now()) - 60
    assert api(sim).cluster.replication.get()[0]["source"] == "pve1"
    listed = await _call(server_for(sim), "list_replication_jobs")
    (item,) = listed["items"]
    assert item["fail_count"] == 2 and plain(item["error"]) == "zfs error" and listed["failing"] == ["201-0"]
    assert listed["incomplete"] == []


async def test_get_task_takes_the_end_time_from_the_task_index(start_sim: Any, server_for: Any, version: str) -> None:
    """Tasks.pm read_task_status has no endtime; the task index row has it."""
    sim = start_sim("truth", version=version)
    row = next(t for t in api(sim).nodes("pve1").tasks.get(source="all") if t["type"] == "vzdump")
    assert "endtime" not in api(sim).nodes("pve1").tasks(row["upid"]).status.get()
    detail = await _call(server_for(sim), "get_task", upid=row["upid"])
    assert detail["task"]["ended"] is not None and detail["task"]["duration_s"] == row["endtime"] - row["starttime"]
    assert detail["task"]["state"] == "ok" and detail["incomplete"] == []


async def test_get_task_says_when_the_end_time_is_unknown(start_sim: Any, server_for: Any, version: str) -> None:
    """A failed task-index read leaves the end time unknown, and the answer says so (never a clean row)."""
    sim = start_sim("truth", version=version)
    row = next(t for t in api(sim).nodes("pve1").tasks.get(source="all") if t["type"] == "vzdump")
    control(sim, "faults", {"errors": [{"pattern": r"^/nodes/pve1/tasks$", "status": 500}]})
    detail = await _call(server_for(sim), "get_task", upid=row["upid"])
    assert detail["task"]["ended"] is None and detail["task"]["state"] == "ok"
    assert len(detail["incomplete"]) == 1 and "task index" in detail["incomplete"][0]


async def test_maxfiles_is_retention_on_pve8_only(start_sim: Any, server_for: Any) -> None:
    """PVE 8 converts storage/vzdump.conf maxfiles to keep-last (pve-storage stable-8 storage_config,
    VZDump.pm $parse_prune_backups_maxfiles); PVE 9 dropped the option (pve8to9 fails on it)."""
    data = pvesim.load_scenario("truth")
    local = next(s for s in data["storages"] if s["id"] == "local")
    local["maxfiles"] = 3
    pve8 = start_sim(data, version="8.4.14")
    assert api(pve8).nodes("pve1").vzdump.defaults.get(storage="local")["prune-backups"] == "keep-last=3"
    report = await _call(server_for(pve8), "diagnose_backups", detail=True)
    assert not any(f["code"] == "BACKUP_JOB_NO_RETENTION" for f in report["findings"])
    data["nodes"][0]["vzdump"] = {"maxfiles": 2}
    del local["maxfiles"]
    conf8 = start_sim(data, version="8.4.14")
    assert api(conf8).nodes("pve1").vzdump.defaults.get(storage="local")["prune-backups"] == "keep-last=2"
    pve9 = start_sim(data, version="9.1.2")
    assert api(pve9).nodes("pve1").vzdump.defaults.get(storage="local")["prune-backups"] == "keep-all=1"
    nine = await _call(server_for(pve9), "diagnose_backups", detail=True)
    keeps = next(f for f in nine["findings"] if f["code"] == "BACKUP_JOB_NO_RETENTION")["evidence"]["keeps_all"]
    assert sorted(keeps) == ["pve1", "pve3"]


async def test_task_error_filter_follows_pve(start_sim: Any, server_for: Any) -> None:
    """Tasks.pm node_tasks: errors=1 drops only 'ok' (warnings and running 'unknown' stay); our errors_only
    view then leaves out what is still running."""
    data = pvesim.load_scenario("truth")
    data["tasks"].append({"node": "pve1", "type": "qmsnapshot", "id": "200", "age": "1h", "status": "WARNINGS: 2"})
    sim = start_sim(data, speed=0.001)  # the snapshot task stays running for the whole test
    root = api(sim)
    running = root.nodes("pve1").qemu(200).snapshot.post(snapname="now")
    listed = {t["upid"]: t for t in root.nodes("pve1").tasks.get(errors=1, source="all")}
    assert running in listed and any(t.get("status") == "WARNINGS: 2" for t in listed.values())
    assert not any(t.get("status") == "OK" for t in listed.values())
    view = await _call(server_for(sim), "list_tasks", node="pve1", errors_only=True)
    assert [t["state"] for t in view["items"]] == ["warning"]


async def test_list_backups_reads_node_local_storage_on_every_node(start_sim: Any, server_for: Any) -> None:
    """A dir storage is local to each node (storage.cfg without shared=1): pve3's archive is only on pve3."""
    sim = start_sim("truth")
    listed = await _call(server_for(sim), "list_backups", vmid=202)
    where = sorted((b["storage"], b["node"]) for b in plain(listed)["items"])
    assert where == [("local", "pve3"), ("pbs", None)] and listed["incomplete"] == []
