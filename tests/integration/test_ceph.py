"""Ceph through MCP against pvesim's ``ceph`` scenario: health findings, evacuation steps, the flag writes."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.integration.conftest import LIMITED_TOKEN
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

# (code, subject id) for every Ceph problem planted in src/pvesim/scenarios/ceph.yaml
PLANTED = {
    ("CEPH_HEALTH_CHECK", "health/OSD_DOWN"),
    ("CEPH_HEALTH_CHECK", "health/OSD_NEARFULL"),
    ("CEPH_HEALTH_CHECK", "health/PG_DEGRADED"),
    ("CEPH_HEALTH_CHECK", "health/MON_DOWN"),
    ("CEPH_HEALTH_CHECK", "health/OSDMAP_FLAGS"),
    ("CEPH_HEALTH_CHECK", "health/PG_NOT_DEEP_SCRUBBED"),
    ("CEPH_OSD_DOWN", "osd.7"),
    ("CEPH_OSD_OUT", "osd.6"),
    ("CEPH_OSD_LATENCY_HIGH", "osd.5"),
    ("CEPH_POOL_NEAR_FULL", "pool/vm-pool"),
    ("CEPH_POOL_LOW_REDUNDANCY", "pool/scratch"),
    ("CEPH_POOL_AUTOSCALE_WARN", "pool/archive"),
    ("CEPH_FLAG_SET", "flag/noout"),
    ("CEPH_FLAG_SET", "flag/norebalance"),
    ("CEPH_MON_OUT_OF_QUORUM", "mon.ceph3"),
    ("CEPH_MON_NOT_IN_MONMAP", "mon.ceph4"),
    ("CEPH_VERSION_MIXED", "versions"),
    ("CEPH_NODE_LOSS_NEARFULL", "capacity"),
}


async def _health(mcp: Any, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("check_cluster_health", {"detail": True, **args})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]  # marked cluster text read as text


@pytest.mark.parametrize("version", ["8.4.14", "9.1.2"])
async def test_ceph_scenario_findings(start_sim: Any, server_for: Any, version: str) -> None:
    report = await _health(server_for(start_sim("ceph", version=version)), areas=["ceph"])
    found = {(f["code"], f["subject"]["id"]) for f in report["findings"]}
    assert found >= PLANTED, PLANTED - found
    down = next(f for f in report["findings"] if f["subject"]["id"] == "health/OSD_DOWN")
    assert down["evidence"]["meaning"] and down["evidence"]["likely_cause"] and down["remediation"]
    assert report["complete"] is True
    mon3 = next(f for f in report["findings"] if f["subject"]["id"] == "mon.ceph3")
    assert mon3["evidence"]["monitors"] == 3 and "2 of 3" in mon3["message"]  # ceph4 is not in the monmap


async def test_demo_ceph_shows_its_planted_problem_and_other_clusters_have_no_ceph(
    demo_sim: Any, start_sim: Any, server_for: Any
) -> None:
    """The default demo is hyper-converged: a newcomer's first health check shows Ceph (demo.yaml)."""
    demo = await _health(server_for(demo_sim), areas=["ceph"])
    found = [(f["code"], f["subject"]["id"], f["subject"]["node"]) for f in demo["findings"]]
    assert found == [("CEPH_OSD_LATENCY_HIGH", "osd.5", "pve3")] and demo["complete"] is True
    assert "180 ms" in demo["findings"][0]["message"]
    plain = await _health(server_for(start_sim("healthy")), areas=["ceph"])
    assert plain["findings"] == [] and plain["complete"] is True


async def test_token_without_sys_audit_gets_check_skipped(start_sim: Any, server_for: Any) -> None:
    import pvesim
    from pvesim.scenario import DEFAULT_TOKENS

    data = pvesim.load_scenario("ceph")
    data["tokens"] = [*DEFAULT_TOKENS, LIMITED_TOKEN]
    report = await _health(server_for(start_sim(data), "limited@pve!mcp"), areas=["ceph"])
    codes = {f["code"] for f in report["findings"]}
    assert "CHECK_SKIPPED" in codes and not any(c.startswith("CEPH_") for c in codes)


async def _evacuate(mcp: Any, node: str) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("plan_node_evacuation", {"node": node})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]  # marked cluster text read as text


