"""Upgrade readiness end to end: check_upgrade_readiness through a real MCP client and `check --upgrade 9`
through the real command, against pvesim's upgrade scenario (PVE 8.4) and against clusters on PVE 9."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

import pvesim
from pve_steward.analysis.upgradeinfo import SHELL_CHECKS
from pvesim.server import SimServer
from tests.conftest import wait_task
from tests.integration.pve import api, control
from tests.integration.test_cli import check
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

# (code, subject id, pve8to9 grade) for every problem planted in src/pvesim/scenarios/upgrade.yaml
PLANTED = {
    ("UPGRADE_UPDATES_PENDING", "pve1", "WARN"),
    ("UPGRADE_KERNEL_NOT_SUITABLE", "pve1", "WARN"),
    ("UPGRADE_TIME_SYNC", "pve1", "WARN"),
    ("UPGRADE_APT_SUITES", "pve1", "FAIL"),
    ("UPGRADE_APT_SUITES", "pve1", "WARN"),
    ("UPGRADE_DAEMON_NOT_ACTIVE", "pve2", "FAIL"),
    ("UPGRADE_ROOTFS_LOW", "pve2", "WARN"),
    ("UPGRADE_CERT_KEY_WEAK", "pve2/pveproxy-ssl.pem", "FAIL"),
    ("UPGRADE_NODE_DESCRIPTION_LONG", "pve2", "WARN"),
    ("UPGRADE_STORAGE_INACTIVE", "backup-nfs", "WARN"),
    ("UPGRADE_CGROUP_LEGACY", "pve3", "FAIL"),
    ("UPGRADE_QUORUM_VOTES", "cluster", "WARN"),
    ("UPGRADE_COROSYNC_TOTEM", "cluster", "FAIL"),
    ("UPGRADE_COROSYNC_NODELIST_MISMATCH", "cluster", "FAIL"),
    ("UPGRADE_MICROCODE_MISSING", "pve3", "WARN"),
    ("UPGRADE_GLUSTERFS", "gluster", "FAIL"),
    ("UPGRADE_MAXFILES", "backup-nfs", "FAIL"),
    ("UPGRADE_MAXFILES", "vzdump.cron", "FAIL"),
    ("UPGRADE_CONTENT_DIRS_SHARED", "media", "FAIL"),
    ("UPGRADE_CONTENT_DIRS_SHARED", "old-dir", "FAIL"),
    ("UPGRADE_BACKUP_JOB_NOTIFICATION", "backup-nightly", "FAIL"),
    ("UPGRADE_ROLE_VM_MONITOR", "role/VMWatcher", "FAIL"),
    ("UPGRADE_MACHINE_VERSION_OLD", "301", "WARN"),
    ("UPGRADE_MACHINE_VERSION_OLD", "302", "WARN"),
    ("UPGRADE_GUEST_DESCRIPTION_LONG", "303", "WARN"),
    ("UPGRADE_BRIDGE_MTU", "304", "NOTICE"),
    ("UPGRADE_VOLUME_CONTENT_MISMATCH", "305", "WARN"),
    ("UPGRADE_CT_NO_OSTYPE", "310", "WARN"),
    ("UPGRADE_LXC_CGROUP_KEYS", "311", "WARN"),
    ("UPGRADE_GUESTS_RUNNING", "pve1", "WARN"),
    ("UPGRADE_GUESTS_RUNNING", "pve2", "WARN"),
    ("UPGRADE_GUESTS_RUNNING", "pve3", "WARN"),
    ("UPGRADE_CEPH_VERSION", "version/pve1", "FAIL"),
    ("UPGRADE_CEPH_VERSION", "version/pve2", "FAIL"),
    ("UPGRADE_CEPH_VERSION", "version/pve3", "FAIL"),
    ("UPGRADE_CEPH_NOOUT", "flags", "WARN"),
    ("UPGRADE_CEPH_CONFIG", "config", "WARN"),
}


async def _readiness(mcp: Any, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("check_upgrade_readiness", {"detail": True, **args})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


@pytest.fixture
def upgrade_sim(start_sim: Any) -> SimServer:
    return start_sim("upgrade")  # type: ignore[no-any-return]


async def test_the_planted_upgrade_problems_are_found_and_graded_as_pve8to9(
    upgrade_sim: SimServer, server_for: Any
) -> None:
    answer = await _readiness(server_for(upgrade_sim, "root@pam!pvesim"))
    report = answer["report"]
    found = {(f["code"], f["subject"]["id"], f["evidence"]["pve8to9"]) for f in report["findings"]}
    assert found == PLANTED
    assert report["complete"] is True and report["status"] == "critical"
    assert answer["nodes_to_upgrade"] == ["pve1", "pve2", "pve3"] and answer["nodes_upgraded"] == []
    assert [c["name"] for c in answer["shell_checks"]] == [name for name, _ in SHELL_CHECKS]
    assert "run pve8to9 on each node" in answer["shell_advice"]


async def test_pages_of_the_readiness_come_from_one_run(upgrade_sim: SimServer, server_for: Any) -> None:
    mcp = server_for(upgrade_sim, "root@pam!pvesim")
    async with Client(mcp) as c:
        pages = []
        for args in ({"limit": 2}, {"limit": 2, "offset": 2}, {"detail": True, "offset": 4}):
            result = await c.call_tool("check_upgrade_readiness", args)
            assert result.is_error is False, result.content[0].text
            pages.append(plain(result.structured_content))
        (app,) = mcp.settings.lifespan.live
        continued = app.admission.continued
    whole = (await _readiness(server_for(upgrade_sim, "root@pam!pvesim")))["report"]["findings"]
    listed = [f for p in pages for f in p["report"]["findings"]]
    assert continued == 2 and [p["report"]["next_offset"] for p in pages] == [2, 4, None]
    assert {(f["code"], f["subject"]["id"]) for f in listed} == {(f["code"], f["subject"]["id"]) for f in whole}
    assert all(p["nodes_to_upgrade"] == ["pve1", "pve2", "pve3"] for p in pages)


async def test_a_token_without_sys_modify_skips_the_update_check_by_name(
    upgrade_sim: SimServer, server_for: Any
) -> None:
    report = (await _readiness(server_for(upgrade_sim)))["report"]
    skipped = [f for f in report["findings"] if f["code"] == "CHECK_SKIPPED"]
    assert {f["subject"]["node"] for f in skipped} == {"pve1", "pve2", "pve3"}
    assert all("Sys.Modify" in f["message"] for f in skipped)
    assert not [f for f in report["findings"] if f["code"] == "UPGRADE_UPDATES_PENDING"]


async def test_a_cluster_already_on_9_says_so(demo_sim: SimServer, server_for: Any) -> None:
    answer = await _readiness(server_for(demo_sim, "root@pam!pvesim"))
    assert answer["nodes_to_upgrade"] == [] and answer["nodes_upgraded"] == ["pve1", "pve2", "pve3"]
    codes = {f["code"] for f in answer["report"]["findings"]}
    assert codes == {"UPGRADE_NODE_UPGRADED"}
    assert "already runs PVE 9" in answer["summary"]


async def test_the_upgrade_scenario_read_as_pve9_is_not_checked(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("upgrade", version="9.1.2")
    answer = await _readiness(server_for(sim, "root@pam!pvesim"))
    assert {f["code"] for f in answer["report"]["findings"]} == {"UPGRADE_NODE_UPGRADED"}


async def test_the_health_check_does_not_run_the_upgrade_checks(upgrade_sim: SimServer, server_for: Any) -> None:
    async with Client(server_for(upgrade_sim)) as c:
        result = await c.call_tool("check_cluster_health", {"detail": True})
        tools = {t.name: t for t in (await c.list_tools()).tools}
    report = plain(result.structured_content)
    assert not [f for f in report["findings"] if f["code"].startswith("UPGRADE_")]
    assert "upgrade" not in report["checked"]
    areas = tools["check_cluster_health"].input_schema["properties"]["areas"]
    assert "upgrade" not in json.dumps(areas)


def test_check_upgrade_prints_the_findings_and_the_shell_checks(upgrade_sim: SimServer, tmp_path: Path) -> None:
    done = check(upgrade_sim, tmp_path, "--upgrade", "9", token="root@pam!pvesim")
    assert done.returncode == 2, done.stderr
    out = done.stdout
    assert out.startswith("= PVE-STEWARD CHECK =") and "areas:       upgrade" in out
    assert "= UPGRADE READINESS (PVE 8 TO 9) =" in out
    assert re.search(r"^FAIL: \[UPGRADE_GLUSTERFS\] found 'glusterfs' storage 'gluster'$", out, re.MULTILINE)
    shell = out.split("= CHECKS THAT NEED A SHELL ON THE NODE =")[1].split("= SUMMARY =")[0]
    assert "run pve8to9 on each node" in shell
    assert all(f"pve8to9 {name}:" in shell for name, _ in SHELL_CHECKS)
    assert "PVE 8 nodes checked for the upgrade to 9: pve1, pve2, pve3" in shell


def test_check_upgrade_json_markdown_and_usage(upgrade_sim: SimServer, demo_sim: SimServer, tmp_path: Path) -> None:
    as_json = check(upgrade_sim, tmp_path, "--upgrade", "9", "--json")
    assert as_json.returncode == 2
    body = json.loads(as_json.stdout)
    assert body["target"] == 9 and body["report"]["area"] == "upgrade" and body["shell_checks"]
    assert body["report"]["check"]["levels"]["FAIL"] > 0 and all("level" in f for f in body["report"]["findings"])
    md = check(upgrade_sim, tmp_path, "--upgrade", "9", "--format", "markdown")
    assert (
        md.returncode == 2
        and "`UPGRADE_GLUSTERFS`" in md.stdout
        and "### Checks that need a shell on the node" in md.stdout
    )
    on_9 = check(demo_sim, tmp_path, "--upgrade", "9", token="root@pam!pvesim")
    assert on_9.returncode == 0, on_9.stdout
    assert "the cluster already runs PVE 9" in on_9.stdout and "INFO: [UPGRADE_NODE_UPGRADED]" in on_9.stdout
    both = check(demo_sim, tmp_path, "--upgrade", "9", "--areas", "backups")
    bad_target = check(demo_sim, tmp_path, "--upgrade", "10")
    assert both.returncode == 64 and "--upgrade runs the upgrade checks only" in both.stderr
    assert bad_target.returncode == 64 and "invalid choice: 10" in bad_target.stderr


def test_pvesim_serves_the_upgrade_reads_per_the_pve_8_schema(upgrade_sim: SimServer) -> None:
    """The reads the upgrade checks make, answered by the PVE 8.4 scenario, follow PVE 8.4's schema."""
    import requests

    from pvesim.apischema import ApiSchema
    from tests.contract.schema_check import check_response

    schema = ApiSchema("8.4")
    s = requests.Session()
    s.trust_env = False
    s.verify = str(upgrade_sim.cert_path)
    full, secret = upgrade_sim.token("root@pam!pvesim")
    s.headers["Authorization"] = f"PVEAPIToken={full}={secret}"
    for template in (
        "/nodes/{node}/apt/versions",
        "/nodes/{node}/services",
        "/nodes/{node}/config",
        "/nodes/{node}/network",
        "/nodes/{node}/apt/repositories",
        "/cluster/config/nodes",
        "/cluster/config/totem",
        "/cluster/config/qdevice",
        "/access/roles",
        "/nodes/{node}/ceph/cfg/raw",
    ):
        resp = s.get(f"{upgrade_sim.url}/api2/json{template.replace('{node}', 'pve2')}")
        assert resp.status_code == 200, (template, resp.reason)
        assert check_response(resp.json()["data"], schema.methods[("GET", template)].returns, template) == []