async def test_evacuating_a_ceph_node_that_is_not_ok_to_stop_is_blocked(start_sim: Any, server_for: Any) -> None:
    plan = await _evacuate(server_for(start_sim("ceph")), "ceph1")
    verdicts = {c["daemon"]: c["safe"] for c in plan["ceph_checks"]}
    assert verdicts == {"osd.0": False, "osd.1": False, "mon.ceph1": False}
    assert plan["verdict"] == "EVACUATION_BLOCKED" and "not ok to stop" in plan["summary"]
    codes = {(f["code"], f["subject"]["id"]) for f in plan["findings"]}
    assert {("CEPH_OSD_NOT_OK_TO_STOP", "osd.0"), ("CEPH_MON_QUORUM_AT_RISK", "mon.ceph1")} <= codes
    noout = [s for s in plan["ceph_steps"] if "noout" in s["action"]]  # the scenario left noout set
    assert [s["when"] for s in noout] == ["before"] and "leave noout as the operator set it" in noout[0]["action"]
    assert not any("unset noout" in s["command"] for s in plan["ceph_steps"])


async def test_evacuating_a_healthy_ceph_node_shows_ok_to_stop_and_noout_steps(demo_sim: Any, server_for: Any) -> None:
    plan = await _evacuate(server_for(demo_sim), "pve1")
    assert {c["daemon"]: c["safe"] for c in plan["ceph_checks"]} == {"osd.0": True, "osd.1": True, "mon.pve1": True}
    assert "ok to stop" in plan["ceph_checks"][0]["status"]
    steps = [(s["when"], s["command"].split(" (")[0]) for s in plan["ceph_steps"]]
    assert ("before", "ceph osd set noout") in steps and ("after", "ceph osd unset noout") in steps
    assert steps.index(("before", "ceph osd set noout")) < steps.index(("after", "ceph osd unset noout"))
    assert not any(f["code"].startswith("CEPH_") for f in plan["findings"])


async def test_evacuating_without_ceph_has_no_ceph_steps(start_sim: Any, server_for: Any) -> None:
    plan = await _evacuate(server_for(start_sim("healthy")), "hv1")
    assert plan["ceph_checks"] == [] and plan["ceph_steps"] == [] and plan["complete"] is True