def test_the_upgrade_scenario_loads_for_both_releases() -> None:
    for version in ("8.4.14", "9.1.2"):
        cluster = pvesim.build_cluster(pvesim.load_scenario("upgrade"), version=version)
        assert cluster.nodes["pve3"].cgroup_mode == 1 and "VMWatcher" in cluster.roles


async def test_a_volume_only_a_snapshot_holds_is_checked_as_pve8to9_does(
    upgrade_sim: SimServer, server_for: Any
) -> None:
    """pve8to9 check_storage_content walks each snapshot's section (GET config?snapshot=) as well."""
    pve = api(upgrade_sim)
    with upgrade_sim.sim.mutate() as c:
        c.guests[301].config["scsi1"] = "local:301/vm-301-disk-1.qcow2,size=8G"  # 'local' has no images
    wait_task(pve.nodes("pve1").tasks(pve.nodes("pve1").qemu(301).snapshot.post(snapname="pre")).status.get)
    with upgrade_sim.sim.mutate() as c:
        del c.guests[301].config["scsi1"]
    report = (await _readiness(server_for(upgrade_sim, "root@pam!pvesim")))["report"]
    (found,) = [
        f for f in report["findings"] if f["code"] == "UPGRADE_VOLUME_CONTENT_MISMATCH" and f["subject"]["id"] == "301"
    ]
    assert "(scsi1 in snapshot 'pre')" in found["message"] and found["evidence"]["snapshot"] == "pre"
    assert report["complete"] is True
    control(upgrade_sim, "faults", {"errors": [{"pattern": r"/qemu/301/snapshot$", "message": "got timeout"}]})
    report = (await _readiness(server_for(upgrade_sim, "root@pam!pvesim")))["report"]
    gaps = [f for f in report["findings"] if f["code"] == "DATA_INCOMPLETE"]
    assert report["complete"] is False and any("snapshot sections" in f["message"] for f in gaps), gaps