async def _write(c: Client, tool: str, **args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    first = await c.call_tool(tool, args)
    assert not first.is_error, first.content[0].text
    preview: dict[str, Any] = first.structured_content  # type: ignore[assignment]
    second = await c.call_tool(tool, {**args, "confirm_token": preview["confirm_token"]})
    assert not second.is_error, second.content[0].text
    return preview, second.structured_content  # type: ignore[return-value]


async def test_flag_writes_preview_confirm_and_change_the_flags(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    ceph = sim.cluster.ceph
    assert ceph is not None and "noout" not in ceph.flags
    async with Client(server_for(sim, "root@pam!pvesim", tier="operator")) as c:
        preview, done = await _write(c, "ceph_set_flag", flag="noout")
        assert preview["status"] == "preview" and "ceph osd set noout" in preview["summary"]
        assert "noout" in ceph.flags and done["status"] == "completed"
        again = await c.call_tool("ceph_set_flag", {"flag": "noout"})
        _preview, undone = await _write(c, "ceph_unset_flag", flag="noout")
        bad = await c.call_tool("ceph_set_flag", {"flag": "nosuchflag"})
    assert again.is_error and "already set" in again.content[0].text
    assert undone["status"] == "completed" and "noout" not in ceph.flags
    assert bad.is_error and "flag" in bad.content[0].text


async def test_flag_write_refusals(start_sim: Any, server_for: Any) -> None:
    async with Client(server_for(start_sim("demo"), "operator@pve!mcp", tier="operator")) as c:
        denied = await c.call_tool("ceph_set_flag", {"flag": "noout"})
    async with Client(server_for(start_sim("healthy"), "root@pam!pvesim", tier="operator")) as c:
        no_ceph = await c.call_tool("ceph_set_flag", {"flag": "noout"})
    assert denied.is_error and "Sys.Modify" in denied.content[0].text
    import pvesim
    from pvesim.scenario import DEFAULT_TOKENS

    data = pvesim.load_scenario("demo")  # Sys.Modify without Sys.Audit: get_flag (Sys.Audit on /) says what lacks
    data["roles"] = {**data.get("roles", {}), "FlagWriter": ["Sys.Modify"]}
    data["tokens"] = [*DEFAULT_TOKENS, {"id": "writer@pve!mcp", "acl": [{"path": "/", "role": "FlagWriter"}]}]
    async with Client(server_for(start_sim(data), "writer@pve!mcp", tier="operator")) as c:
        unread = await c.call_tool("ceph_set_flag", {"flag": "noout"})
    assert unread.is_error and "lacks Sys.Audit on /" in unread.content[0].text
    assert no_ceph.is_error and "no Ceph" in no_ceph.content[0].text


async def test_evacuation_finds_a_monitor_with_a_custom_id_by_its_host(start_sim: Any, server_for: Any) -> None:
    """pveceph mon create --monid: listmon's ``host`` (the node's name on the wire) ties the monitor to pve1."""
    import pvesim

    data = pvesim.load_scenario("demo")
    data["ceph"]["mons"] = [{"node": n, "name": f"mon-{n[-1]}"} for n in ("pve1", "pve2", "pve3")]
    plan = await _evacuate(server_for(start_sim(data)), "pve1")
    assert {c["daemon"]: c["safe"] for c in plan["ceph_checks"]} == {"osd.0": True, "osd.1": True, "mon.mon-1": True}
    assert any(s["command"].startswith("ceph mon ok-to-stop mon-1") for s in plan["ceph_steps"])


async def test_a_down_osd_on_an_old_version_is_not_a_mixed_version(start_sim: Any, server_for: Any) -> None:
    """`osd metadata` keeps a down OSD (pvesim too); Ceph's `versions` and our check count up OSDs only."""
    import pvesim

    data = pvesim.load_scenario("demo")
    data["ceph"]["osds"].append({"id": 6, "node": "pve3", "size": "2T", "up": False, "version": "18.2.4"})
    sim = start_sim(data)
    report = await _health(server_for(sim), areas=["ceph"])
    assert ("CEPH_OSD_DOWN", "osd.6") in {(f["code"], f["subject"]["id"]) for f in report["findings"]}
    assert not [f for f in report["findings"] if f["code"] == "CEPH_VERSION_MIXED"]
    sim.cluster.ceph.osds[6].up = True
    report = await _health(server_for(sim), areas=["ceph"])
    assert [f["evidence"]["older"] for f in report["findings"] if f["code"] == "CEPH_VERSION_MIXED"] == [
        {"18.2.4": ["osd.6"]}
    ]


async def test_inactive_pgs_are_health_warn_and_said_to_block_io(start_sim: Any, server_for: Any) -> None:
    """Ceph PGMap.cc raises PG_AVAILABILITY as HEALTH_WARN (pvesim too); the finding keeps it, says I/O blocks."""
    import pvesim

    data = pvesim.load_scenario("demo")
    for row in data["ceph"]["osds"]:
        row["up"] = row["node"] == "pve3"  # two of three hosts down: PGs below min_size 2
    sim = start_sim(data)
    assert sim.cluster.ceph.health_status() == "HEALTH_WARN"
    report = await _health(server_for(sim), areas=["ceph"])
    (f,) = [f for f in report["findings"] if f["subject"]["id"] == "health/PG_AVAILABILITY"]
    assert f["severity"] == "warning" and "I/O to those PGs is blocked" in f["message"]


async def _upgrade_codes(mcp: Any) -> list[tuple[str, str]]:
    async with Client(mcp) as c:
        result = await c.call_tool("check_upgrade_readiness", {"detail": True})
    assert result.is_error is False, result.content[0].text
    report = plain(result.structured_content)["report"]
    return sorted((f["code"], f["subject"]["id"]) for f in report["findings"] if f["code"].startswith("UPGRADE_CEPH"))


async def test_noout_expectations_on_a_cluster_already_on_9(start_sim: Any, server_for: Any) -> None:
    """pve8to9 on PVE 9 nodes: noout set with one Ceph version -> 'upgrade seems finished'; mixed -> still wanted."""
    import pvesim

    data = pvesim.load_scenario("demo")
    data["ceph"]["flags"] = ["noout"]
    assert await _upgrade_codes(server_for(start_sim(data), "root@pam!pvesim")) == [
        ("UPGRADE_CEPH_NOOUT_STILL_SET", "flags")
    ]
    data = pvesim.load_scenario("demo")
    data["ceph"]["osds"][0]["version"] = "19.2.2"  # one OSD not restarted after the minor update
    assert await _upgrade_codes(server_for(start_sim(data), "root@pam!pvesim")) == [("UPGRADE_CEPH_NOOUT", "flags")]


async def test_evacuation_asks_for_the_nodes_mds_and_warns_of_a_lone_manager(start_sim: Any, server_for: Any) -> None:
    """mds ok-to-stop through cmd-safety; the active manager without standby from /cluster/ceph/status mgrmap."""
    import pvesim

    data = pvesim.load_scenario("demo")
    data["ceph"]["mds"] = [{"node": "pve1", "state": "active"}]
    data["ceph"]["mgrs"] = [{"node": "pve1"}, {"node": "pve2", "up": False}]
    plan = await _evacuate(server_for(start_sim(data)), "pve1")
    assert {c["daemon"]: c["safe"] for c in plan["ceph_checks"]}["mds.pve1"] is False
    codes = {(f["code"], f["subject"]["id"]) for f in plan["findings"]}
    assert {("CEPH_MDS_NOT_OK_TO_STOP", "mds.pve1"), ("CEPH_MGR_NO_STANDBY", "mgr.pve1")} <= codes
    assert plan["verdict"] == "EVACUATION_BLOCKED"
    data["ceph"]["mds"].append({"node": "pve3", "state": "standby"})
    data["ceph"]["mgrs"][1]["up"] = True
    plan = await _evacuate(server_for(start_sim(data)), "pve1")
    assert {c["daemon"]: c["safe"] for c in plan["ceph_checks"]}["mds.pve1"] is True
    assert not any(f["code"].startswith("CEPH_") for f in plan["findings"]) and plan["verdict"] != "EVACUATION_BLOCKED"


def _compute_only_api_node() -> dict[str, Any]:
    """The ceph scenario with ceph4 compute-only (no Ceph packages) and answering the API, as a client sees it
    when pointed at that node: /cluster/ceph/* dies there, /nodes/{n}/ceph/* is proxied to node n."""
    import pvesim

    data = pvesim.load_scenario("ceph")
    ceph = data["ceph"]
    ceph["osds"] = [o for o in ceph["osds"] if o["node"] != "ceph4"]
    ceph["mons"] = [m for m in ceph["mons"] if m["node"] != "ceph4"]
    ceph["installed"], ceph["api_node"] = ["ceph1", "ceph2", "ceph3"], "ceph4"
    return data


async def test_ceph_is_found_through_a_ceph_node_when_the_api_node_has_none(start_sim: Any, server_for: Any) -> None:
    """PVE's GUI walks the nodes' /nodes/{n}/ceph/status (www/manager6/dc/Health.js); so do we."""
    report = await _health(server_for(start_sim(_compute_only_api_node())), areas=["ceph"])
    found = {(f["code"], f["subject"]["id"]) for f in report["findings"]}
    assert {("CEPH_MON_OUT_OF_QUORUM", "mon.ceph3"), ("CEPH_POOL_LOW_REDUNDANCY", "pool/scratch")} <= found
    gaps = [f for f in report["findings"] if f["code"] == "DATA_INCOMPLETE"]
    assert gaps and all("connect it to a Ceph node" in f["message"] for f in gaps) and report["complete"] is False


async def test_evacuation_and_flag_writes_with_a_compute_only_api_node(start_sim: Any, server_for: Any) -> None:
    sim = start_sim(_compute_only_api_node())
    plan = await _evacuate(server_for(sim), "ceph1")
    assert {c["daemon"] for c in plan["ceph_checks"]} == {"osd.0", "osd.1", "mon.ceph1"}
    noout = [s for s in plan["ceph_steps"] if "noout" in s["action"]]  # from the OSD tree's flags
    assert [s["when"] for s in noout] == ["before"] and "leave noout" in noout[0]["action"]
    assert (await _evacuate(server_for(sim), "ceph4"))["ceph_checks"] == []  # no Ceph on ceph4: nothing to stop
    async with Client(server_for(sim, "root@pam!pvesim", tier="operator")) as c:
        refused = await c.call_tool("ceph_unset_flag", {"flag": "noout"})
    assert refused.is_error and "connect it to a Ceph node" in refused.content[0].text


async def test_ceph_is_found_when_the_first_node_cannot_answer(start_sim: Any, server_for: Any) -> None:
    """A Ceph node that fails (not "not installed") does not hide the others that answer: every node is
    asked, the first alone and the rest together."""
    import pvesim

    data = pvesim.load_scenario("ceph")
    data["faults"] = {"errors": [{"pattern": r"^/nodes/ceph1/ceph/status$", "message": "got timeout"}]}
    report = await _health(server_for(start_sim(data)), areas=["ceph"])
    found = {(f["code"], f["subject"]["id"]) for f in report["findings"]}
    assert ("CEPH_MON_OUT_OF_QUORUM", "mon.ceph3") in found
    assert not any(f["code"] == "DATA_INCOMPLETE" for f in report["findings"]), report["findings"]


async def test_a_node_with_newer_packages_asks_for_restarts_and_the_others_for_an_upgrade(
    start_sim: Any, server_for: Any
) -> None:
    """pvestatd broadcasts each node's installed Ceph version (metadata.node); PVE's panel compares with it."""
    import pvesim

    data = pvesim.load_scenario("demo")
    data["ceph"]["version"] = "18.2.4"
    data["ceph"]["installed_versions"] = {"pve1": "19.2.3"}
    report = await _health(server_for(start_sim(data)), areas=["ceph"])
    (f,) = [f for f in report["findings"] if f["code"] == "CEPH_VERSION_MIXED"]
    assert f["evidence"]["newest"] == "19.2.3"
    assert f["evidence"]["restart"] == ["mgr.pve1", "mon.pve1", "osd.0", "osd.1"]  # pve1's daemons
    assert set(f["evidence"]["upgrade_nodes"]) == {"pve2", "pve3"}
